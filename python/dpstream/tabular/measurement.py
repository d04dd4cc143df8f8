"""The workload counters' releases and the measurements the fit is given (post-processing).

A workload selected at a step feeds its batch histogram to its continual counter (one
per number of selections ``k`` a step may make, ``ε'/2k`` each). A counter counts only the
batches of the steps that selected it; the measurement of the workload completes it for the
other rows with the policy's remainder: Algorithm 3's ``"model"`` (the synthetic data's
values for them) or :class:`~dpstream.tabular.policy.Pooled` (the counted rows scaled up).
Everything here reads counter releases and public values (released sizes, selections,
the model): post-processing, no privacy cost.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpstream.counters import Counter, KindName
from dpstream.tabular.domain import Domain
from dpstream.tabular.estimation import MarginalModel, Measurement
from dpstream.tabular.fitting import release_stddev
from dpstream.tabular.policy import (
    Heuristics,
    Margins,
    Policy,
    Pooled,
    pooled_measurement,
    raked_prior,
)
from dpstream.tabular.workloads import Clique

if TYPE_CHECKING:
    from dpstream._rng import Rng
    from dpstream.tabular.coverage import Coverage
    from dpstream.tabular.selection import Budget
    from dpstream.tabular.tables import LazyTables

__all__ = ["WorkloadMeasurements"]


class WorkloadMeasurements:
    """The measurement side of :class:`~dpstream.tabular.TabularStream` (its state is the
    stream's; see there)."""

    _domain: Domain
    _workloads: list[Clique]
    _cells: npt.NDArray[np.int64]
    _counters: dict[int, list[Counter | None]]
    _counter_kind: KindName
    _budgets: dict[int, Budget]
    _horizon: int | None
    _rng: Rng
    _pooled: Pooled | None
    _remainder: LazyTables
    _counted_rows: npt.NDArray[np.int64]
    _synthetic_marginals: LazyTables
    _model: MarginalModel | None
    _mixture: list[MarginalModel]
    _size: int
    _coverage: Coverage | None
    _policy: Policy

    def _counter(self, i: int, k: int) -> Counter:
        """Workload ``i``'s counter for the steps that select ``k`` workloads (``ε/2k``)."""
        c = self._counters[k][i]
        if c is None:
            c = Counter(
                self._counter_kind,
                self._budgets[k].counter_epsilon,
                int(self._cells[i]),
                horizon=self._horizon,
                rng=self._rng,
            )
            self._counters[k][i] = c
        return c

    def _release(self, i: int) -> tuple[npt.NDArray[np.float64], float]:
        """Workload ``i``'s released counts ``C_i(t)`` (the sum of its counters' releases,
        zeros if never selected) and their rough standard deviation per cell."""
        total = np.zeros(int(self._cells[i]))
        stddevs: list[float] = []
        for cs in self._counters.values():
            c = cs[i]
            if c is not None:
                total += c.release.astype(np.float64)
                stddevs.append(release_stddev(c))
        # One counter: its own value, bit for bit (the independent noises' variances add).
        stddev = stddevs[0] if len(stddevs) == 1 else math.sqrt(sum(v * v for v in stddevs))
        return total, stddev

    def _measurement(
        self,
        j: int,
        released: npt.NDArray[np.float64],
        stddev: float,
        size: int,
        *,
        grown: int = 0,
    ) -> tuple[npt.NDArray[np.float64], float]:
        """The measurement ``m(t,j)`` of a workload and a rough standard deviation per cell
        (it weights the fit only), from the counter's release ``C_j(t)`` and ``|f_t|``.

        Remainder ``"model"``: ``C_j(t) + r(t−1,j)``, the synthetic data's value for the
        rows of the other steps (Algorithm 3, lines 16–17). :class:`Pooled`:
        :func:`~dpstream.tabular.policy.pooled_measurement`. ``grown``: the rows the table
        gained since ``r`` was set that the counter did not count (an anchor); ``r`` is
        scaled to the rows it now stands for. Post-processing of releases and public
        values; one place, so that ``benches/diag_tabular_remainder.py`` can replace it."""
        remainder = self._remainder[j]
        counted = int(self._counted_rows[j])
        rest = size - counted
        if self._pooled is None or counted <= 0 or rest <= 0:
            return released + remainder, stddev
        if grown and rest - grown > 0:
            remainder = remainder * (rest / (rest - grown))
        values, sd = pooled_measurement(released, remainder, stddev, counted, rest, self._pooled)
        if self._coverage is not None:  # the uncounted rows raked to the coverage margins
            assert isinstance(self._policy, Heuristics)
            clique = self._workloads[j]
            shape = tuple(self._domain.sizes[c] for c in clique)
            z = self._policy.drift_z
            values = self._coverage.cover(values, released, stddev, clique, shape, z)
        return values, sd

    def _anchors(self, taken: set[int], size: int) -> list[Measurement]:
        """:class:`Pooled` only: the pooled measurements, at the current size, of every
        workload measured at an earlier step and not selected now (the counters are the
        model's memory). None for the ``"model"`` remainder, whose ``C_j + r`` of an
        unselected workload is the model's own value."""
        if self._pooled is None:
            return []
        grown = size - self._size
        out: list[Measurement] = []
        for i in range(len(self._workloads)):
            if i in taken or self._counted_rows[i] <= 0:  # counted rows: it has a counter
                continue
            released, stddev = self._release(i)
            values, stddev = self._measurement(i, released, stddev, size, grown=grown)
            out.append(Measurement(self._workloads[i], values, stddev))
        return out

    def _note_release(self, taken: set[int]) -> None:
        """After a step's fit: ``g_t``'s workload marginals and, for the workloads not selected
        now (``taken`` keep ``r(t−1, j)``), the remainders ``r(t, i)`` that Algorithm 3's
        ``"model"`` remainder reads: computed from the new model when read."""
        self._synthetic_marginals.reset()
        self._remainder.reset(keep=taken)

    def _synthetic_marginal(self, i: int) -> npt.NDArray[np.float64]:
        """``q_i(g_t)``: workload ``i``'s marginal of the model (the average of the mixture's,
        with :class:`~dpstream.tabular.policy.Paper`) scaled to the released size (read
        between steps)."""
        assert self._model is not None, "read after a step"
        parts = [*self._mixture, self._model]
        size = self._size
        clique = self._workloads[i]
        total: Any = sum(p.marginal(clique) * (size / max(p.total, 1e-300)) for p in parts)
        out: npt.NDArray[np.float64] = total / len(parts)
        return out

    def _model_remainder(self, i: int) -> npt.NDArray[np.float64]:
        """``r(t, i) = q_i(g_t) − C_i(t)`` of a workload not selected at step ``t``."""
        return self._synthetic_marginals[i] - self._release(i)[0]

    def _prior(self, i: int, size: int) -> npt.NDArray[np.float64]:
        """``h_{t,0}`` for the ``"l2"`` scores: ``g_{t−1}``'s marginal scaled to ``size``
        rows (uniform before there is a model: the paper's ``g_0``)."""
        if self._model is None or self._size <= 0:
            return np.full(int(self._cells[i]), size / float(self._cells[i]))
        return self._synthetic_marginals[i] * (size / self._size)

    def _raked_prior(
        self, i: int, size: int, base: npt.NDArray[np.float64], margins: Margins
    ) -> npt.NDArray[np.float64]:
        """Refit ``"step"``: ``h_{t,0}`` with the expected batch raked to the batch's one-way
        margins measured at this step (:func:`~dpstream.tabular.policy.raked_prior`)."""
        prior = self._prior(i, size)
        if size <= self._size:
            return prior
        shape = tuple(self._domain.sizes[c] for c in self._workloads[i])
        return raked_prior(prior, base, self._workloads[i], shape, margins)

    def _covered_margins(self, size: int) -> Margins:
        """Coverage: the batch's released one-way margins of the columns that drifted from
        the model (:meth:`~dpstream.tabular.coverage.Coverage.batch_margins`); else none."""
        if self._coverage is None or self._model is None or self._size <= 0:
            return {}
        model, policy = self._model, self._policy
        assert isinstance(policy, Heuristics)
        z = policy.drift_z
        return self._coverage.batch_margins(
            lambda c: model.marginal((c,)), size - self._size, model.total, z
        )

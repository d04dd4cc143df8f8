"""The workload counters' releases and the measurements the fit is given (post-processing).

A workload selected at a step of :class:`~dpstream.tabular.policy.Paper` feeds its batch
histogram to its continual counter (``ε'/2k``). A counter counts only the batches of the
steps that selected it; the measurement of the workload completes it for the other rows
with Algorithm 3's remainder: the synthetic data's values for them. Everything here reads
counter releases and public values (released sizes, selections, the model):
post-processing, no privacy cost.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dpstream.counters import Counter, KindName
from dpstream.tabular.estimation import MarginalModel
from dpstream.tabular.fitting import release_stddev
from dpstream.tabular.keys import counter_rng
from dpstream.tabular.workloads import Clique

if TYPE_CHECKING:
    from dpstream._rng import KeyRing
    from dpstream.tabular.selection import Budget
    from dpstream.tabular.tables import LazyTables

__all__ = ["WorkloadMeasurements"]


class WorkloadMeasurements:
    """The measurement side of :class:`~dpstream.tabular.TabularStream` (its state is the
    stream's; see there)."""

    _workloads: list[Clique]
    _cells: npt.NDArray[np.int64]
    _counters: list[Counter | None]
    _counter_kind: KindName
    _budget: Budget
    _horizon: int | None
    _keys: KeyRing
    _remainder: LazyTables
    _synthetic_marginals: LazyTables
    _model: MarginalModel | None
    _mixture: list[MarginalModel]
    _size: int

    def _counter(self, i: int) -> Counter:
        """Workload ``i``'s counter (``ε'/2k``), allocated when first selected."""
        c = self._counters[i]
        if c is None:
            c = Counter(
                self._counter_kind,
                self._budget.counter_epsilon,
                int(self._cells[i]),
                horizon=self._horizon,
                rng=counter_rng(self._keys, i),
            )
            self._counters[i] = c
        return c

    def _release(self, i: int) -> tuple[npt.NDArray[np.float64], float]:
        """Workload ``i``'s released counts ``C_i(t)`` (zeros if never selected) and their
        rough standard deviation per cell (0 if never selected)."""
        total = np.zeros(int(self._cells[i]))
        c = self._counters[i]
        if c is None:
            return total, 0.0
        total += c.release.astype(np.float64)
        return total, release_stddev(c)

    def _measurement(self, j: int, released: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        """The measurement ``m(t,j) = C_j(t) + r(t−1,j)`` of a workload: the counter's
        release and the synthetic data's value for the rows of the other steps
        (Algorithm 3, lines 16–17). Post-processing of releases and public values."""
        out: npt.NDArray[np.float64] = released + self._remainder[j]
        return out

    def _note_release(self, taken: set[int]) -> None:
        """After a step's fit: ``g_t``'s workload marginals and, for the workloads not selected
        now (``taken`` keep ``r(t−1, j)``), the remainders ``r(t, i)``: computed from the new
        model when read."""
        self._synthetic_marginals.reset()
        self._remainder.reset(keep=taken)

    def _synthetic_marginal(self, i: int) -> npt.NDArray[np.float64]:
        """``q_i(g_t)``: workload ``i``'s marginal of the model (the average of the mixture's)
        scaled to the released size (read between steps)."""
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

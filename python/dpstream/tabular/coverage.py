"""``Adaptive(coverage=True)``: an always-on counter of every column's one-way margins.

A workload's counter counts only the batches of the steps that selected it. On a stream
whose distribution moves with time (a natural time order, a sorted table) two things go
wrong: a column on which every batch differs from the table (the weekday, when batches
are days) makes its workloads' selection scores large at every step, so they capture the
selections; and the pooled remainder scales up counted batches that do not stand for the
table. Coverage counts every batch, cheaply: each step's one-way margins of the covered
columns go to one vector continual counter.

**Privacy.** The counter's input at step ``t`` is the concatenation of the one-way
histograms of the batch (insertions minus deletions) of the ``d`` covered columns (every
column in some workload; public). Add/remove one record (the default) changes ``d`` of its
cells by 1: an ℓ1 change of ``d``; one record's values replaced (``public_sizes=True``) at
most ``2d``. The counter is calibrated with ``ε_c = coverage / (l1·d)`` per unit ℓ1 change
(:attr:`~dpstream.tabular.selection.Budget.coverage_counter_epsilon`), so it is
``coverage``-DP for the stream's relation, with ``coverage = ε·COVERAGE_SHARE`` (``ε/10``)
taken first by :func:`~dpstream.tabular.selection.split_budget`; the rest is split as
without coverage, so a step spends ``k·selection + k·measurement + size + coverage = ε``.
Noise is the counter's (exact discrete Laplace in the Rust core); everything else here is
post-processing of its releases and of public values. The margins are derived from the
batch's exact workload histograms (each covered column from the first workload holding it).

**Use** (post-processing):

* :meth:`Coverage.batch_margins`: the counter's increment at a step (released before the
  step's selections) is a noisy one-way margin of every covered column of the batch. For
  the columns whose margin drifted from the model's expected one (the stream's drift test),
  it rakes every expected batch the step scores against, as ``refit="step"`` does with the
  margins its own measurements released. The score's private input is still the batch
  alone against a public vector: its sensitivity is unchanged.
* :meth:`Coverage.cover`: a pooled measurement ``C_j + U`` estimates the rows ``j``'s
  counter did not count, ``U``, from the rows it did. The counter's release gives their
  one-way margins (``M_a − (C_j)_a``); ``U`` is raked to them (each shrunk towards ``U``'s
  own margin by :func:`~dpstream.tabular.raking.batch_margin`), for the columns where the
  two differ by more than noise and sampling explain.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from dpstream._rng import Rng
from dpstream.counters import Counter, KindName
from dpstream.tabular.fitting import increment_variance, release_stddev
from dpstream.tabular.policy import Margins, drifted
from dpstream.tabular.raking import batch_margin, one_way, rake
from dpstream.tabular.workloads import Clique

__all__ = ["Coverage", "covered_columns"]

FloatArray = npt.NDArray[np.float64]


def covered_columns(workloads: Sequence[Clique]) -> list[int]:
    """The columns the coverage counter counts: every column in some workload (public)."""
    return sorted({c for w in workloads for c in w})


class Coverage:
    """The coverage counter and its last increment (the stream's state; see the module).

    Args:
        kind, horizon, rng: the workload counters' kind, horizon and generator.
        epsilon: the counter's ε per unit ℓ1 change
            (:attr:`~dpstream.tabular.selection.Budget.coverage_counter_epsilon`).
        workloads: the stream's workloads; ``sizes``: every column's categories.
    """

    def __init__(
        self,
        kind: KindName,
        epsilon: object,
        workloads: Sequence[Clique],
        sizes: Sequence[int],
        horizon: int | None,
        rng: Rng,
    ) -> None:
        self.columns = covered_columns(workloads)
        self.sizes = [int(sizes[c]) for c in self.columns]
        # Where each covered column is read: (workload index, axis in it).
        self._source = [
            next((i, w.index(c)) for i, w in enumerate(workloads) if c in w) for c in self.columns
        ]
        self._shapes = [tuple(int(sizes[c]) for c in w) for w in workloads]
        self._offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        self.counter = Counter(kind, epsilon, int(sum(self.sizes)), horizon=horizon, rng=rng)  # type: ignore[arg-type]
        #: The counter's increment at the current step (released before its selections).
        self.increment: FloatArray | None = None

    def step(self, diff: Sequence[npt.NDArray[np.float64]]) -> None:
        """Feed the batch: ``diff[i]`` is workload ``i``'s exact histogram of the batch
        (insertions minus deletions); each covered column's margin is summed from it."""
        parts = [
            one_way(diff[i].reshape(self._shapes[i]), a).astype(np.int64) for i, a in self._source
        ]
        before = self.counter.release.astype(np.float64)
        after = self.counter.step(np.concatenate(parts)).astype(np.float64)
        self.increment = after - before

    def _part(self, flat: FloatArray, column: int) -> FloatArray:
        n = self.columns.index(column)
        return flat[self._offsets[n] : self._offsets[n + 1]]

    def batch_margins(self, model_margin: object, rows: float, table: float, z: float) -> Margins:
        """The step's released one-way margins of the batch, with their noise variance per
        cell, for the columns whose margin drifted from the model's expected one (its
        margin scaled to ``rows`` batch rows): the form ``refit="step"`` rakes expected
        batches to. ``model_margin(c)`` is the model's one-way margin of column ``c``
        (``table`` rows). Empty before the first step's model."""
        if self.increment is None or table <= 0 or rows <= 0:
            return {}
        variance = increment_variance(self.counter)
        out: Margins = {}
        for c in self.columns:
            part = self._part(self.increment, c)
            expected = model_margin(c) * (rows / table)  # type: ignore[operator]
            if drifted(part, expected, variance, z):
                out[c] = ([part], [variance])
        return out

    def cover(
        self,
        values: FloatArray,
        released: FloatArray,
        stddev: float,
        clique: Clique,
        shape: tuple[int, ...],
        z: float,
    ) -> FloatArray:
        """A pooled measurement ``values = C_j + U`` of workload ``clique`` with ``U`` raked
        to the one-way margins of the uncounted rows that the counter's release implies
        (``C_j = released``, noise ``stddev`` per cell)."""
        uncounted = np.clip(values - released, 0.0, None).reshape(shape)
        if uncounted.sum() <= 0:
            return values
        counted = released.reshape(shape)
        total = self.counter.release.astype(np.float64)
        sd = release_stddev(self.counter)
        wanted: dict[int, FloatArray] = {}
        for a, c in enumerate(clique):
            target = self._part(total, c) - one_way(counted, a)
            variance = max(sd * sd + stddev * stddev * (counted.size // shape[a]), 1e-12)
            own = one_way(uncounted, a)
            if drifted(target, own, variance, z):
                wanted[a] = batch_margin([target], [variance], own)
        out: FloatArray = released + rake(uncounted, wanted).reshape(-1)
        return out

"""A workload counter's release history, in time order, and the time-local extrapolation
of its counted rows to the rows it did not count (``TabularStream(remainder="local")``).

A workload's counter only counts the batches of the steps at which the workload was
selected. To measure the whole table, the rows of the other steps must be estimated.
``remainder="pooled"`` scales the counted rows up as one pool: right when every batch
is drawn from the same distribution, biased when the stream drifts (a table arriving
sorted by one of its columns). This module keeps the counter's increments as a short
sequence of **segments** in time order (the increment of one selection, or of a run of
neighbouring selections merged to bound the memory) and estimates the rows between
segments from the segments nearest in time: each segment's window is its ``K``
nearest segments, and ``K`` is chosen by leave-one-out cross-validation on the
segments themselves (predict each segment's increment from its ``K`` nearest other
segments). The increments' noise is independent across selections, so the
cross-validated error is, up to a constant that does not depend on ``K``, the bias²
plus variance of the prediction: a stream without drift picks the whole history
(``K = n``: the pooled estimate), a sorted one picks a short window.

Everything here is **post-processing** of counter releases (differences of released
values) and of public row counts: no privacy cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: At most this many segments per workload: neighbouring segments are merged beyond it,
#: which bounds the history at ``MAX_SEGMENTS`` vectors of the workload's cells.
MAX_SEGMENTS = 32


@dataclass
class SegmentHistory:
    """The increments of one workload's counter, one row per segment, oldest first.

    Per segment ``i``: ``increments[i]`` (the released increment, noisy counts per cell),
    ``rows[i]`` (the net rows it counted), ``noise_units[i]`` (the counter steps merged
    into it: the increment's noise variance in units of one step's), ``inner[i]`` (rows
    not counted between the selections merged into it) and ``gaps[i]`` (rows not counted
    between the previous segment and this one; for the first, since the stream began).
    ``covered`` is the table size just after the last segment's step. All public or
    released; sizes are net rows (insertions − deletions).
    """

    cells: int
    increments: FloatArray = field(init=False)
    rows: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    noise_units: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    inner: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    gaps: IntArray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    covered: int = 0
    _window: int | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self.increments = np.zeros((0, self.cells))

    def __len__(self) -> int:
        return int(self.rows.size)

    def add(self, increment: FloatArray, rows: int, size_before: int) -> None:
        """Record a selection: the counter's released increment for a batch of ``rows``
        net rows, the table holding ``size_before`` rows before that batch."""
        gap = size_before - self.covered
        self.increments = np.vstack([self.increments, increment[None, :]])
        self.rows = np.append(self.rows, rows)
        self.noise_units = np.append(self.noise_units, 1)
        self.inner = np.append(self.inner, 0)
        self.gaps = np.append(self.gaps, gap)
        self.covered = size_before + rows
        self._window = None
        if len(self) > MAX_SEGMENTS:
            self._merge_smallest()

    def _merge_smallest(self) -> None:
        """Merge the neighbouring pair that spans the fewest rows (keeps the resolution even
        in rows)."""
        span = self.rows[:-1] + self.rows[1:] + self.gaps[1:] + self.inner[:-1] + self.inner[1:]
        i = int(np.argmin(span))
        self.increments[i] += self.increments[i + 1]
        self.rows[i] += self.rows[i + 1]
        self.noise_units[i] += self.noise_units[i + 1]
        self.inner[i] += self.inner[i + 1] + self.gaps[i + 1]
        keep = np.arange(len(self)) != i + 1
        self.increments = self.increments[keep]
        self.rows, self.noise_units = self.rows[keep], self.noise_units[keep]
        self.inner, self.gaps = self.inner[keep], self.gaps[keep]

    def attributed(self, size: int) -> FloatArray:
        """Rows not counted, per segment they are estimated from: a segment's inner rows,
        half of each neighbouring gap (all of the first gap to the first segment, and the
        rows since the last segment, ``size − covered``, to the last)."""
        n = len(self)
        out = self.inner.astype(np.float64)
        gaps = self.gaps.astype(np.float64)
        out[0] += gaps[0]
        if n > 1:
            out[:-1] += gaps[1:] / 2.0
            out[1:] += gaps[1:] / 2.0
        out[-1] += float(size - self.covered)
        return out

    def window(self) -> int:
        """The window ``K`` (segments), by leave-one-out cross-validation; ``len(self)`` is
        the whole history (the pooled estimate), preferred on ties. Cached until the next
        :meth:`add` (it depends on the segments only)."""
        if self._window is None:
            self._window = self._cross_validate()
        return self._window

    def _cross_validate(self) -> int:
        n = len(self)
        if n <= 2:
            return n
        y = self.increments
        b = self.rows.astype(np.float64)
        cy = np.vstack([np.zeros((1, self.cells)), np.cumsum(y, axis=0)])
        cb = np.concatenate([[0.0], np.cumsum(b)])
        candidates = [k for k in (1, 2, 4, 8, 16) if k < n - 1] + [n - 1]
        best, best_err = n, np.inf
        for k in reversed(candidates):  # larger windows first: they win ties
            err = 0.0
            for i in range(n):
                lo = min(max(i - k // 2, 0), n - k - 1)
                hi = lo + k + 1
                sy = cy[hi] - cy[lo] - y[i]
                sb = cb[hi] - cb[lo] - b[i]
                pred = (b[i] / sb) * sy if sb > 0 else np.zeros(self.cells)
                d = y[i] - pred
                err += float(np.dot(d, d))
            if err < best_err:
                best, best_err = (n if k == n - 1 else k + 1), err
        return best

    def coefficients(self, size: int, window: int | None = None) -> FloatArray:
        """``a`` such that ``Σ_i a_i·increments[i]`` estimates the rows not counted, at
        table size ``size``: the rows attributed to each segment, times the counts per
        row of the ``window`` segments nearest to it (its own included)."""
        n = len(self)
        k = self.window() if window is None else window
        a = np.zeros(n)
        b = self.rows.astype(np.float64)
        total = float(b.sum())
        for i, share in enumerate(self.attributed(size)):
            if share == 0.0:
                continue
            lo = min(max(i - (k - 1) // 2, 0), n - k)
            sb = float(b[lo : lo + k].sum())
            if sb > 0:
                a[lo : lo + k] += share / sb
            elif total > 0:  # net deletions in the window: the whole history
                a += share / total
        return a

    def to_arrays(self, prefix: str) -> dict[str, npt.NDArray[np.int64] | FloatArray]:
        """The history as named arrays (checkpoints)."""
        meta = np.stack([self.rows, self.noise_units, self.inner, self.gaps], axis=1)
        return {
            f"{prefix}_increments": self.increments,
            f"{prefix}_meta": meta.astype(np.int64),
            f"{prefix}_covered": np.array([self.covered], dtype=np.int64),
        }

    @classmethod
    def from_arrays(
        cls, cells: int, increments: FloatArray, meta: IntArray, covered: IntArray
    ) -> SegmentHistory:
        """Inverse of :meth:`to_arrays`; ``ValueError`` on inconsistent shapes."""
        inc = np.asarray(increments, dtype=np.float64)
        m = np.asarray(meta)
        if inc.ndim != 2 or inc.shape[1] != cells or m.shape != (inc.shape[0], 4):
            raise ValueError("corrupt TabularStream state: counter history shapes")
        if m.dtype.kind not in "iu" or inc.shape[0] > MAX_SEGMENTS or covered.size != 1:
            raise ValueError("corrupt TabularStream state: counter history")
        h = cls(cells)
        h.increments = inc.copy()
        h.rows, h.noise_units, h.inner, h.gaps = (m[:, c].astype(np.int64) for c in range(4))
        h.covered = int(covered[0])
        if np.any(h.noise_units < 1):
            raise ValueError("corrupt TabularStream state: counter history noise units")
        return h

"""Noisy marginal measurements of a categorical table, and what the fit step shares.

A table has ``d`` columns; column ``j`` takes the integer codes ``0 .. sizes[j] - 1``.
The *marginal* of a set of columns (a *clique*, given as sorted column indices) is
the vector of counts of rows in each cell of those columns, flattened in C order over
the clique's domain sizes (the last column varies fastest); ``()`` is the total count.

Everything here and in :mod:`dpstream.tabular.model` / :mod:`dpstream.tabular.mw` is
**post-processing**: it only reads measurements that were already released, draws no
privacy noise, and so costs no privacy budget. The only randomness is the sampling of
synthetic rows, from a caller-supplied :class:`numpy.random.Generator`: either
independent draws (``method="iid"``, :func:`sample_rows`) or controlled rounding of
the expected counts (``method="round"``, :func:`round_rows`, as Private-PGM's
``synthetic_data(method="round")``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

#: A set of columns, as strictly increasing column indices.
Clique = tuple[int, ...]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


#: The values of ``method`` that :meth:`MarginalModel.sample` accepts.
SAMPLE_METHODS = ("iid", "round")


class MarginalModel(Protocol):
    """What a fitted model offers: marginals (counts) and synthetic rows.

    ``sample(n, rng, method=...)`` returns ``n`` rows ``(n, d)`` of int64 codes:
    ``"iid"`` draws them independently from the model; ``"round"`` allocates them by
    unbiased controlled rounding of the expected counts, block of columns by block
    (see :func:`round_rows`). Both are post-processing.
    """

    @property
    def sizes(self) -> tuple[int, ...]: ...

    @property
    def total(self) -> float: ...

    def marginal(self, clique: Sequence[int]) -> FloatArray: ...

    def sample(self, n: int, rng: np.random.Generator, *, method: str = "iid") -> IntArray: ...


def check_clique(clique: object, name: str = "clique") -> Clique:
    """``clique`` as a tuple of strictly increasing non-negative ints, or a ValueError."""
    if isinstance(clique, (str, bytes)) or not isinstance(clique, Iterable):
        raise ValueError(f"{name} must be a sequence of column indices, got {clique!r}")
    cols = tuple(clique)
    for c in cols:
        if isinstance(c, (bool, np.bool_)) or not isinstance(c, (int, np.integer)):
            raise ValueError(f"{name} must hold integer column indices, got {cols!r}")
    out = tuple(int(c) for c in cols)
    if any(c < 0 for c in out):
        raise ValueError(f"{name} {out} has a negative column index")
    if len(set(out)) != len(out):
        raise ValueError(f"{name} {out} repeats a column")
    if list(out) != sorted(out):
        raise ValueError(f"{name} {out} must list its columns in increasing order")
    return out


def check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    """The domain sizes as a tuple of positive ints, or a ValueError."""
    # A tuple checked before is returned as is (a stream asks thousands of times per step;
    # tuples are immutable, and the one kept here is the very object passed in).
    if _CHECKED.get(id(sizes)) is sizes:
        return sizes  # type: ignore[return-value]
    out = _check_sizes(sizes)
    if type(sizes) is tuple and out == sizes and all(type(v) is int for v in sizes):
        if len(_CHECKED) >= 64:
            _CHECKED.clear()
        _CHECKED[id(sizes)] = sizes
    return out


_CHECKED: dict[int, object] = {}


def _check_sizes(sizes: Sequence[int]) -> tuple[int, ...]:
    out: list[int] = []
    for j, s in enumerate(sizes):
        if isinstance(s, (bool, np.bool_)) or not isinstance(s, (int, np.integer)) or s < 1:
            raise ValueError(f"sizes[{j}] must be a positive int, got {s!r}")
        out.append(int(s))
    if not out:
        raise ValueError("sizes must name at least one column")
    return tuple(out)


def check_clique_in(clique: Clique, sizes: tuple[int, ...], name: str = "clique") -> None:
    """Raise a ValueError if a column of ``clique`` is not a column of the domain."""
    if clique and clique[-1] >= len(sizes):
        raise ValueError(
            f"{name} {clique} names column {clique[-1]}, but the domain has {len(sizes)} "
            f"columns (0..{len(sizes) - 1})"
        )


def clique_shape(sizes: Sequence[int], clique: Clique) -> tuple[int, ...]:
    """Domain sizes of the columns of ``clique``."""
    return tuple(sizes[c] for c in clique)


def clique_cells(sizes: Sequence[int], clique: Clique) -> int:
    """Number of cells of the marginal of ``clique`` (an exact Python int)."""
    return math.prod(sizes[c] for c in clique)


def check_total(total: float) -> float:
    """The total count as a positive finite float, or a ValueError."""
    t = float(total)
    if not math.isfinite(t) or t <= 0:
        raise ValueError(f"total must be a positive finite count, got {total!r}")
    return t


@dataclass(frozen=True, eq=False)
class Measurement:
    """A released (noisy) measurement of one marginal.

    Attributes:
        clique: the measured columns, strictly increasing.
        values: the noisy counts, float64, flattened in C order over the clique's
            domain sizes (same layout as :func:`marginal_counts`).
        stddev: standard deviation of the noise in each count (count units, > 0), one
            number for all counts or one per count (``pgm`` only); the fit weights
            each count by ``1 / stddev**2``.
    """

    clique: Clique
    values: FloatArray
    stddev: float | FloatArray

    def __post_init__(self) -> None:
        object.__setattr__(self, "clique", check_clique(self.clique, "Measurement clique"))
        values = np.array(self.values, dtype=np.float64, copy=True).reshape(-1)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"Measurement of {self.clique}: values must be finite")
        values.setflags(write=False)
        object.__setattr__(self, "values", values)
        sd = np.array(self.stddev, dtype=np.float64, copy=True)
        if sd.ndim not in (0, 1) or (sd.ndim == 1 and sd.size != values.size):
            raise ValueError(
                f"Measurement of {self.clique}: stddev must be a number or one per count, "
                f"got shape {sd.shape} for {values.size} counts"
            )
        if not (np.all(np.isfinite(sd)) and np.all(sd > 0)):
            raise ValueError(
                f"Measurement of {self.clique}: stddev must be positive and finite, "
                f"got {self.stddev!r}"
            )
        if sd.ndim == 0:
            object.__setattr__(self, "stddev", float(sd))
        else:
            sd.setflags(write=False)
            object.__setattr__(self, "stddev", sd)

    def __repr__(self) -> str:
        sd = self.stddev
        shown = f"{sd:g}" if isinstance(sd, float) else f"<{sd.size} values>"
        return (
            f"Measurement(clique={self.clique}, values=<{self.values.size} counts>, stddev={shown})"
        )


def check_measurements(
    sizes: tuple[int, ...], measurements: Sequence[Measurement]
) -> list[Measurement]:
    """Check every measurement against the domain; a ValueError names the first bad one."""
    out: list[Measurement] = []
    for i, m in enumerate(measurements):
        if not isinstance(m, Measurement):
            raise ValueError(f"measurements[{i}] must be a Measurement, got {type(m).__name__}")
        check_clique_in(m.clique, sizes, f"measurements[{i}] clique")
        cells = clique_cells(sizes, m.clique)
        if m.values.size != cells:
            raise ValueError(
                f"measurements[{i}] of clique {m.clique} has {m.values.size} values, but the "
                f"marginal has {cells} cells (sizes {clique_shape(sizes, m.clique)})"
            )
        out.append(m)
    return out


def marginal_counts(data: npt.ArrayLike, sizes: Sequence[int], clique: Sequence[int]) -> FloatArray:
    """Exact marginal of ``clique`` in an ``(n, d)`` table of integer codes.

    Returns the counts (float64), flattened in C order over the clique's domain
    sizes. Codes must lie in ``0 .. sizes[j] - 1``; a ValueError says where not.
    """
    sz = check_sizes(sizes)
    cl = check_clique(clique)
    check_clique_in(cl, sz)
    arr = np.asarray(data)
    if arr.ndim != 2 or arr.shape[1] != len(sz):
        raise ValueError(f"data must have shape (n, {len(sz)}), got {arr.shape}")
    if arr.size and not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"data must hold integer codes, got dtype {arr.dtype}")
    shape = clique_shape(sz, cl)
    cells = math.prod(shape)
    if not cl:
        return np.array([float(arr.shape[0])])
    cols = [arr[:, c] for c in cl]
    for c, col in zip(cl, cols, strict=True):
        if col.size and (col.min() < 0 or col.max() >= sz[c]):
            raise ValueError(f"column {c} has codes outside 0..{sz[c] - 1}")
    flat = np.ravel_multi_index(cols, shape) if len(cl) > 1 else cols[0]
    return np.bincount(flat, minlength=cells).astype(np.float64)


def l2_loss(model: MarginalModel, measurements: Sequence[Measurement]) -> float:
    """The fit's objective ``Σ ||μ_C − y_C||² / σ_C²`` (dimensionless) for ``model``."""
    loss = 0.0
    for m in measurements:
        diff = (model.marginal(m.clique) - m.values) / m.stddev
        loss += float(diff @ diff)
    return loss


def check_sample_size(n: object) -> int:
    """``n`` as a non-negative int, or a ValueError."""
    if isinstance(n, (bool, np.bool_)) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"n must be a non-negative int, got {n!r}")
    return int(n)


def sample_rows(probs: FloatArray, n: int, rng: np.random.Generator) -> npt.NDArray[np.intp]:
    """``n`` independent draws of indices ``0 .. len(probs) - 1`` with weights ``probs``."""
    cdf = np.cumsum(probs)
    cdf /= cdf[-1]
    idx = np.searchsorted(cdf, rng.random(n), side="right")
    return np.minimum(idx, len(probs) - 1)


def check_sample_method(method: object) -> str:
    """``method`` if it is one of :data:`SAMPLE_METHODS`, else a ValueError naming them."""
    if not isinstance(method, str) or method not in SAMPLE_METHODS:
        allowed = ", ".join(repr(m) for m in SAMPLE_METHODS)
        raise ValueError(f"method must be one of {allowed}, got {method!r}")
    return method


def controlled_round(
    weights: npt.ArrayLike, totals: npt.ArrayLike, rng: np.random.Generator
) -> IntArray:
    """Unbiased controlled rounding of ``totals[g] · weights[g] / Σ weights[g]``, per row.

    ``weights`` is ``(g, k)`` (negative entries count as 0; a row without mass is
    uniform over its ``k`` cells) and ``totals`` ``(g,)`` non-negative ints. Returns
    int64 counts ``(g, k)`` such that, with ``e = totals[g] · q[g]`` the expected
    counts (``q`` the normalised row):

    * each count is ``floor(e)`` or ``ceil(e)`` (a cell of zero weight gets 0), and
      the counts of a row sum to ``totals[g]`` exactly;
    * a cell gets its ceiling with probability exactly its fractional part
      ``e − floor(e)``, so ``E[count] = e`` (unbiased).

    The remainder ``totals[g] − Σ floor(e)`` is allocated by systematic sampling: the
    cells are put in a uniformly random order, and with one uniform ``u`` in ``[0, 1)``
    per row a cell is rounded up when the running sum of fractional parts crosses one
    of ``u, u + 1, u + 2, …`` inside it (each cell's interval has length its fractional
    part, below 1, so it is crossed at most once). Float round-off is absorbed: the
    running sum is pinned to the integer remainder at its end, so exactly ``totals[g]``
    rows are allocated and no count is negative.

    **Post-processing**: the weights are a released model, so this costs no privacy
    budget; the only randomness is from ``rng`` (one permutation and one uniform per row).
    """
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    tot = np.asarray(totals, dtype=np.int64).reshape(-1)
    if w.ndim != 2 or w.shape[0] != tot.size or w.shape[1] < 1:
        raise ValueError(f"weights must be (g, k) with g = {tot.size} rows, got {w.shape}")
    if np.any(tot < 0):
        raise ValueError("totals must be non-negative")
    g, k = w.shape
    mass = w.sum(axis=1, keepdims=True)
    q = np.where(mass > 0, w / np.where(mass > 0, mass, 1.0), 1.0 / k)
    expected = tot[:, None] * q
    floors = np.floor(expected)
    frac = expected - floors
    counts = floors.astype(np.int64)
    rest = tot - counts.sum(axis=1)  # the remainder to round up; Σ frac up to round-off
    order = rng.permuted(np.broadcast_to(np.arange(k), (g, k)), axis=1)
    cum = np.cumsum(np.take_along_axis(frac, order, axis=1), axis=1)
    target = np.maximum(rest, 0).astype(np.float64)[:, None]
    # Pin the end of the running sum to the remainder (cells at or after the last
    # positive fractional part share its value), and clip any overshoot before it.
    cum = np.where(cum == cum[:, -1:], target, np.minimum(cum, target))
    u = rng.random((g, 1))
    crossed = np.floor(cum - u)
    before = np.concatenate([np.floor(-u), crossed[:, :-1]], axis=1)
    up = np.empty((g, k), dtype=np.int64)
    np.put_along_axis(up, order, (crossed - before).astype(np.int64), axis=1)
    counts += up
    # Telescoping makes every row sum exact and every step ≥ 0; a step of 2, a step
    # in a cell of zero fractional part or a negative remainder needs round-off far
    # beyond float64's on real inputs (kept as a guard).
    broken = (up > 1) | ((up > 0) & (frac == 0))
    bad = np.flatnonzero(broken.any(axis=1) | (rest < 0))
    for r in bad:
        counts[r] = _repair_rounding(counts[r], expected[r], int(tot[r]))
    return counts


def _repair_rounding(counts: IntArray, expected: FloatArray, total: int) -> IntArray:
    """``counts`` moved to floor/ceil of ``expected`` and to sum ``total`` (≥ 0 each).

    Only for rows whose float round-off broke :func:`controlled_round`'s invariants:
    cells are rounded up by largest fractional part (down by smallest) until the row
    sums to ``total``, going beyond the ceiling only if the ceilings cannot reach it.
    """
    lo, hi = np.floor(expected), np.ceil(expected)
    out = np.clip(counts, lo, hi).astype(np.int64)
    frac = expected - lo
    diff = total - int(out.sum())
    while diff != 0:
        if diff > 0:
            room = np.flatnonzero(out < hi)
            if room.size == 0:
                room = np.flatnonzero(expected > 0)
            if room.size == 0:
                room = np.arange(out.size)
            pick = room[np.argsort(-frac[room], kind="stable")[:diff]]
            out[pick] += 1
            diff -= pick.size
        else:
            room = np.flatnonzero(out > lo)
            if room.size == 0:
                room = np.flatnonzero(out > 0)
            pick = room[np.argsort(frac[room], kind="stable")[:-diff]]
            out[pick] -= 1
            diff += pick.size
    return out


def round_rows(
    cond: npt.ArrayLike,
    groups: npt.NDArray[np.intp] | None,
    n: int,
    rng: np.random.Generator,
) -> npt.NDArray[np.intp]:
    """One value index per row by controlled rounding: the ``"round"`` sampling method.

    ``cond`` is ``(s, k)`` (a 1-D array is one row): row ``j`` weighs the ``k`` values
    of the new columns given the conditioning cell ``j``. ``groups[r]`` is row ``r``'s
    conditioning cell (``None``: all ``n`` rows use row 0, the first block). The rows
    of each group (size ``c``) get the value counts :func:`controlled_round` allocates
    from ``c · cond[j] / Σ cond[j]`` — floor or ceiling of each expected count, exact
    total, unbiased; a conditioning row without mass is uniform, as the ``"iid"``
    draws — and these values are shuffled within the group, so that the row order
    carries no information and the pairing with the other columns is random.

    Applied block by block (the first block, then each block given the columns drawn
    before it), every cell's expected count is ``n`` times its model probability
    (unbiasedness of each rounding and the tower rule). **Post-processing**: no privacy
    cost. Vectorised over the groups (memory ``O(groups · k)``).
    """
    table = np.asarray(cond, dtype=np.float64)
    if table.ndim == 1:
        table = table.reshape(1, -1)
    if n == 0:
        return np.zeros(0, dtype=np.intp)
    k = table.shape[1]
    if groups is None:
        cells = np.zeros(1, dtype=np.intp)
        inverse = np.zeros(n, dtype=np.intp)
        sizes = np.array([n], dtype=np.int64)
    else:
        cells, inverse, sizes = _groups_of(np.asarray(groups).reshape(-1))
    counts = controlled_round(table[cells], sizes, rng).reshape(-1)
    filled = np.flatnonzero(counts)
    values = np.repeat(filled % k, counts[filled])  # by group, then by value
    # the rows of each group in a random order (stable sort of a random permutation;
    # small keys as uint16, which numpy sorts stably by radix: the same order, faster)
    perm = rng.permutation(n)
    keys = inverse.reshape(-1)[perm]
    if cells.size <= 1 << 16:
        keys = keys.astype(np.uint16)
    slots = perm[np.argsort(keys, kind="stable")]
    out = np.empty(n, dtype=np.intp)
    out[slots] = values
    return out


def _groups_of(
    groups: npt.NDArray[Any],
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``np.unique(groups, return_inverse=True, return_counts=True)`` of non-negative
    integer codes, by counting (the same arrays, without a sort)."""
    if not groups.size or not np.issubdtype(groups.dtype, np.integer) or groups.min() < 0:
        cells, inverse, sizes = np.unique(groups, return_inverse=True, return_counts=True)
        return cells, inverse, sizes
    every = np.bincount(groups)
    present = every > 0
    cells = np.flatnonzero(present).astype(np.intp)
    rank = np.cumsum(present, dtype=np.intp) - 1
    return cells, rank[groups], every[cells].astype(np.intp)

"""Noisy marginal measurements of a categorical table, and what the fit step shares.

A table has ``d`` columns; column ``j`` takes the integer codes ``0 .. sizes[j] - 1``.
The *marginal* of a set of columns (a *clique*, given as sorted column indices) is
the vector of counts of rows in each cell of those columns, flattened in C order over
the clique's domain sizes (the last column varies fastest); ``()`` is the total count.

Everything here and in :mod:`dpstream.tabular.pgm` / :mod:`dpstream.tabular.mw` is
**post-processing**: it only reads measurements that were already released, draws no
privacy noise, and so costs no privacy budget. The only randomness is the sampling of
synthetic rows, from a caller-supplied :class:`numpy.random.Generator`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

#: A set of columns, as strictly increasing column indices.
Clique = tuple[int, ...]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


class MarginalModel(Protocol):
    """What a fitted model offers: marginals (counts) and synthetic rows."""

    @property
    def sizes(self) -> tuple[int, ...]: ...

    @property
    def total(self) -> float: ...

    def marginal(self, clique: Sequence[int]) -> FloatArray: ...

    def sample(self, n: int, rng: np.random.Generator) -> IntArray: ...


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
        stddev: standard deviation of the noise in each count (count units, > 0);
            the fit weights this measurement by ``1 / stddev**2``.
    """

    clique: Clique
    values: FloatArray
    stddev: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "clique", check_clique(self.clique, "Measurement clique"))
        values = np.array(self.values, dtype=np.float64, copy=True).reshape(-1)
        if not np.all(np.isfinite(values)):
            raise ValueError(f"Measurement of {self.clique}: values must be finite")
        values.setflags(write=False)
        object.__setattr__(self, "values", values)
        sd = float(self.stddev)
        if not math.isfinite(sd) or sd <= 0:
            raise ValueError(
                f"Measurement of {self.clique}: stddev must be positive and finite, "
                f"got {self.stddev!r}"
            )
        object.__setattr__(self, "stddev", sd)

    def __repr__(self) -> str:
        return (
            f"Measurement(clique={self.clique}, values=<{self.values.size} counts>, "
            f"stddev={self.stddev:g})"
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

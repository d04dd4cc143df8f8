"""Raking a model's expected batch to the one-way margins a step has already measured.

Used by :class:`dpstream.tabular.TabularStream` with ``refit="step"``: the ``k``
selections of a step are scored against the model of the previous step, and what the
step's earlier measurements showed about the batch enters as one-way margins. Each
selected workload's counter releases a noisy histogram of the batch (the difference
of two consecutive releases); its sums over the other columns are noisy one-way
margins of the batch. A candidate workload's expected batch (the model's marginal
scaled to the batch's rows) is raked — iterative proportional fitting — to the
margins measured on its columns: its association between the columns stays the
model's, its margins become the batch's.

Everything here is post-processing of released values and public sizes: no privacy
cost, no noise.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: Iterations of iterative proportional fitting in :func:`rake`.
RAKE_ITERS = 10


def one_way(table: FloatArray, axis: int) -> FloatArray:
    """The sums of ``table`` over every axis but ``axis`` (its one-way margin)."""
    out: FloatArray = np.asarray(table).sum(
        axis=tuple(b for b in range(np.ndim(table)) if b != axis)
    )
    return out


def rake(
    table: FloatArray, margins: Mapping[int, FloatArray], iters: int = RAKE_ITERS
) -> FloatArray:
    """``table`` (non-negative, any number of axes) scaled by iterative proportional
    fitting so that its sums over all axes but ``a`` approach ``margins[a]``.

    Cells of a margin whose table slice is all zero (or so small that ``m / slice``
    overflows) stay zero (raking cannot create an association the table does not
    have). Margins must be non-negative with the same total (the batch's rows); a
    table with total 0 is returned unchanged.
    """
    x = np.asarray(table, dtype=np.float64).copy()
    if np.any(x < 0) or not np.all(np.isfinite(x)):
        raise ValueError("rake: the table must be finite and non-negative")
    for a, m in margins.items():
        if not 0 <= a < x.ndim or np.shape(m) != (x.shape[a],):
            raise ValueError(f"rake: margin {a} does not match the table's shape {x.shape}")
        if np.any(np.asarray(m) < 0):
            raise ValueError("rake: margins must be non-negative")
    if not margins or x.sum() <= 0:
        return x
    for _ in range(iters):
        for a, m in margins.items():
            current = one_way(x, a)
            with np.errstate(over="ignore"):
                factor = np.divide(
                    np.asarray(m, dtype=np.float64),
                    current,
                    out=np.zeros_like(current),
                    where=current > 0,
                )
            # A subnormal slice overflows m / current: it counts as empty (x·factor ≤ m
            # otherwise, so the product cannot overflow).
            factor[~np.isfinite(factor)] = 0.0
            shape = [1] * x.ndim
            shape[a] = -1
            x *= factor.reshape(shape)
    return x


def batch_margin(
    estimates: Sequence[FloatArray], variances: Sequence[float], expected: FloatArray
) -> FloatArray:
    """One column's margin of the batch from noisy estimates of it.

    Args:
        estimates: noisy margins (counts per category) from the step's measurements.
        variances: the noise variance per cell of each estimate.
        expected: the model's expected margin of the batch (public); its total is the
            batch's net rows.

    The estimates are averaged with inverse-variance weights, then shrunk towards
    ``expected`` by the positive-part James–Stein factor ``1 − (c − 2)·v/‖d‖²`` (``c``
    categories, at least 1 in place of ``c − 2``; ``v`` the average's variance; ``d``
    its distance from ``expected``), so that a margin that is mostly noise leaves the
    expected batch alone. Negative cells are set to 0 and the margin rescaled to
    ``expected``'s total.
    """
    if not estimates or len(estimates) != len(variances):
        raise ValueError("batch_margin: one variance per estimate, at least one")
    e = np.asarray(expected, dtype=np.float64)
    v = np.asarray(variances, dtype=np.float64)
    if np.any(v <= 0) or not np.all(np.isfinite(v)):
        raise ValueError("batch_margin: variances must be positive")
    w = (1.0 / v) / np.sum(1.0 / v)
    m = np.sum(np.asarray(estimates, dtype=np.float64) * w[:, None], axis=0)
    var = 1.0 / float(np.sum(1.0 / v))
    d = m - e
    energy = float(d @ d)
    keep = max(0.0, 1.0 - max(e.size - 2, 1) * var / energy) if energy > 0 else 0.0
    out: FloatArray = np.clip(e + keep * d, 0.0, None)
    total, got = float(e.sum()), float(out.sum())
    if got <= 0:
        return e.copy()
    out *= total / got
    return out

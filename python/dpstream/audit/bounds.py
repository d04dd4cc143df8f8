"""One-sided Clopper–Pearson bounds on binomial proportions, and the privacy-loss bound
of an audited event built from them.

The bounds invert the regularized incomplete beta function on the log-odds scale
inside a bracket (Newton steps, which stay on the conservative side because the
function is concave there, safeguarded by bisection); every bound is the bracket's
conservative end, widened by a relative 1e-8, more than the evaluation error.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

from dpstream.audit.incomplete_beta import FloatArray, log_beta, log_ibeta

IntArray = npt.NDArray[np.int64]

_LOGIT_TOL = 1e-11  # the root is located to this width (log-odds units)
_OUTWARD = 1e-8  # bounds are widened by this relative amount (the error is below 1e-9)


def _lower_logit(k: IntArray, n: IntArray, level: float) -> FloatArray:
    """Log-odds of the one-sided ``1 − level`` Clopper–Pearson lower bound, ``0 < k < n``.

    Solves ``g(v) = ln I_p(k, n − k + 1) − ln(level) = 0`` (``I_p(k, n − k + 1) =
    P(Bin(n, p) >= k)``) for ``v = logit(p)`` inside a bracket ``[lo, hi]`` with
    ``g(lo) < 0 < g(hi)``. ``g`` is concave in ``v`` (the log-odds of a Beta variable
    has a log-concave density, so its CDF is log-concave), so Newton steps from ``lo``
    stay below the root and rise to it; a step that would leave the bracket (or a
    point that numerically lands above the root) is replaced by bisection. The
    result is the highest point with ``g < 0``: never above the exact bound by more
    than the evaluation error.
    """
    a = k.astype(np.float64)
    b = (n - k + 1).astype(np.float64)
    lbeta = np.array([log_beta(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)])
    log_level = math.log(level)
    # P(Bin(n, p) >= k) <= n p / k <= level / 2 at p = level / (2n) (Markov), and
    # >= 1/2 > level at p = k / n (k is then the median of Bin(n, k / n)).
    p_lo = level / (2.0 * n)
    lo: FloatArray = np.log(p_lo) - np.log1p(-p_lo)
    hi: FloatArray = np.log(a) - np.log((n - k).astype(np.float64))
    log_i, log_d = log_ibeta(lo, a, b, lbeta)
    g = log_i - log_level
    if not np.all(g < 0):  # pragma: no cover - numerical guard
        raise ArithmeticError("Clopper-Pearson bracket failed")
    slope = np.exp(log_d - log_i)  # g'(lo) > 0
    misses = np.zeros(lo.size, dtype=np.int64)  # consecutive trials that landed at or above
    active = np.arange(lo.size)
    for _ in range(200):
        step = -g[active] / slope[active]
        gap = hi[active] - lo[active]
        go = (step > _LOGIT_TOL) & (gap > _LOGIT_TOL)
        active, step, gap = active[go], step[go], gap[go]
        if active.size == 0:
            break
        miss = misses[active]
        # Newton from lo; after a miss (a point within rounding of the root, or past
        # it), back off to just below the bracket's top; after two, bisect.
        trial = np.where(
            (miss == 0) & (step < gap),
            lo[active] + step,
            np.where(miss == 1, hi[active] - 0.5 * _LOGIT_TOL, lo[active] + 0.5 * gap),
        )
        t_log_i, t_log_d = log_ibeta(trial, a[active], b[active], lbeta[active])
        t_g = t_log_i - log_level
        below = t_g < 0
        up, down = active[below], active[~below]
        lo[up], g[up], misses[up] = trial[below], t_g[below], 0
        slope[up] = np.exp(t_log_d[below] - t_log_i[below])
        hi[down] = trial[~below]
        misses[down] += 1
    return lo


def clopper_pearson(
    k: npt.ArrayLike, n: npt.ArrayLike, level: float
) -> tuple[FloatArray, FloatArray]:
    """One-sided Clopper–Pearson bounds on a binomial proportion (vectorised).

    Args:
        k: successes (integers ``0 <= k <= n``).
        n: trials (positive integers), broadcast against ``k``.
        level: the error probability of *each* bound, in ``(0, 1/2)``.

    Returns:
        ``(lower, upper)``: ``P(p < lower) <= level`` and ``P(p > upper) <= level``
        for every ``p``. ``lower`` is the ``level`` quantile of Beta(k, n − k + 1)
        (0 for ``k = 0``) and ``upper`` the ``1 − level`` quantile of
        Beta(k + 1, n − k) (1 for ``k = n``), each widened by a relative 1e-8 (more
        than the numerical error) so that it is never on the wrong side.
    """
    if not 0.0 < level < 0.5:
        raise ValueError(f"level must be in (0, 1/2), got {level!r}")
    k_arr, n_arr = np.broadcast_arrays(np.asarray(k), np.asarray(n))
    for arr, name in ((k_arr, "k"), (n_arr, "n")):
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
        if not np.issubdtype(arr.dtype, np.integer) and not np.all(arr == np.floor(arr)):
            raise ValueError(f"{name} must be integers")
    kk = np.asarray(k_arr, dtype=np.int64).ravel()
    nn = np.asarray(n_arr, dtype=np.int64).ravel()
    if np.any(nn < 1) or np.any(kk < 0) or np.any(kk > nn):
        raise ValueError("need n >= 1 and 0 <= k <= n")
    lower = np.zeros(kk.size)
    upper = np.ones(kk.size)
    # The upper bound for k is one minus the lower bound for n − k (by symmetry).
    counts = np.concatenate([kk, nn - kk])
    trials = np.concatenate([nn, nn])
    logit = np.full(counts.size, -np.inf)
    inner = (counts > 0) & (counts < trials)
    if inner.any():
        logit[inner] = _lower_logit(counts[inner], trials[inner], level)
    full = counts == trials  # I_p(n, 1) = p^n: the bound is level^(1/n)
    t = math.log(level) / trials[full]
    logit[full] = t - np.log(-np.expm1(t))
    m = kk.size
    # Widened by a relative _OUTWARD, well beyond the evaluation error.
    lower = np.where(kk > 0, (1.0 - _OUTWARD) / (1.0 + np.exp(-logit[:m])), 0.0)
    upper = np.where(kk < nn, np.minimum(1.0, (1.0 + _OUTWARD) / (1.0 + np.exp(logit[m:]))), 1.0)
    shape = k_arr.shape
    return lower.reshape(shape), upper.reshape(shape)


def loss_bounds(
    k_num: IntArray, k_den: IntArray, n_num: int, n_den: int, level: float, delta: float
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(numerator lower, denominator upper, ln((lower − δ)/upper))`` per comparison."""
    lower, _ = clopper_pearson(k_num, n_num, level)
    _, upper = clopper_pearson(k_den, n_den, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.where(
            lower > delta, np.log(np.maximum(lower - delta, 0.0)) - np.log(upper), -np.inf
        )
    return lower, upper, loss

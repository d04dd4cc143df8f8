"""Utility metrics: the 1-Wasserstein distance between point sets.

The utility of a synthetic data set is measured, as in the PrivHP paper (Holland et al.,
Section 3.2) and in He, Vershynin and Zhu, by the 1-Wasserstein distance

    W1(μ, ν) = sup over 1-Lipschitz f of ( ∫ f dμ − ∫ f dν )
             = min over couplings π of μ and ν of  E_π ‖X − Y‖∞

between the empirical measure of the input and that of the synthetic data. Here both
measures are empirical: every point of ``x`` carries mass ``1/n`` and every point of ``y``
mass ``1/m`` (``n ≠ m`` is allowed), and the ground metric is the ℓ∞ distance
``‖u − v‖∞ = max_j |u_j − v_j|`` of the unit cube ``[0,1]^d`` with its dyadic
partition. The distance is reported in the units of the coordinates (for data in
``[0,1]^d``, a number in ``[0, 1]``).

These are evaluation tools, not mechanisms: they read private and synthetic data alike and
their output is not differentially private. They use numpy randomness (for the sliced
approximation only), never the privacy generator.

Three ways of computing it, chosen by ``method`` (see :func:`wasserstein1_method`):

* ``d = 1``: always exact, from the sorted samples (quantile functions), in
  ``O((n + m) log(n + m))`` time. No optional dependency.
* ``d ≥ 2``, ``"exact"``: exact optimal transport with the ℓ∞ cost matrix, solved by the
  network simplex of POT (``pip install pot``; imported as ``ot``). Time grows like
  ``(n + m)^3`` and memory like ``8·n·m`` bytes, so it is meant for up to a few thousand
  points per set.
* ``d ≥ 2``, ``"sliced"``: the sliced 1-Wasserstein distance, an average over random unit
  directions of the exact 1-D distance between the projected sets. This is a *different
  distance* (see :func:`wasserstein1`); ``"auto"`` switches to it above ``max_exact``
  points, so compare only numbers computed by the same method.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpstream._params import int_param, optional_seed

__all__ = [
    "EXACT_MAX_COST_ENTRIES",
    "Method",
    "ResolvedMethod",
    "wasserstein1",
    "wasserstein1_method",
]

#: What a caller may ask for.
Method = Literal["auto", "exact", "sliced"]
#: What is actually computed.
ResolvedMethod = Literal["exact", "sliced"]

#: Largest ``n·m`` for which exact optimal transport in ``d ≥ 2`` is attempted: the cost
#: matrix alone then takes 1.6 GB of float64.
EXACT_MAX_COST_ENTRIES = 200_000_000

_METHODS: tuple[str, ...] = ("auto", "exact", "sliced")
# Work arrays of the sliced method hold about this many float64 entries per chunk.
_SLICED_CHUNK_ENTRIES = 1 << 23

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


# ---------------------------------------------------------------------------------------
# Public API
# ---------------------------------------------------------------------------------------


def wasserstein1_method(
    n: int, m: int, d: int, *, method: str = "auto", max_exact: int = 2000
) -> ResolvedMethod:
    """The computation :func:`wasserstein1` performs for sets of ``n`` and ``m`` points in ``d``-D.

    Returns ``"exact"`` (the ℓ∞ 1-Wasserstein distance itself) or ``"sliced"`` (the sliced
    approximation, a different distance). The rule:

    * ``d = 1``: ``"exact"`` whatever ``method`` says (in one dimension the sliced distance
      *is* the exact one, and the exact computation is cheap);
    * ``method="exact"`` or ``"sliced"``: that method;
    * ``method="auto"``: ``"exact"`` if ``n <= max_exact`` and ``m <= max_exact``, else
      ``"sliced"``.

    It does not check that an exact computation fits in memory (:func:`wasserstein1` does).

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``n``, ``m``, ``d`` or ``max_exact`` is not positive, or ``method`` is
            not one of ``"auto"``, ``"exact"``, ``"sliced"``.
    """
    n = int_param(n, "n", low=1, high=None)
    m = int_param(m, "m", low=1, high=None)
    d = int_param(d, "d", low=1, high=None)
    method = _method(method)
    max_exact = int_param(max_exact, "max_exact", low=1, high=None)
    if d == 1:
        return "exact"
    if method == "exact":
        return "exact"
    if method == "sliced":
        return "sliced"
    return "exact" if n <= max_exact and m <= max_exact else "sliced"


def wasserstein1(
    x: npt.ArrayLike,
    y: npt.ArrayLike,
    *,
    method: str = "auto",
    max_exact: int = 2000,
    n_projections: int = 200,
    seed: int | None = 0,
) -> float:
    """1-Wasserstein distance between the empirical measures of ``x`` and ``y``, ℓ∞ ground metric.

    Computes ``W1(μ_x, μ_y) = min_π E_π ‖X − Y‖∞`` over couplings ``π`` of
    ``μ_x = (1/n) Σ δ_{x_i}`` and ``μ_y = (1/m) Σ δ_{y_j}``: the least average ℓ∞
    distance (in the units of the coordinates) that mass must move to turn one set into
    the other. This is the utility metric of the PrivHP paper (Section 3.2) on ``[0,1]^d``;
    the formula is the same for points anywhere in ``ℝ^d``, so points are not required to
    lie in the unit cube. It is a metric: symmetric, zero exactly when the two empirical
    measures coincide, and it satisfies the triangle inequality.

    **When the sliced method is used (method "sliced", or method "auto" with d ≥ 2 and
    more than max_exact points in either set), the value returned is NOT the ℓ∞
    1-Wasserstein distance but a Monte Carlo estimate of the sliced 1-Wasserstein
    distance with Euclidean projections, a different and weaker metric.** It is
    ``(1/P) Σ_p W1(⟨θ_p, x⟩, ⟨θ_p, y⟩)`` for ``P = n_projections`` directions ``θ_p``
    drawn uniformly from the Euclidean unit sphere (reproducibly, from ``seed``), each
    term an exact 1-D distance. Each term is at most ``‖θ_p‖₁ ≤ √d`` times the ℓ∞
    distance; in expectation the estimate is at most ``c_d`` times the 1-Wasserstein
    distance with Euclidean ground metric, where ``c_d = Γ(d/2) / (√π Γ((d+1)/2))``
    (``2/π`` for ``d = 2``, about ``√(2/(π d))`` for large ``d``), hence at most
    ``c_d·√d ≤ 0.91`` times the ℓ∞ value, and often much less; there is no matching
    lower bound. Use :func:`wasserstein1_method` to see which computation a call makes,
    and pass ``method="exact"`` or ``method="sliced"`` explicitly when numbers will be
    compared across sizes. No warning is emitted.

    Args:
        x: points, shape ``(n, d)``; a 1-D array of length ``n`` is ``n`` points with
            ``d = 1``. Any real dtype; converted to float64.
        y: points, shape ``(m, d)`` (or 1-D when ``d = 1``), same ``d`` as ``x``.
        method: ``"auto"`` (default), ``"exact"`` or ``"sliced"``; see
            :func:`wasserstein1_method`. In one dimension the result is always exact.
        max_exact: under ``"auto"`` with ``d ≥ 2``, the largest ``n`` and ``m`` solved
            exactly.
        n_projections: number of random directions of the sliced method.
        seed: seed of the directions of the sliced method (numpy ``default_rng``); ``None``
            draws fresh ones. Unused by exact computations.

    Returns:
        The distance, a non-negative float (units of the coordinates).

    Raises:
        TypeError: ``x`` or ``y`` is not a real numeric array, or a parameter has the
            wrong type.
        ValueError: ``x`` or ``y`` is empty, has the wrong number of dimensions, contains
            NaN or ±inf, or the two have different ``d``; a parameter is out of range;
            ``method="exact"`` in ``d ≥ 2`` with ``n·m`` above
            :data:`EXACT_MAX_COST_ENTRIES`.
        ImportError: an exact computation in ``d ≥ 2`` is needed and POT is not installed.
        RuntimeError: POT's solver stopped before reaching an optimal plan.
    """
    xs = _as_points(x, "x")
    ys = _as_points(y, "y")
    if xs.shape[1] != ys.shape[1]:
        raise ValueError(
            f"x and y must have the same dimension d, got x with d = {xs.shape[1]} "
            f"and y with d = {ys.shape[1]}"
        )
    n, d = xs.shape
    m = ys.shape[0]
    n_projections = int_param(n_projections, "n_projections", low=1, high=None)
    seed = optional_seed(seed)
    resolved = wasserstein1_method(n, m, d, method=method, max_exact=max_exact)

    if d == 1:
        return _w1_1d(xs[:, 0], ys[:, 0])
    if resolved == "exact":
        return _w1_exact_ot(xs, ys)
    return _w1_sliced(xs, ys, n_projections, seed)


# ---------------------------------------------------------------------------------------
# Computations
# ---------------------------------------------------------------------------------------


def _quantile_pairs(n: int, m: int) -> tuple[FloatArray, IntArray, IntArray]:
    """Weights and sorted-sample indices of the pieces of ``|F_x^{-1} − F_y^{-1}|``.

    On ``(0, 1]`` the quantile function of ``x`` is constant (equal to the ``i``-th order
    statistic) on ``((i−1)/n, i/n]``, and that of ``y`` on ``((j−1)/m, j/m]``. Measuring
    ``t`` in units of ``1/(n·m)`` makes every breakpoint an integer (``i·m`` and ``j·n``);
    between two consecutive merged breakpoints ``a < b`` both functions are constant, equal
    to order statistics ``(b−1) // m`` and ``(b−1) // n`` (0-based). The weight of the
    piece is ``(b − a) / (n·m)``; the weights sum to 1.
    """
    breaks = np.union1d(
        np.arange(1, n + 1, dtype=np.int64) * np.int64(m),
        np.arange(1, m + 1, dtype=np.int64) * np.int64(n),
    )
    lengths = np.diff(breaks, prepend=np.int64(0))
    weights = lengths.astype(np.float64) / (float(n) * float(m))
    return weights, (breaks - 1) // m, (breaks - 1) // n


def _w1_sorted_columns(x_sorted: FloatArray, y_sorted: FloatArray) -> FloatArray:
    """Exact 1-D W1 between matching columns of two column-wise sorted arrays."""
    weights, ix, iy = _quantile_pairs(x_sorted.shape[0], y_sorted.shape[0])
    gaps = np.abs(x_sorted[ix] - y_sorted[iy])
    out: FloatArray = weights @ gaps
    return out


def _w1_1d(x: FloatArray, y: FloatArray) -> float:
    """Exact W1 on the line: ``∫_0^1 |F_x^{-1}(t) − F_y^{-1}(t)| dt``."""
    col = _w1_sorted_columns(np.sort(x)[:, None], np.sort(y)[:, None])
    return max(0.0, float(col[0]))


def _import_pot() -> ModuleType:
    try:
        return importlib.import_module("ot")
    except ImportError as exc:
        raise ImportError(
            "the exact 1-Wasserstein distance in d >= 2 needs the POT package (Python "
            "Optimal Transport, imported as `ot`): install it with `pip install pot`, or "
            'pass method="sliced" for the sliced approximation'
        ) from exc


def _w1_exact_ot(x: FloatArray, y: FloatArray) -> float:
    """Exact W1 with ℓ∞ cost by POT's network simplex (``ot.emd2``)."""
    n, m = x.shape[0], y.shape[0]
    if n * m > EXACT_MAX_COST_ENTRIES:
        raise ValueError(
            f"exact optimal transport between {n} and {m} points needs an {n} x {m} cost "
            f"matrix ({n * m} entries > EXACT_MAX_COST_ENTRIES = {EXACT_MAX_COST_ENTRIES}); "
            'use method="sliced" (a different, approximate distance) or subsample'
        )
    ot = _import_pot()
    cost = np.ascontiguousarray(ot.dist(x, y, metric="chebyshev"), dtype=np.float64)
    a = np.full(n, 1.0 / n)
    b = np.full(m, 1.0 / m)
    # The network simplex needs O(n·m)-ish pivots on hard instances; POT's default cap
    # (1e5) can stop it early on a few thousand points.
    value, log = ot.emd2(a, b, cost, numItermax=max(100_000, 100 * n * m), log=True)
    if int(log["result_code"]) != 1:
        raise RuntimeError(
            f"POT's exact solver did not reach an optimal plan: {log.get('warning')!r}"
        )
    return max(0.0, float(value))


def _w1_sliced(x: FloatArray, y: FloatArray, n_projections: int, seed: int | None) -> float:
    """Monte Carlo sliced W1: mean over uniform unit directions of exact 1-D W1."""
    d = x.shape[1]
    rng = np.random.default_rng(seed)
    theta = rng.standard_normal((d, n_projections))
    norms = np.linalg.norm(theta, axis=0)
    # A zero Gaussian vector has probability 0; redraw defensively anyway.
    while np.any(norms == 0.0):
        bad = norms == 0.0
        theta[:, bad] = rng.standard_normal((d, int(bad.sum())))
        norms = np.linalg.norm(theta, axis=0)
    theta /= norms
    chunk = max(1, _SLICED_CHUNK_ENTRIES // max(x.shape[0], y.shape[0]))
    total = 0.0
    for start in range(0, n_projections, chunk):
        t = theta[:, start : start + chunk]
        px = np.sort(x @ t, axis=0)
        py = np.sort(y @ t, axis=0)
        total += float(_w1_sorted_columns(px, py).sum())
    return max(0.0, total / n_projections)


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------


def _as_points(x: object, name: str) -> FloatArray:
    """``x`` as a C-contiguous float64 ``(n, d)`` array of finite values, ``n, d >= 1``."""
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be an array of shape (n, d) or (n,), could not convert it: {exc}"
        ) from exc
    if arr.dtype.kind not in "iuf":
        raise TypeError(
            f"{name} must hold real numbers (integer or float dtype), got dtype {arr.dtype}"
        )
    if arr.ndim == 1:
        arr = arr.reshape(-1, 1)
    elif arr.ndim != 2:
        raise ValueError(
            f"{name} must have shape (n, d) or (n,), got an array of shape {arr.shape}"
        )
    if arr.shape[0] == 0:
        raise ValueError(f"{name} is empty (shape {arr.shape}): need at least one point")
    if arr.shape[1] == 0:
        raise ValueError(f"{name} has d = 0 coordinates (shape {arr.shape}): need d >= 1")
    out = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(out)):
        raise ValueError(f"{name} contains NaN or infinite values")
    return out


def _method(method: object) -> str:
    if not isinstance(method, str):
        raise TypeError(f"method must be a str, got {type(method).__name__} {method!r}")
    if method not in _METHODS:
        raise ValueError(f"method must be one of {', '.join(map(repr, _METHODS))}, got {method!r}")
    return method

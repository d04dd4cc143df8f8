"""Exact integer privacy noise and private selection.

Every draw is made in the Rust core by the exact samplers of Canonne, Kamath
and Steinke (2020) from a ChaCha12 generator (:class:`dpstream.Rng`); no
floating-point arithmetic decides any sample, so these mechanisms do not leak
through floating-point artefacts (Mironov 2012).

Parameters are exact rationals: a float is taken as the binary fraction it
stores (``0.1`` is ``3602879701896397 / 2**55``); pass
``fractions.Fraction(1, 10)`` for one tenth exactly. Dyadic and small
fractions run on a 64/128-bit fast path; any other positive rational is
handled exactly with big integers, only more slowly.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from dpstream import _core
from dpstream._params import RealLike, SizeLike, core_rng, exact_fraction, sample_shape
from dpstream._rng import Rng

__all__ = ["discrete_gaussian", "discrete_laplace", "permute_and_flip"]

# Integers up to 2**53 are exactly representable as float64 scores.
_MAX_EXACT_INT_SCORE = 2**53


def _integer_noise(
    draw: Callable[[int, int, int, Any], np.ndarray],
    parameter: RealLike,
    name: str,
    size: SizeLike,
    rng: Rng | None,
) -> np.ndarray:
    """``size`` draws of the core sampler ``draw`` at the exact rational ``parameter``;
    the arguments are checked before ``rng`` is touched."""
    frac = exact_fraction(parameter, name)
    shape = sample_shape(size)
    inner = core_rng(rng)
    return draw(frac.numerator, frac.denominator, math.prod(shape), inner).reshape(shape)


def discrete_laplace(scale: RealLike, size: SizeLike, *, rng: Rng | None = None) -> np.ndarray:
    """Draw exact discrete Laplace noise: ``P(z) ∝ exp(-|z| / scale)`` on the integers.

    Privacy: adding one draw at ``scale = Δ / ε`` to each value of an
    integer-valued query with ℓ1-sensitivity ``Δ`` (under the query's
    neighbouring relation) is ε-differentially private. ``scale`` is public.

    Args:
        scale: positive rational scale, in the units of the query (counts).
        size: number of draws, or a numpy-style shape.
        rng: generator; ``None`` uses a fresh OS-seeded one (private). A seeded
            :class:`dpstream.Rng` is reproducible and gives no privacy.

    Returns:
        ``np.ndarray`` of ``int64`` with the given shape.

    Raises:
        TypeError: ``scale`` or ``size`` has the wrong type.
        ValueError: ``scale`` is not positive and finite, exceeds ``2**56`` (beyond
            which int64 draws could overflow), or ``size`` is negative.
        MemoryError: ``size`` draws cannot be allocated.

    A rejected call leaves ``rng`` exactly as it was.
    """
    return _integer_noise(_core.discrete_laplace, scale, "scale", size, rng)


def discrete_gaussian(sigma: RealLike, size: SizeLike, *, rng: Rng | None = None) -> np.ndarray:
    """Draw exact discrete Gaussian noise: ``P(z) ∝ exp(-z² / (2 sigma²))`` on the integers.

    Privacy: adding one draw to each value of an integer-valued query with
    ℓ2-sensitivity ``Δ`` is ρ-zero-concentrated DP with ``ρ = Δ² / (2 sigma²)``
    (Canonne, Kamath, Steinke 2020, Theorem 14). ``sigma`` is public.

    Args:
        sigma: positive rational standard-deviation parameter, in query units.
        size: number of draws, or a numpy-style shape.
        rng: generator; ``None`` uses a fresh OS-seeded one (private).

    Returns:
        ``np.ndarray`` of ``int64`` with the given shape.

    Raises:
        TypeError: ``sigma`` or ``size`` has the wrong type.
        ValueError: ``sigma`` is not positive and finite, exceeds ``2**56``, or
            ``size`` is negative.
        MemoryError: ``size`` draws cannot be allocated.

    A rejected call leaves ``rng`` exactly as it was.
    """
    return _integer_noise(_core.discrete_gaussian, sigma, "sigma", size, rng)


def permute_and_flip(
    scores: np.ndarray | list[float] | list[int],
    epsilon: RealLike,
    sensitivity: RealLike,
    *,
    rng: Rng | None = None,
) -> int:
    """Select an index privately by permute-and-flip (McKenna and Sheldon 2020).

    Candidates are visited in a uniformly random order; candidate ``r`` is
    taken with probability ``exp(epsilon * (scores[r] - max(scores)) / (2 * sensitivity))``.

    Privacy: ε-differentially private when each score changes by at most
    ``sensitivity`` between neighbouring data sets; never worse in expected
    score than the exponential mechanism at the same ε. The number of
    candidates, ``epsilon`` and ``sensitivity`` are public. Every coin is an
    exact Bernoulli(exp(-γ)) on the exact rational values of the scores.

    Args:
        scores: 1-D array of finite float64 scores (integers up to 2**53 in
            magnitude are accepted and converted exactly).
        epsilon: positive privacy parameter ε.
        sensitivity: positive ℓ∞-sensitivity of the scores, in score units.
        rng: generator; ``None`` uses a fresh OS-seeded one (private).

    Returns:
        The selected index (an ``int``).

    Raises:
        TypeError: scores are not numeric (or are long doubles, which float64
            cannot hold exactly), or a parameter has the wrong type.
        ValueError: scores are empty, not 1-D, or not finite; integers too large
            to convert exactly; ``epsilon`` or ``sensitivity`` not positive.
    """
    eps = exact_fraction(epsilon, "epsilon")
    sens = exact_fraction(sensitivity, "sensitivity")
    arr = np.asarray(scores)
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(f"scores must be a numeric array, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and arr.dtype.itemsize > 8:
        raise TypeError(
            f"scores of dtype {arr.dtype} cannot be converted to float64 exactly; "
            "pass float64 (or smaller) scores"
        )
    if arr.ndim != 1:
        raise ValueError(f"scores must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("scores must not be empty")
    if (
        np.issubdtype(arr.dtype, np.integer)
        and int(np.max(np.abs(arr.astype(object)))) > _MAX_EXACT_INT_SCORE
    ):
        raise ValueError("integer scores must be at most 2**53 in magnitude to stay exact")
    values = np.ascontiguousarray(arr, dtype=np.float64)
    if not np.all(np.isfinite(values)):
        raise ValueError("scores must be finite")
    inner = core_rng(rng)
    return int(
        _core.permute_and_flip(
            values, eps.numerator, eps.denominator, sens.numerator, sens.denominator, inner
        )
    )

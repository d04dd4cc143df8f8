"""Validation of public parameters: exact rationals, sizes, generators.

Privacy parameters (ε, noise scales, σ, sensitivities) are kept exact: a Python
float is taken as the exact binary fraction it stores, and
:class:`fractions.Fraction`, :class:`decimal.Decimal` and integers are taken as
they are. Nothing here rounds a privacy parameter.
"""

from __future__ import annotations

import math
import numbers
from decimal import Decimal
from fractions import Fraction

import numpy as np

from dpstream import _core
from dpstream._rng import Rng

#: Anything accepted where an exact real parameter is expected.
RealLike = int | float | Fraction | Decimal | np.integer | np.floating
#: A sample size: a count or a numpy-style shape.
SizeLike = int | tuple[int, ...]


def exact_fraction(value: object, name: str, *, positive: bool = True) -> Fraction:
    """``value`` as an exact :class:`Fraction`; ``TypeError``/``ValueError`` name ``name``."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be a real number, got bool {value!r}")
    if isinstance(value, Fraction):
        frac = value
    elif isinstance(value, numbers.Integral):
        frac = Fraction(int(value))
    elif isinstance(value, (float, np.floating)):
        as_float = float(value)
        if not math.isfinite(as_float):
            raise ValueError(f"{name} must be finite, got {as_float!r}")
        frac = Fraction(as_float)
    elif isinstance(value, Decimal):
        if not value.is_finite():
            raise ValueError(f"{name} must be finite, got {value!r}")
        frac = Fraction(value)
    else:
        raise TypeError(
            f"{name} must be an int, float, Fraction or Decimal, got {type(value).__name__}"
        )
    if positive and frac <= 0:
        raise ValueError(f"{name} must be positive, got {value!r}")
    if not positive and frac < 0:
        raise ValueError(f"{name} must be non-negative, got {value!r}")
    return frac


def int_param(value: object, name: str, *, low: int = 0, high: int | None = 2**63 - 1) -> int:
    """``value`` as an ``int`` in ``[low, high]`` (``high=None``: no upper bound); the one
    integer check of the package. ``TypeError`` / ``ValueError`` name ``name``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if high is None:
        if v < low:
            raise ValueError(f"{name} must be at least {low}, got {v}")
        return v
    if v < low and low == 0:
        raise ValueError(f"{name} must be non-negative, got {v}")
    if not low <= v <= high:
        raise ValueError(f"{name} must be in {low}..={_power_of_two(high)}, got {v}")
    return v


def _power_of_two(v: int) -> str:
    """``v`` written as ``2^k`` or ``2^k - 1`` when it is one, for readable messages."""
    if v >= 1024 and v & (v - 1) == 0:
        return f"2^{v.bit_length() - 1}"
    if v >= 1023 and (v + 1) & v == 0:
        return f"2^{v.bit_length()} - 1"
    return str(v)


def sample_shape(size: object) -> tuple[int, ...]:
    """A numpy-style shape from ``size`` (a non-negative int or a tuple of them)."""
    dims = size if isinstance(size, tuple) else (size,)
    shape = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, numbers.Integral):
            raise TypeError(f"size must be an int or a tuple of ints, got {size!r}")
        if int(d) < 0:
            raise ValueError(f"size must be non-negative, got {size!r}")
        shape.append(int(d))
    return tuple(shape)


def core_rng(rng: object) -> _core.Rng | None:
    """The ``_core.Rng`` inside a :class:`dpstream.Rng`, or None for a fresh OS-seeded one."""
    if rng is None:
        return None
    if not isinstance(rng, Rng):
        raise TypeError(f"rng must be a dpstream.Rng or None, got {type(rng).__name__}")
    return rng._inner


def optional_seed(seed: object) -> int | None:
    """A non-negative int seed or None (for sampling and evaluation, never privacy noise)."""
    if seed is None:
        return None
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__} {seed!r}")
    if int(seed) < 0:
        raise ValueError(f"seed must be non-negative, got {int(seed)}")
    return int(seed)

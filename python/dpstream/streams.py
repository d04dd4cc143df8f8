"""Reproducible test streams on the unit cube ``[0,1]^d``, and categorical tables.

Generators of the input distributions used to evaluate the synthesizers: the uniform
distribution and the multifractal distribution of the PrivHP paper (Holland et al.,
Section 3.3), plus Gaussian clusters for the online-synthesizer benchmarks. Every one of
these returns a new float64 array of shape ``(n, d)`` whose rows are the points, in stream
order. :func:`latent_class` gives a wide categorical table instead (int64 codes ``(n, d)``,
rows in stream order) for the tabular stream.

These are *test data*, not mechanisms: they use numpy's PCG64 generator
(``numpy.random.default_rng(seed)``), which is reproducible and not cryptographic. The same
``seed`` and arguments give the same array (for a given numpy version; numpy documents its
``Generator`` streams as stable only within a version); ``seed=None`` draws fresh OS
entropy. Never use them to draw privacy noise.
"""

from __future__ import annotations

import math
import numbers
from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpstream._params import int_param, optional_seed

__all__ = ["clustered", "latent_class", "multifractal", "uniform"]

FloatArray = npt.NDArray[np.float64]

#: Cuts per coordinate of :func:`multifractal` when ``depth`` is not given.
DEFAULT_CUTS_PER_COORDINATE = 30
# A float64 in [0, 1) resolves at most 53 binary digits: deeper cuts are not representable.
_MAX_CUTS_PER_COORDINATE = 53

#: Defaults of :func:`latent_class` (the high-dimensional tabular benchmark's data): values
#: per column, classes, and the concentration of the class profiles.
LATENT_VALUES, LATENT_CLASSES, LATENT_CONCENTRATION = 6, 4, 0.5


def uniform(n: int, d: int, *, seed: int | None) -> FloatArray:
    """``n`` independent points drawn uniformly from the unit cube ``[0,1)^d``.

    Args:
        n: number of points (``>= 0``).
        d: dimension (``>= 1``).
        seed: seed of numpy's ``default_rng`` (reproducible; ``None`` for fresh entropy).

    Returns:
        float64 array of shape ``(n, d)`` with entries in ``[0, 1)``.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``n < 0``, ``d < 1`` or ``seed < 0``.
    """
    n = int_param(n, "n", low=0, high=None)
    d = int_param(d, "d", low=1, high=None)
    rng = np.random.default_rng(optional_seed(seed))
    return rng.random((n, d))


def multifractal(
    n: int,
    d: int,
    *,
    skew: float | Fraction,
    depth: int | None = None,
    seed: int | None,
) -> FloatArray:
    """``n`` independent points from the multifractal distribution MultiFractal(B, [0,1]^d).

    The distribution of Section 3.3 of the PrivHP paper, built on the hierarchical binary
    partition of dpstream: the cell at level ``l`` (a box, the whole cube at ``l = 0``) is
    cut through its middle along coordinate ``l mod d`` into its lower half ``Ω_{θ0}``
    (smaller coordinate values, path bit 0) and its upper half ``Ω_{θ1}`` (path bit 1).
    As in the paper, ``Pr(Ω_0) = B`` and ``Pr(Ω_1) = 1 − B`` with ``B = skew ∈ [1/2, 1]``,
    and the process recurses independently in each half, so the heavy side is always the
    lower half: a cell reached by a path with ``z`` zeros and ``o`` ones has probability
    ``B^z (1 − B)^o``. ``skew = 1/2`` is the uniform distribution; ``skew = 1`` puts all
    the mass in the corner cell at the origin.

    The recursion is truncated after ``depth`` cuts: a point is uniform inside the cell
    its ``depth`` path bits select (half-open, so every point lies strictly inside its
    cell's upper faces). Coordinate ``j`` is cut ``c_j = ⌈(depth − j) / d⌉`` times, so the
    truncation moves no point further than ``max_j 2^{−c_j}`` in ℓ∞.

    Args:
        n: number of points (``>= 0``).
        d: dimension (``>= 1``).
        skew: the parameter ``B``, a real number in ``[1/2, 1]`` (a float, int or
            :class:`~fractions.Fraction`; used as the nearest float64).
        depth: number of cuts (levels of the hierarchy), ``0 <= depth <= 53·d``; default
            ``30·d`` (30 cuts per coordinate, cells of side ``2^{−30}``). ``depth = 0`` is
            the uniform distribution.
        seed: seed of numpy's ``default_rng`` (reproducible; ``None`` for fresh entropy).

    Returns:
        float64 array of shape ``(n, d)`` with entries in ``[0, 1)``.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``n < 0``, ``d < 1``, ``skew`` outside ``[1/2, 1]`` or not finite,
            ``depth`` outside ``[0, 53·d]``, or ``seed < 0``.
    """
    n = int_param(n, "n", low=0, high=None)
    d = int_param(d, "d", low=1, high=None)
    b = _real(skew, "skew")
    if not 0.5 <= b <= 1.0:
        raise ValueError(f"skew must be in [1/2, 1], got {skew!r}")
    if depth is None:
        depth = DEFAULT_CUTS_PER_COORDINATE * d
    depth = int_param(depth, "depth", low=0, high=None)
    if depth > _MAX_CUTS_PER_COORDINATE * d:
        raise ValueError(
            f"depth must be at most {_MAX_CUTS_PER_COORDINATE}·d = "
            f"{_MAX_CUTS_PER_COORDINATE * d} (float64 resolves {_MAX_CUTS_PER_COORDINATE} "
            f"binary digits per coordinate), got {depth}"
        )
    rng = np.random.default_rng(optional_seed(seed))

    # Lower corner of each point's final cell: cut l halves coordinate l mod d for the
    # (l // d + 1)-th time and, when the path bit is 1, moves the corner up by the half
    # width 2^-(l // d + 1). Sums of distinct powers of two down to 2^-53 are exact.
    corner = np.zeros((n, d), dtype=np.float64)
    for level in range(depth):
        upper = rng.random(n) >= b  # P(upper half) = P(U >= B) = 1 - B
        corner[:, level % d] += upper * math.ldexp(1.0, -(level // d + 1))
    cuts = np.array([(depth - j + d - 1) // d for j in range(d)], dtype=np.int64)
    width = np.ldexp(1.0, -cuts)  # side of the final cell along each coordinate
    points = corner + width * rng.random((n, d))
    # Rounding of corner + width·u can reach the cell's upper face: keep cells half-open.
    out: FloatArray = np.minimum(points, np.nextafter(corner + width, 0.0))
    return out


def clustered(
    n: int,
    d: int,
    *,
    n_clusters: int = 5,
    spread: float | Fraction = 0.05,
    seed: int | None,
) -> FloatArray:
    """``n`` points from a mixture of Gaussian blobs, clipped into ``[0,1]^d``.

    The ``n_clusters`` centres are drawn uniformly from ``[0.1, 0.9]^d``; each point picks a
    centre uniformly at random and adds independent ``N(0, spread²)`` noise to every
    coordinate; coordinates are then clipped to ``[0, 1]`` (so a blob near a face puts an
    atom of mass on it). Centres, assignments and offsets all come from ``seed``.

    Args:
        n: number of points (``>= 0``).
        d: dimension (``>= 1``).
        n_clusters: number of blobs (``>= 1``).
        spread: standard deviation of each blob per coordinate, in cube units (``>= 0``;
            ``0`` puts every point on its centre).
        seed: seed of numpy's ``default_rng`` (reproducible; ``None`` for fresh entropy).

    Returns:
        float64 array of shape ``(n, d)`` with entries in ``[0, 1]``.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``n < 0``, ``d < 1``, ``n_clusters < 1``, ``spread`` negative or not
            finite, or ``seed < 0``.
    """
    n = int_param(n, "n", low=0, high=None)
    d = int_param(d, "d", low=1, high=None)
    n_clusters = int_param(n_clusters, "n_clusters", low=1, high=None)
    sigma = _real(spread, "spread")
    if sigma < 0:
        raise ValueError(f"spread must be non-negative, got {spread!r}")
    rng = np.random.default_rng(optional_seed(seed))
    centres = 0.1 + 0.8 * rng.random((n_clusters, d))
    labels = rng.integers(0, n_clusters, size=n)
    points = centres[labels] + sigma * rng.standard_normal((n, d))
    out: FloatArray = np.clip(points, 0.0, 1.0)
    return out


def latent_class(
    n: int,
    d: int,
    *,
    values: int = LATENT_VALUES,
    classes: int = LATENT_CLASSES,
    concentration: float | Fraction = LATENT_CONCENTRATION,
    seed: int | None,
) -> npt.NDArray[np.int64]:
    """``n`` rows of ``d`` correlated categorical columns from a latent-class model.

    A table with the dependence of survey data and no column order: each row draws a
    hidden class ``z`` with probability ``π_z``, then every column independently from the
    class's own distribution over ``values`` categories. Columns are dependent through
    ``z`` only (they are independent given ``z``), so every pair of columns is correlated
    and no marginal is a product of smaller ones. The parameters come from ``seed``
    before the rows: ``π ~ Dirichlet(1, …, 1)`` over ``classes``, and each class's
    distribution of each column ``~ Dirichlet(concentration, …, concentration)`` (below
    1: peaked, so the classes differ strongly). The defaults (6 values, 4 classes,
    concentration 0.5) are those of ``benches/bench_highdim.py``.

    Args:
        n: number of rows (``>= 0``).
        d: number of columns (``>= 1``).
        values: categories per column (``>= 1``); codes are ``0 .. values - 1``.
        classes: number of latent classes (``>= 1``; ``1`` makes the columns independent).
        concentration: Dirichlet parameter of the per-class column distributions (``> 0``).
        seed: seed of numpy's ``default_rng`` (reproducible; ``None`` for fresh entropy).

    Returns:
        int64 array of shape ``(n, d)`` with entries in ``[0, values)``.

    Raises:
        TypeError: an argument has the wrong type.
        ValueError: ``n < 0``, ``d < 1``, ``values < 1``, ``classes < 1``,
            ``concentration`` not positive and finite, or ``seed < 0``.
    """
    n = int_param(n, "n", low=0, high=None)
    d = int_param(d, "d", low=1, high=None)
    values = int_param(values, "values", low=1, high=None)
    classes = int_param(classes, "classes", low=1, high=None)
    alpha = _real(concentration, "concentration")
    if alpha <= 0:
        raise ValueError(f"concentration must be positive, got {concentration!r}")
    rng = np.random.default_rng(optional_seed(seed))
    weights = rng.dirichlet(np.ones(classes))
    # cdf[z, j, :]: cumulative distribution of column j in class z (last entry exactly 1)
    cdf = np.cumsum(rng.dirichlet(np.full(values, alpha), size=(classes, d)), axis=2)
    cdf[:, :, -1] = 1.0
    z = rng.choice(classes, size=n, p=weights)
    u = rng.random((n, d))
    out: npt.NDArray[np.int64] = np.empty((n, d), dtype=np.int64)
    for j in range(d):  # one column at a time: (n, values) temporaries, not (n, d, values)
        out[:, j] = (u[:, j, None] >= cdf[z, j]).sum(axis=1)
    return out


# ---------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------


def _real(value: object, name: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} {value!r}")
    as_float = float(value)
    if not math.isfinite(as_float):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return as_float

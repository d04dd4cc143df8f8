"""The hierarchical binary partition of ``[0,1]^d`` that PrivHP and the online
synthesizer count on.

Level ``l → l+1`` cuts coordinate ``l mod d`` through the middle of the cell.
A level-``l`` cell is an ``l``-bit integer θ whose most significant bit is the
first cut; the level-``l`` prefix of a level-``r`` path is ``path >> (r - l)``.
Cells are half-open, except that 1.0 falls in the top cell. These functions
compute nothing private: they are the public geometry.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._arrays import points_array, uint64_array
from dpstream._params import int_param

__all__ = ["cell_bounds", "encode", "enforce_consistency"]


def encode(points: object, depth: int) -> npt.NDArray[np.uint64]:
    """Level-``depth`` paths (``0 <= depth <= 63``) of ``(n, d)`` points in ``[0,1]^d``.

    Exact: bit ``k`` of coordinate ``x`` is ``floor(x * 2**k) mod 2``.

    Raises:
        ValueError: a point is NaN, infinite or outside ``[0, 1]`` (the message
            names its row and column), or ``depth`` is out of range.
    """
    arr = np.asarray(points)
    dim = arr.shape[1] if arr.ndim == 2 else 1
    return _core.encode_points_array(points_array(arr, dim), int_param(depth, "depth", high=63))


def cell_bounds(
    thetas: object, level: int, dim: int
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Lower and upper corners, each ``(n, dim)``, of level-``level`` cells ``thetas``."""
    lvl = int_param(level, "level", high=63)
    return _core.cell_bounds_array(
        uint64_array(thetas, "thetas"), lvl, int_param(dim, "dim", low=1, high=65536)
    )


def enforce_consistency(
    parent: object, left: object, right: object
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 4 of PrivHP on each ``(parent, left, right)`` triple.

    Returns new ``(left, right)`` with ``left + right == parent`` and both
    non-negative, moved in the same direction (deficit raises both, surplus
    lowers both). Integer input stays integer (an odd difference gives the
    left child the larger half); float input is split evenly.
    """
    p, a, b = (np.asarray(x) for x in (parent, left, right))
    for name, x in (("parent", p), ("left", a), ("right", b)):
        if x.dtype == np.bool_ or not (
            np.issubdtype(x.dtype, np.integer) or np.issubdtype(x.dtype, np.floating)
        ):
            raise TypeError(f"{name} must be numeric, got dtype {x.dtype}")
    if all(np.issubdtype(x.dtype, np.integer) for x in (p, a, b)):
        for name, x in (("parent", p), ("left", a), ("right", b)):
            if x.dtype == np.uint64 and x.size and int(x.max()) > np.iinfo(np.int64).max:
                raise ValueError(f"{name} exceeds the int64 range")
        pi, ai, bi = (np.ascontiguousarray(x, dtype=np.int64).ravel() for x in (p, a, b))
        return _core.consistency_i64(pi, ai, bi)
    pf, af, bf = (np.ascontiguousarray(x, dtype=np.float64).ravel() for x in (p, a, b))
    if not (np.all(np.isfinite(pf)) and np.all(np.isfinite(af)) and np.all(np.isfinite(bf))):
        raise ValueError("counts must be finite")
    return _core.consistency_f64(pf, af, bf)

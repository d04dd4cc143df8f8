"""MST's compression of a closed epoch's columns: rare categories share one code.

Every function reads released (noisy) values or exact counts that the caller then measures;
none draws noise. A merge is public: it is a function of released 1-way marginals.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

__all__ = ["KEEP_SD", "compress", "merge_one", "merge_pair"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: A category keeps a code of its own in a closed epoch's model when its released count
#: is at least this many standard deviations of its noise (MST's threshold).
KEEP_SD = 3.0


def compress(noisy: FloatArray, variance: float) -> IntArray:
    """The map of a column's codes to merged codes: each category whose released count is
    at least ``KEEP_SD`` standard deviations keeps a code of its own, the others share the
    last one (none is merged when fewer than two would be). Reads released values only."""
    keep = noisy >= KEEP_SD * math.sqrt(variance)
    if int((~keep).sum()) < 2:
        return np.arange(noisy.size, dtype=np.int64)
    out = np.empty(noisy.size, dtype=np.int64)
    out[keep] = np.arange(int(keep.sum()))
    out[~keep] = int(keep.sum())
    return out


def merge_pair(
    counts: npt.ArrayLike, shape: tuple[int, int], maps: tuple[IntArray, IntArray]
) -> FloatArray:
    """A flattened 2-way table summed into the merged cells of its two columns."""
    table = np.asarray(counts, dtype=np.float64).reshape(shape)
    a, b = maps
    rows = np.zeros((int(a.max()) + 1, shape[1]))
    np.add.at(rows, a, table)
    out = np.zeros((rows.shape[0], int(b.max()) + 1))
    np.add.at(out.T, b, rows.T)
    return out.reshape(-1)


def merge_one(values: FloatArray, m: IntArray) -> FloatArray:
    out = np.zeros(int(m.max()) + 1)
    np.add.at(out, m, values)
    return out

"""The digest of a batch's rows that a run checkpoint records: a multiset hash, so it
does not depend on the rows' order or on how they are split into files or partitions.

Each row (its canonical 8-byte values: int64 codes or float64 points, in column
order) is hashed to 64 bits by a keyed chain of splitmix64's finaliser
(``h = mix(h ^ value)`` per column); a batch's sums are its row count and the sum of
its rows' hashes, modulo 2^64. Sums of parts add up to the sums of the whole, so a
cluster sums its partitions' and the result is the digest a pandas run computes from
one file. A changed, removed or added row changes the count or the sum, except by an
accident of probability about 2^-64.
It detects edits of the input, not a collision crafted on purpose (the input's owner
runs the command). Reordering rows *within* a batch is not a change: every model a
partitioned run can drive consumes a batch as a multiset (counts).

Vectorised numpy, in blocks of rows (a few MiB of scratch), no per-row Python work.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

__all__ = ["SUMS", "digest", "row_sums"]

_KEY = np.uint64(0x9E3779B97F4A7C15)
_BLOCK = 1 << 16  # rows per block
#: Length of :func:`row_sums`: the row count and the sum of the rows' hashes.
SUMS = 2

Sums = npt.NDArray[np.uint64]


def _mix(x: Sums, tmp: Sums) -> None:
    """splitmix64's finaliser (a bijection of the 64-bit words), in place."""
    for shift, factor in ((30, 0xBF58476D1CE4E5B9), (27, 0x94D049BB133111EB)):
        np.right_shift(x, np.uint64(shift), out=tmp)
        np.bitwise_xor(x, tmp, out=x)
        np.multiply(x, np.uint64(factor), out=x)
    np.right_shift(x, np.uint64(31), out=tmp)
    np.bitwise_xor(x, tmp, out=x)


def row_sums(rows: npt.ArrayLike) -> Sums:
    """``[rows, sum of the rows' hashes]`` (uint64, modulo 2^64) of an ``(n, d)`` array
    of 8-byte values (int64 or float64; hashed by their little-endian bit patterns)."""
    a = np.asarray(rows)
    if a.ndim != 2 or a.dtype.itemsize != 8 or a.dtype.kind not in "iuf":
        raise TypeError(f"rows must be an (n, d) array of 8-byte numbers, got {a.dtype} {a.shape}")
    words = np.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).view("<u8")
    out = np.zeros(SUMS, dtype=np.uint64)
    out[0] = a.shape[0]
    columns = np.empty((a.shape[1], min(_BLOCK, a.shape[0])), dtype=np.uint64)
    h, tmp = np.empty(columns.shape[1], np.uint64), np.empty(columns.shape[1], np.uint64)
    for start in range(0, a.shape[0], _BLOCK):
        block = words[start : start + _BLOCK]
        n = block.shape[0]
        np.copyto(columns[:, :n], block.T)  # columns contiguous
        h[:n] = _KEY
        for j in range(block.shape[1]):
            np.bitwise_xor(h[:n], columns[j, :n], out=h[:n])
            _mix(h[:n], tmp[:n])
        out[1:] += h[:n].sum(dtype=np.uint64, keepdims=True)  # an array sum wraps silently
    return out


def digest(sums: Sums) -> bytes:
    """The bytes of :func:`row_sums` (little-endian), as the run's SHA-256 takes them."""
    return np.asarray(sums, dtype="<u8").tobytes()

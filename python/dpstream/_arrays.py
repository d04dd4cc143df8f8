"""Conversion of user arrays into the exact dtypes and layouts the core takes."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def points_array(points: object, dim: int, name: str = "points") -> npt.NDArray[np.float64]:
    """``points`` as a C-contiguous float64 ``(n, dim)`` array, or a clear error.

    Accepts any array-like of real numbers (floats of at most 64 bits and
    integers convert exactly); a 1-D array is taken as ``n`` points when
    ``dim == 1``. Range and NaN checks happen in the core, which names the
    offending row and column.
    """
    arr = np.asarray(points)
    if arr.dtype == np.bool_ or not (
        np.issubdtype(arr.dtype, np.floating) or np.issubdtype(arr.dtype, np.integer)
    ):
        raise TypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating) and arr.dtype.itemsize > 8:
        raise TypeError(f"{name} of dtype {arr.dtype} cannot be converted to float64 exactly")
    if arr.ndim == 1 and dim == 1:
        arr = arr.reshape(-1, 1)
    if arr.ndim != 2 or arr.shape[1] != dim:
        raise ValueError(f"{name} must have shape (n, {dim}), got {arr.shape}")
    # Aligned too: arrays shipped between processes (e.g. by Dask) can arrive
    # contiguous but misaligned, which the core's zero-copy view refuses.
    return np.require(arr, dtype=np.float64, requirements=["C", "A"])


def uint64_array(values: object, name: str) -> npt.NDArray[np.uint64]:
    """``values`` as a 1-D C-contiguous uint64 array of non-negative integers.

    Python ints up to ``2**64 - 1`` are accepted exactly, also in lists (which
    numpy alone would turn into float64 past ``2**63``).
    """
    if not isinstance(values, np.ndarray):
        seq = list(values) if isinstance(values, (list, tuple)) else [values]
        ints = [v for v in seq if isinstance(v, int) and not isinstance(v, bool)]
        if seq and len(ints) == len(seq):
            if any(v < 0 for v in ints):
                raise ValueError(f"{name} must be non-negative")
            if any(v >= 2**64 for v in ints):
                raise ValueError(f"{name} must be below 2**64")
            out = np.array(ints, dtype=np.uint64)
            return out if isinstance(values, (list, tuple)) else out.reshape(1)
    arr = np.asarray(values)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.size and np.issubdtype(arr.dtype, np.signedinteger) and arr.min() < 0:
        raise ValueError(f"{name} must be non-negative")
    return np.ascontiguousarray(arr, dtype=np.uint64)


def int64_array(values: object, name: str, length: int) -> npt.NDArray[np.int64]:
    """``values`` (an int or 1-D integers) as a C-contiguous int64 array of ``length``."""
    arr = np.asarray(values)
    if arr.size and (arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer)):
        raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    if arr.ndim == 0:
        arr = np.full(length, int(arr), dtype=np.int64)
    if arr.ndim != 1 or arr.shape[0] != length:
        raise ValueError(f"{name} must be an int or 1-D with length {length}, got {arr.shape}")
    if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
        raise ValueError(f"{name} exceed the int64 range")
    return np.ascontiguousarray(arr, dtype=np.int64)

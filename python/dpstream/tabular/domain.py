"""The public schema of a categorical table: column names and category counts.

Everything here is **public**: the domain is fixed before any data is seen
and never derived from it. Records are integer codes ``0 .. size - 1`` per
column; :meth:`Domain.encode` turns a batch (a pandas or polars DataFrame, a
2-D integer array, or nothing) into an ``(n, d)`` int64 array and refuses
anything else with an error naming the column and the bad value. A column whose
domain lists its categories matches a DataFrame's values by their text (a CSV
column of hours read as integers matches ``"5"``, ``"6"``, …); integer codes are
for columns given by their size, and for arrays.
"""

from __future__ import annotations

import json
import numbers
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Codes", "Domain"]

#: An ``(n, d)`` int64 array of category codes.
Codes = npt.NDArray[np.int64]

_MAX_SIZE = 2**31


class Domain:
    """Column names and their numbers of categories, in a fixed order.

    Args:
        columns: ``{name: size}`` in column order; a size is an int ``>= 1``, or
            the public list of the column's categories (strings), whose position
            is the code: in a DataFrame such a column is matched by the text of its
            values (``5`` and ``5.0`` as ``"5"``), in an array it holds codes, and
            :meth:`decode` gives the strings back.
    """

    __slots__ = ("_categories", "_names", "_sizes")

    def __init__(self, columns: Mapping[str, int | Sequence[str]]) -> None:
        if not isinstance(columns, Mapping):
            raise TypeError(f"columns must be a mapping name -> size, got {type(columns).__name__}")
        if not columns:
            raise ValueError("a domain needs at least one column")
        names: list[str] = []
        sizes: list[int] = []
        categories: dict[str, tuple[str, ...]] = {}
        for name, size in columns.items():
            if not isinstance(name, str):
                raise TypeError(f"column names must be strings, got {name!r}")
            if isinstance(size, (list, tuple)):
                cats = tuple(size)
                if not cats or any(not isinstance(c, str) for c in cats):
                    raise TypeError(
                        f"the categories of column {name!r} must be a non-empty list of strings"
                    )
                if len(set(cats)) != len(cats):
                    raise ValueError(f"column {name!r} lists a category twice")
                categories[name] = cats
                size = len(cats)
            if isinstance(size, (bool, np.bool_)) or not isinstance(size, numbers.Integral):
                raise TypeError(f"the size of column {name!r} must be an int, got {size!r}")
            if not 1 <= int(size) <= _MAX_SIZE:
                raise ValueError(f"the size of column {name!r} must be in [1, 2**31], got {size}")
            names.append(name)
            sizes.append(int(size))
        self._names = tuple(names)
        self._sizes = tuple(sizes)
        self._categories = categories

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Domain:
        """Read ``{"column": size, ...}`` (the Private-PGM domain format)."""
        with Path(path).open() as f:
            data = json.load(f)
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a domain file holds one JSON object name -> size")
        return cls(data)

    @property
    def names(self) -> tuple[str, ...]:
        """Column names, in order."""
        return self._names

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of categories of each column, in order."""
        return self._sizes

    def categories(self, name: str) -> tuple[str, ...] | None:
        """The public category labels of column ``name`` (``None``: plain codes)."""
        if name not in self._names:
            raise KeyError(f"no column {name!r} in the domain")
        return self._categories.get(name)

    def decode(self, codes: Codes) -> Any:
        """A pandas DataFrame of ``codes``, with category labels where the domain has them."""
        import pandas as pd

        frame = pd.DataFrame(np.asarray(codes, dtype=np.int64), columns=list(self._names))
        for name, cats in self._categories.items():
            frame[name] = np.asarray(cats, dtype=object)[frame[name].to_numpy()]
        return frame

    def size(self, name: str) -> int:
        """Number of categories of column ``name``."""
        try:
            return self._sizes[self._names.index(name)]
        except ValueError:
            raise KeyError(f"no column {name!r} in the domain") from None

    def cells(self, clique: tuple[int, ...]) -> int:
        """Number of cells of the marginal on the columns ``clique``."""
        return int(np.prod([self._sizes[c] for c in clique], dtype=np.int64))

    def __len__(self) -> int:
        return len(self._names)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Domain):
            return NotImplemented
        return (
            self._names == other._names
            and self._sizes == other._sizes
            and self._categories == other._categories
        )

    def __hash__(self) -> int:
        return hash((self._names, self._sizes))

    def __repr__(self) -> str:
        inner = ", ".join(f"{n!r}: {s}" for n, s in zip(self._names, self._sizes, strict=True))
        return f"Domain({{{inner}}})"

    def encode(self, batch: Any) -> Codes:
        """A batch as an ``(n, d)`` int64 array of codes, validated.

        ``batch`` is ``None`` (no records), a pandas or polars DataFrame whose
        columns are exactly the domain's (any order), or an ``(n, d)`` integer
        array of codes in column order. In a DataFrame, a column whose domain lists
        categories is matched by the text of its values (strings as they are,
        integers and integral floats in decimal, ``True``/``False``); the other
        columns hold codes. Raises ``TypeError`` for a wrong type or dtype and
        ``ValueError`` naming the column for a missing/extra column, a wrong shape, an
        unknown category or a code outside ``0 .. size - 1``.
        """
        return np.ascontiguousarray(self.encode_columns(batch).T)

    def encode_columns(self, batch: Any) -> npt.NDArray[np.int64]:
        """The codes of :meth:`encode` one column after another: a ``(d, n)`` int64 array
        (each column contiguous, as counting reads them). Same checks, same errors."""
        d = len(self._names)
        if batch is None:
            return np.zeros((d, 0), dtype=np.int64)
        if type(batch).__module__.startswith("pyarrow") and hasattr(batch, "to_pandas"):
            batch = batch.to_pandas()  # a pyarrow Table or RecordBatch
        columns = getattr(batch, "columns", None)
        if columns is not None and hasattr(batch, "to_numpy"):
            got = [str(c) for c in columns]
            missing = [n for n in self._names if n not in got]
            extra = [c for c in got if c not in self._names]
            if missing or extra:
                raise ValueError(
                    f"batch columns do not match the domain: missing {missing}, unexpected {extra}"
                )
            arrays = [np.asarray(batch[name].to_numpy()) for name in self._names]
            n = len(arrays[0]) if arrays else 0
            out = np.empty((d, n), dtype=np.int64)
            for j, (name, arr) in enumerate(zip(self._names, arrays, strict=True)):
                cats = self._categories.get(name)
                if cats is not None:
                    out[j] = _category_codes(arr, cats, name)
                else:
                    out[j] = _integer_column(arr, name)
        else:
            if isinstance(batch, (str, bytes)) or not hasattr(batch, "__len__"):
                raise TypeError(
                    "a batch must be a DataFrame, an (n, d) integer array or None, "
                    f"got {type(batch).__name__}"
                )
            arr = np.asarray(batch)
            if arr.size == 0:
                return np.zeros((d, 0), dtype=np.int64)
            if arr.ndim != 2 or arr.shape[1] != d:
                raise ValueError(f"a batch array must have shape (n, {d}), got {arr.shape}")
            out = np.empty((d, arr.shape[0]), dtype=np.int64)
            for j, name in enumerate(self._names):
                out[j] = _integer_column(arr[:, j], name)
        for name, size, col in zip(self._names, self._sizes, out, strict=True):
            # One pass per column: a negative code reads as a huge unsigned one.
            if col.size and bool((col.view(np.uint64) >= size).any()):
                i = int(np.flatnonzero((col < 0) | (col >= size))[0])
                raise ValueError(
                    f"column {name!r} has code {int(col[i])} in row {i}; "
                    f"codes must be in 0..{size - 1}"
                )
        return out


def _text(value: Any) -> str | None:
    """The text a value is matched by against a domain's category labels (``None``: no
    text; such a value is an unknown category)."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bool, np.bool_)):
        return str(bool(value))
    if isinstance(value, numbers.Integral):
        return str(int(value))
    if isinstance(value, numbers.Real):
        v = float(value)
        # pandas reads an integer column with missing values as floats: 5.0 is "5".
        return str(int(v)) if v.is_integer() else str(v)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None


def _category_codes(
    arr: npt.NDArray[Any], cats: tuple[str, ...], name: str
) -> npt.NDArray[np.int64]:
    """Values to codes by the text of each value against the public category list; unknown
    values are refused by name (the first, by row)."""
    index = {c: i for i, c in enumerate(cats)}
    if arr.dtype.kind in "biuf" and arr.size:
        # Numbers: each distinct value's text once.
        values, inverse = np.unique(arr, return_inverse=True)
        known = [index.get(t, -1) if (t := _text(v)) is not None else -1 for v in values.tolist()]
        out = np.asarray(known, dtype=np.int64)[inverse.reshape(-1)]
    else:
        out = np.empty(arr.shape[0], dtype=np.int64)
        for i, v in enumerate(arr.tolist()):
            t = _text(v)
            out[i] = index.get(t, -1) if t is not None else -1
    bad = np.flatnonzero(out < 0)
    if bad.size:
        i = int(bad[0])
        v = arr[i].item() if isinstance(arr[i], np.generic) else arr[i]
        raise ValueError(
            f"column {name!r} has unknown category {v!r} in row {i}; the domain lists "
            f"{len(cats)} categories (a DataFrame's values are matched by their text)"
        )
    return out


def _integer_column(arr: npt.NDArray[Any], name: str) -> npt.NDArray[np.int64]:
    """``arr`` as int64, refusing floats with fractions, bools, strings and objects."""
    if arr.dtype == np.bool_:
        raise TypeError(f"column {name!r} must hold integer codes, got bool")
    if np.issubdtype(arr.dtype, np.integer):
        if arr.dtype == np.uint64 and arr.size and int(arr.max()) > np.iinfo(np.int64).max:
            raise ValueError(f"column {name!r} has codes beyond int64")
        return arr.astype(np.int64, copy=False)
    if np.issubdtype(arr.dtype, np.floating):
        if not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr)):
            raise ValueError(f"column {name!r} holds non-integer values (NaN or fractions)")
        return arr.astype(np.int64)
    raise TypeError(f"column {name!r} must hold integer codes, got dtype {arr.dtype}")

"""The public schema of a table: column names and what each column holds.

Everything here is **public**: the domain is fixed before any data is seen
and never derived from it. Records are integer codes ``0 .. size - 1`` per
column; :meth:`Domain.encode` turns a batch (a pandas or polars DataFrame, a
2-D integer array, or nothing) into an ``(n, d)`` int64 array and refuses
anything else with an error naming the column, the row and the bad value. A
column is given by its size (codes), its category labels (matched in a
DataFrame by the text of its values: a CSV column of hours read as integers
matches ``"5"``, ``"6"``, …), or numeric bins (``{"numeric": [0, 100], "bins":
10}``, ``{"edges": [...]}``), each optionally with a code for missing values
(:mod:`dpstream.tabular.schema`). In a DataFrame a numeric column holds raw
values; in an integer array every column holds codes. :meth:`Domain.decode`
maps codes back (numbers drawn uniformly inside their bin).
"""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpstream.tabular.schema import Column, SchemaError, integer_codes, parse_column, take_labels

__all__ = ["Codes", "Domain"]

#: An ``(n, d)`` int64 array of category codes.
Codes = npt.NDArray[np.int64]


class Domain:
    """Column names and what each column holds, in a fixed order.

    Args:
        columns: ``{name: spec}`` in column order. A spec is an int ``>= 1`` (codes),
            the public list of the column's categories (strings, whose position is
            the code: in a DataFrame such a column is matched by the text of its
            values, ``5`` and ``5.0`` as ``"5"``; in an array it holds codes), or an
            object: ``{"size": 7}``, ``{"categories": [...]}``, ``{"numeric": [lo,
            hi], "bins": b}`` or ``{"edges": [e0, ..., eb]}``, with ``"missing":
            true`` for one more code holding missing values and, for numbers,
            ``"integer": true`` (:mod:`dpstream.tabular.schema`).
    """

    __slots__ = ("_categories", "_columns", "_names", "_sizes")

    def __init__(self, columns: Mapping[str, Any]) -> None:
        if not isinstance(columns, Mapping):
            raise TypeError(f"columns must be a mapping name -> size, got {type(columns).__name__}")
        if not columns:
            raise ValueError("a domain needs at least one column")
        parsed = [
            spec if isinstance(spec, Column) else parse_column(name, spec)
            for name, spec in columns.items()
        ]
        self._columns: tuple[Column, ...] = tuple(parsed)
        self._names = tuple(c.name for c in parsed)
        self._sizes = tuple(c.size for c in parsed)
        self._categories = {
            c.name: c.categories for c in parsed if c.categories is not None and not c.missing
        }

    @classmethod
    def from_json(cls, path: str | os.PathLike[str]) -> Domain:
        """Read ``{"column": spec, ...}``: the Private-PGM domain format (``{"column":
        size}``) and the forms of :class:`Domain` (one line per column, say)."""
        with Path(path).open(encoding="utf-8") as f:
            try:
                data = json.load(f)
            except json.JSONDecodeError as e:
                raise ValueError(f"{path}: not valid JSON ({e})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path}: a domain file holds one JSON object name -> spec")
        return cls(data)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object :meth:`from_json` reads back to this domain."""
        return {c.name: c.to_json() for c in self._columns}

    def column(self, name: str) -> Column:
        """The schema of column ``name`` (:class:`dpstream.tabular.schema.Column`)."""
        try:
            return self._columns[self._names.index(name)]
        except ValueError:
            raise KeyError(f"no column {name!r} in the domain") from None

    @property
    def is_codes(self) -> bool:
        """Every column in the forms before schemas (sizes and category lists)."""
        return all(c.legacy for c in self._columns)

    def coded(self) -> Domain:
        """The domain of the codes alone: category lists (without a missing code) kept,
        every other column as its size. A model counts on it; :meth:`decode` of this
        domain then maps its codes back."""
        return Domain(
            {
                c.name: list(c.categories)
                if c.kind == "categories" and not c.missing and c.categories
                else c.size
                for c in self._columns
            }
        )

    @property
    def names(self) -> tuple[str, ...]:
        """Column names, in order."""
        return self._names

    @property
    def sizes(self) -> tuple[int, ...]:
        """Number of categories of each column, in order."""
        return self._sizes

    def categories(self, name: str) -> tuple[str, ...] | None:
        """The public category labels of column ``name`` (``None``: plain codes, or a
        column that is not a plain category list)."""
        if name not in self._names:
            raise KeyError(f"no column {name!r} in the domain")
        return self._categories.get(name)

    def decode(self, codes: Codes, rng: np.random.Generator | None = None) -> Any:
        """A pandas DataFrame of ``codes``: category labels where the domain has them,
        numbers drawn uniformly inside their bin (integers for ``integer`` columns) with
        ``rng`` (a numpy Generator; ``None``: a fresh one from the operating system), and
        a missing value as an empty cell (``None``, NaN or NA). Post-processing."""
        import pandas as pd

        codes = np.asarray(codes, dtype=np.int64)
        frame = pd.DataFrame(codes, columns=list(self._names))
        if self.is_codes:
            for name, cats in self._categories.items():
                frame[name] = take_labels(cats, frame[name].to_numpy())
            return frame
        g = np.random.default_rng() if rng is None else rng
        return pd.DataFrame(
            {c.name: c.decode_codes(codes[:, j], g) for j, c in enumerate(self._columns)}
        )

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
            and self._columns == other._columns
        )

    def __hash__(self) -> int:
        return hash((self._names, self._sizes))

    def __repr__(self) -> str:
        if self.is_codes:
            inner = ", ".join(f"{n!r}: {s}" for n, s in zip(self._names, self._sizes, strict=True))
        else:
            inner = ", ".join(f"{c.name!r}: {c.to_json()!r}" for c in self._columns)
        return f"Domain({{{inner}}})"

    def encode(self, batch: Any) -> Codes:
        """A batch as an ``(n, d)`` int64 array of codes, validated.

        ``batch`` is ``None`` (no records), a pandas or polars DataFrame whose
        columns are exactly the domain's (any order), or an ``(n, d)`` integer
        array of codes in column order. In a DataFrame, a column whose domain lists
        categories is matched by the text of its values (strings as they are,
        integers and integral floats in decimal, ``True``/``False``), a numeric
        column is binned (values outside its bounds go to the edge bins, with a
        ``UserWarning`` counting them per column), and the other columns hold
        codes. A missing value takes the column's missing code (``"missing":
        true``). Raises ``TypeError`` for a wrong type or dtype and ``ValueError``
        naming the column, the row and the value for a missing/extra column, a
        wrong shape, an unknown category, a missing value without a missing code
        or a code outside ``0 .. size - 1``.
        """
        return np.ascontiguousarray(self.encode_columns(batch).T)

    def encode_columns(
        self, batch: Any, *, clipped: dict[str, int] | None = None
    ) -> npt.NDArray[np.int64]:
        """The codes of :meth:`encode` one column after another: a ``(d, n)`` int64 array
        (each column contiguous, as counting reads them). Same checks, same errors.

        ``clipped``: given, the number of values clipped to the edge bins is added to
        it per numeric column, instead of a warning."""
        d = len(self._names)
        if batch is None:
            return np.zeros((d, 0), dtype=np.int64)
        if type(batch).__module__.startswith("pyarrow") and hasattr(batch, "to_pandas"):
            batch = batch.to_pandas()  # a pyarrow Table or RecordBatch
        columns = getattr(batch, "columns", None)
        counts: dict[str, int] = {}
        if columns is not None and hasattr(batch, "to_numpy"):
            got = [str(c) for c in columns]
            missing = [n for n in self._names if n not in got]
            extra = [c for c in got if c not in self._names]
            if missing or extra:
                raise ValueError(
                    f"batch columns do not match the domain: missing {missing}, unexpected {extra}"
                )
            n = len(batch)
            out = np.empty((d, n), dtype=np.int64)
            for j, spec in enumerate(self._columns):
                arr = np.asarray(batch[spec.name].to_numpy())
                tally = [0]
                try:
                    out[j] = spec.encode_values(arr, tally)
                except SchemaError as e:
                    raise e.plain() from None
                if tally[0]:
                    counts[spec.name] = tally[0]
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
                out[j] = integer_codes(arr[:, j], name)
        for name, size, col in zip(self._names, self._sizes, out, strict=True):
            # One pass per column: a negative code reads as a huge unsigned one.
            if col.size and bool((col.view(np.uint64) >= size).any()):
                i = int(np.flatnonzero((col < 0) | (col >= size))[0])
                raise ValueError(
                    f"column {name!r} has code {int(col[i])} in row {i}; "
                    f"codes must be in 0..{size - 1}"
                )
        if clipped is not None:
            for name, k in counts.items():
                clipped[name] = clipped.get(name, 0) + k
        elif counts:
            warnings.warn(
                "values outside the public bounds were clipped to the edge bins: "
                + ", ".join(f"{k} in column {name!r}" for name, k in counts.items()),
                UserWarning,
                stacklevel=3,
            )
        return out

"""One column of a table's public schema: what it holds, and how it maps to codes.

A :class:`~dpstream.tabular.domain.Domain` is a list of these. Every form is **public**
(fixed before any data is seen, never derived from it):

* ``7`` or ``{"size": 7}``: integer codes ``0 .. 6``;
* ``["a", "b"]`` or ``{"categories": ["a", "b"]}``: labels, matched by their text;
* ``{"numeric": [lo, hi], "bins": b}``: numbers in ``b`` equal-width bins;
* ``{"edges": [e0, e1, ..., eb]}``: numbers in the bins ``[e_i, e_{i+1})``, the last
  closed; values outside ``[e0, eb]`` are clipped to the edge bins (and counted);
* ``"integer": true`` (numbers only): releases hold integers; bins narrower than 1 are
  refused;
* ``"missing": true`` (every form): one more code, the last, for a missing value (NA,
  NaN, None or an empty cell); without it a missing value is an error.

Decoding gives categories as written, numbers drawn uniformly inside their bin
(integers where ``integer``), and a missing value as ``None`` / NaN / NA.
"""

from __future__ import annotations

import itertools
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["Column", "SchemaError", "parse_column"]

_MAX_SIZE = 2**31
_KINDS = ("size", "categories", "numeric", "edges")
_KEYS = {
    "size": {"size", "missing"},
    "categories": {"categories", "missing"},
    "numeric": {"numeric", "bins", "integer", "missing"},
    "edges": {"edges", "integer", "missing"},
}


class SchemaError(ValueError):
    """A value that the schema refuses: names the column, the row (in the batch) and the
    value. ``problem`` is e.g. ``"unknown category"``. :meth:`Domain.encode` raises it as
    a plain ``ValueError`` with the same message and this error as its ``schema``
    attribute (so that it pickles across Dask workers)."""

    def __init__(self, column: str, row: int, value: Any, problem: str, hint: str = "") -> None:
        self.column, self.row, self.value, self.problem, self.hint = (
            column,
            row,
            value,
            problem,
            hint,
        )
        shown = "" if problem == "a missing value" else f" {value!r}"
        super().__init__(
            f"column {column!r} has {problem}{shown} in row {row}" + (f"; {hint}" if hint else "")
        )

    def plain(self) -> ValueError:
        """A ``ValueError`` with this message, carrying the fields as ``schema``: a dict
        ``column``, ``row``, ``value``, ``problem``, ``hint``."""
        error = ValueError(str(self))
        error.schema = {  # type: ignore[attr-defined]
            "column": self.column,
            "row": self.row,
            "value": self.value,
            "problem": self.problem,
            "hint": self.hint,
        }
        return error


@dataclass(frozen=True)
class Column:
    """One column's public schema (see the module docs). ``size`` counts every code,
    the missing one included."""

    name: str
    kind: str  # "size", "categories" or "numeric" (edges)
    size: int
    categories: tuple[str, ...] | None = None
    edges: tuple[float, ...] | None = None
    integer: bool = False
    missing: bool = False

    @property
    def legacy(self) -> bool:
        """Written in the forms before schemas (a size or a category list)."""
        return self.kind in ("size", "categories") and not self.missing

    def to_json(self) -> Any:
        """The JSON value that :func:`parse_column` reads back to this column."""
        if self.kind == "size":
            return self.size if not self.missing else {"size": self.size - 1, "missing": True}
        if self.kind == "categories":
            cats = list(self.categories or ())
            return cats if not self.missing else {"categories": cats, "missing": True}
        out: dict[str, Any] = {"edges": list(self.edges or ())}
        if self.integer:
            out["integer"] = True
        if self.missing:
            out["missing"] = True
        return out

    # ------------------------------------------------------------------ encoding

    def encode_values(self, arr: npt.NDArray[Any], clipped: list[int]) -> npt.NDArray[np.int64]:
        """Values of a DataFrame column to codes; ``clipped[0]`` grows by the number of
        numbers outside the bounds. Raises :class:`SchemaError` for the first bad value."""
        if self.kind == "numeric":
            return self._bin(arr, clipped)
        return self._categorical(arr)

    def _missing_code(self, arr: npt.NDArray[Any], missing: npt.NDArray[np.bool_]) -> int:
        if missing.any() and not self.missing:
            i = int(np.flatnonzero(missing)[0])
            raise SchemaError(
                self.name, i, None, "a missing value", 'add "missing": true to its schema'
            )
        return self.size - 1

    def _bin(self, arr: npt.NDArray[Any], clipped: list[int]) -> npt.NDArray[np.int64]:
        edges = np.asarray(self.edges, dtype=np.float64)
        if arr.dtype.kind in "biuf":
            if arr.dtype.kind == "b":
                raise TypeError(f"column {self.name!r} must hold numbers, got bool")
            x = arr.astype(np.float64)
        else:
            x = np.empty(arr.shape[0], dtype=np.float64)
            for i, v in enumerate(arr.tolist()):
                if _is_missing(v):
                    x[i] = np.nan
                    continue
                try:
                    if isinstance(v, bool):
                        raise ValueError
                    x[i] = float(v)
                except (TypeError, ValueError):
                    raise SchemaError(self.name, i, v, "a value that is not a number") from None
        missing = np.isnan(x)
        out = np.searchsorted(edges, x, side="right").astype(np.int64) - 1
        bins = len(edges) - 1
        low, high = x < edges[0], x > edges[-1]
        clipped[0] += int(low.sum() + high.sum())
        np.clip(out, 0, bins - 1, out=out)
        if missing.any():
            out[missing] = self._missing_code(arr, missing)
        return out

    def _categorical(self, arr: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        if self.kind == "size":
            return self._codes(arr)
        cats = self.categories or ()
        index: dict[str | None, int] = {c: i for i, c in enumerate(cats)}
        none = self.size - 1 if self.missing else -2
        if arr.dtype.kind in "biuf" and arr.size:
            values, inverse = np.unique(arr, return_inverse=True)
            known = [none if _is_missing(v) else index.get(_text(v), -1) for v in values.tolist()]
            out = np.asarray(known, dtype=np.int64)[inverse.reshape(-1)]
        else:
            out = np.empty(arr.shape[0], dtype=np.int64)
            for i, v in enumerate(arr.tolist()):
                out[i] = none if _is_missing(v) else _lookup(index, v)
        bad = np.flatnonzero(out < 0)
        if bad.size:
            i = int(bad[0])
            if out[i] == -2:
                self._missing_code(arr, out == -2)
            v = arr[i].item() if isinstance(arr[i], np.generic) else arr[i]
            raise SchemaError(
                self.name,
                i,
                v,
                "unknown category",
                f"the domain lists {len(cats)} categories (a DataFrame's values are matched "
                "by their text)",
            )
        return out

    def _codes(self, arr: npt.NDArray[Any]) -> npt.NDArray[np.int64]:
        """Integer codes; with ``missing``, a missing value is the last code."""
        if arr.dtype.kind in "biu" or arr.size == 0:
            return integer_codes(arr, self.name)
        if arr.dtype.kind == "f":
            miss = np.isnan(arr)
        else:
            miss = np.fromiter((_is_missing(v) for v in arr.tolist()), bool, arr.shape[0])
        if not miss.any():
            return integer_codes(arr, self.name)
        code = self._missing_code(arr, miss)
        if arr.dtype.kind == "f":
            filled = np.where(miss, 0.0, arr)
        else:
            filled = np.asarray([0 if m else v for m, v in zip(miss, arr.tolist(), strict=True)])
        out = integer_codes(filled, self.name)
        out[miss] = code
        return out

    # ------------------------------------------------------------------ decoding

    def decode_codes(self, codes: npt.NDArray[np.int64], rng: np.random.Generator) -> Any:
        """Codes to values: labels, numbers drawn uniformly in their bin, missing as
        ``None``/NaN/NA. Draws only for numeric columns."""
        import pandas as pd

        miss = codes == self.size - 1 if self.missing else np.zeros(codes.shape, dtype=bool)
        if self.kind == "categories":
            labels = [*(self.categories or ()), None]
            return take_labels(labels, np.where(miss, len(labels) - 1, codes))
        if self.kind == "size":
            if not self.missing:
                return codes
            return pd.arrays.IntegerArray(np.where(miss, 0, codes).astype(np.int64), miss)
        edges = np.asarray(self.edges, dtype=np.float64)
        b = np.where(miss, 0, codes)
        lo, hi = edges[b], edges[b + 1]
        last = b == len(edges) - 2
        if self.integer:
            ilo = np.ceil(lo)
            # The largest integer below hi (at hi itself for the closed last bin).
            ihi = np.where(last, np.floor(hi), np.ceil(hi) - 1)
            x = ilo + np.floor(rng.random(codes.shape) * (ihi - ilo + 1))
            x = np.minimum(x, ihi).astype(np.int64)
            if not self.missing:
                return x
            return pd.arrays.IntegerArray(np.where(miss, 0, x), miss)
        x = lo + rng.random(codes.shape) * (hi - lo)
        # Rounding must not carry a value onto the next bin's edge.
        x = np.where(~last & (x >= hi), np.nextafter(hi, -np.inf), np.minimum(x, hi))
        return np.where(miss, np.nan, x)


def _is_missing(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, str):
        return v.strip() == ""
    if isinstance(v, float):
        return math.isnan(v)
    try:
        import pandas as pd

        return bool(pd.isna(v)) if np.ndim(v) == 0 else False
    except (ImportError, TypeError, ValueError):  # pragma: no cover
        return False


def _lookup(index: dict[str | None, int], value: Any) -> int:
    """A value's code by its text; a text such as ``"19.0"`` (an integer column with
    missing values, written by pandas) also matches the label ``"19"``."""
    code = index.get(_text(value), -1)
    if code < 0 and isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            return code
        if number.is_integer():
            return index.get(str(int(number)), -1)
    return code


def _text(value: Any) -> str | None:
    """The text a value is matched by against a column's category labels (``None``: no
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


def take_labels(labels: list[str | None] | tuple[str, ...], codes: npt.NDArray[Any]) -> Any:
    """The pandas array of ``labels[codes]`` (``None`` a missing value): the labels are
    converted to pandas' string array once and taken by code, as converting every row's
    label is slow."""
    import pandas as pd

    return pd.Series(np.asarray(labels, dtype=object)).array.take(codes)


def integer_codes(arr: npt.NDArray[Any], name: str) -> npt.NDArray[np.int64]:
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


# ---------------------------------------------------------------------- parsing


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be a number, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{what} must be finite, got {value!r}")
    return v


def _flag(spec: Mapping[str, Any], key: str, name: str) -> bool:
    v = spec.get(key, False)
    if not isinstance(v, bool):
        raise TypeError(f"column {name!r}: {key!r} must be true or false, got {v!r}")
    return v


def _size(size: Any, name: str) -> int:
    if isinstance(size, (bool, np.bool_)) or not isinstance(size, numbers.Integral):
        raise TypeError(f"the size of column {name!r} must be an int, got {size!r}")
    if not 1 <= int(size) <= _MAX_SIZE:
        raise ValueError(f"the size of column {name!r} must be in [1, 2**31], got {size}")
    return int(size)


def _categories(cats: Any, name: str) -> tuple[str, ...]:
    if not isinstance(cats, (list, tuple)):
        raise TypeError(f"the categories of column {name!r} must be a non-empty list of strings")
    out = tuple(cats)
    if not out or any(not isinstance(c, str) for c in out):
        raise TypeError(f"the categories of column {name!r} must be a non-empty list of strings")
    if len(set(out)) != len(out):
        raise ValueError(f"column {name!r} lists a category twice")
    return out


def parse_column(name: str, spec: Any) -> Column:
    """A column from its JSON form (see the module docs); ``TypeError`` / ``ValueError``
    naming the column and the field for anything else."""
    if not isinstance(name, str):
        raise TypeError(f"column names must be strings, got {name!r}")
    if isinstance(spec, (list, tuple)):
        cats = _categories(spec, name)
        return Column(name, "categories", len(cats), categories=cats)
    if not isinstance(spec, Mapping):
        return Column(name, "size", _size(spec, name))
    kinds = [k for k in _KINDS if k in spec]
    if len(kinds) != 1:
        raise ValueError(
            f"column {name!r} needs exactly one of {list(_KINDS)}, got {sorted(map(str, spec))}"
        )
    kind = kinds[0]
    unknown = sorted(set(map(str, spec)) - _KEYS[kind])
    if unknown:
        raise ValueError(
            f"column {name!r}: unknown field(s) {unknown} for a {kind!r} column "
            f"(fields: {sorted(_KEYS[kind])})"
        )
    missing = _flag(spec, "missing", name)
    extra = 1 if missing else 0
    if kind == "size":
        return Column(name, "size", _size(spec["size"], name) + extra, missing=missing)
    if kind == "categories":
        cats = _categories(spec["categories"], name)
        return Column(name, "categories", len(cats) + extra, categories=cats, missing=missing)
    integer = _flag(spec, "integer", name)
    if kind == "numeric":
        bounds = spec["numeric"]
        if not isinstance(bounds, (list, tuple)) or len(bounds) != 2:
            raise ValueError(f"column {name!r}: 'numeric' must be [lo, hi], got {bounds!r}")
        lo = _number(bounds[0], f"column {name!r}: 'numeric' lo")
        hi = _number(bounds[1], f"column {name!r}: 'numeric' hi")
        if "bins" not in spec:
            raise ValueError(f"column {name!r}: 'numeric' needs 'bins' (the number of bins)")
        bins = _size(spec["bins"], f"{name}' bins '")
        if not lo < hi:
            raise ValueError(f"column {name!r}: 'numeric' needs lo < hi, got {bounds!r}")
        edges = tuple(float(e) for e in np.linspace(lo, hi, bins + 1))
    else:
        raw = spec["edges"]
        if not isinstance(raw, (list, tuple)) or len(raw) < 2:
            raise ValueError(f"column {name!r}: 'edges' must list at least two numbers")
        edges = tuple(_number(e, f"column {name!r}: an edge") for e in raw)
        if any(b <= a for a, b in itertools.pairwise(edges)):
            raise ValueError(f"column {name!r}: 'edges' must increase strictly, got {list(raw)}")
    if integer:
        widths = np.diff(np.asarray(edges))
        if (widths < 1).any():
            i = int(np.flatnonzero(widths < 1)[0])
            raise ValueError(
                f"column {name!r} is integer but its bin [{edges[i]:g}, {edges[i + 1]:g}) is "
                "narrower than 1: use fewer bins or wider edges"
            )
    return Column(
        name, "numeric", len(edges) - 1 + extra, edges=edges, integer=integer, missing=missing
    )

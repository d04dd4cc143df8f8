"""Files in and out: CSV and Parquet tables, point scaling with public bounds.

Reading and writing are not privacy operations; what matters is what is
*derived* from the data. Point scaling uses bounds the caller states (never
bounds computed from the data) and clips values outside them, which is a
data-independent map.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dpstream._files import atomic_write

__all__ = ["Bounds", "parse_bounds", "read_table", "table_bytes", "write_table"]

FloatArray = npt.NDArray[np.float64]


def _suffix(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ValueError(f"{path}: only .csv and .parquet files are supported, got {suffix!r}")
    return suffix


#: pandas' default strings for a missing value in a CSV file (``read_csv``'s ``na_values``).
NA_STRINGS = frozenset(
    {"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND",
     "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"}
)  # fmt: skip


def read_table(
    path: str | os.PathLike[str],
    columns: list[str] | None = None,
    *,
    sep: str | None = None,
    encoding: str | None = None,
    text: dict[str, tuple[str, ...]] | None = None,
) -> Any:
    """A pandas DataFrame from a ``.csv`` or ``.parquet`` file (optionally some columns).

    CSV only: ``sep`` (default ``,``) and ``encoding`` (default UTF-8; a byte that is
    not valid is reported with its line); ``text``: columns read as text as written
    (``"05"`` stays ``"05"``), each with the labels that are never a missing value
    (a category ``"NA"``); empty cells and pandas' other missing strings are missing.
    """
    import pandas as pd

    p = Path(path)
    if not p.exists():
        raise ValueError(f"input file {p} does not exist")
    if _suffix(p) == ".csv":
        frame = _read_csv(p, sep or ",", encoding or "utf-8", text or {})
    else:
        try:
            frame = pd.read_parquet(p)
        except ImportError as e:  # pragma: no cover - pyarrow is a dependency
            raise ValueError("reading Parquet needs pyarrow: pip install pyarrow") from e
    if columns is not None:
        missing = [c for c in columns if c not in frame.columns]
        if missing:
            raise ValueError(f"{p}: no column(s) {missing}; the file has {list(frame.columns)}")
    return frame


def _read_csv(p: Path, sep: str, encoding: str, text: dict[str, tuple[str, ...]]) -> Any:
    import pandas as pd

    try:
        header = list(pd.read_csv(p, sep=sep, encoding=encoding, nrows=0).columns)
        kept = [c for c in text if c in header]
        options: dict[str, Any] = {"dtype": {c: str for c in kept}}
        if any(NA_STRINGS & set(text[c]) for c in kept):
            # A label that pandas would read as missing stays a label in its column.
            options["keep_default_na"] = False
            options["na_values"] = {c: sorted(NA_STRINGS - set(text.get(c, ()))) for c in header}
        return pd.read_csv(p, sep=sep, encoding=encoding, **options)
    except UnicodeDecodeError as e:
        raise ValueError(_decode_error(p, encoding, e)) from None
    except LookupError:
        raise ValueError(f"--encoding: unknown encoding {encoding!r}") from None
    except pd.errors.EmptyDataError:
        raise ValueError(f"{p}: the file is empty (no header line)") from None
    except pd.errors.ParserError as e:
        raise ValueError(f"{p}: not a CSV file with separator {sep!r} ({e})") from None


def _decode_error(p: Path, encoding: str, e: UnicodeDecodeError) -> str:
    """Where the first byte that ``encoding`` cannot decode is: line and column."""
    data = p.read_bytes()
    try:
        data.decode(encoding)
        at = e.start
    except UnicodeDecodeError as full:
        at = full.start
    line = data.count(b"\n", 0, at) + 1
    column = at - (data.rfind(b"\n", 0, at) + 1) + 1
    return (
        f"{p}: line {line} is not valid {encoding} (byte 0x{data[at]:02x} at column {column}); "
        "give the file's --encoding, e.g. latin-1 or cp1252"
    )


def table_bytes(frame: Any, suffix: str) -> bytes:
    """The bytes of ``frame`` as a ``.csv`` or ``.parquet`` file."""
    buf = io.BytesIO()
    if suffix == ".csv":
        frame.to_csv(buf, index=False)
    else:
        frame.to_parquet(buf, index=False)
    return buf.getvalue()


def write_table(frame: Any, path: str | os.PathLike[str]) -> None:
    """Write a pandas DataFrame to ``.csv`` or ``.parquet`` atomically (temp file + rename)."""
    p = Path(path)
    atomic_write(p, table_bytes(frame, _suffix(p)))


class Bounds:
    """Public per-column bounds ``[lo, hi]`` mapping points to ``[0,1]^d`` and back."""

    __slots__ = ("hi", "lo")

    def __init__(self, lo: FloatArray, hi: FloatArray) -> None:
        if lo.shape != hi.shape or lo.ndim != 1 or not np.all(lo < hi):
            raise ValueError("bounds need lo < hi for every column")
        if not (np.all(np.isfinite(lo)) and np.all(np.isfinite(hi))):
            raise ValueError("bounds must be finite")
        self.lo = lo
        self.hi = hi

    def to_unit(self, x: FloatArray) -> FloatArray:
        """Scale to ``[0,1]^d``; values outside the bounds are clipped to them (NaN refused)."""
        if not np.all(np.isfinite(x)):
            raise ValueError("the points contain NaN or infinite values")
        out: FloatArray = np.clip((x - self.lo) / (self.hi - self.lo), 0.0, 1.0)
        return out

    def from_unit(self, u: FloatArray) -> FloatArray:
        """Back to the original units."""
        out: FloatArray = self.lo + u * (self.hi - self.lo)
        return out


def parse_bounds(text: str, dim: int) -> Bounds:
    """``"lo1,hi1,lo2,hi2,..."`` for ``dim`` columns."""
    try:
        values = [float(v) for v in str(text).split(",")]
    except ValueError:
        raise ValueError(f"--bounds must be numbers 'lo1,hi1,lo2,hi2,...', got {text!r}") from None
    if len(values) != 2 * dim:
        raise ValueError(f"--bounds needs {2 * dim} numbers (lo,hi per column), got {len(values)}")
    arr = np.array(values).reshape(dim, 2)
    return Bounds(arr[:, 0].copy(), arr[:, 1].copy())

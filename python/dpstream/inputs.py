"""An input file checked in full before the first release (the ``dpstream`` commands).

One pass over the rows finds every value that would stop a run halfway: a missing
column, an unknown category, a missing value where the schema has no code for it, a
value that is not a number, a time outside the public calendar. The error names the
file, the line (CSV; the header is line 1) or row (Parquet, from 1), the column and the
value. Values outside public bounds are counted per column for a warning.

Errors and warnings go to the curator (standard error) and may name rows, values and
counts; no release file ever does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dpstream.io import read_table

__all__ = [
    "InputError",
    "check_columns",
    "check_points",
    "check_table",
    "clipped_note",
    "in_command_words",
    "read_input",
    "where",
]

_SEPARATORS = (";", "\t", "|", ",")


class InputError(ValueError):
    """A bad input file: one line naming the file, the row and the column."""


def where(path: Path, position: int) -> str:
    """The place of the row at ``position`` (0-based, in file order): a CSV line
    (the header is line 1) or a Parquet row (from 1)."""
    if Path(path).suffix.lower() == ".csv":
        return f"{path} line {position + 2}"
    return f"{path} row {position + 1}"


def separator(value: Any) -> str | None:
    """``--sep``: one character; ``\\t`` or ``tab`` for a tab."""
    if value is None:
        return None
    sep = {"\\t": "\t", "tab": "\t"}.get(str(value), str(value))
    if len(sep) != 1:
        raise InputError(f"--sep must be one character (or \\t), got {value!r}")
    return sep


def read_input(
    path: Path,
    needed: list[str],
    time_column: str | None,
    sep: Any = None,
    encoding: str | None = None,
    text: dict[str, tuple[str, ...]] | None = None,
) -> Any:
    """The input file (CSV or Parquet) with the columns a run needs (and its time column)
    checked: a missing one is named with the columns the file has."""
    sep = separator(sep)
    frame = read_table(path, sep=sep, encoding=encoding, text=text)
    check_columns(frame, path, needed, sep)
    if time_column is not None and time_column not in frame.columns:
        raise InputError(
            f"--time-column: no column {time_column!r} in {path}; it has "
            f"{[str(c) for c in frame.columns]}"
        )
    return frame


def in_command_words(message: str, names: list[str]) -> str:
    """A stream's message as the command speaks: workloads named by their columns, not
    their indices, and ``max_model_cells`` as ``--max-model-cells`` (TOML
    ``max_model_cells``)."""
    import re

    def named(m: Any) -> str:
        idx = [int(i) for i in m.group(1).split(",") if i.strip()]
        if not all(0 <= i < len(names) for i in idx):
            return str(m.group(0))
        return "workload (" + ", ".join(repr(names[i]) for i in idx) + ")"

    out = re.sub(r"workload \(([\d, ]+)\)", named, message)
    out = out.replace("raise max_model_cells", "raise --max-model-cells (TOML max_model_cells)")
    out = out.replace(
        "within max_model_cells; raise it",
        "within --max-model-cells; raise it (TOML max_model_cells)",
    )
    return out.replace("max_model_cells=", "--max-model-cells ")


def check_columns(frame: Any, path: Path, needed: list[str], sep: str | None) -> None:
    """Refuse a file without one of ``needed``, naming the columns it has; a CSV file
    read as one column is probably split by another separator: say which."""
    got = [str(c) for c in frame.columns]
    missing = [c for c in needed if c not in got]
    if not missing:
        return
    message = f"{path}: no column(s) {missing}; the file has {got}"
    if Path(path).suffix.lower() == ".csv" and len(got) == 1:
        used = sep or ","
        for s in _SEPARATORS:
            if s != used and s in got[0]:
                shown = "\\t" if s == "\t" else s
                message += f"; it looks separated by {shown!r}, not {used!r}: give --sep '{shown}'"
                break
    raise InputError(message)


def check_table(frame: Any, domain: Any, path: Path) -> tuple[Any, dict[str, int]]:
    """Every row encoded with the schema: the ``(n, d)`` codes in file order and the
    number of values clipped to the edge bins per column. ``InputError`` for the first
    bad value, by file row and column."""
    clipped: dict[str, int] = {}
    try:
        columns = domain.encode_columns(frame[list(domain.names)], clipped=clipped)
    except (TypeError, ValueError) as e:
        f = getattr(e, "schema", None)
        if f is None:
            raise InputError(f"{path}: {e}") from None
        shown = "" if f["problem"] == "a missing value" else f" {f['value']!r}"
        hint = f"; {f['hint']}" if f["hint"] else ""
        raise InputError(
            f"{where(path, f['row'])}, column {f['column']!r}: {f['problem']}{shown}{hint}"
        ) from None
    return np.ascontiguousarray(columns.T), clipped


def check_points(frame: Any, columns: list[str], bounds: Any, path: Path) -> dict[str, int]:
    """Every coordinate a finite number: ``InputError`` for the first that is not, by
    file row and column; returns the values outside ``bounds`` per column (clipped)."""
    import pandas as pd

    clipped: dict[str, int] = {}
    for j, name in enumerate(columns):
        raw = frame[name]
        x = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)
        bad = ~np.isfinite(x)
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            value = raw.iloc[i]
            if pd.isna(value):
                problem = "a missing value (the points must be complete)"
            elif np.isinf(x[i]):
                problem = f"an infinite value {value!r}"
            else:
                problem = f"a value that is not a number {value!r}"
            raise InputError(f"{where(path, i)}, column {name!r}: {problem}")
        k = int(((x < bounds.lo[j]) | (x > bounds.hi[j])).sum())
        if k:
            clipped[name] = k
    return clipped


def clipped_note(
    path: Path, clipped: dict[str, int], rows: int, what: str, strict: bool = False
) -> str | None:
    """The warning (``strict``: the error) for values outside public bounds, per column
    with the share of rows; ``None`` if there are none."""
    if not clipped:
        return None
    parts = [
        f"{k} of {rows} rows ({100 * k / max(rows, 1):.1f}%) in column {name!r}"
        for name, k in clipped.items()
    ]
    if strict:
        return f"{path}: values outside {what} (--strict): " + ", ".join(parts)
    return (
        f"{path}: values outside {what} were clipped to the edge: "
        + ", ".join(parts)
        + " (--strict refuses them)"
    )

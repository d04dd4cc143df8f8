"""The public release calendar of a run: periods from ``--start``, ``--end``,
``--release-every`` and ``--release-at``, never from the data.

Release times must not depend on the records: a calendar chosen after looking at the
data (one release where the data is dense, say) would publish something about it
that the guarantee does not cover. So the periods are computed from the options alone,
and each row is then put in the period its time falls in.

Two kinds of time axis:

* an **integer** column (years, step numbers) with integer ``--start``/``--end``: one
  period per value, or with ``--release-every N`` periods of ``N`` values anchored at
  ``--start`` and labelled by their first value (``--end`` must close a whole period:
  ``start + kN - 1``);
* a **date** column: ``--release-every`` ``day``, ``week``, ``month``, ``year`` or a
  count and a unit (``10y``, ``3mo``, ``2w``, ``7d``), periods anchored at ``--start``.

Or an explicit list of release times (``--release-at``): each period ends with one of
them (a date as written, ``2024-03`` covering the whole month, or an integer) and
starts after the previous one (the first at ``--start``). A unit on an integer axis, a
bare number on a date axis, and an ``--end`` that cuts a period are refused.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Outside", "Period", "periods", "split"]

_WORDS = {"day": "D", "week": "W", "month": "M", "year": "Y"}
_UNITS = {"d": "D", "w": "W", "mo": "M", "m": "M", "y": "Y"}
_UNIT_RE = re.compile(r"^\s*(\d+)\s*(d|w|mo|m|y)\s*$", re.IGNORECASE)


class ScheduleError(ValueError):
    """Options that do not make a public calendar, or a time that is not one; ``row``
    (a position in the input) and ``problem`` for the latter."""

    row: int | None = None
    problem: str = ""


def _bad_time(column: str, row: int, problem: str) -> ScheduleError:
    error = ScheduleError(f"column {column!r} has {problem} in row {row}")
    error.row, error.problem = row, problem
    return error


@dataclass(frozen=True)
class Period:
    """One release period: the times ``lo <= t < hi``, labelled ``label``."""

    label: str
    lo: Any
    hi: Any


def _integer(value: Any, option: str, column: str) -> int:
    if isinstance(value, bool):
        raise ScheduleError(f"{option} must be an integer, got {value!r}")
    if isinstance(value, (int, np.integer)):
        return int(value)
    text = str(value).strip()
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    raise ScheduleError(
        f"--time-column {column!r} holds integers, so {option} must be an integer too, "
        f"got {value!r}"
    )


def periods(
    *,
    integer: bool,
    column: str,
    start: Any,
    end: Any,
    every: Any = None,
    at: Any = None,
) -> list[Period]:
    """The periods of the calendar (see the module docs); ``ScheduleError`` (a
    ``ValueError``) naming the option for anything that is not a public calendar."""
    if start is None or (end is None and at is None):
        raise ScheduleError(
            "--time-column needs public --start and --end (the first and last period; "
            "with --release-at, --start)"
        )
    if at is not None and every is not None:
        raise ScheduleError("give --release-every or --release-at, not both")
    if integer:
        return _integer_periods(column, start, end, every, at)
    return _date_periods(column, start, end, every, at)


def _times(at: Any) -> list[str]:
    items = at if isinstance(at, (list, tuple)) else str(at).split(",")
    out = [str(v).strip() for v in items if str(v).strip()]
    if not out:
        raise ScheduleError(f"--release-at needs at least one time, got {at!r}")
    return out


def _integer_periods(column: str, start: Any, end: Any, every: Any, at: Any) -> list[Period]:
    lo = _integer(start, "--start", column)
    if at is not None:
        times = [_integer(t, "--release-at", column) for t in _times(at)]
        if end is not None and _integer(end, "--end", column) != times[-1]:
            raise ScheduleError(
                f"--end {end} must be the last --release-at time ({times[-1]}), or be left out"
            )
        edges = [lo] + [t + 1 for t in times]
        if any(b <= a for a, b in itertools.pairwise(edges)):
            raise ScheduleError(
                f"--release-at times must increase and come at or after --start {lo}, got {at!r}"
            )
        return [Period(str(t), a, b) for t, a, b in zip(times, edges, edges[1:], strict=False)]
    hi = _integer(end, "--end", column)
    n = 1
    if every is not None:
        text = str(every).strip()
        if not re.fullmatch(r"\d+", text):
            raise ScheduleError(
                f"--time-column {column!r} holds integers (not dates), so --release-every must "
                f"be a number of its units, such as 10, got {every!r}"
            )
        n = int(text)
        if n < 1:
            raise ScheduleError(f"--release-every must be at least 1, got {every!r}")
    if hi < lo:
        raise ScheduleError(f"--end {hi} comes before --start {lo}")
    if (hi - lo + 1) % n:
        k = (hi - lo + 1) // n + 1
        raise ScheduleError(
            f"--end {hi} does not close a period of {n} from --start {lo}: give --end "
            f"{lo + (k - 1) * n - 1} or {lo + k * n - 1} (start + kN - 1)"
        )
    return [Period(str(t), t, t + n) for t in range(lo, hi + 1, n)]


def _unit(every: Any, column: str) -> tuple[str, int]:
    text = str(every).strip()
    if text.lower() in _WORDS:
        return _WORDS[text.lower()], 1
    m = _UNIT_RE.match(text)
    if m:
        n = int(m.group(1))
        if n < 1:
            raise ScheduleError(f"--release-every must count at least 1 unit, got {every!r}")
        return _UNITS[m.group(2).lower()], n
    if re.fullmatch(r"\d+", text):
        raise ScheduleError(
            f"--time-column {column!r} holds dates, so --release-every needs a unit: "
            f"{text}d, {text}w, {text}mo or {text}y (or day, week, month, year)"
        )
    raise ScheduleError(
        "--release-every must be day, week, month, year or a count and a unit "
        f"(10y, 3mo, 2w, 7d), got {every!r}"
    )


def _period(value: Any, freq: str | None, option: str) -> Any:
    import pandas as pd

    try:
        return pd.Period(str(value), freq) if freq else pd.Period(str(value))
    except (ValueError, TypeError) as e:
        raise ScheduleError(f"{option} {value!r} is not a date ({e})") from None


def _date_periods(column: str, start: Any, end: Any, every: Any, at: Any) -> list[Period]:
    if at is not None:
        first = _period(start, None, "--start").start_time
        ends = [_period(t, None, "--release-at") for t in _times(at)]
        edges = [first] + [(p + 1).start_time for p in ends]
        if any(b <= a for a, b in itertools.pairwise(edges)):
            raise ScheduleError(
                f"--release-at times must increase and come after --start {start}, got {at!r}"
            )
        if end is not None and (_period(end, None, "--end") + 1).start_time != edges[-1]:
            raise ScheduleError(f"--end {end} must be the last --release-at time, or be left out")
        labels = _times(at)
        return [Period(t, a, b) for t, a, b in zip(labels, edges, edges[1:], strict=False)]
    if every is None:
        raise ScheduleError(
            f"--time-column {column!r} without --release-every must hold integer steps; it "
            "holds dates: give --release-every (day, week, month, year, or a count and a unit "
            "such as 10y) or --release-at"
        )
    freq, n = _unit(every, column)
    p0, pe = _period(start, freq, "--start"), _period(end, freq, "--end")
    total = (pe - p0).n + 1
    if total < 1:
        raise ScheduleError(f"--end {end} comes before --start {start}")
    if total % n:
        k = total // n
        raise ScheduleError(
            f"--end {end} does not close a period of {every} from --start {start}: the last "
            f"period would end at {p0 + (k + 1) * n - 1}; give --end {p0 + k * n - 1} or "
            f"{p0 + (k + 1) * n - 1}"
        )
    out = []
    for k in range(total // n):
        p = p0 + k * n
        out.append(Period(str(p), p.start_time, (p + n).start_time))
    return out


@dataclass(frozen=True)
class Outside:
    """Rows outside the calendar: before its start (``first_before``: the first such
    row's position in the input, ``-1`` if none) and after its end."""

    before: int
    after: int
    first_before: int


def time_values(frame: Any, column: str, integer: bool) -> Any:
    """The time column as int64 (integers, or nanoseconds for dates), the positions of
    missing times and the time zone; ``ScheduleError`` for values that are not times."""
    import pandas as pd

    series = frame[column]
    if integer:
        x = pd.to_numeric(series).to_numpy(dtype=np.float64, na_value=np.nan)
        missing = np.isnan(x)
        fraction = ~missing & (x != np.floor(x))
        if fraction.any():
            i = int(np.flatnonzero(fraction)[0])
            raise _bad_time(column, i, f"a time that is not an integer, {x[i]!r},")
        return np.where(missing, 0, x).astype(np.int64), missing, None
    try:
        times = pd.to_datetime(series)
    except (ValueError, TypeError) as e:
        raise ScheduleError(f"--time-column {column!r}: not dates ({e})") from None
    tz = getattr(times.dtype, "tz", None)
    if tz is not None:
        times = times.dt.tz_convert("UTC").dt.tz_localize(None)
    missing = times.isna().to_numpy()
    ns = times.astype("datetime64[ns]").to_numpy().astype(np.int64)
    return ns, missing, tz


def is_integer_axis(frame: Any, column: str) -> bool:
    """A column of numbers is an integer axis (years, steps), never dates: integers, or
    floats (an integer column with missing values) whose values are integers."""
    import pandas as pd

    dtype = frame[column].dtype
    return bool(pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_float_dtype(dtype))


def split(
    frame: Any, column: str, calendar: list[Period], integer: bool
) -> tuple[list[tuple[str, Any]], Outside]:
    """``(label, rows)`` per period, in time order (rows sorted by time, stably), and the
    rows outside the calendar. A missing time is refused naming its row."""
    import pandas as pd

    values, missing, tz = time_values(frame, column, integer)
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise _bad_time(column, i, "a missing time")
    if integer:
        los = np.asarray([p.lo for p in calendar], dtype=np.int64)
        end = int(calendar[-1].hi)
    else:

        def ns(t: Any) -> int:
            ts = pd.Timestamp(t)
            if tz is not None:
                ts = ts.tz_localize(tz).tz_convert("UTC").tz_localize(None)
            return int(ts.as_unit("ns").value)

        los = np.asarray([ns(p.lo) for p in calendar], dtype=np.int64)
        end = ns(calendar[-1].hi)
    before = values < los[0]
    after = values >= end
    index = np.searchsorted(los, values, side="right") - 1
    order = np.argsort(values, kind="stable")
    frame, index = frame.iloc[order], index[order]
    keep = ~(before | after)[order]
    cuts = np.searchsorted(index[keep], np.arange(len(calendar) + 1), side="left")
    kept = frame[keep] if not keep.all() else frame
    out = [(p.label, kept.iloc[cuts[k] : cuts[k + 1]]) for k, p in enumerate(calendar)]
    first = int(np.flatnonzero(before)[0]) if before.any() else -1
    return out, Outside(int(before.sum()), int(after.sum()), first)


def parquet_outside(
    path: Any, column: str, low: Any, high: Any
) -> tuple[bool, bool, Any, Any] | None:
    """Whether Parquet files hold times before ``low`` or from ``high`` on, and their
    smallest and largest time, from the footers' statistics alone (no partition is
    read); ``None`` where a file or row group has none (or a CSV, or time zones that
    cannot be compared)."""
    from pathlib import Path

    import pandas as pd
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    path = Path(path)
    if path.is_dir():
        files = sorted(
            p for p in path.rglob("*") if p.suffix.lower() in (".parquet", ".parq", ".pq")
        )
    elif path.suffix.lower() == ".parquet":
        files = [path]
    else:
        return None
    first: Any = None
    last: Any = None
    for f in files:
        meta = pq.ParquetFile(f).metadata
        j = meta.schema.to_arrow_schema().get_field_index(column)
        if j < 0:
            return None
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(j).statistics
            if stats is None or not stats.has_min_max:
                return None
            first = stats.min if first is None else min(first, stats.min)
            last = stats.max if last is None else max(last, stats.max)
    if first is None:
        return None
    try:
        if isinstance(low, pd.Timestamp):
            first, last = pd.Timestamp(first), pd.Timestamp(last)
        return bool(first < low), bool(last >= high), first, last
    except TypeError:  # time zones the statistics do not carry
        return None

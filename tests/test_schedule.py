"""The public release calendar (dpstream.schedule, issue 40)."""

from __future__ import annotations

import pandas as pd
import pytest
from dpstream.schedule import periods, split


def labels(**kw: object) -> list[str]:
    return [p.label for p in periods(column="t", **kw)]  # type: ignore[arg-type]


def test_integer_axes() -> None:
    assert labels(integer=True, start=1890, end=2009, every="10") == [
        str(y) for y in range(1890, 2010, 10)
    ]
    assert labels(integer=True, start="1", end="3") == ["1", "2", "3"]
    (p,) = periods(integer=True, column="t", start=0, end=None, at="9")
    assert (p.lo, p.hi) == (0, 10)


def test_dates_words_counts_units_and_lists() -> None:
    assert labels(integer=False, start="2024-01", end="2024-03", every="month") == [
        "2024-01", "2024-02", "2024-03"
    ]  # fmt: skip
    assert labels(integer=False, start="2024-01", end="2024-12", every="3mo") == [
        "2024-01", "2024-04", "2024-07", "2024-10"
    ]  # fmt: skip
    assert labels(integer=False, start="1970", end="1981", every="3y") == [
        "1970", "1973", "1976", "1979"
    ]  # fmt: skip
    ps = periods(integer=False, column="t", start="2024-01", end=None, at="2024-03,2024-06-15")
    assert [p.label for p in ps] == ["2024-03", "2024-06-15"]
    assert str(ps[1].lo) == "2024-04-01 00:00:00" and str(ps[1].hi) == "2024-06-16 00:00:00"


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"integer": True, "start": 1890, "end": 2008, "every": "10"}, "give --end 1999 or 2009"),
        ({"integer": True, "start": 1890, "end": 2009, "every": "10y"}, "holds integers"),
        ({"integer": True, "start": "1890-01", "end": 2009}, "--start must be an integer"),
        ({"integer": False, "start": "2024-01", "end": "2024-02", "every": "2"}, "needs a unit"),
        (
            {"integer": False, "start": "2024-01", "end": "2024-04", "every": "3mo"},
            "does not close",
        ),
        ({"integer": False, "start": "2024-01", "end": "2024-02", "every": "fortnight"}, "10y"),
        ({"integer": False, "start": "2024-01", "end": None, "at": "2024-03,2024-02"}, "increase"),
        ({"integer": True, "start": None, "end": 3}, "needs public --start and --end"),
        ({"integer": True, "start": 1, "end": 3, "every": "1", "at": "3"}, "not both"),
    ],
)
def test_calendars_that_are_not_public_and_whole_are_refused(
    kw: dict[str, object], needle: str
) -> None:
    with pytest.raises(ValueError) as info:
        periods(column="t", **kw)  # type: ignore[arg-type]
    assert needle in str(info.value)


def test_split_sorts_by_time_and_counts_the_rows_outside() -> None:
    frame = pd.DataFrame({"t": [5, 1, 3, 0, 9, 3], "v": range(6)})
    cal = periods(integer=True, column="t", start=1, end=4, every="2")
    batches, outside = split(frame, "t", cal, integer=True)
    assert [(label, rows["v"].tolist()) for label, rows in batches] == [
        ("1", [1]), ("3", [2, 5])
    ]  # fmt: skip
    assert (outside.before, outside.after, outside.first_before) == (1, 2, 3)

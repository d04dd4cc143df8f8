"""The ``dpstream`` command keeps releases apart from everything else (issue 28).

* A release directory holds release files only: no metrics, plots, checkpoints or
  input; evaluation against the real data goes to ``--evaluate DIR``, labelled NOT
  PRIVATE, and is printed only then.
* A checkpoint is bound to the run's options (all of them that shape a release) and to
  the rows it consumed: appended rows continue the run, changed ones are refused.
* ``points --method privhp --seed`` is reproducible.
* Every refusal of the command line is in ``docs/bad-input.md`` (generated from :data:`REFUSALS`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dpstream import runs
from dpstream.cli import main
from dpstream.cli import options as cli_options
from dpstream.cli.parser import build_parser

ADULT = Path(__file__).resolve().parents[1] / "python" / "dpstream" / "data"
DOMAIN = str(ADULT / "adult-domain.json")
BOUNDS = "0,1,0,1"


def points_frame(n: int, seed: int = 0) -> pd.DataFrame:
    g = np.random.default_rng(seed)
    return pd.DataFrame(
        {  # multiples of 1/1024: a CSV round trip is exact
            "x": g.integers(0, 1025, n) / 1024,
            "y": g.integers(0, 1025, n) / 1024,
            "date": pd.to_datetime("2024-01-01")
            + pd.to_timedelta(np.sort(g.integers(0, 91, n)), unit="D"),
        }
    )


def points_args(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "points", "--input", str(data), "--columns", "x,y", "--bounds", BOUNDS,
        "--epsilon", "1", "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip


def privhp_args(data: Path, out: Path, *extra: str) -> list[str]:
    return points_args(
        data, out, "--method", "privhp", "--memory", "100000", "--expected-n", "3000", *extra
    )


def table_args(data: Path, out: Path, *extra: str) -> list[str]:
    return [
        "table", "--input", str(data), "--domain", DOMAIN, "--batch-size", "200",
        "--epsilon", "1", "--out", str(out), "--quiet", *extra,
    ]  # fmt: skip


@pytest.fixture
def pts(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "pts.csv"
    path.parent.mkdir()
    points_frame(3000).to_csv(path, index=False)
    return path


@pytest.fixture
def adult(tmp_path: Path) -> Path:
    path = tmp_path / "in" / "adult.csv"
    path.parent.mkdir(exist_ok=True)
    pd.read_csv(ADULT / "adult.csv", nrows=600).to_csv(path, index=False)
    return path


def listing(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    lines = capsys.readouterr().err.strip().splitlines()
    err = [line for line in lines if "--seed given" not in line]  # the seed's warning
    assert len(err) == 1, err
    return err[0]


# ---------------------------------------------------------------------------- release dirs


@pytest.mark.slow
@pytest.mark.parametrize("command", ["points online", "points privhp", "table"])
def test_a_release_directory_holds_only_releases(
    command: str, pts: Path, adult: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every command, with a checkpoint, an evaluation and a plot asked for: the release
    directory lists release files and nothing else; the evaluation files are labelled."""
    out, evaluation, ckpt = tmp_path / "out", tmp_path / "eval", tmp_path / "run.ckpt"
    extra = ["--checkpoint", str(ckpt), "--evaluate", str(evaluation), "--plot"]
    if command == "points online":
        argv = points_args(pts, out, "--time-column", "date", "--release-every", "month")
        argv += ["--start", "2024-01", "--end", "2024-03", *extra]
        expected = [f"release-2024-0{m}.csv" for m in (1, 2, 3)]
    elif command == "points privhp":
        argv = privhp_args(pts, out, "--batch-size", "1000", *extra)
        expected = ["release-final.csv"]
    else:
        argv = table_args(adult, out, *extra)
        expected = [f"release-{i}.csv" for i in (1, 2, 3)]
    assert main(argv) == 0
    assert sorted(p.name for p in out.iterdir()) == expected
    assert sorted(p.name for p in evaluation.iterdir()) == [
        "NOT-PRIVATE-evaluation.png",
        "NOT-PRIVATE-metrics.csv",
    ]
    printed = capsys.readouterr().out
    figures = [line for line in printed.splitlines() if "final" in line]
    assert figures and all("NOT PRIVATE" in line for line in figures)
    # Without --evaluate: releases only, and no figure computed from the real data printed.
    assert main([a for a in argv if a not in extra] + ["--out", str(tmp_path / "o2")]) == 0
    assert "final" not in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "o2").iterdir()) == expected


# ---------------------------------------------------------------------------- refusals


@dataclass(frozen=True)
class Refusal:
    """A command line refused with exit status 2, one line, nothing written."""

    command: str
    input: str
    message: str
    argv: Callable[[Path, Path, Path], list[str]]  # (points csv, adult csv, tmp) -> argv
    prepare: Callable[[Path, Path, Path], None] | None = None


def _ran(argv: list[str]) -> None:
    assert main(argv) == 0


def _online_ckpt(pts: Path, _: Path, tmp: Path) -> list[str]:
    return points_args(
        pts, tmp / "out", "--batch-size", "1000", "--checkpoint", str(tmp / "c"), "--seed", "5"
    )


def _monthly(pts: Path, tmp: Path, end: str, *extra: str) -> list[str]:
    return points_args(
        pts, tmp / "out", "--time-column", "date", "--release-every", "month",
        "--start", "2024-01", "--end", end, "--checkpoint", str(tmp / "c"), *extra,
    )  # fmt: skip


def _privhp_ckpt(pts: Path, _: Path, tmp: Path) -> list[str]:
    return privhp_args(pts, tmp / "out", "--batch-size", "1000", "--checkpoint", str(tmp / "c"))


def _append_points(pts: Path, n: int = 1000, seed: int = 1) -> None:
    """``n`` rows dated in April 2024 appended to the input."""
    frame = points_frame(n, seed)
    frame["date"] = pd.to_datetime("2024-04-01") + pd.to_timedelta(
        np.sort(np.random.default_rng(seed).integers(0, 30, n)), unit="D"
    )
    pd.concat([pd.read_csv(pts, parse_dates=["date"]), frame]).to_csv(pts, index=False)


def _edit_row(pts: Path, adult: Path, tmp: Path) -> None:
    _ran(_online_ckpt(pts, adult, tmp))
    frame = pd.read_csv(pts)
    frame.loc[10, "x"] = 0.5 if frame.loc[10, "x"] != 0.5 else 0.25
    frame.to_csv(pts, index=False)


def _drop_rows(pts: Path, adult: Path, tmp: Path) -> None:
    _ran(_online_ckpt(pts, adult, tmp))
    pd.read_csv(pts).iloc[:1500].to_csv(pts, index=False)


def _insert_in_march(pts: Path, adult: Path, tmp: Path) -> None:
    _ran(_monthly(pts, tmp, "2024-03"))
    extra = pd.DataFrame({"x": [0.5], "y": [0.5], "date": ["2024-03-15"]})
    pd.concat([pd.read_csv(pts), extra]).to_csv(pts, index=False)


def _finish_privhp_then_append(pts: Path, adult: Path, tmp: Path) -> None:
    _ran(_privhp_ckpt(pts, adult, tmp))
    _append_points(pts)


def _pending_outside(pts: Path, adult: Path, tmp: Path) -> None:
    """A checkpoint whose pending release would be written outside the release directory."""
    _ran(_online_ckpt(pts, adult, tmp))
    header, state, _ = runs._decode_checkpoint(tmp / "c")
    header["pending"] = "../escape.csv"
    (tmp / "c").write_bytes(runs._encode_checkpoint(header, state, b"x"))


def _toml(tmp: Path, policy: str) -> None:
    (tmp / "run.toml").write_text(f"[policy]\n{policy}\n")


def _with_config(p: Path, a: Path, t: Path) -> list[str]:
    return table_args(a, t / "out", "--config", str(t / "run.toml"))


def _table_ckpt(p: Path, a: Path, t: Path) -> list[str]:
    return table_args(a, t / "out", "--checkpoint", str(t / "c"), "--seed", "1")


def _before_policy(pts: Path, adult: Path, tmp: Path) -> None:
    """A table run checkpoint with the options ``table`` had before ``--policy``."""
    _ran(_table_ckpt(pts, adult, tmp))
    header, state, pending = runs._decode_checkpoint(tmp / "c")
    del header["options"]["policy"]
    header["options"].update(table_method="proposed", score="auto", remainder="pooled")
    (tmp / "c").write_bytes(runs._encode_checkpoint(header, state, pending))


def _removed_policy(pts: Path, adult: Path, tmp: Path) -> None:
    """A table run checkpoint whose policy was the default before dpstream 0.2."""
    _ran(_table_ckpt(pts, adult, tmp))
    header, state, pending = runs._decode_checkpoint(tmp / "c")
    old = {"name": "adaptive", "score": "l2", "k": 2, "refit": "step", "coverage": False}
    header["options"]["policy"] = json.dumps(old)
    (tmp / "c").write_bytes(runs._encode_checkpoint(header, state, pending))


def _format_2_partitioned(pts: Path, adult: Path, tmp: Path) -> None:
    """The checkpoint of a partitioned run before issue 30's digest (format 2)."""
    _ran(_online_ckpt(pts, adult, tmp))
    header, state, pending = runs._decode_checkpoint(tmp / "c")
    header["options"]["input_digest"] = "partitions"
    data = runs._encode_checkpoint(header, state, pending)
    (tmp / "c").write_bytes(runs._MAGIC_V2 + data[len(runs._MAGIC) :])


def _write_checkpoint(data: bytes) -> Callable[[Path, Path, Path], None]:
    def prepare(pts: Path, adult: Path, tmp: Path) -> None:
        (tmp / "c").write_bytes(data)

    return prepare


def _parquet_dir(
    edit: Callable[[pd.DataFrame], pd.DataFrame] = lambda f: f, both: bool = False
) -> Callable[..., None]:
    """``tmp/dir``: the points in two Parquet files, the second one (or both) edited."""

    def prepare(pts: Path, _: Path, tmp: Path) -> None:
        pytest.importorskip("dask.dataframe")
        pytest.importorskip("pyarrow")
        (tmp / "dir").mkdir()
        frame = pd.read_csv(pts, parse_dates=["date"])
        first = edit(frame.iloc[:1500]) if both else frame.iloc[:1500]
        first.to_parquet(tmp / "dir" / "part-0.parquet", index=False)
        edit(frame.iloc[1500:]).to_parquet(tmp / "dir" / "part-1.parquet", index=False)

    return prepare


def _on_dir(*extra: str) -> Callable[[Path, Path, Path], list[str]]:
    return lambda p, a, t: points_args(t / "dir", t / "out", "--batch-size", "1000", *extra)


def _not_parquet(pts: Path, a: Path, tmp: Path) -> None:
    _parquet_dir()(pts, a, tmp)
    (tmp / "dir" / "part-2.parquet").write_text("x,y\n0.5,0.5\n")


def _dask_present(*_: Path) -> None:
    pytest.importorskip("dask.distributed")


MONTHLY = ["--time-column", "date", "--release-every", "month", "--start", "2024-01"]

REFUSALS = [
    Refusal(
        "points, table",
        "`--dask`, a scheduler that cannot be reached",
        "--dask: cannot reach the scheduler at 'tcp://127.0.0.1:9'",
        lambda p, a, t: table_args(a, t / "out", "--dask", "tcp://127.0.0.1:9"),
        _dask_present,
    ),
    Refusal(
        "points, table",
        "`--dask`, not an address",
        "--dask: 'nonsense' is neither local:N nor a scheduler address such as tcp://host:8786",
        lambda p, a, t: points_args(p, t / "out", "--dask", "nonsense"),
        _dask_present,
    ),
    Refusal(
        "points, table",
        "`--dask local:0`",
        "--dask local:N needs a positive number of workers, got 'local:0'",
        lambda p, a, t: points_args(p, t / "out", "--dask", "local:0"),
        _dask_present,
    ),
    Refusal(
        "points, table",
        "`--input` a directory without Parquet files",
        "no Parquet files (*.parquet, *.parq, *.pq) in it",
        lambda p, a, t: points_args(t, t / "out"),
        _dask_present,
    ),
    Refusal(
        "points, table",
        "`--input` a directory with a broken Parquet file",
        "cannot read it as Parquet (",
        _on_dir(),
        _not_parquet,
    ),
    Refusal(
        "points, table",
        "`--input` a directory, one file without a column used",
        "dir: part-1.parquet has no column 'y'; it has ['x', 'date']",
        _on_dir(),
        _parquet_dir(lambda f: f.drop(columns=["y"])),
    ),
    Refusal(
        "points, table",
        "`--input` a directory, a column of another type in one file",
        "column 'x' is int64 in part-1.parquet but double in part-0.parquet",
        _on_dir(),
        _parquet_dir(lambda f: f.assign(x=0)),
    ),
    Refusal(
        "points, table",
        "`--input` a directory, `--time-column` missing from one file",
        "dir: part-1.parquet has no column 'date'",
        lambda p, a, t: points_args(t / "dir", t / "out", *MONTHLY, "--end", "2024-03"),
        _parquet_dir(lambda f: f.drop(columns=["date"])),
    ),
    Refusal(
        "points, table",
        "`--input` a directory, `--time-column` stored as text",
        "a partitioned input is filtered by the reader, so the column must be stored as timestamps",
        lambda p, a, t: points_args(t / "dir", t / "out", *MONTHLY, "--end", "2024-03"),
        _parquet_dir(lambda f: f.assign(date=f["date"].astype(str)), both=True),
    ),
    Refusal(
        "points --method online-paper",
        "`--input` a directory",
        "--method online-paper tests every time step in order, so it cannot count a partitioned",
        _on_dir("--method", "online-paper"),
        _parquet_dir(),
    ),
    Refusal(
        "points, table",
        "`--evaluate` equal to `--out`",
        "or inside it: evaluation is NOT PRIVATE and must not sit with the releases",
        lambda p, a, t: points_args(p, t / "out", "--evaluate", str(t / "out")),
    ),
    Refusal(
        "points, table",
        "`--evaluate` inside `--out`",
        "or inside it: evaluation is NOT PRIVATE and must not sit with the releases",
        lambda p, a, t: table_args(a, t / "out", "--evaluate", str(t / "out" / "eval")),
    ),
    Refusal(
        "points, table",
        "`--evaluate` an existing file",
        "is not a directory",
        lambda p, a, t: points_args(p, t / "out", "--evaluate", str(p)),
    ),
    Refusal(
        "points, table",
        "`--checkpoint` inside `--out`",
        "a checkpoint holds exact counts, as sensitive as the data",
        lambda p, a, t: points_args(p, t / "out", "--checkpoint", str(t / "out" / "c")),
    ),
    Refusal(
        "points, table",
        "`--input` inside `--out`",
        "the release directory holds releases only",
        lambda p, a, t: points_args(p, p.parent),
    ),
    Refusal(
        "points, table",
        "`--plot` without `--evaluate`",
        "--plot draws the evaluation against the real data (NOT PRIVATE)",
        lambda p, a, t: table_args(a, t / "out", "--plot"),
    ),
    Refusal(
        "points, table",
        "`--checkpoint` of a run with other options",
        "was made by a run with different options (--epsilon: '1' then, '2' now)",
        lambda p, a, t: [x if x != "1" else "2" for x in _online_ckpt(p, a, t)],
        lambda p, a, t: _ran(_online_ckpt(p, a, t)),
    ),
    Refusal(
        "points, table",
        "`--checkpoint`, a consumed row changed in the input",
        "the input changed: its rows in the first 3 batches (through 3) differ",
        _online_ckpt,
        _edit_row,
    ),
    Refusal(
        "points, table",
        "`--checkpoint`, consumed rows removed from the input",
        "the input changed: its rows in the first 3 batches (through 3) differ",
        _online_ckpt,
        _drop_rows,
    ),
    Refusal(
        "points, table",
        "`--checkpoint`, a row added to a consumed period",
        "the input changed: its rows in the first 3 batches (through 2024-03) differ",
        lambda p, a, t: _monthly(p, t, "2024-03"),
        _insert_in_march,
    ),
    Refusal(
        "points, table",
        "`--checkpoint`, `--end` before the last period consumed",
        "has consumed 3 batches (through 2024-03), but this run has only 2",
        lambda p, a, t: _monthly(p, t, "2024-02"),
        lambda p, a, t: _ran(_monthly(p, t, "2024-03")),
    ),
    Refusal(
        "points --method privhp",
        "`--checkpoint` of a finished run, rows appended to the input",
        "belongs to a finished one-shot run (its one release is written)",
        _privhp_ckpt,
        _finish_privhp_then_append,
    ),
    Refusal(
        "points, table",
        "`--checkpoint` not a run checkpoint",
        "corrupt run checkpoint",
        _online_ckpt,
        _write_checkpoint(b"hello"),
    ),
    Refusal(
        "points, table",
        "`--checkpoint` naming a release file outside the release directory",
        "bad header field 'pending'",
        _online_ckpt,
        _pending_outside,
    ),
    Refusal(
        "points, table",
        "`--checkpoint` from an older dpstream (format 1)",
        "was written by an older dpstream that did not record the input it consumed",
        _online_ckpt,
        _write_checkpoint(b"DPSTREAM-RUN\x00\x01" + bytes(20)),
    ),
    Refusal(
        "points, table",
        "`--checkpoint` of a partitioned run from an older dpstream (format 2)",
        "whose digest of a partitioned input depended on its partitions",
        _online_ckpt,
        _format_2_partitioned,
    ),
    Refusal(
        "table",
        "`--checkpoint` of a run from before `--policy`",
        "was made before --policy replaced --table-method, --score, --remainder and",
        _table_ckpt,
        _before_policy,
    ),
    Refusal(
        "table",
        "`--checkpoint` of a run whose policy used removed options",
        "whose policy used Adaptive(score, k, refit, coverage), options removed in dpstream 0.2",
        _table_ckpt,
        _removed_policy,
    ),
    Refusal(
        "table",
        "`[policy]` in `--config` with a bad field",
        "--policy: Adaptive.growth must be greater than 1, got 1",
        _with_config,
        lambda p, a, t: _toml(t, "growth = 1"),
    ),
    Refusal(
        "table",
        "`[policy]` in `--config` with a removed field",
        "--policy: Adaptive(refit): options of the earlier default policy, removed in dpstream 0.2",
        _with_config,
        lambda p, a, t: _toml(t, "refit = 'step'"),
    ),
    Refusal(
        "table",
        "`[policy]` in `--config` with an unknown field",
        "--policy: Paper: unknown field 'score' (fields: ['counter', 'horizon', 'k'])",
        _with_config,
        lambda p, a, t: _toml(t, "name = 'paper'\nscore = 'l2'"),
    ),
    Refusal(
        "points --method online-paper",
        "`--memory` (a fixed-memory option)",
        "--memory is not used by --method online-paper; remove it",
        lambda p, a, t: points_args(p, t / "out", "--method", "online-paper", "--memory", "9"),
    ),
    Refusal(
        "points --method online-paper",
        "`--expected-n` (a fixed-memory option)",
        "--expected-n is not used by --method online-paper; remove it",
        lambda p, a, t: points_args(p, t / "out", "--method", "online-paper", "--expected-n", "9"),
    ),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[c.input for c in REFUSALS])
def test_refusals_are_one_line_and_write_nothing(
    case: Refusal, pts: Path, adult: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if case.prepare is not None:
        case.prepare(pts, adult, tmp_path)
    capsys.readouterr()
    before = snapshot(tmp_path)
    assert main(case.argv(pts, adult, tmp_path)) == 2
    line = error_line(capsys)
    assert line.startswith("dpstream ") and case.message in line, line
    assert snapshot(tmp_path) == before  # no file or directory written or changed


def snapshot(root: Path) -> dict[Path, bytes | None]:
    return {p: p.read_bytes() if p.is_file() else None for p in root.rglob("*")}


# ---------------------------------------------------------------------------- checkpoints


def test_the_fingerprint_covers_every_option_that_shapes_a_release(tmp_path: Path) -> None:
    """Every option of every command is fingerprinted unless it is listed as changing no
    release; changing any fingerprinted option changes the fingerprint."""
    parser = build_parser()
    for argv in (["points"], ["table"]):
        opts = cli_options.read_options(parser.parse_args(argv))
        canon = cli_options.run_options(opts, Fraction(1))
        # Options added later are fingerprinted only when set (old checkpoints match).
        unset = {k for k in cli_options.FINGERPRINTED_WHEN_SET if k in opts and opts[k] is None}
        assert set(opts) == set(canon) | (set(opts) & cli_options.NOT_FINGERPRINTED) | unset
        assert not unset & set(canon)
        assert "seed" in canon and "format" in canon
        assert ("policy" in canon) is (argv == ["table"])
        for key in canon:
            if key == "epsilon":
                continue
            value = opts[key]
            changed = not value if isinstance(value, bool) else f"{value}-other"
            assert cli_options.run_options({**opts, key: changed}, Fraction(1)) != canon, key
        for key in unset:  # set, they are fingerprinted
            assert cli_options.run_options({**opts, key: "1"}, Fraction(1)) != canon, key
    # A domain file is identified by its contents, not its name.
    domain = tmp_path / "d.json"
    domain.write_text('{"a": 2}')
    first = cli_options.run_options({"domain": domain}, Fraction(1))
    domain.write_text('{"a": 3}')
    assert cli_options.run_options({"domain": domain}, Fraction(1)) != first


def test_a_table_checkpoint_fingerprints_the_serialised_policy(
    adult: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fingerprint is the policy with every field: ``--policy adaptive`` and a TOML
    ``[policy]`` table of the same fields resume each other; another field is refused."""
    ckpt = ["--checkpoint", str(tmp_path / "c"), "--seed", "1"]
    same = tmp_path / "same.toml"
    same.write_text('[policy]\nname = "adaptive"\ngrowth = 2\n')
    other = tmp_path / "other.toml"
    other.write_text("[policy]\ngrowth = 3\n")
    assert main(table_args(adult, tmp_path / "out", *ckpt, "--policy", "adaptive")) == 0
    assert main(table_args(adult, tmp_path / "out", *ckpt, "--config", str(same))) == 0
    before = listing(tmp_path / "out")
    assert main(table_args(adult, tmp_path / "out", *ckpt, "--config", str(other))) == 2
    line = error_line(capsys)
    assert "was made by a run with different options (--policy: " in line
    assert '"growth": 2.0' in line and '"growth": 3.0' in line
    assert listing(tmp_path / "out") == before


def test_appended_rows_continue_the_online_run(pts: Path, tmp_path: Path) -> None:
    """The periodic rerun: a finished run whose input grew continues from its saved model
    (the new rows are cut into new batches after the consumed ones); nothing already
    released is rewritten."""
    frame = pd.read_csv(pts).iloc[:2500]  # the last batch is partial: 500 rows
    frame.to_csv(pts, index=False)
    out, ckpt = tmp_path / "out", tmp_path / "c"
    argv = points_args(pts, out, "--batch-size", "1000", "--seed", "7", "--checkpoint", str(ckpt))
    assert main(argv) == 0
    first = listing(out)
    assert sorted(first) == ["release-1.csv", "release-2.csv", "release-3.csv"]
    grown = pd.concat([frame, points_frame(1500, seed=5)])
    grown.to_csv(pts, index=False)
    assert main(argv) == 0
    now = listing(out)
    assert sorted(now) == [f"release-{i}.csv" for i in range(1, 6)]
    assert {k: now[k] for k in first} == first
    # The model went on: the release after batch 4 has all 3500 points, not 1000.
    assert len(pd.read_csv(out / "release-4.csv")) == 3500
    assert len(pd.read_csv(out / "release-5.csv")) == 4000
    # A rerun with nothing new changes nothing.
    assert main(argv) == 0 and listing(out) == now


def test_a_later_end_continues_a_monthly_run(pts: Path, tmp_path: Path) -> None:
    """Rows of a new month appended and --end moved on: one new release, from the saved
    model; every release equals an uninterrupted run's over the grown input."""
    assert main(_monthly(pts, tmp_path, "2024-03", "--seed", "4")) == 0
    first = listing(tmp_path / "out")
    _append_points(pts)
    assert main(_monthly(pts, tmp_path, "2024-04", "--seed", "4")) == 0
    now = listing(tmp_path / "out")
    assert sorted(now) == [f"release-2024-0{m}.csv" for m in (1, 2, 3, 4)]
    assert {k: now[k] for k in first} == first
    assert len(pd.read_csv(tmp_path / "out" / "release-2024-04.csv")) == 4000
    ref = tmp_path / "ref"
    ref.mkdir()
    argv = _monthly(pts, ref, "2024-04", "--seed", "4")
    assert main(argv) == 0
    assert listing(ref / "out") == now


def test_appended_rows_continue_the_table_run(adult: Path, tmp_path: Path) -> None:
    frame = pd.read_csv(adult)
    frame.iloc[:400].to_csv(adult, index=False)
    argv = table_args(adult, tmp_path / "out", "--seed", "2", "--checkpoint", str(tmp_path / "c"))
    assert main(argv) == 0
    first = listing(tmp_path / "out")
    frame.to_csv(adult, index=False)
    assert main(argv) == 0
    now = listing(tmp_path / "out")
    assert sorted(now) == ["release-1.csv", "release-2.csv", "release-3.csv"]
    assert {k: now[k] for k in first} == first


def test_a_finished_privhp_run_keeps_its_release(
    pts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Rows appended after PrivHP's one release are refused, never counted by a fresh
    model that would overwrite ``release-final``."""
    argv = privhp_args(pts, tmp_path / "out", "--batch-size", "1000")
    argv += ["--checkpoint", str(tmp_path / "c")]
    assert main(argv) == 0
    final = (tmp_path / "out" / "release-final.csv").read_bytes()
    assert main(argv) == 0  # the same input: nothing to do
    _append_points(pts)
    assert main(argv) == 2
    assert "finished one-shot run" in error_line(capsys)
    assert (tmp_path / "out" / "release-final.csv").read_bytes() == final


# ---------------------------------------------------------------------------- seeds


def test_privhp_with_a_seed_is_reproducible(pts: Path, tmp_path: Path) -> None:
    def release(name: str, seed: str, *extra: str) -> bytes:
        argv = privhp_args(pts, tmp_path / name, "--batch-size", "1000", "--seed", seed, *extra)
        assert main(argv) == 0
        return (tmp_path / name / "release-final.csv").read_bytes()

    first = release("a", "3")
    assert release("b", "3") == first
    assert release("c", "4") != first


def test_a_killed_seeded_privhp_run_resumes_to_the_same_release(pts: Path, tmp_path: Path) -> None:
    """Killed before its release: the resumed run's release equals an uninterrupted
    run's (the release noise depends on the seed only, not on when the run started)."""
    from test_cli import run

    def argv(name: str) -> list[str]:
        return privhp_args(
            pts, tmp_path / name, "--batch-size", "1000", "--seed", "3",
            "--checkpoint", str(tmp_path / f"{name}.ckpt"),
        )  # fmt: skip

    assert main(argv("ref")) == 0
    killed = run(*argv("out"), env={"DPSTREAM_FAULT": "before-checkpoint:2"})
    assert killed.returncode == 137
    assert not (tmp_path / "out" / "release-final.csv").exists()
    assert main(argv("out")) == 0
    ref = (tmp_path / "ref" / "release-final.csv").read_bytes()
    assert (tmp_path / "out" / "release-final.csv").read_bytes() == ref


# ---------------------------------------------------------------------------- help


def test_the_help_states_each_relation(capsys: pytest.CaptureFixture[str]) -> None:
    def help_text(command: str) -> str:
        with pytest.raises(SystemExit):
            main([command, "--help"])
        return re.sub(r"\s+", " ", capsys.readouterr().out)

    points = help_text("points")
    assert "--method online (and online-paper): one time step's point replaced" in points
    assert "With --time-column every release therefore publishes the exact count" in points
    assert "--method privhp: one record added or removed" in points
    assert "Release times must not depend on the data" in points
    table = help_text("table")
    assert "one record added to or removed from one batch (default)" in table
    assert "with --public-sizes: one record's values replaced, batch sizes public" in table
    for text in (points, table):
        assert "--out directory receives release files only" in text
        assert "NOT-PRIVATE-metrics.csv" in text


def test_public_sizes_reaches_the_stream(adult: Path, tmp_path: Path) -> None:
    """--public-sizes gives releases of exactly as many rows as records so far."""
    out = tmp_path / "out"
    assert main(table_args(adult, out, "--public-sizes", "--seed", "1")) == 0
    assert [len(pd.read_csv(out / f"release-{i}.csv")) for i in (1, 2, 3)] == [200, 400, 600]


def test_online_paper_runs_the_printed_algorithm(pts: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    args = points_args(pts, out, "--method", "online-paper", "--batch-size", "1000")
    assert main([*args, "--seed", "3"]) == 0
    releases = sorted(out.iterdir())
    assert releases and all(r.name.startswith("release-") for r in releases)
    again = tmp_path / "again"
    assert main([*points_args(pts, again, "--batch-size", "1000"), "--seed", "3"]) == 0
    # The default and the paper's algorithm give different releases on the same seed.
    assert (out / releases[-1].name).read_bytes() != (again / releases[-1].name).read_bytes()


def test_fixed_memory_online_runs_and_its_cap_binds_the_checkpoint(
    pts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, ckpt = tmp_path / "out", tmp_path / "run.ckpt"
    fixed = ("--memory", "1000000", "--expected-n", "3000", "--batch-size", "1000")
    args = points_args(pts, out, *fixed, "--checkpoint", str(ckpt))
    assert main(args) == 0
    assert sorted(p.name for p in out.iterdir())[0].startswith("release-")
    # More rows mean more periods than the cap R the run was built with: refused up front.
    grown = tmp_path / "grown.csv"
    text = pts.read_text()
    grown.write_text(text + "".join(text.splitlines(keepends=True)[1:1001]))
    capsys.readouterr()
    before = sorted(p.name for p in out.iterdir())
    again = points_args(grown, out, *fixed, "--checkpoint", str(ckpt))
    assert main(again) == 2
    assert "--max-releases" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == before


def test_a_format_2_checkpoint_is_upgraded_on_its_file(
    pts: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before issue 30's multiset digest (format 2) a checkpoint hashed the consumed
    rows' bytes in input order. A pandas run's is checked with that hash on its file
    and continues in format 3 (the releases of an uninterrupted run); a partitioned
    run's (its digest depended on the partitions) is refused with a clear message."""
    data = pd.read_csv(pts)
    data.iloc[:2000].to_csv(tmp_path / "first.csv", index=False)
    ckpt = tmp_path / "c"
    first = points_args(tmp_path / "first.csv", tmp_path / "out", "--batch-size", "1000")
    _ran([*first, "--checkpoint", str(ckpt), "--seed", "5"])
    header, state, pending = runs._decode_checkpoint(ckpt)
    consumed = data.iloc[:2000][["x", "y"]].to_numpy(dtype="<f8").tobytes()
    header["input_sha256"] = hashlib.sha256(consumed).hexdigest()
    old = runs._MAGIC_V2 + runs._encode_checkpoint(header, state, pending)[len(runs._MAGIC) :]
    ckpt.write_bytes(old)
    rest = points_args(pts, tmp_path / "out", "--batch-size", "1000", "--seed", "5")
    _ran([*rest, "--checkpoint", str(ckpt)])
    assert ckpt.read_bytes().startswith(runs._MAGIC)
    _ran(points_args(pts, tmp_path / "ref", "--batch-size", "1000", "--seed", "5"))
    assert listing(tmp_path / "out") == listing(tmp_path / "ref")
    # A consumed row changed: the old hash says so.
    header["input_sha256"] = hashlib.sha256(consumed[:-1] + b"\x01").hexdigest()
    ckpt.write_bytes(
        runs._MAGIC_V2 + runs._encode_checkpoint(header, state, pending)[len(runs._MAGIC) :]
    )
    capsys.readouterr()
    assert main([*rest, "--checkpoint", str(ckpt)]) == 2
    assert "the input changed: its rows in the first 2 batches" in error_line(capsys)
    # A partitioned run's format-2 checkpoint.
    header["options"]["input_digest"] = "partitions"
    ckpt.write_bytes(
        runs._MAGIC_V2 + runs._encode_checkpoint(header, state, pending)[len(runs._MAGIC) :]
    )
    assert main([*rest, "--checkpoint", str(ckpt)]) == 2
    assert "whose digest of a partitioned input depended on its partitions" in error_line(capsys)

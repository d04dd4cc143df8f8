"""benches/bench_highdim.py, run through its command line on tiny inputs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benches" / "bench_highdim.py"


def test_quick_run_writes_its_section_and_per_setting_outputs(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# results\n\n## Another section\n\nkept\n")
    out = tmp_path / "out"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--results", str(results), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    text = results.read_text()
    assert "## Another section\n\nkept" in text  # other sections stay
    assert "## High-dimensional tabular streams (issue 31)" in text
    assert "benches/bench_highdim.py --quick`" in text  # the rerun command
    rows = [ln for ln in text.splitlines() if ln.startswith(("| 6 | 15 |", "| 8 | 28 |"))]
    assert len(rows) == 2
    assert rows[0].startswith("| 6 | 15 |") and rows[1].startswith("| 8 | 28 |")
    # the feasibility comparison: 8 columns, 2 random models, no fit over its bound
    agree = [ln for ln in text.splitlines() if ln.startswith("| 8 | 2 |")]
    assert len(agree) == 1 and agree[0].endswith("| 0 |")
    for d, workloads in ((6, 15), (8, 28)):
        r = json.loads((out / f"columns-{d}-steps-2.json").read_text())
        assert r["workloads"] == workloads and len(r["seconds"]) == 2
        assert 0 < r["avg_we"] <= r["max_we"] <= 2
        assert 0 < r["independent_avg_we"] <= r["independent_max_we"]
        assert r["tree_cells"] <= 200_000 and 1 <= r["measured_workloads"] <= workloads
        assert r["peak_rss_mb"] > 0


def test_no_write_prints_the_section(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--columns", "5", "--steps", "1", "--no-write",
         "--out", str(tmp_path)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert run.stdout.startswith("## High-dimensional tabular streams (issue 31)")
    assert "| 5 | 10 |" in run.stdout
    assert (tmp_path / "columns-5-steps-1.json").exists()
    # 10 workloads, all scored by the default bound: one run, no comparison
    assert "Scoring" not in run.stdout and "max_scored=500: whole step" in run.stdout
    assert not (tmp_path / "columns-5-steps-1-all.json").exists()


def test_a_bound_below_the_workloads_runs_every_size_both_ways(tmp_path: Path) -> None:
    """--max-scored 10 at 6 columns (15 workloads): a second run scoring all of them, the
    accuracy of both side by side, and the per-block medians of both runs."""
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--columns", "6", "--steps", "3",
         "--max-scored", "10", "--no-write", "--out", str(tmp_path)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    text = run.stdout
    assert "--max-scored 10" in text  # the rerun command
    assert "### Scoring 10 workloads per step against scoring all" in text
    both = [ln for ln in text.splitlines() if ln.startswith("| 6 | 15 | 0.") and "×) |" in ln]
    assert len(both) == 2  # the main table, and the two runs side by side
    assert both[1].count(" / ") == 6  # AvgWE, MaxWE, seconds twice, measured, cells
    bounded = json.loads((tmp_path / "columns-6-steps-3.json").read_text())
    every = json.loads((tmp_path / "columns-6-steps-3-all.json").read_text())
    assert bounded["max_scored"] == 10 and every["max_scored"] is None
    for r in (bounded, every):
        assert len(r["seconds"]) == len(r["release_seconds"]) == 3
        assert all(0 <= b <= a for a, b in zip(r["seconds"], r["release_seconds"], strict=True))
        assert len(r["block_cells"]) == 1 and r["block_cells"][0] == r["tree_cells"]
    blocks = [ln for ln in text.splitlines() if ln.startswith("| 6 | max_scored=")]
    assert [ln.split(" | ")[1] for ln in blocks] == [
        f"max_scored={m}: {what}"
        for m in ("10", "all")
        for what in ("whole step", "model work", "model cells")
    ]
    assert "median step / the smallest size's: 6: 1.0×" in run.stderr


def test_the_fit_timing_reports_where_mbi_does_not_run(tmp_path: Path) -> None:
    """--mbi with this interpreter (no mbi here): the built-in fit is timed on the last
    fit's measurements, and mbi's row says why it did not run."""
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--columns", "5", "--steps", "2", "--no-write",
         "--out", str(tmp_path), "--mbi", sys.executable],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert "### One fit on the same measurements" in run.stdout
    row = [ln for ln in run.stdout.splitlines() if ln.startswith("| 5 | ") and "did not" in ln]
    assert len(row) == 1 and "not installed" in row[0]
    assert (tmp_path / "fit-5-steps-2.npz").exists()

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
    assert "## High-dimensional tabular stream" in text
    assert "benches/bench_highdim.py --quick`" in text  # the rerun command
    rows = [ln for ln in text.splitlines() if ln.startswith(("| 6 | 15 |", "| 8 | 28 |"))]
    assert len(rows) == 2
    assert rows[0].startswith("| 6 | 15 |") and rows[1].startswith("| 8 | 28 |")
    # the feasibility comparison (in the details file): 8 columns, 2 random models, no fit
    # over its bound
    assert "### The feasibility rule" not in text
    details = (tmp_path / "out" / "bench_highdim.md").read_text()
    agree = [ln for ln in details.splitlines() if ln.startswith("| 8 | 2 |")]
    assert len(agree) == 1 and agree[0].endswith("| 0 |")
    for d, workloads in ((6, 15), (8, 28)):
        r = json.loads((out / f"columns-{d}-steps-2.json").read_text())
        assert r["workloads"] == workloads and len(r["seconds"]) == 2
        assert 0 < r["avg_we"] <= r["max_we"] <= 2
        assert 0 < r["independent_avg_we"] <= r["independent_max_we"]
        assert 0 < r["avg_tv"] <= r["max_tv"] <= 1
        assert len(r["seconds"]) == len(r["release_seconds"]) == 2
        assert all(0 <= b <= a for a, b in zip(r["seconds"], r["release_seconds"], strict=True))
        assert r["epochs"] >= 1 and r["peak_rss_mb"] > 0


def test_no_write_prints_the_section(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--columns", "5", "--steps", "1", "--no-write",
         "--out", str(tmp_path)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    assert run.stdout.startswith("## High-dimensional tabular stream\n")
    assert "| 5 | 10 |" in run.stdout
    assert (tmp_path / "columns-5-steps-1.json").exists()
    blocks = [ln for ln in run.stdout.splitlines() if ln.startswith("| 5 | ") and "step" in ln]
    assert [ln.split(" | ")[1] for ln in blocks] == ["whole step"]
    assert "| 5 | model work |" in run.stdout

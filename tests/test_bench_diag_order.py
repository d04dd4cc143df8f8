"""benches/diag_tabular_order.py, run through its command line on tiny inputs (it checks the
stream orders and their seeds itself before running)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_bench

TITLE = "## Tabular stream: which order is the paper's Adult-ordered? (issue 5)"


def test_quick_run_writes_its_summary_and_per_setting_table(tmp_path: Path) -> None:
    results = tmp_path / "RESULTS.md"
    results.write_text("# results\n\n## Another section\n\nkept\n")
    done = run_bench(
        "diag_tabular_order.py",
        "--quick",
        "--steps",
        "2",
        "--workers",
        "1",
        "--results",
        str(results),
    )
    assert done.returncode == 0, done.stderr
    text = results.read_text()
    assert "## Another section\n\nkept" in text and TITLE in text
    assert "### Summary" in text and "- Reading:" in text
    assert "### Results" not in text and "### Per-setting tables" in text
    details = (tmp_path / "out" / "diag_tabular_order.md").read_text()
    assert details.startswith(TITLE) and "### Results" in details
    # One row per batch size (50, 200), ε (0.5, 1, 2, 4) and metric (4).
    rows = [ln for ln in details.splitlines() if ln.startswith(("| 50 ", "| 200 "))]
    assert len(rows) == 2 * 4 * 4
    # Only the file-order streams ran: the sorted and randomized columns are empty.
    assert all(ln.split("|")[4].strip() == "–" for ln in rows)

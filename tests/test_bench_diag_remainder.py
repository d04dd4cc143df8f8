"""benches/diag_tabular_remainder.py, run through its command line on tiny inputs. Before it
measures, the script checks its oracle: raking fits the margins and keeps the odds ratios, the
"algorithm 3" variant is the library step for step, and the oracle remainder is the exact
marginal of the unselected rows."""

from __future__ import annotations

from conftest import run_bench

VARIANTS = ("algorithm 3", "oracle remainder", "oracle margins", "oracle association")


def test_quick_run_checks_its_oracle_and_reports_every_variant() -> None:
    done = run_bench(
        "diag_tabular_remainder.py", "--quick", "--steps", "2", "--workers", "1", "--no-write"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("self-check passed")
    section = done.stdout.split("## Tabular stream: what the remainder costs (issue 5)", 1)[1]
    assert "--quick: the first 2 steps only" in section
    results = section.split("### Results", 1)[1]
    rows = [ln for ln in results.splitlines() if ln.startswith("| Adult-")]
    for variant in VARIANTS:
        assert any(f"| {variant} |" in ln for ln in rows), variant
    assert len([ln for ln in rows if "| algorithm 3 |" in ln]) == 4  # one per setting

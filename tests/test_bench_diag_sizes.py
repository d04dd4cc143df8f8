"""benches/diag_tabular_sizes.py, run through its command line on tiny inputs (it checks the
variants' options and that the stored streams' sizes are public sizes at 2ε before running)."""

from __future__ import annotations

from conftest import run_bench


def test_quick_run_has_both_variants_and_the_size_error() -> None:
    done = run_bench(
        "diag_tabular_sizes.py", "--quick", "--steps", "2", "--workers", "1", "--no-write"
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("## Tabular stream: what the noisy size costs (issue 28)")
    rows = [ln for ln in text.splitlines() if ln.startswith("| Adult-")]
    noisy = [ln for ln in rows if "| add/remove | " in ln and "%" in ln]
    public = [ln for ln in rows if "| public sizes | exact |" in ln]
    assert len(noisy) == len(public) == 4  # per stream: 3 ε shuffled, 1 sorted
    assert all(" → " in ln for ln in noisy + public)

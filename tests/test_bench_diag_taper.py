"""benches/diag_tabular_taper.py, run through its command line on tiny inputs (it checks that
the default is the taper schedule and the fixed one differs in it alone before running)."""

from __future__ import annotations

import re

from conftest import run_bench

STEPS = 3


def test_the_taper_shares_the_fixed_schedules_draws_before_it_acts() -> None:
    done = run_bench(
        "diag_tabular_taper.py", "--quick", "--steps", str(STEPS), "--workers", "1", "--no-write"
    )
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith("## Tabular stream: where the taper acts (issue 5)")
    results = text.split("### Results", 1)[1].split("### Summary", 1)[0]
    rows = [ln for ln in results.splitlines() if ln.startswith("| Adult-")]
    assert len(rows) == 2 * 4  # both orders, every ε, one run each
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        # Before step 3W the schedules agree: 2 or 3 selections a step, never 1 ...
        k1, k2, k3 = (int(v) for v in cells[3].split(" / "))
        assert k1 == 0 and k2 + k3 == STEPS
        # ... and on the same seed the two streams are the same: fixed → taper equal.
        pairs = [re.fullmatch(r"(\S+) → (\S+)", c) for c in cells[5:]]
        assert all(p is not None and p[1] == p[2] for p in pairs), row

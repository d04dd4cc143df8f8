"""benches/diag_tabular_taper.py: the two k schedules on the same seeds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
bt = pytest.importorskip("bench_tabular")
diag = pytest.importorskip("diag_tabular_taper")

STEPS = 3


def _job(order: str = "randomized", eps: float = 1.0) -> object:
    return bt.Job(order, diag.BATCH, eps, diag.FIXED, "simple", 0, STEPS)


def test_the_taper_shares_the_fixed_schedules_draws_before_it_acts() -> None:
    # Before step 3W the schedules agree, so on the same seed the streams are equal.
    out = diag.run((_job(), False))
    assert out.taper == out.fixed and not out.reused
    assert len(out.ks) == STEPS and set(out.ks) <= {2, 3}
    # The options hook keeps the job's seed: the fixed options give the stored method's stream.
    same = bt.run_job(_job(), options=bt.method_options(diag.FIXED))
    assert tuple(float(v) for v in same.last) == out.fixed


def test_the_default_is_the_taper_and_the_fixed_schedule_is_the_other() -> None:
    assert bt.DEFAULT == diag.TAPER
    assert bt.method_options(diag.TAPER)["k_schedule"] == "taper"
    assert bt.method_options(diag.FIXED)["k_schedule"] == "fixed"
    others = {k: v for k, v in bt.method_options(diag.TAPER).items() if k != "k_schedule"}
    assert others == {k: v for k, v in bt.method_options(diag.FIXED).items() if k != "k_schedule"}


def test_render_counts_the_steps_and_the_paired_wins() -> None:
    w = 91
    start = 3 * w
    ks = (2,) * start + (1,) * 30 + (2,) * 10  # 30 of the 40 late steps at k = 1
    outcomes = [
        diag.Outcome(_job(order, eps), ks, (0.9,) * 6, (1.0,) * 6, True)  # type: ignore[arg-type]
        for order in diag.RUNS
        for eps in bt.EPSILONS
    ]
    text = diag.render(outcomes, 60.0, "cmd", 2)
    assert text.startswith(diag.SECTION_TITLE)
    assert "| 30 / 283 / 0 | 75% |" in text
    assert "1.00 → 0.900 (0.900×; 1/1)" in text
    rows = [ln for ln in text.splitlines() if ln.startswith("| Adult-")]
    assert len(rows) == 2 * len(outcomes)  # one per stream, one per setting in the summary

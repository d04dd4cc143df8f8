"""benches/diag_paper_thresholds.py, run through its command line on a tiny horizon (the
thresholds and levels checked against values computed by hand)."""

from __future__ import annotations

from conftest import run_bench


def test_levels_of_a_small_horizon() -> None:
    done = run_bench("diag_paper_thresholds.py", "--epsilon", "128", "4", "--steps", "15")
    assert done.returncode == 0, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("| 128 |")]
    # ε = 128: t_r = ⌈2^r/128⌉ is 1 up to r = 7, then 2, 4, 8: levels 7 (H = 1), 8 (2),
    # 9 (4) and 10 (steps 8–15); ε_r = C_1·128 ≈ 10.183 for every depth-r cell, and
    # T_0 = ⌊18 ln H / ε_r⌋ = 0, 1, 2, 3.
    assert [r.split(" | ")[1:6] for r in rows] == [
        ["7", "1", "1", "10.183", "0"],
        ["8", "2", "2", "10.183", "1"],
        ["9", "4", "4", "10.183", "2"],
        ["10", "8", "8", "10.183", "3"],
    ]
    # One cell crosses from level 9 (2 ≤ 4 − 2), a sibling pair from level 10 (2·3 + 2 ≤ 8).
    assert rows[2].split(" | ")[6:8] == ["yes", "no"]
    assert rows[3].split(" | ")[6:8] == ["yes", "yes"]
    assert rows[3].endswith("| 6.364 |")  # (ε_r/2)(1 + 1/4): the audited pair's loss
    assert "ε = 128: thresholds crossed by one cell from level 9 (t = 4..7, T_0 = 2); " in (
        done.stdout
    )
    # ε = 4 reaches no threshold by t = 15 (its level ε is 0.318: T_0 ≥ 39 for H ≥ 2).
    assert "ε = 4: thresholds crossed by one cell never by T; a sibling pair never by T" in (
        done.stdout
    )


def test_refuses_dimension_one() -> None:
    done = run_bench("diag_paper_thresholds.py", "--dim", "1")
    assert done.returncode != 0 and "--dim" in done.stderr

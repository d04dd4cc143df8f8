"""benches/diag_audit_tails.py: the tail scan behind the sharp online audits' events."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BENCHES = Path(__file__).resolve().parents[1] / "benches"
sys.path.insert(0, str(BENCHES))
diag = pytest.importorskip("diag_audit_tails")


def test_tails_count_each_side_in_its_favoured_direction() -> None:
    da = np.array([3.0, 2.0, 0.0, np.nan])
    db = np.array([0.0, -2.0, -3.0, 1.0])
    rows = diag.tails(da, db, range(2, 3))
    assert [r[:3] for r in rows] == [("D >= 2", 2, 0), ("D <= -2", 2, 0)]
    assert all(np.isnan(r[3]) and r[4] < 0 for r in rows)  # no ratio from empty tails


@pytest.mark.parametrize(
    ("method", "header"),
    [
        ("epochs", "## online epochs: level-6 pair: pair loss 1.0000"),
        ("privhp", "## online privhp (for_memory): level-8 pair: pair loss 1.1716"),
        ("paper-threshold", "## online paper: threshold-crossing depth-10 pair: pair loss 6.3641"),
    ],
)
def test_command_line_on_a_tiny_run(method: str, header: str) -> None:
    out = subprocess.run(
        [
            sys.executable,
            str(BENCHES / "diag_audit_tails.py"),
            method,
            "--runs",
            "50",
            "--max-cut",
            "1",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.startswith(header)
    assert "| D >= 1 |" in out and "| D <= -1 |" in out


def test_planted_factor_needs_the_planted_build() -> None:
    if diag._core.__dict__.get("_planted_set_epsilon_factor") is not None:
        pytest.skip("the planted-bugs extension is imported")
    with pytest.raises(SystemExit):
        diag.main(["paper", "--runs", "1", "--planted", "2"])

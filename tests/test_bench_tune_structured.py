"""benches/tune_online_structured.py: the generator's two orders hold the same points, and the
command line runs on a tiny stream."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
from conftest import run_bench

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import tune_online_structured as tune


def test_orders_hold_the_same_points_in_the_cube() -> None:
    a = tune.structured(5_000, 2, 3, "shuffled")
    b = tune.structured(5_000, 2, 3, "regions")
    assert a.shape == b.shape == (5_000, 2)
    assert a.min() >= 0.0 and a.max() <= 1.0
    assert np.array_equal(np.unique(a, axis=0), np.unique(b, axis=0))
    assert not np.array_equal(a, b)


def test_command_line_prints_both_orders() -> None:
    done = run_bench("tune_online_structured.py", "--seeds", "1", "--n", "3000", "--releases", "10")
    assert done.returncode == 0, done.stderr
    ratios = re.findall(r"final/floor (\d+\.\d+), worst/naive (\d+\.\d+)", done.stdout)
    assert "tuning shuffled" in done.stdout and "tuning regions" in done.stdout
    assert len(ratios) == 2 and all(float(x) > 0 for pair in ratios for x in pair)

"""benches/diag_tabular_order.py and the stream orders of benches/bench_tabular.py."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
bt = pytest.importorskip("bench_tabular")
diag = pytest.importorskip("diag_tabular_order")

CODES = np.array([[2, 1], [0, 3], [1, 0], [0, 1], [2, 0]], dtype=np.int64)


def test_orders_of_the_stream() -> None:
    # File order: the rows as given (a copy, so a caller cannot change the data).
    rows = bt.stream_rows(CODES, "file-order", 0)
    np.testing.assert_array_equal(rows, CODES)
    assert rows is not CODES
    # Sorted: lexicographic by all columns, the first column first.
    np.testing.assert_array_equal(
        bt.stream_rows(CODES, "ordered", 0), [[0, 1], [0, 3], [1, 0], [2, 0], [2, 1]]
    )
    # Randomized: a permutation of the rows, fixed by the run.
    r0, r1 = bt.stream_rows(CODES, "randomized", 0), bt.stream_rows(CODES, "randomized", 1)
    assert sorted(map(tuple, r0)) == sorted(map(tuple, CODES))
    np.testing.assert_array_equal(r0, bt.stream_rows(CODES, "randomized", 0))
    assert not np.array_equal(r0, r1)
    with pytest.raises(ValueError, match="unknown order 'sorted'"):
        bt.stream_rows(CODES, "sorted", 0)


def test_the_grids_keep_their_seeds() -> None:
    # A new order must not shift the seeds (hence the stored streams) of the existing ones.
    assert bt.ALL_ORDERS[: len(bt.ORDERS)] == bt.ORDERS == ("randomized", "ordered")
    assert all(j.order in bt.ORDERS for g in bt.GRIDS.values() for j in g.jobs)


def _result(order: str, batch: int, eps: float, value: float, run: int) -> bt.Result:
    row = [value] * len(bt.METRICS)
    job = bt.Job(order, batch, eps, bt.DEFAULT, "simple", run)
    return bt.Result(job, 20, 1000, [19, 20], [row, row], [row, row], 1.0, 1.0, 0.0)


def test_render_reads_the_ratios() -> None:
    # Sorted streams three times the randomized error, file order equal to it.
    results = [
        _result(order, b, e, 0.002 * (1 + r) * factor, r)
        for b in diag.BATCHES
        for e in bt.EPSILONS
        for r in range(2)
        for order, factor in (("randomized", 1.0), ("ordered", 3.0), ("file-order", 1.0))
    ]
    text = diag.render(results, 60.0, "cmd", 2)
    assert text.startswith(diag.SECTION_TITLE)
    assert "Ours on the sorted stream / randomized: median 3.00" in text
    assert "Ours in file order / randomized: median 1.00" in text
    assert "evidence, not proof" in text
    # One table row per batch size, ε and metric.
    rows = [ln for ln in text.splitlines() if ln.startswith("| 50 ") or ln.startswith("| 200 ")]
    assert len(rows) == len(diag.BATCHES) * len(bt.EPSILONS) * len(diag.METRICS)


def test_reading_is_neutral_when_the_ratios_do_not_separate() -> None:
    assert "do not single out" in diag.reading([1.0, 1.02], [1.05, 1.1], [0.98, 1.0])
    assert "no reading" in diag.reading([1.0], [float("nan")], [1.0])
    assert "evidence" in diag.reading([1.0, 0.97], [2.5, 3.0], [1.01, 0.99])

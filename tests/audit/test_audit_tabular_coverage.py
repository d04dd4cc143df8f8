"""Audit of ``Adaptive(coverage=True)``'s counter of one-way margins (issue 29).

Neighbouring streams differ by one record added to the first batch (add/remove). A record
moves one cell of each covered column's margin, an ℓ1 change of ``d``; the stream gives the
counter ``ε·COVERAGE_SHARE / d`` (``Budget.coverage_counter_epsilon``), so its release is
``ε·COVERAGE_SHARE``-DP. The mechanism audited is that counter (the kind and ε a stream with
coverage builds) fed the batch's one-way margins (``raking.one_way``, as ``Coverage.step``),
reduced to the sum of the two changed cells (post-processing). Many runs at once: the
counter's dimension is the runs times the margins' cells.
"""

from __future__ import annotations

from fractions import Fraction

import dpstream
import numpy as np
from dpstream.counters import Counter
from dpstream.tabular import Adaptive, Domain, TabularStream
from dpstream.tabular.raking import one_way
from dpstream.tabular.selection import COVERAGE_SHARE

SHAPE = (2, 3)  # one workload over columns a (2 values) and b (3 values)


def _coverage_mechanism(stream_epsilon: Fraction, factor: int = 1):
    """The coverage counter of a stream with ``Adaptive(coverage=True)``, many runs at once;
    ``factor`` multiplies its ε (the planted bug)."""
    probe = TabularStream(
        Domain({"a": SHAPE[0], "b": SHAPE[1]}), stream_epsilon,
        policy=Adaptive(coverage=True), rng=dpstream.Rng(seed=0),
    )  # fmt: skip
    coverage = probe._coverage
    assert coverage is not None and coverage.columns == [0, 1]
    kind, eps = coverage.counter.kind, coverage.counter.epsilon * factor
    cells = sum(SHAPE)

    def mechanism(histogram: np.ndarray, rng: dpstream.Rng, size: int) -> np.ndarray:
        table = histogram.reshape(SHAPE)
        margins = np.concatenate([one_way(table, 0), one_way(table, 1)]).astype(np.int64)
        c = Counter(kind, eps, size * cells, rng=rng)
        released = c.step(np.tile(margins, size)).reshape(size, cells)
        return released[:, 0] + released[:, SHAPE[0]]  # cells a = 0 and b = 0

    return mechanism


def test_audit_of_the_coverage_margins(audited) -> None:  # type: ignore[no-untyped-def]
    """ε = 10: the coverage counter's release is ε·COVERAGE_SHARE = 1-DP; one record at
    (a, b) = (0, 0). The audit gets close to it, and a counter given twice its ε is caught."""
    batch = np.array([5, 3, 2, 4, 1, 6], dtype=np.int64)
    other = batch.copy()
    other[0] += 1
    eps = Fraction(10)
    share = float(eps * COVERAGE_SHARE)
    result = audited(
        "tabular coverage margins, ε_coverage = 1",
        _coverage_mechanism(eps),
        (batch, other),
        epsilon=share,
        runs=300_000,
        seed=30,
        batch_size=150_000,
    )
    assert result.passed, result
    assert result.lower_bound >= 0.5 * share, result
    bug = audited(
        "tabular coverage margins at twice their ε (planted bug)",
        _coverage_mechanism(eps, factor=2),
        (batch, other),
        epsilon=share,
        runs=300_000,
        seed=31,
        batch_size=150_000,
    )
    assert not bug.passed, bug

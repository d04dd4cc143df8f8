"""Audit of the table size that ``TabularStream(policy=Paper())`` (and ``Baseline()``)
releases (issue 28).

Neighbouring streams differ by one record added to one step (add/remove, the default
relation). The mechanism audited is the stream's size release: its size counter (the kind
and ε a ``Paper()`` stream builds) and ``released_size`` (the running maximum of an insert-only
stream), reduced to the released sizes and their changes (post-processing). Many runs at
once: a counter of ``dim = size`` is ``size`` independent runs of the scalar counter.
"""

from __future__ import annotations

from fractions import Fraction

import dpstream
import numpy as np
from dpstream.counters import Counter
from dpstream.tabular import Domain, Paper, TabularStream, table_size
from dpstream.tabular.stream import SIZE_SHARE


def _size_mechanism(stream_epsilon: Fraction, steps: int, claimed_share: Fraction | None = None):
    """The released sizes of a ``Paper()`` TabularStream, many runs at once: its size counter's
    kind and ε (read from a stream), ``released_size`` as in ``step`` (insert-only), the
    released sizes and their changes (post-processing). ``claimed_share`` builds the
    counter with another ε (the planted bug)."""
    d = Domain({"a": 3, "b": 2})
    probe = TabularStream(d, stream_epsilon, policy=Paper(), rng=dpstream.Rng(seed=0))
    assert probe._size_counter is not None
    kind = probe._size_counter.kind
    eps = probe._size_counter.epsilon if claimed_share is None else stream_epsilon * claimed_share

    def mechanism(nets: np.ndarray, rng: dpstream.Rng, size: int) -> np.ndarray:
        c = Counter(kind, eps, size, rng=rng)
        released = np.zeros(size, dtype=np.int64)
        out = []
        for t in range(steps):
            raw = c.step(np.full(size, nets[t], dtype=np.int64))
            new = table_size.released_size(released, raw, monotone=True)
            out += [new, new - released]
            released = new
        return np.column_stack(out)

    return mechanism


def test_audit_of_the_released_size(audited) -> None:  # type: ignore[no-untyped-def]
    """Neighbours: one record added to step 2 of 4 (batches of 50). The released sizes are
    ε·SIZE_SHARE-DP (ε = 20: the size counter has ε = 1); the audit gets close to it, and a
    size counter given twice its share is caught."""
    nets = np.array([50, 50, 50, 50], dtype=np.int64)
    other = nets.copy()
    other[1] += 1
    eps = Fraction(20)
    share = eps * SIZE_SHARE
    result = audited(
        "tabular released size, ε_size = 1",
        _size_mechanism(eps, 4),
        (nets, other),
        epsilon=float(share),
        runs=300_000,
        seed=28,
        batch_size=150_000,
    )
    assert result.passed, result
    assert result.lower_bound >= 0.5 * float(share), result
    bug = audited(
        "tabular released size with twice its share (planted bug)",
        _size_mechanism(eps, 4, claimed_share=2 * SIZE_SHARE),
        (nets, other),
        epsilon=float(share),
        runs=300_000,
        seed=29,
        batch_size=150_000,
    )
    assert not bug.passed, bug

"""SegmentHistory: a counter's increments in time order and the time-local extrapolation of
``TabularStream(remainder="local")``, against a plain reference written from the definition."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from dpstream.tabular.history import MAX_SEGMENTS, SegmentHistory
from hypothesis import given, settings
from hypothesis import strategies as st


def reference_window(y: list[list[Fraction]], b: list[int]) -> int:
    """Leave-one-out: predict segment i from its k nearest other segments (a contiguous run
    of k + 1 segments holding i, as centred as the ends allow), for k in 1, 2, 4, 8, 16
    below n − 1 and k = n − 1 (the whole history); the window is k + 1, larger on ties."""
    n = len(b)
    if n <= 2:
        return n
    ks = [k for k in (1, 2, 4, 8, 16) if k < n - 1] + [n - 1]
    best: tuple[Fraction, int] | None = None
    for k in ks:
        err = Fraction(0)
        for i in range(n):
            lo = min(max(i - k // 2, 0), n - k - 1)
            others = [m for m in range(lo, lo + k + 1) if m != i]
            sb = sum(b[m] for m in others)
            for c in range(len(y[i])):
                pred = Fraction(b[i], sb) * sum(y[m][c] for m in others) if sb > 0 else 0
                err += (y[i][c] - pred) ** 2
        window = n if k == n - 1 else k + 1
        if best is None or err < best[0] or (err == best[0] and window > best[1]):
            best = (err, window)
    assert best is not None
    return best[1]


def reference_coefficients(b: list[int], gaps: list[int], tail: int, k: int) -> list[Fraction]:
    """Each segment stands for the rows of half of each neighbouring gap (all of the first
    gap, and the tail), estimated per row from the k segments around it."""
    n = len(b)
    share = [Fraction(0)] * n
    share[0] += gaps[0]
    for i in range(1, n):
        share[i - 1] += Fraction(gaps[i], 2)
        share[i] += Fraction(gaps[i], 2)
    share[-1] += tail
    a = [Fraction(0)] * n
    for i in range(n):
        lo = min(max(i - (k - 1) // 2, 0), n - k)
        sb = sum(b[lo : lo + k])
        for m in range(lo, lo + k):
            a[m] += share[i] / sb
    return a


segments = st.lists(
    st.tuples(
        st.lists(st.integers(0, 60), min_size=3, max_size=3),  # increment (counts)
        st.integers(1, 80),  # rows counted
        st.integers(0, 500),  # rows not counted before it
    ),
    min_size=1,
    max_size=12,
)


def build(segs: list[tuple[list[int], int, int]]) -> SegmentHistory:
    h = SegmentHistory(3)
    size = 0
    for inc, rows, gap in segs:
        size += gap
        h.add(np.array(inc, dtype=np.float64), rows, size)
        size += rows
    return h


@settings(max_examples=80, deadline=None)
@given(segments, st.integers(0, 300))
def test_window_and_coefficients_match_the_reference(
    segs: list[tuple[list[int], int, int]], tail: int
) -> None:
    h = build(segs)
    assert len(h) == len(segs) <= MAX_SEGMENTS
    y = [[Fraction(v) for v in inc] for inc, _, _ in segs]
    b = [rows for _, rows, _ in segs]
    gaps = [gap for _, _, gap in segs]
    k = reference_window(y, b)
    assert h.window() == k
    size = h.covered + tail
    got = h.coefficients(size)
    want = reference_coefficients(b, gaps, tail, k)
    np.testing.assert_allclose(got, [float(v) for v in want], rtol=1e-12, atol=1e-12)
    # The estimate stands for exactly the rows not counted.
    assert float(np.dot(got, h.rows)) == pytest.approx(size - sum(b), rel=1e-12, abs=1e-9)


@given(segments)
def test_the_whole_history_is_the_pooled_estimate(segs: list[tuple[list[int], int, int]]) -> None:
    h = build(segs)
    size = h.covered + 17
    a = h.coefficients(size, window=len(h))
    rest, counted = size - int(h.rows.sum()), int(h.rows.sum())
    np.testing.assert_allclose(a, rest / counted, rtol=1e-12)


def test_a_stream_without_drift_uses_the_whole_history_and_a_sorted_one_a_short_window() -> None:
    g = np.random.default_rng(3)
    steady, drifting = SegmentHistory(4), SegmentHistory(4)
    for t in range(20):
        p = np.array([0.4, 0.3, 0.2, 0.1])
        steady.add(200 * p, 200, 600 * t)  # exactly proportional: every window predicts it
        q = np.roll(p, t // 5)  # the distribution moves every 5 selections
        drifting.add(200 * q + g.normal(0, 1, 4), 200, 600 * t)
    assert steady.window() == 20
    assert drifting.window() < 20


def test_merging_keeps_the_sums_and_bounds_the_segments() -> None:
    g = np.random.default_rng(5)
    h = SegmentHistory(2)
    size, total = 0, np.zeros(2)
    for _ in range(3 * MAX_SEGMENTS):
        gap, rows = int(g.integers(0, 100)), int(g.integers(1, 50))
        inc = g.integers(0, 30, 2).astype(np.float64)
        size += gap
        h.add(inc, rows, size)
        size += rows
        total += inc
    assert len(h) == MAX_SEGMENTS
    np.testing.assert_allclose(h.increments.sum(axis=0), total)
    assert int(h.noise_units.sum()) == 3 * MAX_SEGMENTS
    assert int(h.rows.sum() + h.inner.sum() + h.gaps.sum()) == h.covered == size
    back = SegmentHistory.from_arrays(
        2, **{k.split("_", 1)[1]: v for k, v in h.to_arrays("x").items()}
    )
    np.testing.assert_array_equal(back.increments, h.increments)
    assert back.covered == h.covered and np.array_equal(back.gaps, h.gaps)
    with pytest.raises(ValueError):
        SegmentHistory.from_arrays(3, h.increments, np.zeros((len(h), 4), np.int64), np.array([1]))


def test_on_a_drifting_stream_the_local_estimate_is_closer_than_the_pooled_one() -> None:
    """A stream whose distribution moves steadily (a table arriving sorted), a workload selected
    at a random 30% of the steps, little noise: the rows not counted, estimated from the
    segments around them, against all counted rows alike (the pooled estimate)."""
    g = np.random.default_rng(11)
    h = SegmentHistory(2)
    missed = np.zeros(2)
    size = 0
    for t in range(120):
        p = 0.1 + 0.8 * t / 119
        batch = np.array([p, 1 - p]) * 100
        if g.random() < 0.3:
            h.add(batch + g.normal(0, 0.5, 2), 100, size)
        else:
            missed += batch
        size += 100
    assert h.window() < len(h)
    local = h.coefficients(size) @ h.increments
    pooled = h.coefficients(size, window=len(h)) @ h.increments
    assert np.abs(local - missed).sum() < 0.25 * np.abs(pooled - missed).sum()


def test_a_local_checkpoint_without_its_histories_is_refused() -> None:
    import io

    import dpstream
    from dpstream.tabular import Domain, TabularStream

    d = Domain({"a": 3, "b": 2, "c": 2})
    g = np.random.default_rng(1)
    s = TabularStream(d, 1, marginals_per_step=1, iters=5, rng=dpstream.Rng(seed=1))
    for _ in range(3):
        s.step(np.stack([g.integers(0, n, 40) for n in (3, 2, 2)], axis=1))
    data = s.to_bytes()
    magic = b"DPSTREAM-TABULAR"
    npz = np.load(io.BytesIO(data[len(magic) :]))
    arrays = {k: npz[k] for k in npz.files}
    assert any(k.startswith("history_") for k in arrays)
    assert TabularStream.from_bytes(data).to_bytes() == data
    for cut in ("_increments", "_meta"):
        broken = dict(arrays)
        key = next(k for k in broken if k.endswith(cut))
        if cut == "_increments":
            del broken[key]
        else:
            broken[key] = broken[key][:, :3]
        buf = io.BytesIO()
        np.savez(buf, **broken)
        with pytest.raises(ValueError, match="history"):
            TabularStream.from_bytes(magic + buf.getvalue())

"""Adaptive(coverage=True) and Adaptive(staleness=...): the ε split, the coverage counter,
checkpoints and roll-back, and the staleness bonus's public form."""

from __future__ import annotations

from fractions import Fraction

import dpstream
import numpy as np
import pytest
from dpstream.tabular import Adaptive, Domain, TabularStream, all_workloads
from dpstream.tabular.coverage import Coverage, covered_columns
from dpstream.tabular.policy import staleness_bonus, to_dict
from dpstream.tabular.selection import COVERAGE_SHARE, Budget, select


def drifting(n: int, seed: int) -> np.ndarray:
    """Rows whose column a moves from category 0 to 2 over the stream (b, c follow a)."""
    g = np.random.default_rng(seed)
    a = np.minimum((np.arange(n) * 3) // n + (g.random(n) < 0.1), 2)
    b = np.where(g.random(n) < 0.8, a % 2, g.integers(0, 2, n))
    c = np.where(g.random(n) < 0.8, a, g.integers(0, 3, n))
    return np.stack([a, b, c], axis=1).astype(np.int64)


DOMAIN = Domain({"a": 3, "b": 2, "c": 3})


def weekday_batch(d: Domain, t: int, n: int, seed: int) -> np.ndarray:
    """Batch ``t`` of a stream whose column a is ``t mod 7`` throughout the batch (the
    weekday of a daily batch); b, c and e are random and correlated."""
    g = np.random.default_rng(seed)
    b = g.integers(0, 3, n)
    c = np.where(g.random(n) < 0.7, b, g.integers(0, 3, n))
    e = np.where(g.random(n) < 0.7, (b + 1) % 3, g.integers(0, 3, n))
    return np.stack([np.full(n, t % 7), b, c, e], axis=1).astype(np.int64)


def batches(rows: np.ndarray, lo: int, hi: int) -> list[np.ndarray]:
    return [rows[100 * t : 100 * (t + 1)] for t in range(lo, hi)]


@pytest.mark.parametrize("public_sizes", [False, True])
def test_the_coverage_share_is_taken_first_and_the_split_sums_to_epsilon(
    public_sizes: bool,
) -> None:
    eps = Fraction(3, 2)
    w = all_workloads(DOMAIN, 2)
    for k in (1, 2, 3):
        b = TabularStream.budget(eps, k, w, DOMAIN, public_sizes=public_sizes, coverage_columns=3)
        plain = TabularStream.budget(eps, k, w, DOMAIN, public_sizes=public_sizes)
        assert b.coverage == eps * COVERAGE_SHARE == eps / 10 and plain.coverage == 0
        # Every step spends exactly ε: its selections, its counters, the size and coverage.
        assert k * b.selection + k * b.measurement + b.size + b.coverage == eps
        assert k * plain.selection + k * plain.measurement + plain.size == eps
        assert b.size == plain.size and b.l1 == plain.l1
        # One record moves one cell of each of the d = 3 columns' margins (2 when replaced).
        assert b.coverage_l1 == b.l1 * 3
        assert b.coverage_counter_epsilon == b.coverage / (b.l1 * 3)
        assert plain.coverage_counter_epsilon == 0
    s = TabularStream(
        DOMAIN, eps, policy=Adaptive(coverage=True), public_sizes=public_sizes, rng=dpstream.Rng(1)
    )
    assert s._coverage is not None
    counter = s._coverage.counter
    assert counter.epsilon == s._budget.coverage_counter_epsilon and counter.dim == 8
    assert all(v.coverage == eps / 10 for v in s.budgets.values())
    assert TabularStream(DOMAIN, eps)._coverage is None
    with pytest.raises(ValueError, match="coverage_columns must be at least 0"):
        TabularStream.budget(eps, 1, w, DOMAIN, coverage_columns=-1)


def test_only_the_columns_in_a_workload_are_covered_and_one_record_moves_each_once() -> None:
    d = Domain({"a": 3, "b": 2, "c": 3, "e": 4})
    assert covered_columns([(0, 1), (1, 2)]) == [0, 1, 2]
    s = TabularStream(d, 1, workloads=[(0, 1), (1, 2)], policy=Adaptive(coverage=True))
    assert s.budgets[2].coverage_l1 == 3 and s._coverage is not None
    assert s._coverage.counter.dim == 3 + 2 + 3
    # The margins a batch feeds are the exact one-way counts of the covered columns:
    # removing one record changes the vector by exactly d = 3 in l1.
    rows = np.concatenate([drifting(40, 2), np.zeros((40, 1), dtype=np.int64)], axis=1)
    cov = Coverage("simple", Fraction(10**9), [(0, 1), (1, 2)], d.sizes, None, dpstream.Rng(3))

    def fed(codes: np.ndarray) -> np.ndarray:
        from dpstream.tabular.workloads import marginal

        diff = [marginal(codes, d, w).astype(np.float64) for w in [(0, 1), (1, 2)]]
        c = Coverage("simple", Fraction(10**9), [(0, 1), (1, 2)], d.sizes, None, dpstream.Rng(3))
        c.step(diff)
        assert c.increment is not None
        return c.increment

    full = fed(rows)
    want = np.concatenate([np.bincount(rows[:, c], minlength=d.sizes[c]) for c in (0, 1, 2)])
    np.testing.assert_array_equal(full, want)  # ε = 1e9: the counter's noise is 0
    for i in range(5):
        assert np.abs(full - fed(np.delete(rows, i, axis=0))).sum() == 3
    assert cov.increment is None


def test_the_coverage_counter_counts_every_batch_resumes_and_rolls_back() -> None:
    rows = drifting(1200, 5)
    # ε = 1e6: the counter's release is the exact margins with overwhelming probability.
    s = TabularStream(DOMAIN, 10**6, policy=Adaptive(coverage=True), iters=10, rng=dpstream.Rng(3))
    for b in batches(rows, 0, 3):
        s.step(b)
    assert s._coverage is not None and s._coverage.increment is not None
    want = np.concatenate(
        [np.bincount(rows[:300, c], minlength=n) for c, n in enumerate((3, 2, 3))]
    )
    np.testing.assert_array_equal(s._coverage.counter.release, want)
    last = np.concatenate(
        [np.bincount(rows[200:300, c], minlength=n) for c, n in enumerate((3, 2, 3))]
    )
    np.testing.assert_array_equal(s._coverage.increment, last)
    # A failed fit after the counters stepped rolls the coverage counter back too.
    before = s.to_bytes()
    fit = s._fit
    s._fit = lambda *a: (_ for _ in ()).throw(FloatingPointError("boom"))
    with pytest.raises(FloatingPointError):
        s.step(rows[300:400])
    s._fit = fit
    assert s.to_bytes() == before
    np.testing.assert_array_equal(s._coverage.increment, last)

    def make() -> TabularStream:
        policy = Adaptive(coverage=True, staleness=2.0)
        return TabularStream(DOMAIN, 1, policy=policy, iters=20, rng=dpstream.Rng(seed=4))

    a, b = make(), make()
    for x in batches(rows, 0, 4):
        a.step(x)
        b.step(x)
    b = TabularStream.from_bytes(b.to_bytes(), allow_seeded=True)
    assert b.policy == Adaptive(coverage=True, staleness=2.0)
    for x in batches(rows, 4, 8):
        assert a.step(x).equals(b.step(x))
    # A checkpoint whose coverage counter is missing or of another ε is refused.
    import io

    data = a.to_bytes()
    magic = b"DPSTREAM-TABULAR"
    npz = np.load(io.BytesIO(data[len(magic) :]))
    arrays = {k: npz[k] for k in npz.files}
    for change in ("drop", "other"):
        broken = dict(arrays)
        if change == "drop":
            del broken["coverage_counter"]
        else:
            other = TabularStream(DOMAIN, 2, policy=Adaptive(coverage=True), rng=dpstream.Rng(1))
            other.step(rows[:100])
            assert other._coverage is not None
            c = other._coverage.counter.to_bytes()
            broken["coverage_counter"] = np.frombuffer(c, dtype=np.uint8)
        buf = io.BytesIO()
        np.savez(buf, **broken)
        with pytest.raises(ValueError, match="coverage counter"):
            TabularStream.from_bytes(magic + buf.getvalue(), allow_seeded=True)


def test_without_the_new_fields_the_stream_is_unchanged_and_the_fingerprint_names_them() -> None:
    rows = drifting(600, 8)
    a = TabularStream(DOMAIN, 1, iters=20, rng=dpstream.Rng(seed=6))
    b = TabularStream(DOMAIN, 1, policy=Adaptive(staleness=0.0), iters=20, rng=dpstream.Rng(6))
    for x in batches(rows, 0, 6):
        assert a.step(x).equals(b.step(x))
    assert to_dict(Adaptive())["coverage"] is False and to_dict(Adaptive())["staleness"] == 4.0
    assert to_dict(Adaptive(staleness=0.0)) != to_dict(Adaptive())
    assert to_dict(Adaptive(coverage=True)) != to_dict(Adaptive())
    # Coverage changes the releases (ε is split differently).
    c = TabularStream(DOMAIN, 1, policy=Adaptive(coverage=True), iters=20, rng=dpstream.Rng(6))
    outs = [c.step(x) for x in batches(rows, 0, 6)]
    assert not outs[-1].equals(a.synthetic_codes())


def test_the_staleness_bonus_reads_public_values_and_grows_with_the_gap() -> None:
    policy = Adaptive(staleness=2.0)
    last = np.array([-1, 3, 9], dtype=np.int64)
    cells = np.array([4, 9, 16], dtype=np.int64)
    table = 100 * 64 + 1  # the batch is less than 1/64 of the table: the gate is open
    got = staleness_bonus(policy, 10, last, cells, 100, table, 0.5, per_cell=False)
    assert got is not None
    np.testing.assert_allclose(got, 2.0 * 0.5 * 10.0 * np.array([11, 7, 1]))
    per_cell = staleness_bonus(policy, 10, last, cells, 100, table, 0.5, per_cell=True)
    np.testing.assert_allclose(per_cell, got / np.array([2.0, 3.0, 4.0]))  # type: ignore[operator]
    off = Adaptive(staleness=0.0)
    assert staleness_bonus(off, 10, last, cells, 100, table, 0.5, per_cell=False) is None
    # A calm stream: no bonus (below the policy's staleness_share, none at all).
    assert staleness_bonus(policy, 10, last, cells, 100, table, 0.0, per_cell=False) is None
    any_share = Adaptive(staleness=2.0, staleness_share=0.0)
    zero = staleness_bonus(any_share, 10, last, cells, 100, table, 0.0, per_cell=False)
    np.testing.assert_array_equal(zero, 0.0)


def test_the_staleness_bonus_acts_only_at_a_drift_share_of_at_least_staleness_share() -> None:
    last = np.array([-1, 3], dtype=np.int64)
    cells = np.array([4, 9], dtype=np.int64)
    policy = Adaptive(staleness=2.0, staleness_gate=0.0, staleness_share=0.3)
    for share in (0.0, 0.1, 0.29, 0.3, 0.31, 1.0):
        got = staleness_bonus(policy, 10, last, cells, 100, 200, share, per_cell=False)
        assert (got is not None) == (share >= 0.3), share


@pytest.mark.parametrize("gate", [0.0, 8.0, 64.0])
def test_the_staleness_gate_opens_only_when_the_batch_is_a_small_share_of_the_table(
    gate: float,
) -> None:
    policy = Adaptive(staleness=2.0, staleness_gate=gate)
    last = np.array([-1, 3], dtype=np.int64)
    cells = np.array([4, 9], dtype=np.int64)
    for rows, table in [(100, 100), (100, 799), (100, 800), (100, 801), (100, 6400), (100, 6401)]:
        got = staleness_bonus(policy, 10, last, cells, rows, table, 0.5, per_cell=False)
        assert (got is not None) == (rows * gate < table), (rows, table)


def test_with_few_large_batches_the_gated_bonus_leaves_the_stream_bit_identical() -> None:
    """Issue 29's rule settings (R = 12 and 48 equal batches): a released batch is at least
    1/48 of the released table, so the default gate (1/64) never opens and the stream with
    the bonus is the stream without it (the same noise, selections and releases)."""
    d = Domain({"a": 7, "b": 3, "c": 3, "e": 3})
    rows = np.concatenate([weekday_batch(d, t, 400, 13) for t in range(48)])
    for r in (12, 48):
        plain = TabularStream(d, 1, policy=Adaptive(staleness=0.0), iters=10, rng=dpstream.Rng(3))
        gated = TabularStream(d, 1, policy=Adaptive(staleness=4.0), iters=10, rng=dpstream.Rng(3))
        for x in np.array_split(rows, r):
            assert plain.step(x).equals(gated.step(x))
            assert plain.last_selected == gated.last_selected
        assert gated._drift_rate > 0  # the drift test ran: only the gate kept the bonus off


def test_a_bonus_shifts_the_scores_but_not_the_sensitivity() -> None:
    """Permute-and-flip with a public bonus: neighbouring batches (one record moved) get
    scores that differ by at most the sensitivity, and a large bonus decides the pick."""
    d = Domain({"a": 4, "b": 4, "c": 4})
    w = all_workloads(d, 2)
    budget: Budget = TabularStream.budget(1, 1, w, d, score="l2")
    g = np.random.default_rng(0)
    batch = [g.integers(0, 30, 16).astype(np.float64) for _ in w]
    models = [np.full(16, 200.0) for _ in w]
    big = np.array([0.0, 0.0, 1e6])
    picks = {
        select("l2", batch, [0.0] * 3, models, rows=400, table_rows=4000, budget=budget,
               drifting=False, rng=dpstream.Rng(seed=s), bonus=big)
        for s in range(20)
    }  # fmt: skip
    assert picks == {2}
    from dpstream.tabular.selection import excess_l2_scores

    def scores(xs: list[np.ndarray], bonus: np.ndarray) -> np.ndarray:
        raw = excess_l2_scores(xs, [-m for m in models], models, rows=400, table_rows=4000,
                               noise_stddev=1.0)  # fmt: skip
        return raw + np.floor(bonus * 2**20) / 2**20

    bonus = np.array([3.3, 0.125, 7.77])
    for i in range(16):
        moved = [x.copy() for x in batch]
        moved[1][i] += 1
        delta = np.abs(scores(moved, bonus) - scores(batch, bonus))
        assert delta.max() <= float(budget.score_sensitivity)
    negative = np.array([1.0, -1.0, 0.0])
    with pytest.raises(ValueError, match="selection bonus"):
        select("l2", batch, [0.0] * 3, models, rows=400, table_rows=4000, budget=budget,
               drifting=False, rng=dpstream.Rng(seed=1), bonus=negative)  # fmt: skip


def test_staleness_re_measures_workloads_a_drifting_column_would_starve() -> None:
    """Column a's value is the same within each batch and changes every batch (the weekday
    of a daily batch): without staleness its workloads capture the first selections."""
    d = Domain({"a": 7, "b": 3, "c": 3, "e": 3})
    out = [weekday_batch(d, t, 300, 11 + t) for t in range(40)]
    counts = {}
    for stale in (0.0, 4.0):
        policy = Adaptive(staleness=stale, staleness_gate=0.0)  # the bonus at every step
        s = TabularStream(d, 2, policy=policy, iters=20, rng=dpstream.Rng(5))
        for x in out:
            s.step(x)
        counts[stale] = s.selection_counts
    never = {k: sum(v == 0 for v in c.values()) for k, c in counts.items()}
    top = {k: max(c.values()) for k, c in counts.items()}
    assert never[4.0] <= never[0.0] and top[4.0] < top[0.0]


def test_a_state_from_before_the_staleness_gate_resumes_with_the_bonus_at_every_step() -> None:
    """A checkpoint written before ``staleness_gate`` and ``staleness_share`` existed (its
    serialised policy lacks them) had the bonus at every step and any drift share: it loads
    as ``staleness_gate=0, staleness_share=0`` and continues bit for bit."""
    import io
    import json

    d = Domain({"a": 7, "b": 3, "c": 3, "e": 3})
    out = [weekday_batch(d, t, 300, 11 + t) for t in range(12)]
    old = Adaptive(staleness=4.0, staleness_gate=0.0, staleness_share=0.0)
    a = TabularStream(d, 2, policy=old, iters=20, rng=dpstream.Rng(seed=9))
    for x in out[:6]:
        a.step(x)
    magic = b"DPSTREAM-TABULAR"
    npz = np.load(io.BytesIO(a.to_bytes()[len(magic) :]))
    arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["header"].tobytes())
    for field in ("staleness_gate", "staleness_share"):
        del header["config"]["policy"][field]
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    b = TabularStream.from_bytes(magic + buf.getvalue(), allow_seeded=True)
    assert b.policy == old
    for x in out[6:]:
        assert a.step(x).equals(b.step(x))

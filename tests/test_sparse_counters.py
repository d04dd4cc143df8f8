"""Sparse counters (Algorithms 2 and 3 of He, Vershynin, Zhu) and the online ε schedule.

Error behaviour is checked statistically with fixed seeds; structure (constant releases
within a segment, nothing counted before ``t_{r_0}``, all-or-nothing steps) exactly. The
budget of the online synthesizer (Proposition 4.1: ``sup_s Σ_{j<=s} ε_{j,s} <= ε/2``) is
checked in exact rational arithmetic.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dpstream import Rng
from dpstream.counters import (
    Counter,
    InhomogeneousSparseCounter,
    SparseCounter,
    online_epsilon,
)

EPSILONS = [Fraction(1), Fraction(1, 3), Fraction(0.1)]  # 0.1: the exact binary fraction


def formula(eps: float, d: int, j: int, r: int) -> float:
    if d == 1:
        return 3 / math.pi**2 * eps / (j + 1) ** 2
    a = 1 - 1 / d
    c1 = (1 - 2 ** (-a / 2)) / 2
    return c1 * eps * 2 ** ((j - r) * a / 2)


# --------------------------------------------------------------------------- budget


@pytest.mark.parametrize("eps", EPSILONS, ids=str)
@pytest.mark.parametrize("d", [1, 2, 3, 5])
def test_online_budget_never_exceeds_half_epsilon(eps: Fraction, d: int) -> None:
    for s in range(1, 201):
        total = sum((online_epsilon(eps, d, j, s) for j in range(1, s + 1)), Fraction(0))
        assert total <= eps / 2, (d, s)
    # The bound is nearly attained for d >= 2: (1 - α^-s)/2 -> 1/2.
    if d >= 2:
        assert total > eps / 2 * Fraction(99, 100)


@pytest.mark.parametrize("d", [1, 2, 3, 5, 16])
def test_online_epsilon_is_a_tight_lower_bound_of_the_formula(d: int) -> None:
    for eps in EPSILONS:
        for j in (1, 2, 9, 40):
            for r in (j, j + 1, j + 7, j + 300):
                v = online_epsilon(eps, d, j, r)
                assert isinstance(v, Fraction)
                exact = formula(float(eps), d, j, r)
                # Rounded down to 32 significant bits: below the formula, within 2^-31.
                assert -(2.0**-31) * exact <= float(v) - exact <= 1e-13 * exact, (d, j, r)
                assert v.denominator & (v.denominator - 1) == 0  # a dyadic rational
                assert v.numerator < 2**33


def test_online_epsilon_d1_is_the_same_at_every_level_and_bad_arguments_fail() -> None:
    assert online_epsilon(1, 1, 4, 0) == online_epsilon(1, 1, 4, 50)
    with pytest.raises(ValueError):
        online_epsilon(1, 2, 3, 2)  # r < j for d >= 2
    with pytest.raises(ValueError):
        online_epsilon(1, 2, 0, 2)
    with pytest.raises(ValueError):
        online_epsilon(0, 2, 1, 2)
    with pytest.raises(ValueError):
        online_epsilon(1, 0, 1, 2)
    with pytest.raises(TypeError):
        online_epsilon(1, 2.0, 1, 2)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- Algorithm 2


def evenly(n: int, horizon: int) -> np.ndarray:
    x = np.zeros(horizon, dtype=np.int64)
    x[np.linspace(0, horizon - 1, n).astype(np.int64)] = 1
    return x


def mean_abs_error(kind: str, x: np.ndarray, seeds: range) -> float:
    true = np.cumsum(x)
    errs = []
    for s in seeds:
        if kind == "sparse":
            out = SparseCounter(1, len(x), rng=Rng(seed=s)).run(x)
        else:
            out = Counter("simple", 1, rng=Rng(seed=s)).run(x)
        errs.append(np.abs(out - true).mean())
    return float(np.mean(errs))


def test_sparse_error_is_far_below_the_simple_counter_and_grows_slowly() -> None:
    n, seeds = 2048, range(100, 112)
    small, big = evenly(n, 2**12), evenly(n, 2**18)
    sparse_small = mean_abs_error("sparse", small, seeds)
    sparse_big = mean_abs_error("sparse", big, seeds)
    simple_big = mean_abs_error("simple", big, seeds)
    simple_small = mean_abs_error("simple", small, seeds)
    assert sparse_big < 0.5 * simple_big, (sparse_big, simple_big)
    # 64 times the horizon: the simple counter's error grows like √T (×8), the sparse
    # counter's like log T.
    assert sparse_big < 2.0 * sparse_small, (sparse_small, sparse_big)
    assert simple_big > 4.0 * simple_small
    # Lemma 3.2: E error_t ≲ (log T + log^1.5 n)/ε, with a modest constant.
    for err, horizon in ((sparse_small, 2**12), (sparse_big, 2**18)):
        assert err < 5 * (math.log(horizon) + math.log(n) ** 1.5)


def test_sparse_release_is_constant_within_segments_and_zero_before_the_first() -> None:
    c = SparseCounter(Fraction(1, 2), 3000, rng=Rng(seed=4))
    assert c.threshold == math.floor(9 * math.log(3000) * 2)
    prev_seg, prev_rel, changes = 0, 0, 0
    for t in range(3000):
        r = c.step(int(t % 2 == 0))
        if c.segments == prev_seg:
            assert r == prev_rel
        else:
            changes += 1
        if c.segments == 0:
            assert r == 0
        prev_seg, prev_rel = c.segments, r
    assert c.time == 3000 and changes >= 3
    assert abs(c.release - 1500) < 400
    with pytest.raises(ValueError, match="horizon"):
        c.step(0)


def twins(seed: int) -> tuple[SparseCounter, SparseCounter]:
    return (SparseCounter(1, 40, rng=Rng(seed=seed)), SparseCounter(1, 40, rng=Rng(seed=seed)))


def test_sparse_refused_steps_change_nothing_and_run_equals_steps() -> None:
    a, b = twins(8)
    x = (np.arange(40) % 3 == 0).astype(np.int64) * 7
    with pytest.raises(ValueError, match="non-negative"):
        a.step(-1)
    with pytest.raises(ValueError, match="non-negative"):
        a.run([1, 2, -3])
    with pytest.raises(ValueError, match="horizon"):
        a.run(np.zeros(41, dtype=np.int64))
    with pytest.raises(TypeError):
        a.step(True)
    with pytest.raises(TypeError):
        a.step(1.0)  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        a.step(2**62 + 1)
    assert a.time == 0
    out = a.run(x)
    assert out.dtype == np.int64 and out.shape == (40,)
    assert [b.step(int(v)) for v in x] == out.tolist()
    assert a.segments == b.segments


def test_sparse_api_repr_memory_and_split() -> None:
    c = SparseCounter(Fraction(1, 10), 1000, rng=Rng(seed=1))
    assert "NOT PRIVATE" in repr(c) and c.seeded
    assert "NOT PRIVATE" not in repr(SparseCounter(1, 10))
    assert c.epsilon == Fraction(1, 10) and c.horizon == 1000
    split = c.epsilon_split()
    assert sum(s.epsilon for s in split) == c.epsilon
    assert split[1].sensitivity == 10  # the tree over T = 1000 items has 10 levels
    m = c.memory_bytes()
    c.run(np.ones(1000, dtype=np.int64))
    # O(log T): the p-sums of closed segments, at most one per tree level.
    assert c.segments >= 1
    assert m < c.memory_bytes() <= m + 8 * 10
    with pytest.raises(ValueError):
        SparseCounter(0, 10)
    with pytest.raises(ValueError):
        SparseCounter(1, 0)


# --------------------------------------------------------------------------- Algorithm 3


def test_inhomogeneous_ignores_steps_before_the_starting_level() -> None:
    c = InhomogeneousSparseCounter(Fraction(1, 2), 3, [1] * 10, rng=Rng(seed=2))
    assert c.first_time == 16  # ⌈2^3 / (1/2)⌉
    out = c.run(np.full(15, 5, dtype=np.int64))
    assert (out == 0).all() and c.level is None
    c.step(1)
    assert c.level == 3 and c.level_epsilon(4) == 1


def test_inhomogeneous_level_structure_and_error() -> None:
    # ε_time = 1: levels 2 (t = 4..7), 3 (8..15), ...; the release tracks the count of
    # steps from t_{r_0} = 4 on.
    x = evenly(3000, 2**15)
    c = InhomogeneousSparseCounter(1, 2, [1] * 20, rng=Rng(seed=3))
    out = c.run(x)
    true = np.cumsum(x) - np.cumsum(x)[2]
    assert (out[:3] == 0).all()
    assert c.level == 15  # the last step is t = 32768 = t_15
    assert np.abs(out - true)[3:].mean() < 150


def test_inhomogeneous_online_schedule_and_refusals() -> None:
    c = InhomogeneousSparseCounter.online(Fraction(1, 2), 2, 3, rng=Rng(seed=5))
    assert c.start_level == 3 and c.first_time == 16
    assert c.level_epsilon(5) == online_epsilon(Fraction(1, 2), 2, 3, 5)
    d1 = InhomogeneousSparseCounter.online(1, 1, 4)
    assert d1.start_level == 0 and d1.first_time == 1
    # A table of 2 levels (1 and 2: steps 2..7) refuses step 8, all-or-nothing.
    a = InhomogeneousSparseCounter(1, 1, [1, 1], rng=Rng(seed=6))
    b = InhomogeneousSparseCounter(1, 1, [1, 1], rng=Rng(seed=6))
    with pytest.raises(ValueError):
        a.run(np.ones(8, dtype=np.int64))
    with pytest.raises(ValueError):
        a.step(-2)
    assert a.time == 0
    assert a.run(np.ones(7, dtype=np.int64)).tolist() == [b.step(1) for _ in range(7)]
    with pytest.raises(ValueError):
        a.step(1)
    assert a.time == 7 and "NOT PRIVATE" in repr(a)
    with pytest.raises(ValueError):
        InhomogeneousSparseCounter(1, 0, [])
    with pytest.raises(ValueError):
        InhomogeneousSparseCounter(1, 0, [0])

"""The privacy budget ledger: epsilon_spent / epsilon_remaining and refusals."""

from __future__ import annotations

from fractions import Fraction

import dpstream
import numpy as np
import pytest
from dpstream.budget import BudgetExceededError, Ledger
from dpstream.counters import Counter, InhomogeneousSparseCounter, SparseCounter
from dpstream.sketch import CountMinSketch
from dpstream.tabular import Domain, ModelOptions, Paper, TabularStream


def test_ledger_arithmetic_is_exact() -> None:
    led = Ledger(Fraction(1))
    led.charge(Fraction(1, 3), "a")
    led.charge(Fraction(2, 3), "b")
    assert led.spent == 1 and led.remaining == 0
    with pytest.raises(BudgetExceededError, match="only 0 of the budget 1 remains"):
        led.charge(Fraction(1, 10**9), "c")
    assert Ledger(None).remaining is None


def test_sketch_releases_spend_and_a_budget_is_enforced() -> None:
    s = CountMinSketch(2, 32, budget=1)
    s.update([1, 2, 3])
    r = s.release(Fraction(1, 2))
    assert s.epsilon_spent == Fraction(1, 2) and s.epsilon_remaining == Fraction(1, 2)
    assert r.epsilon_spent == Fraction(1, 2) and r.epsilon_remaining == 0
    s.release(Fraction(1, 2))
    with pytest.raises(BudgetExceededError):
        s.release(Fraction(1, 100))
    assert s.epsilon_spent == 1  # the refused release spent nothing
    with pytest.raises(BudgetExceededError, match="private release"):
        r.release(1)
    free = CountMinSketch(1, 8)
    free.release(2)
    assert free.epsilon_spent == 2 and free.epsilon_remaining is None


def test_privhp_spends_once_and_refuses_merging_released_summaries() -> None:
    a = dpstream.PrivHP(1, 2, k=4, width=16, depth=6, rng=dpstream.Rng(seed=1))
    b = dpstream.PrivHP(1, 2, k=4, width=16, depth=6, rng=dpstream.Rng(seed=1))
    assert (a.epsilon_spent, a.epsilon_remaining) == (0, 1)
    a.update(np.full((10, 2), 0.3))
    a.release()
    a.release()  # the same generator again: no new ε
    assert (a.epsilon_spent, a.epsilon_remaining) == (1, 0)
    with pytest.raises(BudgetExceededError, match="cannot be merged"):
        b.merge(a)
    with pytest.raises(BudgetExceededError):
        a.merge(b)


def test_continual_objects_spend_their_epsilon_with_the_first_release() -> None:
    c = Counter("hybrid", Fraction(1, 2), 1)
    assert (c.epsilon_spent, c.epsilon_remaining) == (0, Fraction(1, 2))
    c.step([1])
    c.step([0])
    assert (c.epsilon_spent, c.epsilon_remaining) == (Fraction(1, 2), 0)
    sc = SparseCounter(1, 10)
    sc.step(1)
    assert sc.epsilon_spent == 1
    ic = InhomogeneousSparseCounter.online(1, 2, 1)  # starts counting at t_1 = 2
    ic.step(1)
    assert ic.epsilon_spent == 0  # the step before t_{r_0} enters nothing
    for _ in range(10):
        ic.step(1)
    levels = range(ic.start_level, (ic.level or 0) + 1)
    assert ic.epsilon_spent == max(ic.level_epsilon(r) for r in levels) > 0
    syn = dpstream.OnlineSynthesizer(1, 2, method="paper")
    syn.update(np.full((5, 2), 0.5))
    assert syn.epsilon_spent == 0  # nothing released yet
    syn.release()
    syn.release(size=3)
    assert (syn.epsilon_spent, syn.epsilon_remaining) == (1, 0)
    d = Domain({"a": 2, "b": 2})
    ts = TabularStream(d, 2, policy=Paper(k=1), model=ModelOptions(iters=5))
    assert ts.epsilon_spent == 0
    ts.step(np.array([[0, 1], [1, 1]]))
    assert (ts.epsilon_spent, ts.epsilon_remaining) == (2, 0)

"""One accounting truth (issue 41): each object's ledger (``epsilon_spent``) comes from
the same split function as its noise scales, and that split agrees with the claims the
audits derive independently from the documentation (derived here again, never read from
the library, so that a planted bug that moves the library's split is seen as a
disagreement). For every default: the online default (epochs), ``for_memory``, the
paper's schedule, PrivHP and the counters."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dpstream import OnlineSynthesizer, PrivHP, Rng
from dpstream.counters import KINDS, Counter, online_epsilon

from .online_setups import MERGED_DEPTH, MERGED_EPSILON, merged_block_scale

EPSILONS = [Fraction(1), Fraction(3, 2), Fraction(8)]


def _points(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 2))


@pytest.mark.parametrize("eps", EPSILONS)
def test_epochs_split_ledger_and_claims_agree(eps: Fraction) -> None:
    s = OnlineSynthesizer(eps, 2, rng=Rng(seed=1))
    inner: Any = s._inner
    for k in range(8):
        # Documented: a point of super-block k is in k + 1 blocks of ε/(k+1) each.
        split = [Fraction(*x) for x in inner.epsilon_split(k)]
        assert split == [eps / (k + 1)] * (k + 1)
        # The audits' noise scale (2·depth·(k+1)/ε) is the one this split gives.
        for depth in (1, 6):
            assert merged_block_scale(eps, k, depth) == 2 * depth / split[0]
    assert s.epsilon_spent == 0
    for e in range(20):  # super-blocks 0 and 1
        s.update(_points(5, e))
        s.release(1)
    assert s.epsilon_spent == Fraction(*inner.epsilon_ledger()) == eps
    assert s.epsilon_spent == sum(Fraction(*x) for x in inner.epsilon_split(1))


def test_the_merged_audit_claims_use_the_library_scale() -> None:
    inner: Any = OnlineSynthesizer(MERGED_EPSILON, 2, rng=Rng(seed=2))._inner
    (share, _) = (Fraction(*x) for x in inner.epsilon_split(1))
    assert merged_block_scale(MERGED_EPSILON, 1, MERGED_DEPTH) == 2 * MERGED_DEPTH / share == 3


@pytest.mark.parametrize("releases", [1, 2, 8, 100])
@pytest.mark.parametrize("eps", EPSILONS)
def test_for_memory_split_ledger_and_claims_agree(eps: Fraction, releases: int) -> None:
    s = OnlineSynthesizer.for_memory(
        eps, 2, memory_bytes=2_000_000, expected_n=10_000, max_releases=releases, rng=Rng(seed=3)
    )
    inner: Any = s._inner
    levels = math.floor(math.log2(releases)) + 1  # documented: L = ⌊log2 R⌋ + 1
    assert inner.levels == levels
    assert Fraction(*inner.block_epsilon()) == eps / (2 * levels)  # ε_b = ε/(2L)
    s.update(_points(50, 4))
    s.release(1)
    # L blocks, each 2·ε_b under replacement: ε.
    assert s.epsilon_spent == Fraction(*inner.epsilon_ledger()) == eps


@pytest.mark.parametrize("dim", [1, 2, 3])
@pytest.mark.parametrize("eps", EPSILONS)
def test_paper_schedule_sums_below_half_epsilon(eps: Fraction, dim: int) -> None:
    # Proposition 4.1: sup_s Σ_{j ≤ s} ε_{j,s} ≤ ε/2 gives ε; (4.2) / (5.1) give the sums.
    for s in range(1, 41):
        total = sum(online_epsilon(eps, dim, j, s) for j in range(1, s + 1))
        assert total <= eps / 2
        if dim >= 2:
            alpha = 2 ** ((1 - 1 / dim) / 2)
            assert float(total) >= float(eps) / 2 * (1 - alpha**-s) * (1 - 2**-30)
        else:
            exact = sum(3 / math.pi**2 / (j + 1) ** 2 for j in range(1, s + 1)) * float(eps)
            assert float(total) >= exact * (1 - 2**-30)
    syn = OnlineSynthesizer(eps, dim, method="paper", rng=Rng(seed=5))
    syn.update(np.full((5, dim), 0.5))
    syn.release(1)
    assert syn.epsilon_spent == eps


@pytest.mark.parametrize("eps", EPSILONS)
def test_privhp_sigmas_and_ledger_agree(eps: Fraction) -> None:
    p = PrivHP(eps, 2, k=4, width=16, rows=1, depth=8, sketch="count-min")
    sigmas = p.sigmas
    assert len(sigmas) == 9
    assert sum(sigmas) <= eps  # add/remove one point: Σ σ_l
    assert sum(sigmas) >= eps * (1 - Fraction(len(sigmas), 2**40) / eps - Fraction(1, 2**30))
    p.update(_points(100, 6))
    p.release(rng=Rng(seed=7))
    assert p.epsilon_spent == eps


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("eps", EPSILONS)
def test_counter_split_and_ledger_agree(eps: Fraction, kind: str) -> None:
    horizon = 64 if kind in ("block", "binary-tree") else None
    c = Counter(kind, eps, 1, horizon=horizon, rng=Rng(seed=8))
    shares = c.epsilon_split()
    assert sum(s.epsilon for s in shares) == eps
    # Documented per-family budgets: the simple counter spends ε on its one family; the
    # block, binary-tree and hybrid counters split it in two halves or use it whole.
    want = {
        "simple": [eps],
        "block": [eps / 2, eps / 2],
        "unbounded-block": [eps / 2, eps / 2],
        "binary-tree": [eps],
        "hybrid": [eps / 2, eps / 2],
    }[kind]
    assert [s.epsilon for s in shares] == want
    assert c.epsilon_spent == 0
    c.step(1)
    assert c.epsilon_spent == eps

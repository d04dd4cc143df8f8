"""Permute-and-flip: a pure-Python reference, cross-checked against the Rust core.

The reference computes the exact output distribution for small m by enumerating all m!
visiting orders: in each order, candidate r is reached with the probability that every
earlier one was refused, and taken with probability ``exp(ε (q_r - q*) / (2Δ))``. The
exponent is computed exactly (Fractions); only the final ``exp`` is a float.

Statistical checks run at ``ALPHA`` = 1e-6 per test example on fixed seeds, and the
hypothesis examples are derandomized (conftest profile), so nothing here flakes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest
from conftest import (
    ALPHA,
    assert_chi_square,
    binomial_pvalue,
    clopper_pearson_lower,
    clopper_pearson_upper,
    merge_small_categories,
)
from dpstream import Rng, noise
from hypothesis import given, settings
from hypothesis import strategies as st

Real = int | float | Fraction
PF_SEED = 31337
DRAWS = 20_000


def pf_reference(
    scores: Sequence[Real], epsilon: Real, sensitivity: Real, *, halve: bool = True
) -> np.ndarray:
    """Exact selection probabilities of permute-and-flip, by enumerating visiting orders.

    ``halve=False`` gives a deliberately broken variant that forgets the factor 1/2 in the
    exponent (a common mistake, which makes the mechanism only 2ε-DP).
    """
    q = [Fraction(s) for s in scores]
    eps, sens = Fraction(epsilon), Fraction(sensitivity)
    top = max(q)
    factor = Fraction(1, 2) if halve else Fraction(1)
    accept = [math.exp(-float(eps * (top - qr) * factor / sens)) for qr in q]
    m = len(q)
    probs = np.zeros(m)
    for order in itertools.permutations(range(m)):
        reach = 1.0
        for r in order:
            probs[r] += reach * accept[r]
            reach *= 1.0 - accept[r]
    probs /= math.factorial(m)
    assert abs(probs.sum() - 1.0) < 1e-12
    return probs


def run_rust(scores: object, epsilon: Real, sensitivity: Real, n: int, seed: int) -> np.ndarray:
    """Counts of each index over ``n`` seeded runs of the Rust implementation."""
    rng = Rng(seed=seed)
    m = len(scores)  # type: ignore[arg-type]
    picks = [noise.permute_and_flip(scores, epsilon, sensitivity, rng=rng) for _ in range(n)]  # type: ignore[arg-type]
    return np.bincount(picks, minlength=m)


def assert_matches(counts: np.ndarray, probs: np.ndarray, label: str) -> None:
    """Chi-square (pooling rare categories) at ALPHA/2, and exact per-index binomial
    tests at ALPHA/(2m): together a false-alarm rate of at most ALPHA."""
    n = int(counts.sum())
    m = len(probs)
    for r in range(m):
        pval = binomial_pvalue(int(counts[r]), n, float(probs[r]))
        assert pval > ALPHA / (2 * m), (
            f"{label}: index {r} chosen {counts[r]} of {n} times, expected "
            f"{n * probs[r]:.1f}; p = {pval:.2e}; counts {counts.tolist()}"
        )
    observed, expected = merge_small_categories(counts, probs, n)
    if len(expected) >= 2:
        assert_chi_square(observed, expected, label, ALPHA / 2)


# ---------------------------------------------------------------------------------------
# The reference itself
# ---------------------------------------------------------------------------------------


def test_reference_on_known_cases() -> None:
    # One candidate; all ties; two candidates by hand.
    assert pf_reference([3], 1, 1).tolist() == [1.0]
    assert np.allclose(pf_reference([2, 2, 2, 2], 1, 1), 0.25)
    # Scores (0, 2), ε = 1, Δ = 1: p_0 = e^-1; index 0 wins only if visited first.
    p = math.exp(-1)
    assert np.allclose(pf_reference([0, 2], 1, 1), [p / 2, 1 - p / 2])
    # m = 3 against a hand enumeration of the 6 orders for (0, 0, 1), ε = 2, Δ = 1.
    a = math.exp(-1)
    by_hand_0 = (2 * a + a * (1 - a) + 0) / 6  # orders 0..., (1,0,2); (2,...) never reach 0
    assert np.isclose(pf_reference([0, 0, 1], 2, 1)[0], by_hand_0)


def test_reference_prefers_higher_scores() -> None:
    probs = pf_reference([0, 1, 2, 3, 4], 1, 1)
    assert np.all(np.diff(probs) > 0)


# ---------------------------------------------------------------------------------------
# Cross-language: Rust against the reference
# ---------------------------------------------------------------------------------------

# m >= 2 (a single candidate is tested in test_noise_api); integer or half-integer scores.
SCORES = st.tuples(
    st.lists(st.integers(min_value=-8, max_value=8), min_size=2, max_size=5), st.booleans()
).map(lambda t: [k / 2 for k in t[0]] if t[1] else t[0])
EPSILONS = st.sampled_from([Fraction(1, 4), 0.5, 1, 2, Fraction(7, 3), 5])
SENSITIVITIES = st.sampled_from([1, 0.5, 2, Fraction(3, 2)])


@pytest.mark.slow
@settings(max_examples=15)
@given(scores=SCORES, epsilon=EPSILONS, sensitivity=SENSITIVITIES)
def test_rust_matches_reference(scores: list[Real], epsilon: Real, sensitivity: Real) -> None:
    counts = run_rust(scores, epsilon, sensitivity, DRAWS, PF_SEED)
    probs = pf_reference(scores, epsilon, sensitivity)
    assert_matches(counts, probs, f"pf({scores}, ε={epsilon}, Δ={sensitivity})")


EXTREME_CASES = [
    # Scores one ulp apart at 1e300: gap 2**944; ε = 2**-943 makes the exponent exactly 1.
    ([1e300, math.nextafter(1e300, 0.0)], Fraction(1, 2**943), 1),
    # A subnormal against zero: gap 2**-1074; ε = 2**1075 gives exponent 1.
    ([5e-324, 0.0], Fraction(2**1075), 1),
    # Integers at the top of the exact range.
    ([2**53, 2**53 - 1, 0, 2**53 - 2], 2, 1),
    # Exponents that are not dyadic: ε = 1/3, Δ = 7/5.
    ([0.1, 0.7, -0.3], Fraction(1, 3), Fraction(7, 5)),
]


@pytest.mark.parametrize(
    ("scores", "epsilon", "sensitivity"), EXTREME_CASES, ids=["1e300", "subnormal", "2^53", "frac"]
)
def test_rust_is_exact_at_extreme_magnitudes(
    scores: list[Real], epsilon: Real, sensitivity: Real
) -> None:
    counts = run_rust(scores, epsilon, sensitivity, DRAWS, PF_SEED + 1)
    probs = pf_reference(scores, epsilon, sensitivity)
    assert np.sort(probs)[-2] > 0.05  # built so that the choice is not a foregone one
    assert_matches(counts, probs, f"pf({scores})")


def test_cross_check_detects_a_wrong_implementation() -> None:
    # The same check against the broken reference (exponent without the 1/2) must fail.
    scores, epsilon = [0, 1, 2.5, -1, 2], 1
    counts = run_rust(scores, epsilon, 1, DRAWS, PF_SEED + 2)
    assert_matches(counts, pf_reference(scores, epsilon, 1), "correct")
    with pytest.raises(AssertionError):
        assert_matches(counts, pf_reference(scores, epsilon, 1, halve=False), "broken")


# ---------------------------------------------------------------------------------------
# Argmax, ties
# ---------------------------------------------------------------------------------------


@settings(max_examples=25)
@given(
    scores=st.lists(st.integers(min_value=-100, max_value=100), min_size=1, max_size=8).filter(
        lambda s: s.count(max(s)) == 1
    )
)
def test_argmax_is_chosen_when_epsilon_is_huge(scores: list[int]) -> None:
    # Integer gaps are >= 1, so every other candidate is taken with probability at most
    # exp(-10**6 / 2): never, in any number of runs.
    rng = Rng(seed=PF_SEED + 3)
    best = scores.index(max(scores))
    picks = {noise.permute_and_flip(scores, 10**6, 1, rng=rng) for _ in range(100)}
    assert picks == {best}


@pytest.mark.parametrize("m", [2, 3, 5, 8])
def test_ties_give_a_uniform_choice(m: int) -> None:
    for value in (0.0, -7.5, 1e300):
        counts = run_rust([value] * m, 1, 1, 10_000, PF_SEED + m)
        assert_matches(counts, np.full(m, 1 / m), f"{m} ties at {value}")


def test_tied_maxima_share_the_choice_when_epsilon_is_huge() -> None:
    scores = [3, 1, 3, 0, 3]
    counts = run_rust(scores, 10**6, 1, 9_000, PF_SEED + 9)
    assert counts[1] == counts[3] == 0
    assert_matches(counts, np.array([1, 0, 1, 0, 1]) / 3, "tied maxima")


# ---------------------------------------------------------------------------------------
# Privacy
# ---------------------------------------------------------------------------------------

SHIFTS = st.sampled_from([Fraction(-1), Fraction(-1, 2), Fraction(0), Fraction(1, 2), Fraction(1)])


def max_log_ratio(p: np.ndarray, q: np.ndarray) -> float:
    return float(np.max(np.abs(np.log(p) - np.log(q))))


@settings(max_examples=100)
@given(
    data=st.data(),
    scores=st.lists(st.integers(min_value=-8, max_value=8), min_size=1, max_size=5),
    epsilon=EPSILONS,
    sensitivity=SENSITIVITIES,
)
def test_neighbouring_scores_change_probabilities_by_at_most_e_epsilon(
    data: st.DataObject, scores: list[int], epsilon: Real, sensitivity: Real
) -> None:
    # Neighbouring data sets move each score by at most Δ (in any direction).
    shifts = data.draw(st.lists(SHIFTS, min_size=len(scores), max_size=len(scores)))
    sens = Fraction(sensitivity)
    neighbour = [Fraction(s) + d * sens for s, d in zip(scores, shifts, strict=True)]
    p = pf_reference(scores, epsilon, sensitivity)
    q = pf_reference(neighbour, epsilon, sensitivity)
    assert max_log_ratio(p, q) <= float(epsilon) + 1e-9


def test_privacy_bound_is_attained() -> None:
    # Scores (0, 0) against (Δ, -Δ): index 1 drops from 1/2 to e^-ε / 2, a ratio of
    # exactly e^ε. The privacy check above is therefore tight, not vacuous...
    for epsilon in (0.5, 1, 3):
        p = pf_reference([0, 0], epsilon, 1)
        q = pf_reference([1, -1], epsilon, 1)
        assert math.isclose(max_log_ratio(p, q), epsilon, rel_tol=1e-12)
        # ...and the broken variant (no factor 1/2) violates it.
        p_bad = pf_reference([0, 0], epsilon, 1, halve=False)
        q_bad = pf_reference([1, -1], epsilon, 1, halve=False)
        assert max_log_ratio(p_bad, q_bad) > epsilon + 0.1


def audit_lower_bound(x: np.ndarray, y: np.ndarray) -> float:
    """Largest 1 - ALPHA lower bound on ``|log(P(r | q) / P(r | q'))|`` over indices r."""
    comparisons = 2 * len(x)
    a = ALPHA / (2 * comparisons)
    nx, ny = int(x.sum()), int(y.sum())
    with np.errstate(divide="ignore"):
        fwd = np.log(clopper_pearson_lower(x, nx, a)) - np.log(clopper_pearson_upper(y, ny, a))
        rev = np.log(clopper_pearson_lower(y, ny, a)) - np.log(clopper_pearson_upper(x, nx, a))
    return float(max(fwd.max(), rev.max()))


@pytest.mark.parametrize("epsilon", [0.5, 1])
def test_rust_privacy_audit_on_worst_case_neighbours(epsilon: float) -> None:
    # Empirical audit (DESIGN rule 5) of the Rust implementation on the neighbours that
    # attain the bound: no selection probability may differ by more than e^ε beyond
    # sampling error. Run at 2ε, the same audit must fail, so it has power.
    n = 10_000
    seed = PF_SEED + round(10 * epsilon)
    honest = audit_lower_bound(
        run_rust([0, 0], epsilon, 1, n, seed), run_rust([1, -1], epsilon, 1, n, seed + 1)
    )
    assert honest <= epsilon, f"permute-and-flip audit failed: lower bound {honest:.3f}"
    broken = audit_lower_bound(
        run_rust([0, 0], 2 * epsilon, 1, n, seed + 2),
        run_rust([1, -1], 2 * epsilon, 1, n, seed + 3),
    )
    assert broken > epsilon, f"the audit missed a 2ε mechanism: lower bound {broken:.3f}"

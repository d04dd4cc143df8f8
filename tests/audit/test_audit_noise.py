"""Audits of the noise mechanisms: discrete Laplace, discrete Gaussian, permute-and-flip,
and the planted bugs the audit must flag (half the noise scale; a budget split that
sums to 2ε; permute-and-flip run at 2ε).

Every audit is seeded, so each assertion is deterministic; with a random seed each
"passed" would fail with probability at most ALPHA (1e-6, the harness default), and
each planted bug is flagged by a wide margin (the bound is far above ε).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from dpstream import Rng, noise

from ._runs import batched

RUNS = 400_000
BATCH = 200_000
COUNT = 10  # a count; its neighbour is COUNT + 1 (add one record, sensitivity 1)


def laplace_mechanism(scale: Fraction):
    """``count + Z``, ``Z ~ discrete Laplace(scale)``: ε-DP for ``scale = 1/ε``."""

    def mechanism(count: int, rng: Rng, size: int) -> np.ndarray:
        return count + noise.discrete_laplace(scale, size, rng=rng)

    return mechanism


@pytest.mark.parametrize("epsilon", [Fraction(1, 2), Fraction(1), Fraction(2)])
def test_discrete_laplace_mechanism(audited, epsilon: Fraction) -> None:
    result = audited(
        f"discrete Laplace, ε = {epsilon}",
        laplace_mechanism(1 / epsilon),
        (COUNT, COUNT + 1),
        seed=100 + int(4 * epsilon),
        **batched(RUNS, BATCH, epsilon),
    )
    assert result.passed, result
    # Sharp: every half-line through the two counts has ratio exactly e^ε.
    assert result.lower_bound >= 0.9 * float(epsilon), result


def test_planted_bug_laplace_at_half_the_scale(audited) -> None:
    # Claims ε = 1 but adds noise of scale 1/(2ε): really 2ε-DP.
    result = audited(
        "PLANTED: Laplace at half the scale",
        laplace_mechanism(Fraction(1, 2)),
        (COUNT, COUNT + 1),
        seed=110,
        **batched(RUNS, BATCH),
    )
    assert not result.passed, result
    assert result.lower_bound > 1.8, result


def two_releases(count: int, rng: Rng, size: int) -> np.ndarray:
    """A counter-like mechanism that releases the same count twice, each release
    calibrated to the whole ε = 1 (scale 1/ε): the split sums to 2ε."""
    z = noise.discrete_laplace(1, (size, 2), rng=rng)
    return count + z


def test_planted_bug_budget_split_summing_to_two_epsilon(audited) -> None:
    # The automatic events include {min(x) >= v}: both releases high, ratio e^(2ε).
    result = audited(
        "PLANTED: two ε releases of one count",
        two_releases,
        (COUNT, COUNT + 1),
        seed=120,
        **batched(RUNS, BATCH),
    )
    assert not result.passed, result
    assert result.lower_bound > 1.6, result
    assert result.event is not None and result.event.startswith(("min(x)", "max(x)", "sum(x)"))


def test_the_split_done_right_passes(audited) -> None:
    # The same mechanism with each release at ε/2 (scale 2/ε) is ε-DP.
    def halves(count: int, rng: Rng, size: int) -> np.ndarray:
        return count + noise.discrete_laplace(2, (size, 2), rng=rng)

    result = audited(
        "two ε/2 releases of one count",
        halves,
        (COUNT, COUNT + 1),
        seed=121,
        **batched(RUNS, BATCH),
    )
    assert result.passed, result
    assert result.lower_bound >= 0.85, result


def test_discrete_gaussian_mechanism(audited) -> None:
    # σ = 2 and sensitivity 1: ρ = 1/(2σ²) = 1/8 zCDP, hence (ε, δ)-DP with
    # ε = ρ + 2 sqrt(ρ ln(1/δ)) for every δ > 0 (Bun and Steinke 2016, Prop. 1.3).
    sigma, delta = 2, 1e-3
    rho = 1 / (2 * sigma**2)
    epsilon = rho + 2 * math.sqrt(rho * math.log(1 / delta))

    def mechanism(count: int, rng: Rng, size: int) -> np.ndarray:
        return count + noise.discrete_gaussian(sigma, size, rng=rng)

    result = audited(
        f"discrete Gaussian σ = 2, δ = {delta:g}",
        mechanism,
        (COUNT, COUNT + 1),
        epsilon=epsilon,
        delta=delta,
        runs=RUNS,
        batch_size=BATCH,
        seed=130,
    )
    assert result.passed, result
    assert result.lower_bound > 0.3, result  # the audit sees the mechanism's loss


# ---------------------------------------------------------------------------------------
# Permute-and-flip
# ---------------------------------------------------------------------------------------

PF_RUNS = 20_000


def permute_and_flip(epsilon: float):
    """Selection among two candidates with sensitivity-1 scores."""

    def mechanism(scores: tuple[int, int], rng: Rng, size: int) -> np.ndarray:
        return np.array(
            [noise.permute_and_flip(list(scores), epsilon, 1, rng=rng) for _ in range(size)]
        )

    return mechanism


# Neighbouring score vectors: each score moves by at most the sensitivity 1, in
# opposite directions (the worst case for exponential-type mechanisms). With two
# candidates, P(pick 0) is e^(-ε/2)/2 for scores (0, 1) and 1 - e^(-ε/2)/2 for (1, 0):
# the loss is ln(2 e^(ε/2) - 1) (0.83 at ε = 1), below ε.
PF_NEIGHBOURS = ((0, 1), (1, 0))


def audit_selection(audited, name: str, epsilon: float, seed: int) -> Any:
    """The audit (claim ε = 1, PF_RUNS runs per side) of permute-and-flip run at
    ``epsilon`` on PF_NEIGHBOURS."""
    return audited(name, permute_and_flip(epsilon), PF_NEIGHBOURS, seed=seed, **batched(PF_RUNS))


def test_permute_and_flip(audited) -> None:
    result = audit_selection(audited, "permute-and-flip, ε = 1", 1.0, 140)
    assert result.passed, result
    exact = math.log(2 * math.exp(0.5) - 1)
    assert 0.85 * exact <= result.lower_bound <= exact + 1e-9, result


def test_planted_bug_permute_and_flip_at_two_epsilon(audited) -> None:
    # Called with 2ε by mistake: the loss is ln(2e^ε - 1) = 1.49 at ε = 1.
    result = audit_selection(audited, "PLANTED: permute-and-flip at 2ε", 2.0, 141)
    assert not result.passed, result
    assert result.lower_bound > 1.3, result

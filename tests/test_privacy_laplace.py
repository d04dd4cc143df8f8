"""Empirical privacy audit of the Laplace mechanism on counts (DESIGN rule 5).

Neighbouring data sets have counts ``c`` and ``c + 1``; the mechanism releases
``c + Z`` with ``Z ~ discrete_laplace(1/ε)``, which is ε-DP. For each ε we draw N
releases from both neighbours (fixed seeds) and, for every event ``E`` of a fixed family
(single values ``{v}``, and half-lines ``{<= t}``, ``{>= t}``), compute a
high-confidence LOWER bound on ``log(P(E | c) / P(E | c+1))`` and on the reverse ratio
from Clopper-Pearson bounds: ``log(lower(P(E | c))) - log(upper(P(E | c+1)))``.
Bonferroni over all events, directions and the two bounds of each comparison keeps the
false-alarm rate of each test at ``ALPHA`` = 1e-6. The audit fails when some lower bound
exceeds ε: then, with confidence 1 - 1e-6, the mechanism is not ε-DP.

The power test runs the same audit on a broken mechanism (noise at half the scale, so
effectively 2ε-DP) and requires the audit to catch it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from _event_bounds import event_counts, event_names, log_ratio_bounds, strongest
from conftest import ALPHA
from dpstream import Rng, noise

EPSILONS = [0.5, 1, 2]
DRAWS = 1_000_000
COUNT = 10  # the count of the first data set; its neighbour has COUNT + 1


@dataclass
class Audit:
    """The largest lower bound on a log probability ratio, and the event attaining it."""

    bound: float
    event: str
    comparisons: int


def release(count: int, scale: float, seed: int) -> np.ndarray:
    """``DRAWS`` independent releases ``count + Z`` of the Laplace mechanism."""
    return count + noise.discrete_laplace(scale, DRAWS, rng=Rng(seed=seed))


def event_range(epsilon: float) -> tuple[int, int]:
    """Outputs audited: beyond ``COUNT ± ln(DRAWS)/ε`` a value expects < 1 draw.

    Fixed by ε and N, never by the data, so the Bonferroni count is fixed too.
    """
    reach = math.ceil(math.log(DRAWS) / epsilon)
    return COUNT - reach, COUNT + 1 + reach


def audit(x: np.ndarray, y: np.ndarray, lo: int, hi: int) -> Audit:
    """Max over events and both directions of a 1 - ALPHA lower bound on the log ratio."""
    names = event_names("Z", lo, hi)
    comparisons = 2 * len(names)  # each event, both directions
    a = ALPHA / (2 * comparisons)  # two one-sided bounds per comparison
    bound, k, forward = strongest(*log_ratio_bounds(x, y, lo, hi, a))
    num, den = ("c", "c+1") if forward else ("c+1", "c")
    return Audit(bound, f"P({names[k]} | {num}) / P({names[k]} | {den})", comparisons)


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_laplace_mechanism_is_epsilon_dp(epsilon: float) -> None:
    seed = round(100 * epsilon)
    x = release(COUNT, 1 / epsilon, seed=7000 + seed)
    y = release(COUNT + 1, 1 / epsilon, seed=7500 + seed)
    lo, hi = event_range(epsilon)
    result = audit(x, y, lo, hi)
    assert result.bound <= epsilon, (
        f"privacy audit failed at ε = {epsilon}: log-ratio lower bound {result.bound:.4f} "
        f"for {result.event} ({result.comparisons} comparisons)"
    )
    # The audit is sharp: the true worst ratio is exactly e^ε (every v <= c attains it),
    # and N draws resolve it to within a few percent. A much smaller bound would mean the
    # noise is wider than the scale 1/ε promises.
    assert result.bound >= 0.8 * epsilon, f"audit lost its resolution: {result}"


@pytest.mark.parametrize("epsilon", EPSILONS)
def test_audit_catches_noise_at_half_the_scale(epsilon: float) -> None:
    # A broken mechanism that claims ε but adds noise of scale 1/(2ε) is only 2ε-DP.
    seed = round(100 * epsilon)
    x = release(COUNT, 1 / (2 * epsilon), seed=8000 + seed)
    y = release(COUNT + 1, 1 / (2 * epsilon), seed=8500 + seed)
    lo, hi = event_range(epsilon)
    result = audit(x, y, lo, hi)
    assert result.bound > epsilon, (
        f"the audit missed a 2ε mechanism at ε = {epsilon}: bound {result.bound:.4f}"
    )


def test_audit_catches_a_mechanism_that_ignores_the_count_on_one_side() -> None:
    # A different failure: noise that is fine in distribution but released with an
    # off-by-one in one neighbour only (c + 2 instead of c + 1), i.e. sensitivity 2.
    epsilon = 1.0
    x = release(COUNT, 1 / epsilon, seed=8900)
    y = release(COUNT + 2, 1 / epsilon, seed=8901)
    lo, hi = event_range(epsilon)
    result = audit(x, y, lo, hi)
    assert result.bound > epsilon


def test_event_counts_are_exact() -> None:
    s = np.array([-5, 0, 1, 1, 2, 3, 3, 3, 9])
    counts = event_counts(s, 0, 3)
    vals = range(4)
    assert counts.tolist() == (
        [int(np.sum(s == v)) for v in vals]
        + [int(np.sum(s <= v)) for v in vals]
        + [int(np.sum(s >= v)) for v in vals]
    )

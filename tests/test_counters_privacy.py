"""Empirical privacy audit of the continual-release counters (DESIGN rule 5).

Neighbouring streams: ``x`` is all zeros; ``x'`` adds +1 to the increment of one step
``t0``, chosen so that the increment enters as many noisy values as the mechanism allows
(one step value for the simple counter; a step value and a block sum for the block
counters; all ``L`` levels of the binary tree for ``t0 = 1``; all ``k`` levels of an
epoch tree plus one power-of-two increment for the hybrid counter). Every release
sequence is observed up to a later time.

The noisy values that contain step ``t0`` are differences of releases (``r_b - r_a``);
their tuple is a post-processing of the release sequence, so any event about it is an
event about the releases. The audit uses the events ``{max of the tuple <= v}`` and
``{min of the tuple >= v}`` — the ones that attain the ratio e^ε exactly for the joint
release — and, for the release at the last time alone, the half-lines ``{r <= v}`` and
``{r >= v}``. For each event and direction, ``log(CP_lower(P(E | x))) - log(CP_upper(P(E
| x')))`` is a high-confidence lower bound on the privacy loss; Bonferroni over all
events, directions and bounds keeps the false-alarm rate at ALPHA = 1e-6 per test. The
audit fails when a lower bound exceeds ε.

The coordinates of one vector counter are independent runs of the scalar mechanism,
so a counter with ``dim = N`` yields N samples per neighbour (fixed seeds).

Power: the same audit of a counter built with 2ε (noise at half the scale) — what a
mechanism that gets its scale wrong by a factor of two would release — must be flagged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
import pytest
from _counter_setups import SETUPS, Setup
from _event_bounds import count_ratio_bounds, strongest
from conftest import ALPHA
from dpstream import Rng
from dpstream.counters import Counter

RUNS = 400_000


def at_most(samples: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """``#{samples <= v}`` for each threshold ``v``."""
    return np.searchsorted(np.sort(samples), thresholds, side="right")


def releases(setup: Setup, epsilon: Fraction, neighbour: bool, seed: int) -> np.ndarray:
    """Releases at times 0..steps (row 0 is 0) of RUNS independent runs."""
    c = Counter(setup.kind, epsilon, RUNS, horizon=setup.horizon, rng=Rng(seed=seed))  # type: ignore[arg-type]
    out = np.zeros((setup.steps + 1, RUNS), dtype=np.int64)
    zero, one = np.zeros(RUNS, dtype=np.int64), np.ones(RUNS, dtype=np.int64)
    for t in range(1, setup.steps + 1):
        out[t] = c.step(one if neighbour and t == setup.t0 else zero)
    return out


def noisy_values(setup: Setup, r: np.ndarray) -> np.ndarray:
    """The noisy values containing step t0, one row each."""
    return np.stack([r[b] - r[a] for a, b in setup.values])


@dataclass
class Audit:
    bound: float
    event: str
    comparisons: int


def audit(setup: Setup, epsilon: Fraction, x: np.ndarray, y: np.ndarray) -> Audit:
    """Largest 1 - ALPHA lower bound on the privacy loss over the event family."""
    # Event ranges fixed by public values (ε, the scales, RUNS), never by the data.
    reach = math.ceil(max(setup.scales) / float(epsilon) * math.log(RUNS)) + 1
    grid = np.arange(-reach, reach + 2)
    sd_last = math.sqrt(2 * setup.steps) * max(setup.scales) / float(epsilon)
    last_grid = np.unique(np.round(np.linspace(-5 * sd_last, 5 * sd_last + 1, 101))).astype(
        np.int64
    )

    def events(r: np.ndarray) -> tuple[np.ndarray, list[str]]:
        vals = noisy_values(setup, r)
        hi, lo, last = vals.max(axis=0), vals.min(axis=0), r[-1]
        counts = [
            at_most(hi, grid),
            len(lo) - at_most(lo, grid - 1),
            at_most(last, last_grid),
            len(last) - at_most(last, last_grid - 1),
        ]
        names = (
            [f"max(values) <= {v}" for v in grid]
            + [f"min(values) >= {v}" for v in grid]
            + [f"r_{setup.steps} <= {v}" for v in last_grid]
            + [f"r_{setup.steps} >= {v}" for v in last_grid]
        )
        return np.concatenate(counts), names

    kx, names = events(x)
    ky, _ = events(y)
    comparisons = 2 * len(names)
    a = ALPHA / (2 * comparisons)
    bound, k, forward = strongest(*count_ratio_bounds(kx, RUNS, ky, RUNS, a))
    given = "x) / P(. | x')" if forward else "x') / P(. | x)"
    return Audit(bound, f"P({names[k]} | {given}", comparisons)


def seeds(kind: str, offset: int) -> tuple[int, int]:
    base = 10_000 + 100 * list(SETUPS).index(kind) + offset
    return base, base + 1


CASES = [
    pytest.param(k, e, id=f"{k}-eps={e}")
    for k, e in [(k, Fraction(1)) for k in SETUPS] + [("hybrid", Fraction(1, 2))]
]


@pytest.mark.parametrize(("kind", "epsilon"), CASES)
def test_counter_is_epsilon_dp(kind: str, epsilon: Fraction) -> None:
    setup = SETUPS[kind]
    sx, sy = seeds(kind, 0 if epsilon == 1 else 50)
    x = releases(setup, epsilon, False, sx)
    y = releases(setup, epsilon, True, sy)
    result = audit(setup, epsilon, x, y)
    assert result.bound <= epsilon, (
        f"privacy audit failed for {kind} at ε = {epsilon}: log-ratio lower bound "
        f"{result.bound:.4f} for {result.event} ({result.comparisons} comparisons)"
    )
    # The audit is sharp: {max(values) <= 0} has ratio exactly e^ε, and RUNS samples
    # resolve it to within a few percent. Much less would mean more noise than claimed.
    assert result.bound >= 0.85 * float(epsilon), f"audit lost its resolution: {result}"


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(SETUPS))
def test_audit_flags_noise_at_half_the_scale(kind: str) -> None:
    # A broken counter that claims ε but adds the noise of a 2ε counter.
    setup = SETUPS[kind]
    sx, sy = seeds(kind, 20)
    x = releases(setup, Fraction(2), False, sx)
    y = releases(setup, Fraction(2), True, sy)
    result = audit(setup, Fraction(1), x, y)
    assert result.bound > 1, f"the audit missed a 2ε {kind} counter: {result}"


def test_audit_flags_a_tree_with_one_level_too_few() -> None:
    # A subtler bug: scale (L - 1)/ε for a tree of L = 4 levels, i.e. (4/3)ε-DP.
    setup = SETUPS["binary-tree"]
    sx, sy = seeds("binary-tree", 30)
    x = releases(setup, Fraction(4, 3), False, sx)
    y = releases(setup, Fraction(4, 3), True, sy)
    result = audit(setup, Fraction(1), x, y)
    assert result.bound > 1, f"the audit missed a (4/3)ε tree: {result}"


@pytest.mark.parametrize("kind", list(SETUPS))
def test_the_audited_values_are_the_ones_containing_step_t0(kind: str) -> None:
    # Neighbouring streams without noise (ε = 2^20: every draw is 0 but with probability
    # below e^-100000; the noise is keyed by the data, so two streams cannot share it):
    # each audited value moves by exactly +1, every release before t0 is unchanged and
    # every release from t0 on moves by exactly +1.
    setup = SETUPS[kind]
    c = {
        n: Counter(setup.kind, 2**20, 3, horizon=setup.horizon, rng=Rng(seed=5))  # type: ignore[arg-type]
        for n in (False, True)
    }
    r = {n: np.zeros((setup.steps + 1, 3), dtype=np.int64) for n in c}
    for t in range(1, setup.steps + 1):
        for n in c:
            r[n][t] = c[n].step([int(n and t == setup.t0)] * 3)
    diff = (r[True] - r[False])[:, 0]
    assert diff.tolist() == [int(t >= setup.t0) for t in range(setup.steps + 1)]
    moved = noisy_values(setup, r[True]) - noisy_values(setup, r[False])
    assert (moved == 1).all()
    # As many values as the mechanism's sensitivity allows, and their losses add to ε.
    assert sum(Fraction(1, s) for s in setup.scales) == 1
    shares = Counter(setup.kind, 1, horizon=setup.horizon).epsilon_split()  # type: ignore[arg-type]
    assert sum(s.epsilon for s in shares) == 1

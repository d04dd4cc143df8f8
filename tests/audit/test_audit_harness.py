"""The audit harness itself: Clopper–Pearson bounds against SciPy, repeatability, the
event machinery, calibration of the false-alarm rate, and argument checking."""

from __future__ import annotations

import math

import numpy as np
import pytest
from dpstream import Rng, noise
from dpstream.audit import AuditResult, audit, clopper_pearson
from scipy import stats

from ._runs import batched

# ---------------------------------------------------------------------------------------
# Clopper–Pearson
# ---------------------------------------------------------------------------------------


def scipy_bounds(k: np.ndarray, n: int, level: float) -> tuple[np.ndarray, np.ndarray]:
    lower = np.where(k == 0, 0.0, stats.beta.ppf(level, np.maximum(k, 1), n - k + 1))
    upper = np.where(k == n, 1.0, stats.beta.isf(level, k + 1, np.maximum(n - k, 1)))
    return lower, upper


@pytest.mark.parametrize("n", [1, 2, 7, 100, 10_000, 1_000_000, 100_000_000])
@pytest.mark.parametrize("level", [1e-2, 1e-6, 1e-9])
def test_clopper_pearson_matches_scipy_and_is_conservative(n: int, level: float) -> None:
    rng = np.random.default_rng(n)
    k = np.unique(np.concatenate([[0, 1, 2, n // 2, n - 2, n - 1, n], rng.integers(0, n + 1, 12)]))
    k = k[(k >= 0) & (k <= n)]
    lower, upper = clopper_pearson(k, n, level)
    ref_lower, ref_upper = scipy_bounds(k, n, level)
    # Within 1e-7 relative of SciPy, and never on the wrong side of it by more than
    # SciPy's own error (the bounds are widened by a relative 1e-8 on purpose).
    np.testing.assert_allclose(lower, ref_lower, rtol=1e-7, atol=0)
    np.testing.assert_allclose(upper, ref_upper, rtol=1e-7, atol=0)
    assert np.all(lower <= ref_lower * (1 + 1e-10))
    assert np.all(upper >= ref_upper * (1 - 1e-10))
    # Small tails (1 − upper) are accurate as well, where SciPy is exact enough to judge.
    assert np.all((lower >= 0) & (lower < upper) & (upper <= 1))


def test_clopper_pearson_closed_forms() -> None:
    n, level = 50, 1e-3
    lower, upper = clopper_pearson([0, n], n, level)
    assert lower[0] == 0 and upper[1] == 1
    # k = n: P(Bin(n, p) >= n) = p^n = level; k = 0: (1 − p)^n = level.
    assert lower[1] == pytest.approx(level ** (1 / n), rel=1e-7)
    assert upper[0] == pytest.approx(1 - level ** (1 / n), rel=1e-7)
    # Vectorised over n too, and shape-preserving.
    lo, up = clopper_pearson(np.array([[1, 2], [3, 4]]), np.array([10, 20]), 0.01)
    assert lo.shape == up.shape == (2, 2)


@pytest.mark.parametrize(
    ("k", "n", "level", "error"),
    [
        (3, 2, 0.01, ValueError),
        (-1, 5, 0.01, ValueError),
        (1, 0, 0.01, ValueError),
        (1.5, 5, 0.01, ValueError),
        (1, 5, 0.5, ValueError),
        (1, 5, 0.0, ValueError),
        ("a", 5, 0.01, TypeError),
    ],
)
def test_clopper_pearson_rejects_bad_input(k: object, n: int, level: float, error: type) -> None:
    with pytest.raises(error):
        clopper_pearson(k, n, level)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# The harness
# ---------------------------------------------------------------------------------------


def laplace(scale: float):
    def mechanism(count: int, rng: Rng, size: int) -> np.ndarray:
        return count + noise.discrete_laplace(scale, size, rng=rng)

    return mechanism


def randomized_response(epsilon: float):
    """Keep the bit with probability e^ε / (1 + e^ε): exactly ε-DP, and the event
    {output = bit} attains the ratio e^ε (the worst case for the audit)."""
    keep = math.exp(epsilon) / (1 + math.exp(epsilon))

    def mechanism(bit: int, rng: Rng, size: int) -> np.ndarray:
        u = rng.integers(size) / 2.0**64
        return np.where(u < keep, bit, 1 - bit)

    return mechanism


def test_same_seed_same_result_and_seed_is_recorded() -> None:
    kwargs = {"epsilon": 1, "runs": 20_000, "batch_size": 7_000}
    r1 = audit(laplace(1), (0, 1), seed=5, **kwargs)
    r2 = audit(laplace(1), (0, 1), seed=5, **kwargs)
    r3 = audit(laplace(1), (0, 1), seed=6, **kwargs)
    assert r1 == r2
    assert r1.seed == 5 and r3.seed == 6
    assert r1.events != r3.events
    drawn = audit(laplace(1), (0, 1), seed=None, **kwargs)
    assert drawn == audit(laplace(1), (0, 1), seed=drawn.seed, **kwargs)


def test_runs_are_split_and_every_run_has_its_own_generator() -> None:
    seen: list[tuple[int, bytes]] = []

    def mechanism(value: int, rng: Rng) -> int:
        draw = rng.integers(2).tobytes()
        seen.append((value, draw))
        return value

    result = audit(mechanism, (0, 1), epsilon=1, runs=500, seed=1)
    assert result.runs == 400 and result.selection_runs == 100
    assert len(seen) == 1000 and len({d for _, d in seen}) == 1000  # distinct streams
    # Selection runs of both sides first, then the audit runs.
    assert [v for v, _ in seen] == [0] * 100 + [1] * 100 + [0] * 400 + [1] * 400
    # Deterministic outputs that differ: the loss is unbounded, and 400 runs show > 2.
    assert result.lower_bound > 2 and not result.passed


def test_identical_inputs_give_no_evidence_of_loss() -> None:
    result = audit(laplace(2), (5, 5), epsilon=0, runs=40_000, seed=3, batch_size=40_000)
    assert result.lower_bound < 0
    assert result.passed  # ε = 0 is not falsified by identical distributions


def test_automatic_events_on_vectors_include_joint_summaries() -> None:
    def mechanism(count: int, rng: Rng, size: int) -> np.ndarray:
        return count + noise.discrete_laplace(1, (size, 3), rng=rng)

    result = audit(mechanism, (0, 1), epsilon=3, runs=100_000, seed=4, batch_size=50_000)
    assert result.passed
    names = {e.event for e in result.events}
    assert any(n.startswith(("max(x)", "min(x)", "sum(x)")) for n in names)
    # Three coordinates each shifted by one: the orthant events reach close to 3.
    assert result.lower_bound > 2.5
    assert result.candidates > 0 and len(result.events) == 8


def test_given_predicates_per_run_and_batched_agree_with_counts() -> None:
    def per_run(count: int, rng: Rng) -> int:
        return int(count + noise.discrete_laplace(1, 1, rng=rng)[0])

    events = {"at most 0": lambda x: x <= 0, "at least 1": lambda x: x >= 1}
    result = audit(per_run, (0, 1), epsilon=1, runs=4_000, seed=8, events=events)
    assert result.selection_runs == 0 and result.runs == 4_000
    assert {e.event for e in result.events} == set(events)
    assert len(result.events) == 4  # both directions of both events
    best = result.events[0]
    assert best.lower_bound == result.lower_bound
    assert result.counts == (best.count_a, best.count_b)
    # Batched predicates take a whole batch and return a boolean array.
    options = batched(4_000, 1_000)
    in_batches = audit(laplace(1), (0, 1), seed=8, events=[lambda x: x <= 0], **options)
    assert in_batches.events[0].event == "event[0]"
    with pytest.raises(ValueError, match="boolean array"):
        audit(laplace(1), (0, 1), epsilon=1, runs=10, seed=1, batch_size=5, events=[lambda x: True])


def test_selection_among_given_events() -> None:
    events = [lambda x, t=t: x <= t for t in range(-5, 6)]
    selection = {"events": events, "selection_runs": 10_000, "max_events": 3}
    result = audit(laplace(1), (0, 1), seed=9, **selection, **batched(50_000))
    assert result.candidates == 11 and len(result.events) == 3 and result.runs == 40_000
    assert result.passed and result.lower_bound > 0.85


def test_categorical_outputs() -> None:
    def mechanism(bit: int, rng: Rng) -> str:
        return ("yes", "no")[bit] if rng.integers(1)[0] < 2**63 else "unsure"

    result = audit(mechanism, (0, 1), epsilon=1, runs=2_000, seed=2)
    assert not result.passed  # 'yes' never happens on input 1
    assert result.event in ("output == 'yes'", "output == 'no'")


def test_delta_is_subtracted() -> None:
    # A mechanism that reveals its input with probability 0.01: (0, 0.01)-DP, and
    # (ε, δ)-DP for no δ below 0.01 at any finite ε.
    def mechanism(bit: int, rng: Rng, size: int) -> np.ndarray:
        u = rng.integers(size) / 2.0**64
        noise_bit = (rng.integers(size) >> np.uint64(63)).astype(np.int64)
        return np.where(u < 0.01, bit + 2, noise_bit)

    kwargs = {"epsilon": 0.0, "runs": 200_000, "batch_size": 100_000}
    assert audit(mechanism, (0, 1), seed=1, delta=0.011, **kwargs).passed
    flagged = audit(mechanism, (0, 1), seed=1, delta=0.005, **kwargs)
    assert not flagged.passed and flagged.lower_bound > 2, flagged


def test_false_alarm_rate_on_a_tight_mechanism() -> None:
    # 60 audits of exactly-ε randomized response at alpha = 0.1: each flags it with
    # probability at most 0.1 (in practice far less: Clopper–Pearson is conservative).
    epsilon = 1.0
    flagged = 0
    bounds = []
    for seed in range(60):
        r = audit(
            randomized_response(epsilon),
            (0, 1),
            epsilon=epsilon,
            runs=3_000,
            seed=seed,
            batch_size=3_000,
            events=[lambda x: x == 0],
            alpha=0.1,
        )
        flagged += not r.passed
        bounds.append(r.lower_bound)
    assert flagged <= 12, f"{flagged} false alarms in 60 audits at alpha = 0.1"
    # ...and the bound is sharp: the median audit sees most of the true loss.
    assert float(np.median(bounds)) > 0.8 * epsilon


def test_result_summary_mentions_the_verdict() -> None:
    r = audit(laplace(0.5), (0, 1), epsilon=1, runs=20_000, seed=1, batch_size=20_000)
    assert isinstance(r, AuditResult) and not r.passed
    text = str(r)
    assert "FAILED" in text and "worst event" in text and "seed 1" in text


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"epsilon": -1}, ValueError),
        ({"epsilon": math.inf}, ValueError),
        ({"delta": 1.0}, ValueError),
        ({"alpha": 0.0}, ValueError),
        ({"alpha": 0.6}, ValueError),
        ({"runs": 1}, ValueError),
        ({"runs": 2.5}, TypeError),
        ({"seed": -1}, ValueError),
        ({"events": "bins"}, ValueError),
        ({"events": []}, ValueError),
        ({"events": [1]}, ValueError),
        ({"selection_runs": 0}, ValueError),
        ({"selection_runs": 100}, ValueError),
        ({"batch_size": 0}, ValueError),
        ({"max_events": 0}, ValueError),
    ],
)
def test_bad_arguments(kwargs: dict, error: type) -> None:
    args = {"epsilon": 1, "runs": 100, "seed": 0, "batch_size": 10} | kwargs
    with pytest.raises(error):
        audit(laplace(1), (0, 1), **args)


def test_bad_mechanism_and_neighbours() -> None:
    with pytest.raises(TypeError):
        audit(42, (0, 1), epsilon=1, runs=10, seed=0)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        audit(laplace(1), (0, 1, 2), epsilon=1, runs=10, seed=0)  # type: ignore[arg-type]
    calls = iter(range(100))

    def shape_changes(x: int, rng: Rng) -> np.ndarray:
        return np.zeros(1 + (next(calls) >= 4))

    with pytest.raises(ValueError, match="shape"):
        audit(shape_changes, (0, 1), epsilon=1, runs=10, seed=0)

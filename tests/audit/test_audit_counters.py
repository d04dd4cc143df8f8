"""Audits of the continual-release counters: every kind of :class:`Counter`, both sparse
counters, and a counter built with twice its budget (a planted bug).

Neighbouring streams differ by +1 in the increment of one step ``t0`` (one record added
at one time). The mechanism audited is the counter's whole release sequence, reduced
(post-processing, so any event about it is an event about the releases) to the noisy
values that contain step ``t0`` — differences of releases ``r_b − r_a`` — and the last
release. The automatic events include ``{min(values) >= v}``, which attains the ratio
e^ε for the joint release, so the audits are sharp.

Runs are cheap: one counter of ``dim = size`` is ``size`` independent runs of the scalar
counter (its coordinates have independent noise).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from _counter_setups import SETUPS, Setup
from dpstream import Rng
from dpstream.counters import Counter, InhomogeneousSparseCounter, SparseCounter

from ._runs import batched

RUNS = 300_000
BATCH = 150_000


def counter_mechanism(setup: Setup, epsilon: Fraction):
    def mechanism(stream: np.ndarray, rng: Rng, size: int) -> np.ndarray:
        c = Counter(setup.kind, epsilon, size, horizon=setup.horizon, rng=rng)  # type: ignore[arg-type]
        r = np.zeros((setup.steps + 1, size), dtype=np.int64)
        for t in range(1, setup.steps + 1):
            r[t] = c.step(np.full(size, stream[t], dtype=np.int64))
        return np.column_stack([r[b] - r[a] for a, b in setup.values] + [r[-1]])

    return mechanism


def neighbours(setup: Setup) -> tuple[np.ndarray, np.ndarray]:
    x = np.zeros(setup.steps + 1, dtype=np.int64)  # x[0] unused: steps are 1-based
    y = x.copy()
    y[setup.t0] = 1
    return x, y


@pytest.mark.parametrize("kind", list(SETUPS))
def test_counter(audited, kind: str) -> None:
    setup = SETUPS[kind]
    result = audited(
        f"counter {kind}, ε = 1",
        counter_mechanism(setup, Fraction(1)),
        neighbours(setup),
        seed=200 + list(SETUPS).index(kind),
        **batched(RUNS, BATCH),
    )
    assert result.passed, result
    assert result.lower_bound >= 0.8, result  # sharp: {min(values) >= 1} has ratio e^ε


def test_planted_bug_counter_with_its_split_summing_to_two_epsilon(audited) -> None:
    # A block counter whose step values and block sums each get the whole ε (instead of
    # ε/2 each): the split sums to 2ε — the noise of Counter("block", 2ε).
    setup = SETUPS["block"]
    result = audited(
        "PLANTED: block counter split summing to 2ε",
        counter_mechanism(setup, Fraction(2)),
        neighbours(setup),
        seed=210,
        **batched(RUNS, BATCH),
    )
    assert not result.passed, result
    assert result.lower_bound > 1.6, result


# ---------------------------------------------------------------------------------------
# Sparse counters (one Python-level counter per run: fewer runs)
# ---------------------------------------------------------------------------------------

SPARSE_RUNS = 30_000
SPARSE_OPTIONS = batched(SPARSE_RUNS)


def sparse_mechanism(first: int, rng: Rng, size: int) -> np.ndarray:
    """Algorithm 2 with T = 8, ε = 1 (T_0 = ⌊9 ln 8⌋ = 18): the releases after each
    step, the number of closed segments, and the time the first segment closed."""
    out = np.empty((size, 10), dtype=np.int64)
    for i in range(size):
        c = SparseCounter(1, 8, rng=rng)
        first_close = 8
        for t in range(8):
            out[i, t] = c.step(first if t == 0 else 0)
            if first_close == 8 and c.segments > 0:
                first_close = t
        out[i, 8], out[i, 9] = c.segments, first_close
    return out


def test_sparse_counter(audited) -> None:
    # The first step carries T_0 = 18 or 19: the threshold test right after it is as
    # sensitive as it gets.
    result = audited(
        "sparse counter (Alg. 2), ε = 1", sparse_mechanism, (18, 19), seed=220, **SPARSE_OPTIONS
    )
    assert result.passed, result


def inhomogeneous_mechanism(value: int, rng: Rng, size: int) -> np.ndarray:
    """Algorithm 3 with ε_time = 1, r_0 = 1, ε_r = 1: the seven releases."""
    x = np.zeros(7, dtype=np.int64)
    x[1] = value  # t = 2 = t_1, the first counted step
    return np.stack([InhomogeneousSparseCounter(1, 1, [1, 1], rng=rng).run(x) for _ in range(size)])


def test_inhomogeneous_sparse_counter(audited) -> None:
    result = audited(
        "inhomogeneous sparse counter (Alg. 3), ε_r = 1",
        inhomogeneous_mechanism,
        (6, 7),
        seed=230,
        **SPARSE_OPTIONS,
    )
    assert result.passed, result

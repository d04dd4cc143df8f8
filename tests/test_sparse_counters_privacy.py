"""Empirical privacy audit of the sparse counters (DESIGN rule 5).

Neighbouring streams differ in the value of one step by +1. For Algorithm 2
(:class:`SparseCounter`, T = 8, ε = 1, T_0 = ⌊9 ln 8⌋ = 18) the first step carries 18
in ``x`` and 19 in ``x'``, so that the threshold test right after it is as sensitive as
possible; for Algorithm 3 (:class:`InhomogeneousSparseCounter`, ε_time = 1, r_0 = 1,
ε_r = 1) the changed step is the first of level 1, carrying 6 vs 7.

Each run gives the release sequence. The events are: the time of the first segment
closure (Algorithm 2) or the release after each step (binned half-lines) and the final
release (half-lines ``{r <= v}``, ``{r >= v}`` on a public grid). For every event and
direction, ``log CP_lower(P(E | x)) - log CP_upper(P(E | x'))`` is a lower bound on the
privacy loss at confidence 1 - ALPHA (Bonferroni over all comparisons); it must not
exceed ε. Power: the same audit of a counter built with a much larger ε (noise at a
fraction of the scale), audited against ε, must be flagged.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from conftest import ALPHA, clopper_pearson_lower, clopper_pearson_upper
from dpstream import Rng
from dpstream.counters import InhomogeneousSparseCounter, SparseCounter

RUNS = 60_000


def sparse_runs(epsilon: Fraction, first: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Releases (RUNS, 8) and segment counts after each step."""
    rng = Rng(seed=seed)
    x = np.zeros(8, dtype=np.int64)
    x[0] = first
    rel = np.empty((RUNS, 8), dtype=np.int64)
    seg = np.empty((RUNS, 8), dtype=np.int64)
    for i in range(RUNS):
        c = SparseCounter(epsilon, 8, rng=rng)
        for t in range(8):
            rel[i, t] = c.step(int(x[t]))
            seg[i, t] = c.segments
    return rel, seg


def inhomogeneous_runs(level_eps: Fraction, first: int, seed: int) -> np.ndarray:
    rng = Rng(seed=seed)
    x = np.zeros(7, dtype=np.int64)
    x[1] = first  # t = 2 = t_1, the first counted step
    out = np.empty((RUNS, 7), dtype=np.int64)
    for i in range(RUNS):
        c = InhomogeneousSparseCounter(1, 1, [level_eps, level_eps], rng=rng)
        out[i] = c.run(x)
    return out


def half_line_counts(v: np.ndarray, grid: np.ndarray) -> np.ndarray:
    s = np.sort(v)
    return np.concatenate(
        [np.searchsorted(s, grid, side="right"), len(s) - np.searchsorted(s, grid, side="left")]
    )


def max_loss(kx: np.ndarray, ky: np.ndarray) -> float:
    a = ALPHA / (2 * len(kx))
    with np.errstate(divide="ignore"):
        fwd = np.log(clopper_pearson_lower(kx, RUNS, a)) - np.log(
            clopper_pearson_upper(ky, RUNS, a)
        )
        rev = np.log(clopper_pearson_lower(ky, RUNS, a)) - np.log(
            clopper_pearson_upper(kx, RUNS, a)
        )
    return float(max(fwd.max(), rev.max()))


def sparse_events(rel: np.ndarray, seg: np.ndarray) -> np.ndarray:
    first = np.where(seg.max(axis=1) > 0, np.argmax(seg > 0, axis=1), 8)
    by_time = np.array([(first == k).sum() for k in range(9)])
    closed = np.array([(seg[:, -1] == k).sum() for k in range(4)])
    grid = np.arange(-60, 100, 4)  # public: a few noise scales around the counts
    return np.concatenate([by_time, closed, half_line_counts(rel[:, -1], grid)])


def inhomogeneous_events(out: np.ndarray) -> np.ndarray:
    grid = np.arange(-30, 40, 2)
    return np.concatenate([half_line_counts(out[:, t], grid) for t in (2, 3, 6)])


def test_sparse_counter_is_epsilon_dp() -> None:
    kx = sparse_events(*sparse_runs(Fraction(1), 18, 501))
    ky = sparse_events(*sparse_runs(Fraction(1), 19, 502))
    assert max_loss(kx, ky) <= 1


@pytest.mark.slow
def test_sparse_audit_flags_a_counter_with_too_little_noise() -> None:
    # Broken variant: the noise of a 6ε counter under an ε claim. Its public threshold
    # is T_0 = ⌊9 ln 8 / 6⌋ = 3, so the first step carries 3 vs 4.
    kx = sparse_events(*sparse_runs(Fraction(6), 3, 503))
    ky = sparse_events(*sparse_runs(Fraction(6), 4, 504))
    assert max_loss(kx, ky) > 1


@pytest.mark.slow
def test_inhomogeneous_counter_is_epsilon_r_dp() -> None:
    kx = inhomogeneous_events(inhomogeneous_runs(Fraction(1), 6, 601))
    ky = inhomogeneous_events(inhomogeneous_runs(Fraction(1), 7, 602))
    assert max_loss(kx, ky) <= 1


@pytest.mark.slow
def test_inhomogeneous_audit_flags_a_counter_with_too_little_noise() -> None:
    kx = inhomogeneous_events(inhomogeneous_runs(Fraction(8), 6, 603))
    ky = inhomogeneous_events(inhomogeneous_runs(Fraction(8), 7, 604))
    assert max_loss(kx, ky) > 1


@pytest.mark.parametrize("changed", [1, 2, 3])
def test_steps_before_the_starting_level_leave_no_trace(changed: int) -> None:
    # Lemma 3.3 (2): with t_{r_0} = 4 (ε_time = 1, r_0 = 2), changing a step before 4
    # changes no release, draw for draw.
    x = np.ones(40, dtype=np.int64)
    y = x.copy()
    y[changed - 1] += 5
    a = InhomogeneousSparseCounter(1, 2, [1] * 5, rng=Rng(seed=9)).run(x)
    b = InhomogeneousSparseCounter(1, 2, [1] * 5, rng=Rng(seed=9)).run(y)
    assert (a == b).all()

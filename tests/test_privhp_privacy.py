"""Empirical privacy audits of the private sketches and of PrivHP (DESIGN rule 5).

Style of test_privacy_laplace.py: run a mechanism many times on two neighbouring inputs
(fixed seeds), and for every event ``E`` of a family fixed in advance (binned values
``{v}`` and half-lines ``{<= v}``, ``{>= v}`` of a statistic of the release) compute a
Clopper-Pearson high-confidence LOWER bound on ``log(P(E | A) / P(E | B))`` and on the
reverse ratio. Bonferroni over all events, both directions and the two bounds of each
comparison keeps the false-alarm rate of each test at ALPHA = 1e-6. A test fails when
some lower bound exceeds the privacy parameter: then, with confidence 1 - 1e-6, the
mechanism is not private at that level.

* Sketches: neighbours differ by one occurrence of one key (``update(x, 1)``); the
  release adds discrete Laplace noise of scale ``rows/ε`` to every cell, so the whole
  matrix is ε-DP and each single cell is (ε/rows)-DP.
* PrivHP: neighbours are point streams ``X`` and ``X + {x}``; the hash functions are
  public, so both sides are built from the same seeded generator; each release uses a
  fresh seeded generator. The released total is the clamped root count, which is
  σ_0-DP on its own; anything of the release is ε-DP.

The power test audits a deliberately broken mechanism (neighbours two occurrences apart,
so the true loss is 2ε) and requires the audit to flag it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pytest
from _event_bounds import event_names, log_ratio_bounds, strongest
from conftest import ALPHA
from dpstream import PrivHP, Rng
from dpstream.sketch import CountMinSketch, CountSketch

MASK128 = (1 << 128) - 1


def bucket(h: tuple[int, int, int, int], key: int, width: int) -> int:
    """The documented bucket rule (see test_sketch.py for the reference check)."""
    a, b, _, _ = h
    return ((((a * key + b) & MASK128) >> 64) * width) >> 64


# ---------------------------------------------------------------------------------------
# The audit
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Statistic:
    """Integer samples of one statistic under both neighbours, and the fixed range of
    values whose events are audited (chosen from public parameters, never the samples)."""

    name: str
    a: np.ndarray
    b: np.ndarray
    lo: int
    hi: int


@dataclass
class Audit:
    bound: float
    event: str


def audit(stats: list[Statistic]) -> dict[str, Audit]:
    """For each statistic, the largest 1 - ALPHA lower bound on a log probability ratio
    over its events and both directions; Bonferroni over all statistics together."""
    comparisons = sum(2 * 3 * (s.hi - s.lo + 1) for s in stats)
    a = ALPHA / (2 * comparisons)
    out = {}
    for s in stats:
        names = event_names(s.name, s.lo, s.hi)
        bound, k, forward = strongest(*log_ratio_bounds(s.a, s.b, s.lo, s.hi, a))
        num, den = ("A", "B") if forward else ("B", "A")
        out[s.name] = Audit(bound, f"P({names[k]} | {num}) / P({names[k]} | {den})")
    return out


def test_audit_helpers_are_exact() -> None:
    # Identical samples give no evidence of any loss (event_counts: test_privacy_laplace.py).
    x = np.random.default_rng(0).integers(0, 5, 1000)
    assert audit([Statistic("x", x, x.copy(), 0, 4)])["x"].bound <= 0


# ---------------------------------------------------------------------------------------
# Sketch releases
# ---------------------------------------------------------------------------------------

SKETCH_TRIALS = 100_000
KEY = 12345
OTHER_KEYS = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 2**40, 2**63 + 5]


def key_stream(extra: int) -> tuple[np.ndarray, np.ndarray]:
    """Keys and counts: KEY occurs 10 + extra times, amid other keys."""
    keys = np.array([KEY] * (10 + extra) + OTHER_KEYS * 3, dtype=np.uint64)
    return keys, np.ones(len(keys), dtype=np.int64)


def sketch_cells(kind, rows: int, width: int, extra: int, epsilon, seed: int) -> np.ndarray:
    """``SKETCH_TRIALS`` releases (``(trials, rows, width)`` cells) of the sketch of
    ``key_stream(extra)``; the hashes come from a fixed seed (they are public)."""
    s = kind(rows, width, rng=Rng(seed=777))
    s.update(*key_stream(extra))
    rng = Rng(seed=seed)
    out = np.empty((SKETCH_TRIALS, rows, width), dtype=np.int64)
    for t in range(SKETCH_TRIALS):
        out[t] = s.release(epsilon, rng=rng).cells()
    return out


def key_cells(kind, rows: int, width: int, cells: np.ndarray) -> np.ndarray:
    """``(trials, rows)``: the cell of KEY in each row."""
    hashes = kind(rows, width, rng=Rng(seed=777)).hashes()
    cols = [bucket(h, KEY, width) for h in hashes]
    return cells[:, np.arange(rows), cols]


def reach(scale: float, factor: float = 1.0) -> int:
    """Half-width of the audited range: beyond ``scale * ln(trials)`` a value expects
    fewer than one draw."""
    return math.ceil(factor * scale * math.log(SKETCH_TRIALS))


def exact_key_cells(kind, rows: int, width: int) -> np.ndarray:
    """``(rows,)``: the noiseless cells of KEY on side A. The audited ranges are centred
    on them: the test chose the streams, so this is not a data-dependent event choice."""
    exact = kind(rows, width, rng=Rng(seed=777))
    exact.update(*key_stream(0))
    return key_cells(kind, rows, width, exact.cells()[None])[0]


def cell_samples(kind, rows: int, width: int, extra: int, epsilon, seed: int) -> np.ndarray:
    return key_cells(kind, rows, width, sketch_cells(kind, rows, width, extra, epsilon, seed))


def key_cell_audit(kind, extra: int, seeds: tuple[int, int], below: int = 0) -> Audit:
    """The audit of KEY's cell in a 1 x 8 sketch released at ε = 1, on ``key_stream(0)``
    and on ``key_stream(extra)``, over the values from ``c - below - r`` to
    ``c + extra + r`` (``c``: the exact cell, ``r``: the reach of the noise)."""
    epsilon, rows, width = 1, 1, 8
    a = cell_samples(kind, rows, width, 0, epsilon, seed=seeds[0])
    b = cell_samples(kind, rows, width, extra, epsilon, seed=seeds[1])
    c = int(exact_key_cells(kind, rows, width)[0])
    r = reach(rows / epsilon)
    return audit([Statistic("cell", a[:, 0], b[:, 0], c - below - r, c + extra + r)])["cell"]


def test_released_count_min_sketch_cell_is_epsilon_dp() -> None:
    epsilon = 1
    result = key_cell_audit(CountMinSketch, 1, (1, 2))
    assert result.bound <= epsilon, (
        f"privacy audit failed: log-ratio lower bound {result.bound:.4f} for {result.event}"
    )
    # The audit is sharp: every {cell <= v} with v <= c attains the ratio e^ε exactly, so
    # a much smaller bound would mean noise wider than rows/ε (lost utility).
    assert result.bound >= 0.6 * epsilon, f"audit lost its resolution: {result}"


def test_released_count_sketch_cell_is_epsilon_dp() -> None:
    epsilon = 1
    result = key_cell_audit(CountSketch, 1, (3, 4), below=1)  # the neighbour's is c ± 1
    assert result.bound <= epsilon, f"audit failed: {result.bound:.4f} for {result.event}"
    assert result.bound >= 0.6 * epsilon, f"audit lost its resolution: {result}"


@pytest.mark.slow
def test_released_sketch_with_three_rows_is_epsilon_dp() -> None:
    """rows = 3: each row's cell of the key is (ε/3)-DP, and their sum (sensitivity 3,
    three independent Laplace(3/ε) draws) is ε-DP."""
    epsilon, rows, width = 1, 3, 8
    c = exact_key_cells(CountMinSketch, rows, width)
    a = cell_samples(CountMinSketch, rows, width, 0, epsilon, seed=5)
    b = cell_samples(CountMinSketch, rows, width, 1, epsilon, seed=6)
    r = reach(rows / epsilon)
    stats = [
        Statistic(f"row {i}", a[:, i], b[:, i], int(c[i]) - r, int(c[i]) + 1 + r)
        for i in range(rows)
    ]
    total = int(c.sum())
    r_sum = reach(rows / epsilon, factor=1.5)
    stats.append(Statistic("sum", a.sum(axis=1), b.sum(axis=1), total - r_sum, total + 3 + r_sum))
    results = audit(stats)
    worst = max(results.values(), key=lambda x: x.bound)
    assert worst.bound <= epsilon, f"audit failed: {worst.bound:.4f} for {worst.event}"
    for i in range(rows):
        row = results[f"row {i}"]
        assert row.bound <= epsilon / rows, (
            f"a single row's cell leaks more than ε/rows: {row.bound:.4f} for {row.event}"
        )


@pytest.mark.slow
def test_audit_catches_a_sketch_at_twice_the_sensitivity() -> None:
    # Broken on purpose: release at ε but neighbours two occurrences apart, which is what
    # noise at half the scale would do to a true neighbour. The true loss is 2ε.
    epsilon = 1
    result = key_cell_audit(CountMinSketch, 2, (7, 8))
    assert result.bound > epsilon, f"the audit missed a 2ε mechanism: bound {result.bound:.4f}"


# ---------------------------------------------------------------------------------------
# PrivHP
# ---------------------------------------------------------------------------------------

PRIVHP_TRIALS = 40_000
PARAMS = {"k": 2, "width": 4, "rows": 1, "depth": 3}
EPSILON = 1
X = np.array([0.05, 0.2, 0.3, 0.3, 0.45, 0.6, 0.7, 0.9]).reshape(-1, 1)
POINT = 0.3  # the extra point of the neighbour


def privhp_releases(points: np.ndarray, seed_base: int) -> tuple[np.ndarray, np.ndarray]:
    """Totals and the count of the leaf containing POINT over PRIVHP_TRIALS releases."""
    totals = np.empty(PRIVHP_TRIALS)
    leaf = np.empty(PRIVHP_TRIALS)
    for t in range(PRIVHP_TRIALS):
        p = PrivHP(EPSILON, 1, rng=Rng(seed=31337), **PARAMS)  # same public hashes
        p.update(points)
        g = p.release(rng=Rng(seed=seed_base + t))
        lower, upper, counts = g.cells()
        inside = (lower[:, 0] <= POINT) & (upper[:, 0] > POINT)
        assert np.count_nonzero(inside) == 1
        totals[t] = g.total
        leaf[t] = counts[inside][0]
    return totals, leaf


@pytest.fixture(scope="module")
def privhp_samples() -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Releases on X plus ``extra`` copies of POINT, for extra = 0, 1 and 4."""
    return {
        extra: privhp_releases(np.vstack([X] + [[[POINT]]] * extra), 10_000_000 * (extra + 1))
        for extra in (0, 1, 4)
    }


def privhp_statistics(
    samples: dict[int, tuple[np.ndarray, np.ndarray]], extra: int
) -> list[Statistic]:
    tot_a, leaf_a = samples[0]
    tot_b, leaf_b = samples[extra]
    sigma0 = float(PrivHP(EPSILON, 1, **PARAMS).sigmas[0])
    n = len(X)
    r = math.ceil(math.log(PRIVHP_TRIALS) / sigma0)
    return [
        Statistic("total", tot_a.astype(np.int64), tot_b.astype(np.int64), 0, n + 1 + r),
        Statistic(
            "floor(leaf count)",
            np.floor(leaf_a).astype(np.int64),
            np.floor(leaf_b).astype(np.int64),
            0,
            n + 1 + r,
        ),
    ]


@pytest.mark.slow
def test_privhp_release_is_epsilon_dp(privhp_samples) -> None:
    tot_a, leaf_a = privhp_samples[0]
    tot_b, leaf_b = privhp_samples[1]
    sigma0 = float(PrivHP(EPSILON, 1, **PARAMS).sigmas[0])
    # The root count is integral and clamped at 0; leaf counts are non-negative.
    for tot in (tot_a, tot_b):
        assert np.array_equal(tot, np.round(tot)) and (tot >= 0).all()
    assert (leaf_a >= 0).all() and (leaf_b >= 0).all()
    results = audit(privhp_statistics(privhp_samples, 1))
    for name, result in results.items():
        assert result.bound <= EPSILON, (
            f"PrivHP privacy audit failed on {name}: log-ratio lower bound "
            f"{result.bound:.4f} > ε = {EPSILON} for {result.event}"
        )
    # The total alone is the clamped root count: σ_0-DP, a much stronger claim.
    total = results["total"]
    assert total.bound <= sigma0, (
        f"the released total leaks more than σ_0 = {sigma0:.4f}: {total.bound:.4f} "
        f"for {total.event}"
    )


@pytest.mark.slow
def test_audit_catches_privhp_on_streams_four_points_apart(privhp_samples) -> None:
    # Not neighbours: X and X + 4·{x} may be up to 4ε apart. The same audit must see
    # more than ε, or it could not have caught a PrivHP that leaks like this.
    results = audit(privhp_statistics(privhp_samples, 4))
    worst = max(results.values(), key=lambda x: x.bound)
    assert worst.bound > EPSILON, f"the audit missed a 4-point difference: {results}"

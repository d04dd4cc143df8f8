"""Shared helpers for the dpstream test suite.

Statistical tests run at a fixed false-alarm rate :data:`ALPHA` per test, with fixed
seeds: a test that passes once passes every time, and a broken sampler is caught with
overwhelming probability. Helpers here are imported by the test modules
(``from conftest import ...``; pytest puts this directory on ``sys.path``).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import dpstream
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from scipy import special, stats

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
#: The benchmark scripts: their tests run them through their command line.
BENCHES = ROOT / "benches"


#: The audits ``make test`` keeps as its smoke tier (a few seconds each): the accounting
#: of every default, one noise, counter, online and tabular audit, and a planted 2ε bug
#: in a counter and in the tabular default. ``make check`` runs every audit.
SMOKE_AUDITS = (
    "test_audit_accounting.py::",
    "test_audit_noise.py::test_discrete_laplace_mechanism",
    "test_audit_counters.py::test_counter[simple]",
    "test_audit_counters.py::test_planted_bug_counter_with_its_split_summing_to_two_epsilon",
    "test_audit_synthesis.py::test_online_epochs_one_replaced_point",
    "test_audit_tabular_default.py::test_default_tabular_stream[4101-fast]",
    "test_audit_tabular_default.py::test_planted_double_epsilon_is_flagged[4101-fast]",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the check tier by path, before ``-m`` deselects: the privacy audits
    (``tests/audit/``, but :data:`SMOKE_AUDITS`) as ``audit`` and the tests that run the
    bench scripts (``tests/test_bench_*.py``) as ``bench``. ``make test`` runs neither
    (nor ``slow``)."""
    for item in items:
        path = Path(item.path)
        if TESTS / "audit" in path.parents:
            if not any(key in item.nodeid for key in SMOKE_AUDITS):
                item.add_marker(pytest.mark.audit)
        elif path.parent == TESTS and path.name.startswith("test_bench_"):
            item.add_marker(pytest.mark.bench)


def example_binary(name: str) -> Path:
    """The release build of the Rust example ``rust/core/examples/<name>.rs``, which the
    Makefile builds before pytest (tests never build Rust). Missing, the test is skipped,
    or fails if ``DPSTREAM_REQUIRE_EXAMPLES`` is set (as ``make test`` and ``make check`` do)."""
    target = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    binary = (ROOT / target) / "release" / "examples" / name
    if not binary.exists():
        why = (
            f"{binary} is not built: run `cargo build --release -p dpstream-core "
            f"--example {name}` (make test does)"
        )
        if os.environ.get("DPSTREAM_REQUIRE_EXAMPLES"):
            pytest.fail(why)
        pytest.skip(why)
    return binary


def run_bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run ``benches/<script>`` with ``args`` in this interpreter (output captured, never
    raising on a failure: the caller checks ``returncode``)."""
    return subprocess.run(
        [sys.executable, str(BENCHES / script), *args], capture_output=True, text=True, check=False
    )


#: False-alarm rate of every statistical test (one assertion per test, Bonferroni inside).
ALPHA = 1e-6

# Every hypothesis test is derandomized (examples come from a fixed seed) so that the
# statistical properties never flake; set HYPOTHESIS_PROFILE=explore to search randomly.
settings.register_profile(
    "dpstream",
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("explore", deadline=None, derandomize=False, max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dpstream"))

# A cumulative distribution function on the integers: cdf(k) = P(Z <= k), vectorised.
IntCdf = Callable[[np.ndarray], np.ndarray]


# ---------------------------------------------------------------------------------------
# Exact distributions
# ---------------------------------------------------------------------------------------


def laplace_pmf(scale: float, z: np.ndarray | int) -> np.ndarray:
    """Discrete Laplace pmf ``tanh(1/(2b)) * exp(-|z|/b)``."""
    z = np.asarray(z, dtype=np.float64)
    return np.tanh(0.5 / scale) * np.exp(-np.abs(z) / scale)


def laplace_cdf(scale: float) -> IntCdf:
    """``P(Z <= k)`` of the discrete Laplace law: ``P(Z >= k) = p^k / (1 + p)`` for ``k >= 1``."""
    p = math.exp(-1.0 / scale)

    def cdf(k: np.ndarray) -> np.ndarray:
        k = np.asarray(k, dtype=np.float64)
        upper = np.exp(-np.abs(k) / scale) / (1.0 + p)  # P(Z >= |k|) for |k| >= 1
        # k < 0: P(Z <= k) = P(Z >= -k);  k >= 0: 1 - P(Z >= k + 1).
        right = 1.0 - np.exp(-(k + 1.0) / scale) / (1.0 + p)
        return np.where(k < 0, upper, right)

    return cdf


def laplace_tail(scale: float, k: int) -> float:
    """``P(|Z| >= k) = 2 p^k / (1 + p)`` for ``k >= 1``."""
    p = math.exp(-1.0 / scale)
    return 2.0 * math.exp(-k / scale) / (1.0 + p)


def gaussian_cdf(sigma: float) -> IntCdf:
    """``P(Z <= k)`` of the discrete Gaussian ``∝ exp(-z² / (2 sigma²))``.

    For ``sigma <= 2000`` the pmf is summed over ``|z| <= 14 sigma + 30`` (the rest has
    mass below 1e-40). Beyond, the sum over a run of integers is the normal integral over
    the run widened by 1/2 on each side (Euler-Maclaurin: absolute error below
    ``1 / (24 sigma²)``, under 1e-8 here) and the normaliser is ``sigma √(2π)`` (Poisson
    summation: relative error ``2 exp(-2π² sigma²)``).
    """
    if sigma <= 2000:
        r = math.ceil(14 * sigma) + 30
        z = np.arange(-r, r + 1, dtype=np.float64)
        w = np.exp(-(z**2) / (2.0 * sigma**2))
        cum = np.cumsum(w / w.sum())

        def cdf(k: np.ndarray) -> np.ndarray:
            idx = np.asarray(k, dtype=np.int64) + r
            out = cum[np.clip(idx, 0, 2 * r)]
            return np.where(idx < 0, 0.0, np.where(idx > 2 * r, 1.0, out))

        return cdf

    def cdf_big(k: np.ndarray) -> np.ndarray:
        return special.ndtr((np.asarray(k, dtype=np.float64) + 0.5) / sigma)

    return cdf_big


def gaussian_pmf(sigma: float, z: np.ndarray | int) -> np.ndarray:
    """Discrete Gaussian pmf, normalised numerically (or by ``sigma √(2π)`` if ``sigma >= 4``)."""
    z = np.asarray(z, dtype=np.float64)
    if sigma >= 4:
        norm = sigma * math.sqrt(2 * math.pi)
    else:
        r = int(40 * sigma) + 10
        k = np.arange(-r, r + 1, dtype=np.float64)
        norm = float(np.exp(-(k**2) / (2 * sigma**2)).sum())
    return np.exp(-(z**2) / (2 * sigma**2)) / norm


# ---------------------------------------------------------------------------------------
# Chi-square goodness of fit
# ---------------------------------------------------------------------------------------


def chi_square_critical(df: int, alpha: float = ALPHA) -> float:
    """Critical value of the chi-square statistic with ``df`` degrees of freedom."""
    return float(stats.chi2.isf(alpha, df))


def chi_square_statistic(observed: np.ndarray, expected: np.ndarray) -> float:
    observed = np.asarray(observed, dtype=np.float64)
    expected = np.asarray(expected, dtype=np.float64)
    return float(np.sum((observed - expected) ** 2 / expected))


def assert_chi_square(
    observed: Sequence[int] | np.ndarray,
    probs: Sequence[float] | np.ndarray,
    label: str,
    alpha: float = ALPHA,
) -> None:
    """Pearson chi-square test of ``observed`` counts against ``probs`` at ``alpha``."""
    observed = np.asarray(observed, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    assert observed.shape == probs.shape and len(probs) >= 2, "need at least two bins"
    assert abs(probs.sum() - 1.0) < 1e-9, f"{label}: bin probabilities sum to {probs.sum()}"
    n = observed.sum()
    expected = n * probs
    assert expected.min() >= 5, f"{label}: a bin expects only {expected.min():.2f} draws"
    stat = chi_square_statistic(observed, expected)
    df = len(probs) - 1
    crit = chi_square_critical(df, alpha)
    worst = int(np.argmax((observed - expected) ** 2 / expected))
    assert stat < crit, (
        f"{label}: chi2 = {stat:.1f} >= {crit:.1f} (df {df}); worst bin {worst}: "
        f"observed {observed[worst]:.0f}, expected {expected[worst]:.1f}"
    )


def integer_bins(cdf: IntCdf, n: int, half_width: int, min_expected: float) -> np.ndarray:
    """Inner edges ``E`` of bins ``(-inf, E0), [E0, E1), ..., [E_last, inf)`` on the integers.

    Candidate edges are all integers of ``[-half_width, half_width]`` (or about 4000 evenly
    spaced ones when that range is wider); adjacent candidate cells are then merged, left
    to right, into runs until each run expects at least ``min_expected`` of ``n`` draws. A
    short last run is merged into the one before it. The two outer bins are the tails.
    """
    if 2 * half_width + 1 <= 4001:
        cand = np.arange(-half_width, half_width + 1, dtype=np.int64)
    else:
        cand = np.unique(np.round(np.linspace(-half_width, half_width, 4001)).astype(np.int64))
    cum = np.concatenate(([0.0], cdf(cand - 1), [1.0]))
    cell_mass = np.diff(cum)  # cell i is [cand[i-1], cand[i]) with the tails at both ends
    edges: list[int] = []
    acc = 0.0
    for i, mass in enumerate(cell_mass):
        acc += mass
        if acc * n >= min_expected and i < len(cand):
            edges.append(int(cand[i]))
            acc = 0.0
    if acc * n < min_expected and edges:
        edges.pop()  # merge the short right tail into the run before it
    return np.asarray(edges, dtype=np.int64)


def binned_counts(
    samples: np.ndarray, cdf: IntCdf, edges: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Observed counts and exact probabilities of the bins with inner ``edges``."""
    idx = np.searchsorted(edges, np.ravel(samples), side="right")
    observed = np.bincount(idx, minlength=len(edges) + 1)
    cum = np.concatenate(([0.0], cdf(edges - 1), [1.0]))
    return observed, np.diff(cum)


def assert_integer_distribution(
    samples: np.ndarray,
    cdf: IntCdf,
    half_width: int,
    label: str,
    min_expected: float | None = None,
    alpha: float = ALPHA,
) -> int:
    """Chi-square test of integer ``samples`` against ``cdf``; returns the number of bins.

    Bins are runs of integers expecting at least ``min_expected`` draws (default
    ``max(100, n/200)``, so at most ~200 bins), plus a tail bin on each side.
    """
    n = int(np.size(samples))
    if min_expected is None:
        min_expected = max(100.0, n / 200)
    edges = integer_bins(cdf, n, half_width, min_expected)
    observed, probs = binned_counts(samples, cdf, edges)
    assert_chi_square(observed, probs, label, alpha)
    return len(probs)


def merge_small_categories(
    observed: np.ndarray, probs: np.ndarray, n: int, min_expected: float = 20.0
) -> tuple[np.ndarray, np.ndarray]:
    """Pool the categories expecting fewer than ``min_expected`` draws into one bin.

    If the pool itself is still that small, it is merged into the smallest other
    category. The pooling depends only on ``probs`` and ``n``, never on the data.
    """
    observed = np.asarray(observed, dtype=np.float64)
    probs = np.asarray(probs, dtype=np.float64)
    small = probs * n < min_expected
    if not small.any():
        return observed, probs
    big_obs, big_p = list(observed[~small]), list(probs[~small])
    pool_obs, pool_p = float(observed[small].sum()), float(probs[small].sum())
    if pool_p * n >= min_expected or not big_p:
        big_obs.append(pool_obs)
        big_p.append(pool_p)
    else:
        j = int(np.argmin(big_p))
        big_obs[j] += pool_obs
        big_p[j] += pool_p
    return np.asarray(big_obs), np.asarray(big_p)


# ---------------------------------------------------------------------------------------
# Binomial confidence bounds
# ---------------------------------------------------------------------------------------


def clopper_pearson_lower(k: np.ndarray | int, n: int, a: float) -> np.ndarray:
    """One-sided ``1 - a`` lower confidence bound on a binomial proportion (vectorised)."""
    k = np.asarray(k, dtype=np.float64)
    safe = np.maximum(k, 1.0)
    return np.where(k == 0, 0.0, stats.beta.ppf(a, safe, n - k + 1))


def clopper_pearson_upper(k: np.ndarray | int, n: int, a: float) -> np.ndarray:
    """One-sided ``1 - a`` upper confidence bound on a binomial proportion (vectorised)."""
    k = np.asarray(k, dtype=np.float64)
    safe = np.maximum(n - k, 1.0)
    return np.where(k == n, 1.0, stats.beta.isf(a, k + 1, safe))


def binomial_pvalue(k: int, n: int, p: float) -> float:
    """Exact two-sided binomial p-value (scipy.stats.binomtest)."""
    return float(stats.binomtest(int(k), int(n), p).pvalue)


def seeded_checkpoint_loads(
    obj: Any, decode: Callable[..., Any], name: str, path: Path
) -> list[Any]:
    """Check that ``obj``'s seeded checkpoint is refused without ``allow_seeded=True`` by
    ``decode`` (a ``from_bytes``) and by :func:`dpstream.load` (issue 28), and return the
    objects both load with the opt-in, each still marked NOT PRIVATE and saving the same
    bytes."""
    data = obj.to_bytes()
    with pytest.raises(ValueError, match=rf"seeded {name} .*NOT PRIVATE.*allow_seeded=True"):
        decode(data)
    dpstream.save(obj, path)
    with pytest.raises(ValueError, match="allow_seeded=True"):
        dpstream.load(path)
    loaded = [decode(data, allow_seeded=True), dpstream.load(path, allow_seeded=True)]
    for x in loaded:
        assert "NOT PRIVATE" in repr(x)
        assert x.to_bytes() == data
    return loaded

"""Statistical tests of the exact samplers against their exact distributions.

Every test runs at the false-alarm rate ``ALPHA`` (1e-6; Bonferroni-corrected inside a
test that makes several checks) on a FIXED seed, so it never flakes: a correct sampler
passes every time, and a sampler that is off by a few percent fails with overwhelming
probability. The ``*_detects_*`` tests feed the same checks draws from a wrong law to
show that each check can fail.

Discrete Laplace with scale b: ``P(z) = tanh(1/(2b)) exp(-|z|/b)``, ``p = exp(-1/b)``.
Discrete Gaussian with parameter sigma: ``P(z) ∝ exp(-z² / (2 sigma²))``.
"""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from conftest import (
    ALPHA,
    assert_integer_distribution,
    binomial_pvalue,
    gaussian_cdf,
    laplace_cdf,
    laplace_tail,
)
from dpstream import Rng, noise

#: The false-alarm rate of each test below: 1e-6 (``conftest.ALPHA``, shared by all modules).
FALSE_ALARM_RATE = ALPHA

LAPLACE_SCALES = [0.5, 1, 3, 10, 1e3, 1e6]
GAUSSIAN_SIGMAS = [0.5, 1, 3, 10, 1e3, 1e6]
LAPLACE_DRAWS = 1_000_000
GAUSSIAN_DRAWS = 500_000


def laplace_half_width(scale: float, n: int) -> int:
    """Beyond this, one tail expects fewer than 1e-3 of ``n`` draws."""
    return math.ceil(scale * math.log(1e3 * n)) + 5


def gaussian_half_width(sigma: float, n: int) -> int:
    return math.ceil(sigma * math.sqrt(2 * math.log(1e3 * n))) + 5


# ---------------------------------------------------------------------------------------
# Checks (shared by the tests and by the power tests)
# ---------------------------------------------------------------------------------------


def check_laplace_chi_square(z: np.ndarray, scale: float, label: str) -> int:
    return assert_integer_distribution(
        z, laplace_cdf(scale), laplace_half_width(scale, z.size), label
    )


def bin_counts(z: np.ndarray, w: int, bins: int) -> np.ndarray:
    """Counts of ``[kw, (k+1)w)`` for ``k < bins`` (half-open, unlike ``np.histogram``)."""
    k = z[z >= 0] // w
    return np.bincount(k[k < bins], minlength=bins)


def check_laplace_log_ratio(z: np.ndarray, scale: float, label: str) -> int:
    """Neighbouring bins of width ``w`` have log mass ratio exactly ``-w/scale``.

    On each side, bins ``[kw, (k+1)w)`` (and their mirror images ``(-(k+1)w, -kw]``)
    have masses in ratio ``r = p^w``. Given ``n_k + n_{k+1}``, the count ``n_{k+1}`` is
    Binomial(``n_k + n_{k+1}``, ``r / (1 + r)``): an exact binomial test per pair. Summed
    over the disjoint pairs (0,1), (2,3), ... (or (1,2), (3,4), ...) the outer counts are
    again exactly binomial given the pair totals: four pooled tests with more power. All
    checks are Bonferroni-corrected. Width 1 for small scales, ``round(scale/4)`` for
    large ones. Pairs are those whose outer bin expects at least 100 draws (fixed by the
    law, not the data). Returns the number of checks.
    """
    n = z.size
    w = max(1, round(scale / 4))
    r = math.exp(-w / scale)
    q = r / (1 + r)
    cdf = laplace_cdf(scale)
    k = np.arange(0, 100_000)
    bin_mass = cdf((k + 1) * w - 1) - cdf(k * w - 1)
    n_pairs = int(np.argmax(bin_mass * n < 100)) - 1  # bins 0..n_pairs expect >= 100
    assert n_pairs >= 2, f"{label}: too few draws for a log-ratio test"
    pos = bin_counts(z, w, n_pairs + 1)  # [kw, (k+1)w)
    neg = bin_counts(-z, w, n_pairs + 1)  # (-(k+1)w, -kw]
    checks = 2 * n_pairs + 4
    expected = -w / scale

    def check(side: str, what: str, lo: int, hi: int) -> None:
        pval = binomial_pvalue(hi, lo + hi, q)
        est = math.log(hi / lo) if lo and hi else float("-inf")
        assert pval > ALPHA / checks, (
            f"{label}: side {side}, {what} (width {w}): counts {lo}, {hi}; "
            f"log-ratio {est:.4f}, expected {expected:.4f}; p = {pval:.2e}"
        )

    for side, counts in (("+", pos), ("-", neg)):
        for i in range(n_pairs):
            check(side, f"bins {i},{i + 1}", int(counts[i]), int(counts[i + 1]))
        for start in (0, 1):
            firsts = np.arange(start, n_pairs, 2)
            lo, hi = int(counts[firsts].sum()), int(counts[firsts + 1].sum())
            check(side, f"pooled pairs from {start}", lo, hi)
    return checks


def check_laplace_tail(z: np.ndarray, scale: float, label: str) -> None:
    """``P(|Z| >= k) = 2 p^k / (1 + p)`` at ``k = round(3 scale)``, exact binomial test."""
    k = max(1, round(3 * scale))
    p_tail = laplace_tail(scale, k)
    hits = int(np.count_nonzero(np.abs(z) >= k))
    pval = binomial_pvalue(hits, z.size, p_tail)
    assert pval > ALPHA, (
        f"{label}: P(|Z| >= {k}) observed {hits / z.size:.6f}, exact {p_tail:.6f}; p = {pval:.2e}"
    )


# ---------------------------------------------------------------------------------------
# Discrete Laplace
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("scale", LAPLACE_SCALES)
def test_laplace_chi_square(scale: float) -> None:
    z = noise.discrete_laplace(scale, LAPLACE_DRAWS, rng=Rng(seed=1000 + round(math.log(scale))))
    bins = check_laplace_chi_square(z, scale, f"laplace({scale})")
    assert bins >= 5


@pytest.mark.parametrize("scale", LAPLACE_SCALES)
def test_laplace_log_ratio_of_neighbouring_counts(scale: float) -> None:
    z = noise.discrete_laplace(scale, LAPLACE_DRAWS, rng=Rng(seed=2000 + round(math.log(scale))))
    assert check_laplace_log_ratio(z, scale, f"laplace({scale})") >= 8


@pytest.mark.parametrize("scale", LAPLACE_SCALES)
def test_laplace_tail_mass(scale: float) -> None:
    z = noise.discrete_laplace(scale, LAPLACE_DRAWS, rng=Rng(seed=3000 + round(math.log(scale))))
    check_laplace_tail(z, scale, f"laplace({scale})")


@pytest.mark.parametrize("scale", [1, 1e3])
@pytest.mark.parametrize("factor", [0.9, 1.1])
def test_laplace_checks_detect_a_wrong_scale(scale: float, factor: float) -> None:
    # Draws at a scale 10% off must fail every one of the three checks.
    z = noise.discrete_laplace(scale * factor, LAPLACE_DRAWS, rng=Rng(seed=4000))
    for check in (check_laplace_chi_square, check_laplace_log_ratio, check_laplace_tail):
        with pytest.raises(AssertionError):
            check(z, scale, "wrong scale")


def test_laplace_checks_detect_a_missing_sign_rejection() -> None:
    # A classic sampler bug: a geometric magnitude with a random sign, without rejecting
    # (negative, 0), gives P(0) = 1 - p instead of (1 - p) / (1 + p).
    scale = 3
    p = math.exp(-1 / scale)
    gen = np.random.default_rng(4001)
    magnitude = gen.geometric(1 - p, LAPLACE_DRAWS) - 1
    z = np.where(gen.random(LAPLACE_DRAWS) < 0.5, -magnitude, magnitude)
    with pytest.raises(AssertionError):
        check_laplace_chi_square(z, scale, "no sign rejection")
    with pytest.raises(AssertionError):
        check_laplace_log_ratio(z, scale, "no sign rejection")


# ---------------------------------------------------------------------------------------
# Discrete Gaussian
# ---------------------------------------------------------------------------------------


def check_gaussian_chi_square(z: np.ndarray, sigma: float, label: str) -> int:
    return assert_integer_distribution(
        z, gaussian_cdf(sigma), gaussian_half_width(sigma, z.size), label
    )


@pytest.mark.parametrize("sigma", GAUSSIAN_SIGMAS)
def test_gaussian_chi_square(sigma: float) -> None:
    z = noise.discrete_gaussian(sigma, GAUSSIAN_DRAWS, rng=Rng(seed=5000 + round(math.log(sigma))))
    bins = check_gaussian_chi_square(z, sigma, f"gaussian({sigma})")
    assert bins >= 3


@pytest.mark.slow
@pytest.mark.parametrize("sigma", [1, 1e3])
@pytest.mark.parametrize("factor", [0.95, 1.05])
def test_gaussian_chi_square_detects_a_wrong_sigma(sigma: float, factor: float) -> None:
    z = noise.discrete_gaussian(sigma * factor, GAUSSIAN_DRAWS, rng=Rng(seed=5100))
    with pytest.raises(AssertionError):
        check_gaussian_chi_square(z, sigma, "wrong sigma")


def test_gaussian_is_not_a_rounded_continuous_gaussian() -> None:
    # At sigma = 0.5 the discrete Gaussian differs from round(N(0, 0.25)) by a few
    # percent in P(0); the chi-square check distinguishes them.
    rng = np.random.default_rng(5200)
    rounded = np.rint(rng.normal(0.0, 0.5, GAUSSIAN_DRAWS)).astype(np.int64)
    with pytest.raises(AssertionError):
        check_gaussian_chi_square(rounded, 0.5, "rounded normal")


# ---------------------------------------------------------------------------------------
# Exact parameters: floats, Fractions, Decimals, big rationals
# ---------------------------------------------------------------------------------------

EXACT_LAPLACE = [
    # (parameter, draws, min expected per bin)
    (0.1, 2_000_000, 50),  # the binary fraction 3602879701896397 / 2**55
    (Fraction(1, 10), 2_000_000, 50),
    (2.3, 1_000_000, None),
    (Fraction(23, 10), 1_000_000, None),
    (Decimal("0.7"), 1_000_000, None),
    (Fraction(2**70 + 1, 2**69), 300_000, None),  # parts beyond 64 bits: big-integer path
    (Fraction(10**30 + 1, 10**29), 300_000, None),
]
EXACT_GAUSSIAN = [
    (0.3, 200_000, 100),  # P(Z = 1) ≈ 0.0038
    (Fraction(3, 10), 200_000, 100),
    (2.3, 200_000, None),
    (Fraction(23, 10), 200_000, None),
    (Fraction(7, 3), 200_000, None),
    (Fraction(2**70 + 1, 2**69), 200_000, None),
]


#: The samplers of the exact-parameter tests: the sampler, the exact CDF and the audited
#: half-width for a float parameter, and the seed of the draws.
EXACT_SAMPLERS: dict[str, tuple[Any, Any, Any, int]] = {
    "laplace": (noise.discrete_laplace, laplace_cdf, laplace_half_width, 6000),
    "gaussian": (noise.discrete_gaussian, gaussian_cdf, gaussian_half_width, 6100),
}


def assert_exact_parameter_distribution(
    name: str, parameter: Any, draws: int, min_expected: float | None
) -> None:
    """``draws`` of sampler ``name`` at the exact ``parameter`` follow the distribution
    of the float nearest it."""
    draw, cdf, half_width, seed = EXACT_SAMPLERS[name]
    x = float(Fraction(parameter))
    z = draw(parameter, draws, rng=Rng(seed=seed))
    assert_integer_distribution(
        z, cdf(x), half_width(x, draws), f"{name}({parameter!r})", min_expected
    )


@pytest.mark.parametrize(
    ("scale", "draws", "min_expected"), EXACT_LAPLACE, ids=[repr(s) for s, *_ in EXACT_LAPLACE]
)
def test_laplace_exact_parameter_distribution(scale, draws, min_expected) -> None:
    assert_exact_parameter_distribution("laplace", scale, draws, min_expected)


@pytest.mark.parametrize(
    ("sigma", "draws", "min_expected"), EXACT_GAUSSIAN, ids=[repr(s) for s, *_ in EXACT_GAUSSIAN]
)
def test_gaussian_exact_parameter_distribution(sigma, draws, min_expected) -> None:
    assert_exact_parameter_distribution("gaussian", sigma, draws, min_expected)


def test_laplace_tenth_has_the_right_zero_mass() -> None:
    # P(Z != 0) = 1 - tanh(5) ≈ 9.08e-5 at scale 1/10: about 180 of 2M draws are nonzero,
    # both for the float 0.1 and for Fraction(1, 10) (their laws differ by ~1e-16).
    p_nonzero = 1 - math.tanh(5)
    for scale in (0.1, Fraction(1, 10)):
        z = noise.discrete_laplace(scale, 2_000_000, rng=Rng(seed=6200))
        hits = int(np.count_nonzero(z))
        assert binomial_pvalue(hits, z.size, p_nonzero) > ALPHA / 2, (scale, hits)


def test_bin_counts_are_half_open() -> None:
    z = np.array([-3, -1, 0, 1, 2, 3, 4, 5, 6, 7, 8])
    assert bin_counts(z, 2, 4).tolist() == [2, 2, 2, 2]  # [0,2) [2,4) [4,6) [6,8)
    assert bin_counts(-z, 1, 4).tolist() == [1, 1, 0, 1]  # 0, -1, -2, -3

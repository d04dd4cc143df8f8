"""The audits' regularized incomplete beta function: ``ln B(a, b)`` and ``ln I_x(a, b)``
(with its derivative on the log-odds scale) against exact values (rational binomial
sums, closed forms) and, at the sizes of the Clopper–Pearson bounds, against SciPy."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from dpstream.audit.incomplete_beta import log_beta, log_ibeta
from scipy import special


def ibeta(x: np.ndarray, a: float, b: float) -> tuple[np.ndarray, np.ndarray]:
    """``ln I_x(a, b)`` and ``ln dI/dv`` at the log-odds ``v`` of ``x``."""
    v = np.log(x) - np.log1p(-x)
    n = v.size
    return log_ibeta(v, np.full(n, float(a)), np.full(n, float(b)), np.full(n, log_beta(a, b)))


def exact_log_ibeta(x: Fraction, a: int, b: int) -> float:
    """``ln I_x(a, b) = ln P(Bin(a + b − 1, x) >= a)`` for integers, exactly."""
    n = a + b - 1
    tail = sum(math.comb(n, j) * x**j * (1 - x) ** (n - j) for j in range(a, n + 1))
    return math.log(tail.numerator) - math.log(tail.denominator)


@pytest.mark.parametrize("p", [1, 2, 9, 10, 37, 1000])
@pytest.mark.parametrize("q", [1.0, 2.5, 10.0, 1e3, 1e6, 1e8])
def test_log_beta_is_exact_for_an_integer_argument(p: int, q: float) -> None:
    """``B(p, q) = Γ(p) / (q (q+1) ... (q+p−1))``: no cancellation in the reference
    (SciPy's ``betaln`` is off by up to 1e-7 at these sizes)."""
    want = math.lgamma(p) - math.fsum(math.log(q + i) for i in range(p))
    assert log_beta(p, q) == pytest.approx(want, rel=1e-12, abs=1e-13)
    assert log_beta(q, p) == log_beta(p, q)


@pytest.mark.parametrize(("a", "b"), [(1, 1), (1, 9), (3, 5), (12, 2), (20, 30), (45, 15)])
def test_log_ibeta_matches_exact_binomial_tails(a: int, b: int) -> None:
    grid = [Fraction(1, 10**6), Fraction(1, 50), Fraction(1, 5), Fraction(1, 2), Fraction(3, 4)]
    grid += [Fraction(19, 20), Fraction(999_999, 10**6)]
    got, _ = ibeta(np.array([float(x) for x in grid]), a, b)
    want = [exact_log_ibeta(x, a, b) for x in grid]
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("b", [1.0, 7.5, 1e4, 1e8])
def test_log_ibeta_closed_forms_at_large_sizes(b: float) -> None:
    """``I_x(1, b) = 1 − (1 − x)^b`` with ``dI/dv = b x (1 − x)^b``, and
    ``I_x(b, 1) = x^b``, within the module's 1e-9 (a tail near 1 is evaluated as the
    other one, so ``ln I`` near 0 has that relative error)."""
    x = np.array([1e-12, 1e-9, 1e-6, 1e-3, 0.1, 0.5, 0.9])
    got, got_d = ibeta(x, 1.0, b)
    np.testing.assert_allclose(got, np.log(-np.expm1(b * np.log1p(-x))), rtol=1e-9, atol=1e-15)
    np.testing.assert_allclose(got_d, math.log(b) + np.log(x) + b * np.log1p(-x), rtol=1e-10)
    y = 1.0 - x
    got, _ = ibeta(y, b, 1.0)
    np.testing.assert_allclose(got, b * np.log(y), rtol=1e-10, atol=1e-300)


@pytest.mark.parametrize(("a", "b"), [(2.5, 1e6), (37.0, 1e6), (1e3, 1e8), (5e5, 5e5), (1e8, 40.0)])
def test_log_ibeta_matches_scipy_in_both_tails(a: float, b: float) -> None:
    """Within SciPy's own accuracy at these sizes (1e-7, as for the bounds)."""
    mean = a / (a + b)
    sd = math.sqrt(a * b / ((a + b) ** 2 * (a + b + 1)))
    x = mean + sd * np.array([-6.0, -3.0, -1.0, 0.0, 1.0, 3.0, 6.0])
    x = x[(x > 0) & (x < 1)]
    got, _ = ibeta(x, a, b)
    below, above = special.betainc(a, b, x), special.betaincc(a, b, x)
    with np.errstate(divide="ignore"):  # np.where computes both branches
        want = np.where(below < 0.5, np.log(below), np.log1p(-above))
    np.testing.assert_allclose(got, want, rtol=1e-7, atol=1e-12)

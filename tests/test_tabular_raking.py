"""Raking a model's expected batch to measured one-way margins (``refit="step"``)."""

from __future__ import annotations

import numpy as np
import pytest
from dpstream.tabular.raking import batch_margin, rake
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

shapes = st.lists(st.integers(2, 5), min_size=1, max_size=3).map(tuple)


@st.composite
def table_and_margins(draw: st.DrawFn) -> tuple[np.ndarray, dict[int, np.ndarray]]:
    shape = draw(shapes)
    cells = st.floats(0.5, 50.0)
    table = draw(hnp.arrays(np.float64, shape, elements=cells))
    target = draw(hnp.arrays(np.float64, shape, elements=cells))
    target *= table.sum() / target.sum()
    axes = draw(st.sets(st.integers(0, len(shape) - 1), min_size=1))
    margins = {
        a: target.sum(axis=tuple(b for b in range(len(shape)) if b != a)) for a in sorted(axes)
    }
    return table, margins


def margin(x: np.ndarray, a: int) -> np.ndarray:
    return x.sum(axis=tuple(b for b in range(x.ndim) if b != a))


@settings(max_examples=60, deadline=None)
@given(table_and_margins())
def test_raking_meets_the_margins_and_keeps_the_association(
    case: tuple[np.ndarray, dict[int, np.ndarray]],
) -> None:
    table, margins = case
    out = rake(table, margins, iters=2000)
    for a, m in margins.items():
        np.testing.assert_allclose(margin(out, a), m, rtol=1e-5, atol=1e-9)
    # Raking multiplies by one factor per axis: the log-table changes by a sum of
    # functions of one index each, so every 2×2 odds ratio of two axes is unchanged.
    if table.ndim >= 2:
        idx = [slice(None)] * table.ndim
        for a in range(2, table.ndim):
            idx[a] = 0
        t, o = table[tuple(idx)], out[tuple(idx)]
        ratio = lambda x: x[0, 0] * x[1, 1] / (x[0, 1] * x[1, 0])  # noqa: E731
        assert ratio(o) == pytest.approx(ratio(t), rel=1e-9)
    # The last margin raked to holds exactly after any number of sweeps.
    last = list(margins)[-1]
    np.testing.assert_allclose(margin(rake(table, margins), last), margins[last], rtol=1e-12)


def test_raking_leaves_a_matching_table_and_zero_slices_alone() -> None:
    t = np.array([[1.0, 3.0], [2.0, 4.0]])
    np.testing.assert_array_equal(rake(t, {0: margin(t, 0), 1: margin(t, 1)}), t)
    z = np.array([[0.0, 0.0], [2.0, 6.0]])
    out = rake(z, {0: np.array([4.0, 4.0])})
    np.testing.assert_array_equal(out[0], [0.0, 0.0])  # no mass to scale
    np.testing.assert_allclose(out[1], [1.0, 3.0])
    np.testing.assert_array_equal(rake(np.zeros((2, 2)), {0: np.ones(2)}), np.zeros((2, 2)))
    np.testing.assert_array_equal(rake(t, {}), t)
    # A slice of subnormal mass: m / current would overflow to inf (and inf · 0 to NaN).
    tiny = np.array([[5e-324, 0.0], [2.0, 6.0]])
    with np.errstate(all="raise"):
        out = rake(tiny, {0: np.array([4.0, 4.0]), 1: np.array([2.0, 6.0])})
    assert np.all(np.isfinite(out)) and np.all(out[0] == 0.0)


@pytest.mark.parametrize(
    ("table", "margins", "match"),
    [
        (np.array([[1.0, -1.0]]), {0: np.array([0.0])}, "non-negative"),
        (np.array([[1.0, np.nan]]), {0: np.array([1.0])}, "finite"),
        (np.ones((2, 2)), {2: np.ones(2)}, "shape"),
        (np.ones((2, 2)), {0: np.ones(3)}, "shape"),
        (np.ones((2, 2)), {0: np.array([-1.0, 5.0])}, "non-negative"),
    ],
)
def test_raking_refuses_bad_input(table: np.ndarray, margins: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        rake(table, margins)


def batch_margin_reference(
    estimates: list[list[float]], variances: list[float], expected: list[float]
) -> list[float]:
    """The docstring's rule, written out with plain floats."""
    inv = [1.0 / v for v in variances]
    m = [
        sum(e[c] * w for e, w in zip(estimates, inv, strict=True)) / sum(inv)
        for c in range(len(expected))
    ]
    var = 1.0 / sum(inv)
    d = [a - b for a, b in zip(m, expected, strict=True)]
    energy = sum(x * x for x in d)
    keep = max(0.0, 1.0 - max(len(expected) - 2, 1) * var / energy) if energy > 0 else 0.0
    out = [max(0.0, e + keep * x) for e, x in zip(expected, d, strict=True)]
    if sum(out) <= 0:
        return list(expected)
    return [x * sum(expected) / sum(out) for x in out]


@settings(max_examples=80, deadline=None)
@given(
    st.integers(2, 6).flatmap(
        lambda c: st.tuples(
            st.lists(st.lists(st.floats(-20, 200), min_size=c, max_size=c), min_size=1, max_size=3),
            st.lists(st.floats(0.1, 1e4), min_size=3, max_size=3),
            st.lists(st.floats(0.0, 100.0), min_size=c, max_size=c),
        )
    )
)
def test_batch_margin_matches_the_reference(
    case: tuple[list[list[float]], list[float], list[float]],
) -> None:
    estimates, variances, expected = case
    variances = variances[: len(estimates)]
    got = batch_margin([np.array(e) for e in estimates], variances, np.array(expected))
    want = batch_margin_reference(estimates, variances, expected)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
    assert np.all(got >= 0) and got.sum() == pytest.approx(sum(expected), abs=1e-9)


def test_batch_margin_trusts_precise_estimates_and_ignores_noise() -> None:
    expected = np.array([25.0, 25.0, 25.0, 25.0])
    seen = np.array([100.0, 0.0, 0.0, 0.0])
    np.testing.assert_allclose(batch_margin([seen], [1e-6], expected), seen, rtol=1e-6, atol=1e-6)
    # Variance far above the distance: the expected margin stays.
    np.testing.assert_array_equal(batch_margin([seen], [1e9], expected), expected)
    # Two estimates: the precise one dominates the average.
    got = batch_margin([seen, np.array([0.0, 100.0, 0.0, 0.0])], [1e-3, 1e3], expected)
    assert got[0] > 99.0
    with pytest.raises(ValueError):
        batch_margin([], [], expected)
    with pytest.raises(ValueError):
        batch_margin([seen], [0.0], expected)

"""The noise API: shapes, dtypes, reproducibility, symmetry and argument validation.

A rejected call must leave a seeded generator untouched: after the error, the next
draws equal those of a fresh generator with the same seed.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from conftest import ALPHA, binomial_pvalue
from dpstream import Rng, _core, noise
from hypothesis import given, settings
from hypothesis import strategies as st

SAMPLERS = {
    "discrete_laplace": (noise.discrete_laplace, "scale"),
    "discrete_gaussian": (noise.discrete_gaussian, "sigma"),
}
SAMPLER_NAMES = sorted(SAMPLERS)

# Positive scales of every accepted kind, small enough that no draw leaves int64.
POSITIVE_SCALES = st.one_of(
    st.floats(min_value=1e-300, max_value=1e9, allow_nan=False, allow_infinity=False),
    st.fractions(min_value=Fraction(1, 10**9), max_value=10**9, max_denominator=10**12).filter(
        lambda f: f > 0
    ),
    st.integers(min_value=1, max_value=10**9),
    st.decimals(
        min_value=Decimal("1e-9"), max_value=Decimal(10**9), allow_nan=False, allow_infinity=False
    ),
    st.floats(min_value=1e-6, max_value=1e6).map(np.float64),
    st.integers(min_value=1, max_value=10**6).map(np.int64),
)
# Scales for statistical properties: large enough that there is something to see.
VISIBLE_SCALES = st.one_of(
    st.floats(min_value=0.3, max_value=1e8, allow_nan=False, allow_infinity=False),
    st.fractions(min_value=Fraction(3, 10), max_value=10**8, max_denominator=1000),
    st.integers(min_value=1, max_value=10**8),
)
SHAPES = st.one_of(
    st.integers(min_value=0, max_value=100),
    st.lists(st.integers(min_value=0, max_value=5), min_size=0, max_size=3).map(tuple),
)
SEEDS = st.integers(min_value=0, max_value=2**64)

REFERENCE_SEED = 20240611


def assert_rng_untouched(rng: Rng, seed: int) -> None:
    """``rng`` (built from ``seed``) is exactly where a fresh generator starts.

    Raw words come first: they are read one per output, so a generator that is ahead by
    even one word differs here. (Comparing noise draws alone is not enough: samplers
    skip a data-dependent number of words per draw, so two copies of a stream that are
    a few words apart can fall into step again after a few draws.) Laplace draws then
    compare the partly used bit buffer, which the raw words do not touch.
    """
    fresh = Rng(seed=seed)
    assert np.array_equal(rng.integers(8), fresh.integers(8)), (
        "a rejected call advanced the generator"
    )
    assert np.array_equal(
        noise.discrete_laplace(3, 40, rng=rng), noise.discrete_laplace(3, 40, rng=fresh)
    ), "a rejected call used bits of the generator's buffer"


def assert_rejected(
    call: Callable[[Rng], object], name: str, errors: tuple[type[Exception], ...]
) -> None:
    """``call(rng)`` raises one of ``errors`` naming ``name`` and leaves ``rng`` untouched."""
    rng = Rng(seed=REFERENCE_SEED)
    with pytest.raises(errors) as info:
        call(rng)
    assert name in str(info.value), f"message {str(info.value)!r} does not name {name!r}"
    assert_rng_untouched(rng, REFERENCE_SEED)


@pytest.mark.parametrize(
    "consume",
    [
        lambda rng: noise.discrete_laplace(1, 1, rng=rng),
        lambda rng: noise.discrete_gaussian(1, 1, rng=rng),
        lambda rng: noise.permute_and_flip([0.0, 0.0], 1, 1, rng=rng),  # a single coin
        lambda rng: rng.integers(1),
    ],
    ids=["laplace", "gaussian", "permute_and_flip", "integers"],
)
def test_untouched_check_detects_a_single_draw(consume: Callable[[Rng], object]) -> None:
    # The "rejected calls do not draw" checks below can fail: even the smallest draw is
    # detected, for many seeds (comparing noise draws alone would miss some: see
    # assert_rng_untouched).
    for seed in range(REFERENCE_SEED, REFERENCE_SEED + 20):
        rng = Rng(seed=seed)
        consume(rng)
        with pytest.raises(AssertionError):
            assert_rng_untouched(rng, seed)


# ---------------------------------------------------------------------------------------
# Shapes, dtypes, reproducibility
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@settings(max_examples=40)
@given(scale=POSITIVE_SCALES, size=SHAPES, seed=SEEDS)
def test_dtype_shape_and_reproducibility(
    sampler: str, scale: object, size: int | tuple[int, ...], seed: int
) -> None:
    draw = SAMPLERS[sampler][0]
    out = draw(scale, size, rng=Rng(seed=seed))
    shape = size if isinstance(size, tuple) else (size,)
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.int64
    assert out.shape == shape
    assert np.array_equal(out, draw(scale, size, rng=Rng(seed=seed)))


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@pytest.mark.parametrize("size", [0, (0,), (2, 0, 3), (0, 0), (), 1, (1, 1, 1), (3, 4)])
def test_explicit_shapes(sampler: str, size: int | tuple[int, ...]) -> None:
    draw = SAMPLERS[sampler][0]
    out = draw(2, size, rng=Rng(seed=1))
    assert out.dtype == np.int64
    assert out.shape == (size if isinstance(size, tuple) else (size,))
    assert draw(2, size).shape == out.shape  # OS-seeded generator


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_numpy_integer_sizes(sampler: str) -> None:
    draw = SAMPLERS[sampler][0]
    assert draw(2, np.int64(5), rng=Rng(seed=1)).shape == (5,)
    assert draw(2, (np.uint8(2), np.int32(3)), rng=Rng(seed=1)).shape == (2, 3)


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_size_zero_does_not_draw(sampler: str) -> None:
    draw = SAMPLERS[sampler][0]
    rng = Rng(seed=REFERENCE_SEED)
    draw(5, 0, rng=rng)
    draw(5, (2, 0, 3), rng=rng)
    assert_rng_untouched(rng, REFERENCE_SEED)


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@settings(max_examples=20)
@given(scale=VISIBLE_SCALES)
def test_equal_values_of_different_types_give_equal_draws(sampler: str, scale: object) -> None:
    # The parameter is an exact rational: Fraction, float, Decimal, int and numpy forms of
    # the same number are the same parameter, so they give the same draws.
    draw = SAMPLERS[sampler][0]
    frac = Fraction(scale)  # type: ignore[arg-type]
    forms: list[object] = [frac]
    if isinstance(scale, float):
        forms += [np.float64(scale), Decimal(scale)]
    if frac.denominator == 1:
        forms += [int(frac), np.int64(int(frac)), float(frac), Decimal(int(frac))]
    expected = draw(frac, 30, rng=Rng(seed=5))
    for form in forms:
        assert np.array_equal(draw(form, 30, rng=Rng(seed=5)), expected), repr(form)


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_float_is_taken_as_its_exact_binary_value(sampler: str) -> None:
    # 0.1 is 3602879701896397 / 2**55, not one tenth: the two parameters differ, and the
    # float agrees with its exact Fraction. At scale 3 the streams diverge quickly.
    draw = SAMPLERS[sampler][0]
    as_float = draw(3.1, 200, rng=Rng(seed=8))
    assert np.array_equal(as_float, draw(Fraction(3.1), 200, rng=Rng(seed=8)))
    assert np.array_equal(as_float, draw(Decimal.from_float(3.1), 200, rng=Rng(seed=8)))
    assert not np.array_equal(as_float, draw(Fraction(31, 10), 200, rng=Rng(seed=8)))


# ---------------------------------------------------------------------------------------
# Symmetry
# ---------------------------------------------------------------------------------------


def assert_symmetric(z: np.ndarray, label: str, groups: int = 4) -> None:
    """Sign test of ``Z`` against ``-Z``, within groups of equal ``|Z|`` ranges.

    For a symmetric law, given ``|Z| = a > 0`` the sign is a fair coin. Groups are
    formed from the magnitudes only, so within each group the number of positive draws
    is exactly Binomial(group size, 1/2) under symmetry. Bonferroni over the groups.
    """
    nonzero = z[z != 0]
    if nonzero.size == 0:
        return
    mags = np.abs(nonzero)
    cuts = np.unique(np.quantile(mags, np.linspace(0, 1, groups + 1)[1:-1], method="lower"))
    group = np.searchsorted(cuts, mags, side="left")
    for g in np.unique(group):
        sel = nonzero[group == g]
        positives = int((sel > 0).sum())
        p = binomial_pvalue(positives, sel.size, 0.5)
        assert p > ALPHA / groups, (
            f"{label}: {positives} positive of {sel.size} draws with |Z| in group {g} "
            f"(cuts {cuts.tolist()}), p = {p:.2e}"
        )


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@settings(max_examples=15)
@given(scale=VISIBLE_SCALES, seed=SEEDS)
def test_symmetry(sampler: str, scale: object, seed: int) -> None:
    draw = SAMPLERS[sampler][0]
    z = draw(scale, 20_000, rng=Rng(seed=seed))
    assert_symmetric(z, f"{sampler}({scale})")


def test_symmetry_check_detects_asymmetry() -> None:
    # The symmetry check must be able to fail: |Z| with a few signs flipped is not symmetric.
    z = np.abs(noise.discrete_laplace(5, 20_000, rng=Rng(seed=4)))
    z[::10] *= -1
    with pytest.raises(AssertionError):
        assert_symmetric(z, "folded laplace")


# ---------------------------------------------------------------------------------------
# Rejected arguments
# ---------------------------------------------------------------------------------------

BAD_SCALES: list[tuple[object, type[Exception]]] = [
    (0, ValueError),
    (0.0, ValueError),
    (-0.0, ValueError),
    (-1, ValueError),
    (-1e-300, ValueError),
    (Fraction(-1, 3), ValueError),
    (Fraction(0), ValueError),
    (Decimal(0), ValueError),
    (Decimal("-2.5"), ValueError),
    (np.float64(-3.0), ValueError),
    (np.int64(0), ValueError),
    (float("nan"), ValueError),
    (np.float64("nan"), ValueError),
    (float("inf"), ValueError),
    (float("-inf"), ValueError),
    (np.float32("inf"), ValueError),
    (Decimal("NaN"), ValueError),
    (Decimal("sNaN"), ValueError),
    (Decimal("Infinity"), ValueError),
    (True, TypeError),
    (False, TypeError),
    (np.bool_(True), TypeError),
    ("1", TypeError),
    ("0.5", TypeError),
    (None, TypeError),
    (1 + 0j, TypeError),
    (complex(2, 1), TypeError),
    ([1.0], TypeError),
    (np.array([1.0]), TypeError),
    (b"1", TypeError),
]


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@pytest.mark.parametrize(("bad", "error"), BAD_SCALES, ids=[repr(b) for b, _ in BAD_SCALES])
def test_bad_scale_is_rejected(sampler: str, bad: object, error: type[Exception]) -> None:
    draw, name = SAMPLERS[sampler]
    assert_rejected(lambda rng: draw(bad, 10, rng=rng), name, (error,))


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@settings(max_examples=30)
@given(
    bad=st.one_of(
        st.floats(max_value=0.0, allow_nan=False),
        st.fractions(max_value=0),
        st.integers(max_value=0),
        st.decimals(max_value=0, allow_nan=False),
    )
)
def test_any_non_positive_scale_is_rejected(sampler: str, bad: object) -> None:
    draw, name = SAMPLERS[sampler]
    assert_rejected(lambda rng: draw(bad, 10, rng=rng), name, (ValueError,))


BAD_SIZES: list[tuple[object, type[Exception]]] = [
    (-1, ValueError),
    (-(2**70), ValueError),
    ((2, -1), ValueError),
    ((-3,), ValueError),
    (np.int64(-2), ValueError),
    (1.5, TypeError),
    (2.0, TypeError),
    (np.float64(2.0), TypeError),
    ((2, 1.0), TypeError),
    ("3", TypeError),
    (None, TypeError),
    (True, TypeError),
    ((2, True), TypeError),
    (np.bool_(True), TypeError),
    ([2, 3], TypeError),
    (Fraction(3), TypeError),
    (1j, TypeError),
]


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@pytest.mark.parametrize(("bad", "error"), BAD_SIZES, ids=[repr(b) for b, _ in BAD_SIZES])
def test_bad_size_is_rejected(sampler: str, bad: object, error: type[Exception]) -> None:
    draw = SAMPLERS[sampler][0]
    assert_rejected(lambda rng: draw(1, bad, rng=rng), "size", (error,))


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@settings(max_examples=20)
@given(
    bad=st.one_of(
        st.integers(max_value=-1),
        st.lists(st.integers(-5, 5), min_size=1, max_size=3)
        .filter(lambda d: min(d) < 0)
        .map(tuple),
    )
)
def test_any_negative_size_is_rejected(sampler: str, bad: int | tuple[int, ...]) -> None:
    draw = SAMPLERS[sampler][0]
    assert_rejected(lambda rng: draw(1, bad, rng=rng), "size", (ValueError,))


BAD_RNGS: list[object] = [
    42,
    "seed",
    np.random.default_rng(0),
    np.random.RandomState(0),
    __import__("random").Random(0),
    _core.Rng(None),  # the raw core generator is not the public type
    Rng,  # the class, not an instance
]


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@pytest.mark.parametrize("bad", BAD_RNGS, ids=[type(b).__name__ for b in BAD_RNGS])
def test_bad_rng_is_rejected(sampler: str, bad: object) -> None:
    draw = SAMPLERS[sampler][0]
    with pytest.raises(TypeError, match="rng"):
        draw(1, 5, rng=bad)


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_rng_is_keyword_only(sampler: str) -> None:
    draw = SAMPLERS[sampler][0]
    with pytest.raises(TypeError):
        draw(1, 5, Rng(seed=1))


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_rejected_scale_wins_over_a_valid_size(sampler: str) -> None:
    # Validation happens before any allocation or draw: a bad scale with a huge (but
    # representable) size fails fast instead of allocating.
    draw, name = SAMPLERS[sampler]
    assert_rejected(lambda rng: draw(-1, 10**15, rng=rng), name, (ValueError,))


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@pytest.mark.parametrize("size", [10**12, 2**62, (2**31, 2**31)])
def test_unallocatable_size_raises_memory_error(sampler: str, size: object) -> None:
    draw = SAMPLERS[sampler][0]
    rng = Rng(seed=REFERENCE_SEED)
    try:
        draw(1, size, rng=rng)
    except MemoryError as exc:
        assert "allocate" in str(exc)
    except BaseException as exc:  # PanicException derives from BaseException
        pytest.fail(f"raised {type(exc).__name__}: {exc}")
    else:
        pytest.fail(f"no error for size {size}")
    assert_rng_untouched(rng, REFERENCE_SEED)


def test_unallocatable_integers_raise_memory_error() -> None:
    with pytest.raises(MemoryError):
        Rng().integers(10**12)


# ---------------------------------------------------------------------------------------
# Overflow of astronomically large scales
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
@pytest.mark.parametrize("scale", [2**56 + 1, 2**70, 1e300, Fraction(2**200 + 1, 3)])
def test_scale_that_could_overflow_int64_is_refused(sampler: str, scale: object) -> None:
    # Above 2**56, an int64 draw could overflow; the call is refused up front and the
    # generator is not touched.
    draw, name = SAMPLERS[sampler]
    rng = Rng(seed=REFERENCE_SEED)
    with pytest.raises(ValueError, match=rf"{name} must be at most 2\^56"):
        draw(scale, 100, rng=rng)
    assert_rng_untouched(rng, REFERENCE_SEED)


@pytest.mark.parametrize("sampler", SAMPLER_NAMES)
def test_largest_scale_is_accepted(sampler: str) -> None:
    draw = SAMPLERS[sampler][0]
    out = draw(2**56, 1000, rng=Rng(seed=4))
    assert out.dtype == np.int64
    assert np.abs(out).max() > 2**50


def test_scale_just_below_overflow_still_works() -> None:
    # 2**50 leaves ~2**13 standard deviations of headroom below 2**63.
    out = noise.discrete_laplace(2**50, 1000, rng=Rng(seed=3))
    assert np.abs(out).max() > 2**45
    assert math.isfinite(float(np.abs(out).mean()))


# ---------------------------------------------------------------------------------------
# permute_and_flip
# ---------------------------------------------------------------------------------------


def pf(scores: object, epsilon: object = 1, sensitivity: object = 1, **kw: object) -> int:
    return noise.permute_and_flip(scores, epsilon, sensitivity, **kw)  # type: ignore[arg-type]


SCORE_VECTORS = st.lists(
    st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=8,
)


@settings(max_examples=40)
@given(scores=SCORE_VECTORS, eps=POSITIVE_SCALES, sens=POSITIVE_SCALES, seed=SEEDS)
def test_pf_returns_a_valid_index_reproducibly(
    scores: list[float], eps: object, sens: object, seed: int
) -> None:
    out = pf(scores, eps, sens, rng=Rng(seed=seed))
    assert type(out) is int
    assert 0 <= out < len(scores)
    assert out == pf(scores, eps, sens, rng=Rng(seed=seed))
    assert pf(np.asarray(scores), eps, sens, rng=Rng(seed=seed)) == out
    assert pf(tuple(scores), eps, sens, rng=Rng(seed=seed)) == out


def test_pf_single_candidate() -> None:
    for scores in ([5.0], [0], np.array([-3], dtype=np.int8)):
        assert pf(scores, rng=Rng(seed=1)) == 0


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint64, np.float16, np.float32]
)
def test_pf_accepts_numeric_dtypes(dtype: type) -> None:
    scores = np.array([0, 3, 1, 2], dtype=dtype)
    out = pf(scores, rng=Rng(seed=9))
    # The same values as float64 give the same choice from the same stream.
    assert out == pf(scores.astype(np.float64), rng=Rng(seed=9))


def test_pf_accepts_non_contiguous_scores() -> None:
    base = np.arange(20, dtype=np.float64)
    view = base[::4]
    assert not view.flags.c_contiguous
    assert pf(view, rng=Rng(seed=2)) == pf(view.copy(), rng=Rng(seed=2))


def test_pf_integer_scores_up_to_2_53_are_accepted() -> None:
    big = 2**53
    assert pf([big, -big, 0], 1e6, 1, rng=Rng(seed=1)) == 0
    assert pf(np.array([big, big - 1], dtype=np.int64), 1e6, 1, rng=Rng(seed=1)) == 0


@pytest.mark.skipif(
    np.finfo(np.longdouble).nmant <= 52, reason="long double is float64 on this platform"
)
def test_pf_long_double_scores_are_exact_or_refused() -> None:
    scores = np.array([1, 1], dtype=np.longdouble)
    scores[0] += np.longdouble(2) ** -60  # exact in the 64-bit mantissa, lost in float64
    assert scores[0] > scores[1]
    rng = Rng(seed=1)
    try:
        picks = {pf(scores, 2**70, 1, rng=rng) for _ in range(200)}
    except (TypeError, ValueError):
        return
    # Gap 2**-60 at ε = 2**70: index 1 is taken with probability exp(-2**9) per visit.
    assert picks == {0}


BAD_SCORES: list[tuple[object, type[Exception]]] = [
    ([], ValueError),
    (np.array([], dtype=np.float64), ValueError),
    (np.zeros((2, 2)), ValueError),
    ([[1.0, 2.0]], ValueError),
    (np.float64(3.0), ValueError),  # 0-d
    ([1.0, float("nan")], ValueError),
    ([float("inf"), 0.0], ValueError),
    ([0.0, float("-inf")], ValueError),
    (np.array([1e308, 1e309]), ValueError),
    (np.array([True, False]), TypeError),
    ([True, False], TypeError),
    (["a", "b"], TypeError),
    (np.array(["1", "2"]), TypeError),
    ([1 + 0j, 2], TypeError),
    ([None, 1.0], TypeError),
    ([Fraction(1), Fraction(2)], TypeError),
    ([2**53 + 1, 0], ValueError),
    ([0, -(2**53) - 1], ValueError),
    (np.array([2**63 - 1, 0], dtype=np.int64), ValueError),
    (np.array([-(2**63), 0], dtype=np.int64), ValueError),
    (np.array([2**64 - 1, 0], dtype=np.uint64), ValueError),
    ([2**70, 0], (TypeError, ValueError)),  # Python ints beyond int64: object dtype
]


@pytest.mark.parametrize(
    ("bad", "error"), BAD_SCORES, ids=[f"scores{i}" for i in range(len(BAD_SCORES))]
)
def test_pf_bad_scores_are_rejected(bad: object, error: type[Exception]) -> None:
    errors = error if isinstance(error, tuple) else (error,)
    assert_rejected(lambda rng: pf(bad, rng=rng), "scores", errors)


@pytest.mark.parametrize("name", ["epsilon", "sensitivity"])
@pytest.mark.parametrize(("bad", "error"), BAD_SCALES, ids=[repr(b) for b, _ in BAD_SCALES])
def test_pf_bad_epsilon_or_sensitivity_is_rejected(
    name: str, bad: object, error: type[Exception]
) -> None:
    kwargs = {"epsilon": 1, "sensitivity": 1, name: bad}
    assert_rejected(
        lambda rng: noise.permute_and_flip([0.0, 1.0], rng=rng, **kwargs),  # type: ignore[arg-type]
        name,
        (error,),
    )


@pytest.mark.parametrize("bad", BAD_RNGS, ids=[type(b).__name__ for b in BAD_RNGS])
def test_pf_bad_rng_is_rejected(bad: object) -> None:
    with pytest.raises(TypeError, match="rng"):
        pf([0.0, 1.0], rng=bad)


def test_pf_rejection_order_does_not_draw() -> None:
    # Several bad arguments at once: still an error, still no draw.
    assert_rejected(lambda rng: pf([], -1, 0, rng=rng), "epsilon", (ValueError,))

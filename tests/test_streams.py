"""Tests of dpstream.streams: reproducible test streams on [0,1]^d.

Statistical tests run at the suite's false-alarm rate ALPHA with fixed seeds (one
assertion per test, or Bonferroni inside).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from conftest import ALPHA, assert_chi_square, binomial_pvalue, merge_small_categories
from dpstream import _core, streams

Generator = Callable[..., npt.NDArray[np.float64]]

GENERATORS: dict[str, Generator] = {
    "uniform": streams.uniform,
    "multifractal": lambda n, d, *, seed: streams.multifractal(n, d, skew=0.7, seed=seed),
    "multifractal-shallow": lambda n, d, *, seed: streams.multifractal(
        n, d, skew=0.9, depth=3, seed=seed
    ),
    "clustered": streams.clustered,
    "clustered-wide": lambda n, d, *, seed: streams.clustered(
        n, d, n_clusters=2, spread=0.5, seed=seed
    ),
}


def cell_index(x: npt.NDArray[np.float64], level: int) -> npt.NDArray[np.int64]:
    """Level-``level`` cell of each point in dpstream's partition, first cut most significant.

    Cut ``l`` halves coordinate ``l mod d`` for the ``(l // d + 1)``-th time; its bit is
    ``floor(x_j · 2^(l // d + 1)) mod 2`` (0 = lower half).
    """
    d = x.shape[1]
    idx = np.zeros(x.shape[0], dtype=np.int64)
    for cut in range(level):
        j, k = cut % d, cut // d + 1
        bit = np.floor(x[:, j] * 2.0**k).astype(np.int64) & 1
        idx = 2 * idx + bit
    return idx


def multifractal_cell_probs(level: int, skew: float) -> npt.NDArray[np.float64]:
    """``B^zeros · (1 − B)^ones`` for every level-``level`` path, in path order."""
    paths = np.arange(2**level)
    ones = np.array([bin(int(p)).count("1") for p in paths])
    return np.asarray(skew ** (level - ones) * (1 - skew) ** ones, dtype=np.float64)


# ---------------------------------------------------------------------------------------
# Shapes, ranges, reproducibility
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", GENERATORS)
@pytest.mark.parametrize(("n", "d"), [(0, 1), (1, 1), (1000, 1), (500, 2), (300, 7)])
def test_shape_dtype_range(name: str, n: int, d: int) -> None:
    x = GENERATORS[name](n, d, seed=1)
    assert isinstance(x, np.ndarray)
    assert x.shape == (n, d)
    assert x.dtype == np.float64
    assert np.all(np.isfinite(x))
    assert np.all(x >= 0.0)
    assert np.all(x <= 1.0)
    if not name.startswith("clustered"):
        assert np.all(x < 1.0)  # uniform and multifractal never produce the upper face


@pytest.mark.parametrize("name", GENERATORS)
def test_reproducible_by_seed(name: str) -> None:
    gen = GENERATORS[name]
    a = gen(2000, 3, seed=42)
    np.testing.assert_array_equal(a, gen(2000, 3, seed=42))
    assert not np.array_equal(a, gen(2000, 3, seed=43))
    assert not np.array_equal(gen(2000, 3, seed=None), gen(2000, 3, seed=None))


def test_seed_is_required() -> None:
    with pytest.raises(TypeError):
        streams.uniform(3, 2)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        streams.multifractal(3, 2, skew=0.6)  # type: ignore[call-arg]


# ---------------------------------------------------------------------------------------
# Uniform
# ---------------------------------------------------------------------------------------


def test_uniform_is_uniform_on_level_cells() -> None:
    x = streams.uniform(100_000, 3, seed=7)
    level = 9  # 512 cells, 3 cuts per coordinate
    observed = np.bincount(cell_index(x, level), minlength=2**level)
    assert_chi_square(observed, np.full(2**level, 2.0**-level), "uniform, level 9")


# ---------------------------------------------------------------------------------------
# MultiFractal
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("d", "level"), [(1, 8), (2, 8), (3, 9)])
def test_multifractal_half_is_uniform(d: int, level: int) -> None:
    x = streams.multifractal(100_000, d, skew=0.5, seed=11 + d)
    observed = np.bincount(cell_index(x, level), minlength=2**level)
    assert_chi_square(observed, np.full(2**level, 2.0**-level), f"B = 1/2, d = {d}")


def test_multifractal_level1_lower_half_of_coordinate0_has_mass_b() -> None:
    n, b = 100_000, 0.8
    x = streams.multifractal(n, 2, skew=b, seed=21)
    lower = int(np.count_nonzero(x[:, 0] < 0.5))
    assert binomial_pvalue(lower, n, b) > ALPHA, f"{lower} of {n} in the lower half"


def test_multifractal_level2_lower_half_of_coordinate1_has_mass_b() -> None:
    # The second cut halves coordinate 1 (d = 2) inside each level-1 half, with the lower
    # half heavy again: marginally and conditionally on the first bit, mass B.
    n, b = 100_000, 0.8
    x = streams.multifractal(n, 2, skew=b, seed=22)
    first = x[:, 0] < 0.5
    alpha = ALPHA / 3  # three binomial tests
    for label, rows in [("all", np.ones(n, bool)), ("x0 < 1/2", first), ("x0 >= 1/2", ~first)]:
        k, m = int(np.count_nonzero(x[rows, 1] < 0.5)), int(np.count_nonzero(rows))
        assert binomial_pvalue(k, m, b) > alpha, f"{label}: {k} of {m} have x1 < 1/2"


@pytest.mark.parametrize(("d", "skew"), [(1, 0.8), (2, 0.8), (3, 0.65), (2, 0.95)])
def test_multifractal_cell_masses_follow_the_product_law(d: int, skew: float) -> None:
    n, level = 200_000, 8
    x = streams.multifractal(n, d, skew=skew, seed=31 + d)
    observed = np.bincount(cell_index(x, level), minlength=2**level)
    obs, probs = merge_small_categories(observed, multifractal_cell_probs(level, skew), n)
    assert_chi_square(obs, probs, f"MultiFractal({skew}), d = {d}, level {level}")


def test_multifractal_is_uniform_inside_its_truncated_cells() -> None:
    # skew = 1 sends every point down the all-lower path; after depth = 3 cuts (d = 2) the
    # cell is [0, 1/4) × [0, 1/2), and inside it the point is uniform: checked on the
    # 8 × 8 grid of that cell.
    x = streams.multifractal(64_000, 2, skew=1.0, depth=3, seed=41)
    assert np.all(x[:, 0] < 0.25)
    assert np.all(x[:, 1] < 0.5)
    scaled = np.floor(x * np.array([4.0 * 8, 2.0 * 8])).astype(np.int64)
    observed = np.bincount(scaled[:, 0] * 8 + scaled[:, 1], minlength=64)
    assert_chi_square(observed, np.full(64, 1 / 64), "uniform inside the depth-3 cell")


def test_multifractal_depth_zero_is_uniform() -> None:
    x = streams.multifractal(50_000, 2, skew=0.9, depth=0, seed=43)
    observed = np.bincount(cell_index(x, 6), minlength=64)
    assert_chi_square(observed, np.full(64, 1 / 64), "depth 0")


def test_multifractal_skew_one_default_depth_is_tiny_corner() -> None:
    x = streams.multifractal(1000, 3, skew=1.0, seed=44)
    assert np.all(x < 2.0**-30)  # 30 cuts per coordinate by default


def test_multifractal_deepest_cells_stay_half_open() -> None:
    # 53 cuts per coordinate: cells of side 2^-53, the float64 resolution in [1/2, 1).
    x = streams.multifractal(20_000, 1, skew=0.5, depth=53, seed=45)
    assert np.all(x < 1.0)
    assert np.all(x >= 0.0)


@pytest.mark.skipif(
    not hasattr(_core, "encode_points_array"), reason="dpstream.partition.encode not built yet"
)
def test_multifractal_paths_agree_with_dpstream_partition() -> None:
    from dpstream import partition

    x = streams.multifractal(5000, 3, skew=0.7, seed=46)
    level = 20
    got = partition.encode(x, level).astype(np.int64)
    np.testing.assert_array_equal(got, cell_index(x, level))


# ---------------------------------------------------------------------------------------
# Clustered
# ---------------------------------------------------------------------------------------


def test_clustered_zero_spread_puts_points_on_the_centres() -> None:
    x = streams.clustered(1000, 4, n_clusters=3, spread=0.0, seed=51)
    centres = np.unique(x, axis=0)
    assert len(centres) == 3
    assert np.all((centres >= 0.1) & (centres <= 0.9))


def test_clustered_points_concentrate_near_centres() -> None:
    x = streams.clustered(20_000, 2, n_clusters=4, spread=0.01, seed=52)
    centres = np.unique(streams.clustered(20_000, 2, n_clusters=4, spread=0.0, seed=52), axis=0)
    dist = np.abs(x[:, None, :] - centres[None, :, :]).max(axis=2).min(axis=1)
    # Within 6 standard deviations of a centre in ℓ∞: P(miss) < 2·2·1e-9 per point.
    assert np.all(dist < 0.06)


# ---------------------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda: streams.uniform(-1, 2, seed=0), ValueError, "n must be at least 0"),
        (lambda: streams.uniform(3, 0, seed=0), ValueError, "d must be at least 1"),
        (lambda: streams.uniform(3.0, 2, seed=0), TypeError, "n must be an int"),
        (lambda: streams.uniform(True, 2, seed=0), TypeError, "n must be an int"),
        (lambda: streams.uniform(3, 2, seed=-5), ValueError, "seed must be non-negative"),
        (lambda: streams.uniform(3, 2, seed="x"), TypeError, "seed must be an int"),
        (lambda: streams.multifractal(3, 2, skew=0.4, seed=0), ValueError, r"\[1/2, 1\]"),
        (lambda: streams.multifractal(3, 2, skew=1.01, seed=0), ValueError, r"\[1/2, 1\]"),
        (lambda: streams.multifractal(3, 2, skew=float("nan"), seed=0), ValueError, "finite"),
        (lambda: streams.multifractal(3, 2, skew="0.7", seed=0), TypeError, "real number"),
        (
            lambda: streams.multifractal(3, 2, skew=0.7, depth=107, seed=0),
            ValueError,
            "depth must be at most",
        ),
        (
            lambda: streams.multifractal(3, 2, skew=0.7, depth=-1, seed=0),
            ValueError,
            "depth must be at least 0",
        ),
        (lambda: streams.clustered(3, 2, n_clusters=0, seed=0), ValueError, "n_clusters"),
        (lambda: streams.clustered(3, 2, spread=-0.1, seed=0), ValueError, "spread"),
        (lambda: streams.clustered(3, 2, spread=float("inf"), seed=0), ValueError, "finite"),
    ],
)
def test_bad_arguments(call: Callable[[], object], error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        call()


def test_multifractal_accepts_fraction_skew() -> None:
    from fractions import Fraction

    a = streams.multifractal(100, 2, skew=Fraction(3, 4), seed=3)
    np.testing.assert_array_equal(a, streams.multifractal(100, 2, skew=0.75, seed=3))

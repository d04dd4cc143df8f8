"""dpstream.Rng: seeding, reproducibility, the NOT PRIVATE marking, seed validation."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import dpstream
import numpy as np
import pytest
from conftest import ALPHA, binomial_pvalue
from dpstream import Rng, noise
from hypothesis import given, settings
from hypothesis import strategies as st

SEEDS = st.integers(min_value=0, max_value=2**256 - 1)


def laplace_draws(rng: Rng, n: int = 64) -> np.ndarray:
    return noise.discrete_laplace(1000, n, rng=rng)


@settings(max_examples=30)
@given(seed=SEEDS)
def test_same_seed_gives_same_draws(seed: int) -> None:
    a, b = Rng(seed=seed), Rng(seed=seed)
    assert np.array_equal(laplace_draws(a), laplace_draws(b))
    # The streams stay in step across calls and across samplers.
    assert np.array_equal(
        noise.discrete_gaussian(7, 10, rng=a), noise.discrete_gaussian(7, 10, rng=b)
    )
    assert np.array_equal(a.integers(5), b.integers(5))
    assert np.array_equal(laplace_draws(a), laplace_draws(b))


@settings(max_examples=30)
@given(pair=st.lists(SEEDS, min_size=2, max_size=2, unique=True))
def test_different_seeds_give_different_draws(pair: list[int]) -> None:
    # 64 draws at scale 1000: two independent streams agree with probability < 1e-150.
    a, b = (laplace_draws(Rng(seed=s)) for s in pair)
    assert not np.array_equal(a, b)


@pytest.mark.parametrize("bit", [0, 63, 64, 128, 255])
def test_every_seed_byte_matters(bit: int) -> None:
    # Seeds that differ in a single high bit must give different streams: the whole
    # 256-bit key is used, not just a 64-bit prefix.
    assert not np.array_equal(laplace_draws(Rng(seed=0)), laplace_draws(Rng(seed=1 << bit)))


def test_successive_draws_of_one_generator_differ() -> None:
    rng = Rng(seed=3)
    assert not np.array_equal(laplace_draws(rng), laplace_draws(rng))


def test_os_seeded_generators_differ() -> None:
    a, b = Rng(), Rng()
    assert not np.array_equal(laplace_draws(a), laplace_draws(b))
    assert not np.array_equal(a.integers(4), b.integers(4))
    # rng=None draws from a fresh OS-seeded generator on every call.
    assert not np.array_equal(noise.discrete_laplace(1000, 64), noise.discrete_laplace(1000, 64))


def test_seeded_repr_says_not_private() -> None:
    for seed in (0, 12345, 2**256 - 1, bytes(range(32))):
        rng = Rng(seed=seed)
        assert "NOT PRIVATE" in repr(rng)
        assert rng.seeded is True


def test_os_seeded_repr_does_not_say_not_private() -> None:
    rng = Rng()
    assert "NOT PRIVATE" not in repr(rng)
    assert "seed" not in repr(rng).lower()
    assert rng.seeded is False
    assert Rng(seed=None).seeded is False


def test_seed_equal_to_zero_is_a_seed_not_os_entropy() -> None:
    # A falsy seed must not be mistaken for "no seed".
    assert Rng(seed=0).seeded
    assert np.array_equal(laplace_draws(Rng(seed=0)), laplace_draws(Rng(seed=0)))


def test_numpy_integer_seed_is_accepted() -> None:
    assert np.array_equal(laplace_draws(Rng(seed=np.uint64(9))), laplace_draws(Rng(seed=9)))
    assert np.array_equal(laplace_draws(Rng(seed=np.int32(9))), laplace_draws(Rng(seed=9)))


def test_bytes_seed() -> None:
    key = bytes(range(32))
    a, b = Rng(seed=key), Rng(seed=key)
    assert a.seeded
    assert np.array_equal(laplace_draws(a), laplace_draws(b))
    assert not np.array_equal(laplace_draws(Rng(seed=key)), laplace_draws(Rng(seed=bytes(32))))


def test_bytearray_seed_is_accepted_like_bytes() -> None:
    key = bytes(range(32))
    assert np.array_equal(laplace_draws(Rng(seed=bytearray(key))), laplace_draws(Rng(seed=key)))


@pytest.mark.parametrize("length", [0, 1, 16, 31, 33, 64])
def test_bytes_seed_of_wrong_length_is_refused(length: int) -> None:
    with pytest.raises(ValueError, match="32 bytes"):
        Rng(seed=bytes(length))


@pytest.mark.parametrize("seed", [-1, -(2**300), 2**256, 2**256 + 5, 2**1000])
def test_out_of_range_seed_is_refused(seed: int) -> None:
    with pytest.raises(ValueError, match="seed"):
        Rng(seed=seed)


def test_largest_seed_is_accepted() -> None:
    assert Rng(seed=2**256 - 1).seeded


@pytest.mark.parametrize(
    "seed",
    [
        *(True, False, np.bool_(True), 1.0, 0.5, float("nan"), np.float64(3.0)),
        *("1", "seed", Fraction(1), Decimal(1), [1, 2], (1,), 1j, object()),
    ],
)
def test_seed_of_wrong_type_is_refused(seed: object) -> None:
    with pytest.raises(TypeError, match="seed"):
        Rng(seed=seed)  # type: ignore[arg-type]


@given(size=st.integers(min_value=0, max_value=300), seed=SEEDS)
@settings(max_examples=25)
def test_integers(size: int, seed: int) -> None:
    out = Rng(seed=seed).integers(size)
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.uint64
    assert out.shape == (size,)
    assert np.array_equal(out, Rng(seed=seed).integers(size))


def test_integers_are_uniform_64_bit() -> None:
    # Every one of the 64 bits is a fair coin: a binomial check per bit at 1e-6 overall.
    n = 20_000
    words = Rng(seed=2024).integers(n)
    bits = (words[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    ones = bits.sum(axis=0)
    pvals = [binomial_pvalue(int(k), n, 0.5) for k in ones]
    assert min(pvals) > ALPHA / 64, f"bit frequencies {ones.tolist()}"
    assert len(np.unique(words)) == n


def test_integers_size_zero_and_numpy_size() -> None:
    rng = Rng(seed=1)
    assert rng.integers(0).shape == (0,)
    assert rng.integers(np.int64(3)).shape == (3,)


@pytest.mark.parametrize("size", [-1, -(2**70), 1.5, 2.0, "3", None, True, (2,)])
def test_integers_bad_size_is_refused(size: object) -> None:
    with pytest.raises((TypeError, ValueError), match="size"):
        Rng(seed=1).integers(size)  # type: ignore[arg-type]


def test_public_api_exports() -> None:
    assert dpstream.Rng is Rng
    assert isinstance(dpstream.__version__, str)
    assert set(noise.__all__) == {"discrete_gaussian", "discrete_laplace", "permute_and_flip"}


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_generators_refuse_to_be_duplicated(how: str) -> None:
    # A duplicated generator would replay the same noise in two releases.
    import copy
    import pickle

    rng = Rng()
    op = {"copy": copy.copy, "deepcopy": copy.deepcopy, "pickle": pickle.dumps}[how]
    with pytest.raises(TypeError, match="repeat the same noise"):
        op(rng)

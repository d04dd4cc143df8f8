"""Continual-release PrivHP in fixed memory (``OnlineSynthesizer.for_memory``,
``method="privhp"``): releases, the cap on epochs, checkpoints, fixed memory, bad input."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _helpers import assert_bad_batches_change_nothing, needs_statm, rss_growth
from dpstream import OnlineSynthesizer, Rng, load, save, streams

# Seeded checkpoints need an explicit opt-in to load (issue 28).
SEEDED_OK: dict[str, bool] = {"allow_seeded": True}

MIB = 2**20


def blob_points(n: int, seed: int) -> np.ndarray:
    return streams.clustered(n, 2, n_clusters=3, spread=0.03, seed=seed)


def make(seed: int | None = 1, *, r: int = 16, mem: int = MIB, n: int = 100_000):
    rng = None if seed is None else Rng(seed=seed)
    return OnlineSynthesizer.for_memory(
        1, 2, memory_bytes=mem, expected_n=n, max_releases=r, rng=rng
    )


def test_for_memory_is_the_privhp_method() -> None:
    s = make()
    assert s.method == "privhp" and s.max_releases == 16 and s.epochs == 0
    assert repr(s).startswith("OnlineSynthesizer(epsilon=1, dim=2, method='privhp', t=0")
    assert "NOT PRIVATE" in repr(s)
    assert 0 < s.memory_bytes() <= MIB
    assert s.depth >= 1 and s.n_regions > 0
    assert not hasattr(OnlineSynthesizer(1, 2), "max_releases")  # PrivHPSynthesizer's only
    with pytest.raises(ValueError, match=r"use OnlineSynthesizer\.for_memory"):
        OnlineSynthesizer(1, 2, method="privhp")
    # The per-block budget is ε/(2L), L = floor(log2 16) + 1 = 5.
    assert s._inner.levels == 5 and s._inner.block_epsilon() == (1, 10)


def test_releases_have_t_rows_and_follow_the_data() -> None:
    s = make(2)
    x = np.random.default_rng(3).random((20_000, 2)) / 4  # all in [0, 1/4)^2
    for i in range(1, 4):
        s.update(x[(i - 1) * 5000 : i * 5000])
        out = s.release()
        assert out.shape == (5000 * i, 2) and ((out >= 0) & (out <= 1)).all()
        assert s.epochs == i
    assert ((s.release() < 0.3).all(axis=1)).mean() > 0.9
    lower, upper, counts = s.cells()
    assert counts.dtype == np.int64 and counts.sum() == s.t == 15_000
    assert lower.shape == upper.shape == (len(counts), 2) and (lower < upper).all()
    assert s.release(17).shape == (17, 2)
    # No new point: no new epoch, the same generators.
    assert s.epochs == 3
    np.testing.assert_array_equal(s.cells()[2], counts)


def test_a_release_past_the_cap_is_refused_and_changes_nothing() -> None:
    s = make(4, r=3)
    for i in range(3):
        s.update(blob_points(500, i))
        s.release(1)
    assert s.release().shape == (1500, 2)  # no new point: allowed
    s.update(blob_points(10, 9))
    before = s.to_bytes()
    for call in (s.release, lambda: s.release(5), s.cells):
        with pytest.raises(ValueError, match="max_releases = 3 epochs have been released"):
            call()
    assert s.to_bytes() == before and s.epochs == 3 and s.t == 1510


def test_bad_parameters_are_refused() -> None:
    for kwargs, match in [
        ({"memory_bytes": 1000}, "memory_bytes = 1000 is too small"),
        ({"memory_bytes": 0}, "memory_bytes"),
        ({"max_releases": 0}, "max_releases"),
        ({"max_releases": 2**32 + 1}, "max_releases"),
        ({"expected_n": 0}, "expected_n"),
        ({"memory_bytes": 1.5}, "memory_bytes"),
    ]:
        args = {"memory_bytes": MIB, "expected_n": 1000, "max_releases": 10} | kwargs
        with pytest.raises((ValueError, TypeError), match=match):
            OnlineSynthesizer.for_memory(1, 2, **args)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="epsilon"):
        OnlineSynthesizer.for_memory(0, 2, memory_bytes=MIB, expected_n=10, max_releases=10)
    with pytest.raises(ValueError, match="dim"):
        OnlineSynthesizer.for_memory(1, 0, memory_bytes=MIB, expected_n=10, max_releases=10)


def test_bad_batch_changes_nothing() -> None:
    s = make(5)
    s.update(blob_points(100, 2))
    assert_bad_batches_change_nothing(s)
    assert s.t == 100


def test_batches_do_not_change_the_output() -> None:
    x = blob_points(3000, 6)
    a, b = make(7), make(7)
    a.update(x)
    b.update(x[:1000])
    b.update(x[1000:])
    np.testing.assert_array_equal(a.release(), b.release())


def test_seeded_save_load_resumes_exactly() -> None:
    x = blob_points(6000, 6)
    a, b = make(8), make(8)
    for s in (a, b):
        s.update(x[:2000])
        s.release()
        s.update(x[2000:3000])
    b = OnlineSynthesizer.from_bytes(b.to_bytes(), **SEEDED_OK)
    assert b.method == "privhp" and b.t == 3000 and b.epochs == 1 and b.max_releases == 16
    for s in (a, b):
        s.update(x[3000:])
    np.testing.assert_array_equal(a.release(), b.release())
    np.testing.assert_array_equal(a.release(100), b.release(100))


def test_checkpoint_between_releases_restores_the_same_generators(tmp_path: Path) -> None:
    s = make(None)  # OS-seeded: private
    for i in range(3):
        s.update(blob_points(3000, 10 + i))
        s.release(1)
    data = s.to_bytes()
    path = tmp_path / "privhp.dpst"
    save(s, path)
    loaded = load(path)
    assert isinstance(loaded, OnlineSynthesizer) and loaded.method == "privhp"
    assert not loaded.seeded
    runs = [OnlineSynthesizer.from_bytes(data).cells() for _ in "ab"] + [loaded.cells()]
    for other in runs[1:]:
        for u, v in zip(runs[0], other, strict=True):
            np.testing.assert_array_equal(u, v)


def test_memory_bytes_does_not_depend_on_where_points_fell() -> None:
    base = blob_points(4000, 20)
    every = np.random.default_rng(21).random((4000, 2))
    seen = []
    for x in (base, every):
        s = make(22)
        sizes = [s.memory_bytes()]
        s.update(x[:1000])
        s.release(1)
        s.update(x[1000:])
        s.release(1)
        sizes.append(s.memory_bytes())
        sizes.append(OnlineSynthesizer.from_bytes(s.to_bytes(), **SEEDED_OK).memory_bytes())
        seen.append(sizes)
    assert seen[0] == seen[1] and len(set(seen[0])) == 1


@needs_statm
def test_ten_million_points_in_fixed_memory() -> None:
    s = make(23, r=100, n=10**7)
    reported = s.memory_bytes()
    assert reported <= MIB

    def first(batch: np.ndarray) -> None:
        s.update(batch)
        s.release(1000)

    def each(i: int, batch: np.ndarray) -> None:
        s.update(batch)
        if i % 10 == 9:
            assert s.release(1000).shape == (1000, 2)
        assert s.memory_bytes() == reported

    grown = rss_growth(first, each)
    assert s.t == 10**7 and s.epochs == 10
    assert grown <= 4 * MIB, f"RSS grew by {grown / MIB:.1f} MiB over 10^7 points"

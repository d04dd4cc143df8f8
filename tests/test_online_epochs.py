"""The default online synthesizer (``method="epochs"``): releases, checkpoints, public memory."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from _helpers import assert_bad_batches_change_nothing
from dpstream import OnlineSynthesizer, Rng, streams
from hypothesis import given, settings
from hypothesis import strategies as st

# Seeded checkpoints need an explicit opt-in to load (issue 28).
SEEDED_OK: dict[str, bool] = {"allow_seeded": True}


def blob_points(n: int, seed: int) -> np.ndarray:
    return streams.clustered(n, 2, n_clusters=3, spread=0.03, seed=seed)


def test_default_method_and_repr() -> None:
    s = OnlineSynthesizer(1, 2, rng=Rng(seed=1))
    assert s.method == "epochs" and s.epochs == 0
    assert repr(s).startswith("OnlineSynthesizer(epsilon=1, dim=2, method='epochs', t=0")
    assert "NOT PRIVATE" in repr(s)
    with pytest.raises(ValueError, match="method must be one of 'epochs', 'paper'"):
        OnlineSynthesizer(1, 2, method="fast")


def test_release_has_t_rows_and_cells_sum_to_t() -> None:
    s = OnlineSynthesizer(1, 2, rng=Rng(seed=2))
    s.update(blob_points(5000, 1))
    out = s.release()
    assert out.shape == (5000, 2) and ((out >= 0) & (out <= 1)).all()
    lower, upper, counts = s.cells()
    assert counts.sum() == 5000 and (counts >= 0).all()
    assert (lower < upper).all()
    # Leaves tile the cube: their volumes sum to 1.
    assert np.isclose((upper - lower).prod(axis=1).sum(), 1.0)
    assert s.release(17).shape == (17, 2)
    # No new point: no new epoch, the same private tree.
    assert s.epochs == 1
    np.testing.assert_array_equal(s.cells()[2], counts)


def test_epochs_follow_releases_with_new_points() -> None:
    s = OnlineSynthesizer(1, 1, rng=Rng(seed=3))
    for i in range(1, 6):
        s.update(np.random.default_rng(i).random(100))
        s.release(1)
        s.release(1)
        assert s.epochs == i


def test_mass_goes_where_the_points_are() -> None:
    s = OnlineSynthesizer(1, 2, rng=Rng(seed=4))
    x = np.random.default_rng(5).random((20_000, 2)) / 4  # all in [0, 1/4)^2
    s.update(x)
    out = s.release()
    assert ((out < 0.25).all(axis=1)).mean() > 0.97


def test_seeded_save_load_resumes_exactly() -> None:
    x = blob_points(6000, 6)
    a = OnlineSynthesizer(1, 2, rng=Rng(seed=7))
    b = OnlineSynthesizer(1, 2, rng=Rng(seed=7))
    a.update(x[:2000])
    a.release()
    a.update(x[2000:3000])
    b.update(x[:2000])
    b.release()
    b.update(x[2000:3000])
    b = OnlineSynthesizer.from_bytes(b.to_bytes(), **SEEDED_OK)
    assert b.method == "epochs" and b.t == 3000 and b.epochs == 1
    for s in (a, b):
        s.update(x[3000:])
    np.testing.assert_array_equal(a.release(), b.release())


def test_checkpoint_between_releases_restores_the_same_noisy_counts() -> None:
    s = OnlineSynthesizer(1, 2)  # OS-seeded: private
    for i in range(3):
        s.update(blob_points(3000, 10 + i))
        s.release(1)
    data = s.to_bytes()
    first = OnlineSynthesizer.from_bytes(data).cells()
    second = OnlineSynthesizer.from_bytes(data).cells()
    for u, v in zip(first, second, strict=False):
        np.testing.assert_array_equal(u, v)


@pytest.mark.parametrize("method", ["epochs", "for_memory"])
def test_checkpoint_loaded_200_times_gives_one_release(method: str) -> None:
    """Issue 41, the review's scenario: a checkpoint in an open epoch, loaded 200 times,
    each copy fed the same later epochs through a merge (epochs: 16 epochs of
    super-block 1 merge at epoch 31; for_memory: epochs 1-8 merge at epoch 8). Every
    copy releases the same cells and points, byte for byte; other data after the
    checkpoint gives other noise (the difference of two continuations is not exact)."""
    rng = np.random.default_rng(41)
    if method == "epochs":
        s = OnlineSynthesizer(4, 1)
        n_epochs, last, batch = 20, 31, 30
    else:
        s = OnlineSynthesizer.for_memory(4, 1, memory_bytes=200_000, expected_n=300, max_releases=8)
        n_epochs, last, batch = 3, 8, 30
    data = [rng.random(batch) / 2 for _ in range(last)]
    for x in data[:n_epochs]:
        s.update(x)
        s.release(1)
    s.update(data[n_epochs])
    saved = s.to_bytes()

    def continuation(moved: float) -> tuple[bytes, ...]:
        c = OnlineSynthesizer.from_bytes(saved)
        out = [c.release().tobytes()]
        for x in data[n_epochs + 1 :]:
            c.update(np.r_[x[:-1], x[-1] + moved])  # the last point moved
            out.append(c.release(5).tobytes())
        assert c.epochs == last
        return (*out, *(a.tobytes() for a in c.cells()))

    first = continuation(0.0)
    assert {continuation(0.0) for _ in range(200)} == {first}
    other = continuation(0.5)  # one point per later epoch moved to the other half
    assert other[0] == first[0]  # the open epoch's block holds the same points
    assert other[1:] != first[1:]  # the Rust tests check the blocks' noise itself


def test_memory_bytes_does_not_depend_on_where_points_fell() -> None:
    base = blob_points(4000, 20)
    last = base.copy()
    last[-1] = [0.999, 0.001]
    every = np.random.default_rng(21).random((4000, 2))
    seen = []
    for x in (base, last, every):
        s = OnlineSynthesizer(1, 2, rng=Rng(seed=22))
        s.update(x[:1000])
        s.release(1)
        s.update(x[1000:])
        sizes = [s.memory_bytes()]
        s.release(1)
        sizes.append(s.memory_bytes())
        data = s.to_bytes()
        sizes += [OnlineSynthesizer.from_bytes(data, **SEEDED_OK).memory_bytes() for _ in "ab"]
        seen.append(sizes)
    assert seen[0] == seen[1] == seen[2]
    assert seen[0][1] == seen[0][2] == seen[0][3]


def test_old_checkpoints_load_as_paper() -> None:
    s = OnlineSynthesizer(1, 2, method="paper", rng=Rng(seed=1))
    s.update(blob_points(100, 1))
    loaded = OnlineSynthesizer.from_bytes(s.to_bytes(), **SEEDED_OK)
    assert loaded.method == "paper"


def test_bad_batch_changes_nothing() -> None:
    s = OnlineSynthesizer(1, 2, rng=Rng(seed=8))
    s.update(blob_points(100, 2))
    assert_bad_batches_change_nothing(s)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=5), st.integers(0, 2**32))
def test_batching_does_not_change_any_output(cuts: list[int], seed: int) -> None:
    x = np.random.default_rng(seed).random((300, 2))
    a = OnlineSynthesizer(2, 2, rng=Rng(seed=seed))
    b = OnlineSynthesizer(2, 2, rng=Rng(seed=seed))
    a.update(x)
    prev = 0
    for c in [*sorted(cuts), 300]:
        b.update(x[prev:c])
        prev = c
    np.testing.assert_array_equal(a.release(), b.release())


def test_a_seeded_epochs_checkpoint_needs_the_opt_in(tmp_path: Path) -> None:
    """Issue 28: the default method's seeded checkpoint is refused without the opt-in,
    by ``from_bytes`` and by ``dpstream.load``; a private one needs none."""
    import dpstream

    s = OnlineSynthesizer(1, 2, rng=Rng(seed=2))
    s.update(blob_points(500, 2))
    data = s.to_bytes()
    dpstream.save(s, tmp_path / "e.dpst")
    with pytest.raises(ValueError, match=r"seeded OnlineSynthesizer .*allow_seeded=True"):
        OnlineSynthesizer.from_bytes(data)
    with pytest.raises(ValueError, match="allow_seeded=True"):
        dpstream.load(tmp_path / "e.dpst")
    for back in (
        OnlineSynthesizer.from_bytes(data, allow_seeded=True),
        dpstream.load(tmp_path / "e.dpst", allow_seeded=True),
    ):
        assert back.method == "epochs" and back.seeded and "NOT PRIVATE" in repr(back)
    private = OnlineSynthesizer(1, 2)
    private.update(blob_points(500, 2))
    dpstream.save(private, tmp_path / "p.dpst")
    loaded = dpstream.load(tmp_path / "p.dpst")
    assert loaded.method == "epochs" and not loaded.seeded

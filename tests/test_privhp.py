"""PrivHP and its released TreeGenerator (issue 3): parameters, the ε split, updates,
release, sampling, persistence, memory sizing, merging, accuracy and fixed memory."""

from __future__ import annotations

import math
import struct
import zlib
from fractions import Fraction
from pathlib import Path

import dpstream
import numpy as np
import pytest
from _helpers import (
    assert_corrupt_checkpoints_refused,
    assert_truncations_and_flips_refused,
    needs_statm,
    rss_growth,
)
from _synth_inputs import BAD_BATCHES, BAD_EPSILONS
from conftest import ALPHA, assert_chi_square, merge_small_categories, seeded_checkpoint_loads
from dpstream import PrivHP, Rng, TreeGenerator, metrics, partition
from hypothesis import given
from hypothesis import strategies as st

BASE = {"k": 4, "width": 16, "depth": 6}


def exact_levels(k: int, depth: int) -> int:
    """``min(floor(log2 k), depth)``: the levels counted exactly."""
    return min(k.bit_length() - 1, depth)


def uniform(n: int, dim: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n, dim))


def released(
    points: np.ndarray, *, seed: int = 1, release_seed: int = 2, **params
) -> tuple[PrivHP, TreeGenerator]:
    params = {"epsilon": 1, "dim": points.shape[1], **BASE, **params}
    eps = params.pop("epsilon")
    dim = params.pop("dim")
    p = PrivHP(eps, dim, rng=Rng(seed=seed), **params)
    p.update(points)
    return p, p.release(rng=Rng(seed=release_seed))


# ---------------------------------------------------------------------------------------
# Construction
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "message"),
    [
        *BAD_EPSILONS,
        ((1, 0), {}, ValueError, r"\bdim\b.*got 0"),
        ((1, -1), {}, ValueError, r"\bdim\b"),
        ((1, 2**16 + 1), {}, ValueError, r"\bdim\b"),
        ((1, 2.0), {}, TypeError, r"\bdim\b"),
        ((1, 2), {"k": 0}, ValueError, r"\bk\b.*got 0"),
        ((1, 2), {"k": 2**24 + 1}, ValueError, r"\bk\b"),
        ((1, 2), {"k": 4.0}, TypeError, r"\bk\b"),
        ((1, 2), {"width": 0}, ValueError, r"\bwidth\b.*got 0"),
        ((1, 2), {"width": 2**30 + 1}, ValueError, r"\bwidth\b"),
        ((1, 2), {"depth": 0}, ValueError, r"\bdepth\b.*got 0"),
        ((1, 2), {"depth": 61}, ValueError, r"\bdepth\b.*got 61"),
        ((1, 2), {"depth": -1}, ValueError, r"\bdepth\b"),
        ((1, 2), {"rows": 0}, ValueError, r"\brows\b.*got 0"),
        ((1, 2), {"rows": 65}, ValueError, r"\brows\b.*got 65"),
        ((1, 2), {"sketch": "countmin"}, ValueError, r"\bsketch\b.*countmin"),
        ((1, 2), {"sketch": None}, TypeError, r"\bsketch\b"),
        ((1, 2), {"budget": "even"}, ValueError, r"\bbudget\b.*even"),
        ((1, 2), {"budget": 1}, TypeError, r"\bbudget\b"),
        ((1, 2), {"rng": 7}, TypeError, r"\brng\b"),
        # 2^27 x 16 cells at each of 3 levels: over the 16 GiB cap.
        ((1, 2), {"k": 1, "width": 2**27, "rows": 16, "depth": 3}, ValueError, "16 GiB"),
        ((1, 2), {"k": 4, "width": 2**30, "rows": 64, "depth": 60}, ValueError, "16 GiB"),
    ],
)
def test_construction_errors_name_the_parameter(args, kwargs, error, message) -> None:
    params = {**BASE, **kwargs}
    with pytest.raises(error, match=message):
        PrivHP(*args, **params)


def test_properties_and_repr() -> None:
    p = PrivHP(Fraction(1, 2), 3, k=8, width=32, rows=2, depth=9, sketch="count")
    assert (p.epsilon, p.dim, p.k, p.width, p.rows, p.depth) == (Fraction(1, 2), 3, 8, 32, 2, 9)
    assert (p.points_seen, p.released) == (0, False)
    assert "NOT PRIVATE" not in repr(p)
    # A seeded construction rng only keys the public hash functions.
    hashed = PrivHP(1, 2, rng=Rng(seed=3), **BASE)
    assert "NOT PRIVATE" not in repr(hashed)
    assert "epsilon=1" in repr(hashed)


def test_release_with_a_seeded_rng_says_not_private() -> None:
    p = PrivHP(1, 2, **BASE)
    p.update(uniform(100, 2, 0))
    g = p.release(rng=Rng(seed=1))
    assert "NOT PRIVATE" in repr(p)
    assert "NOT PRIVATE" in repr(g)
    assert "NOT PRIVATE" in repr(p.release())  # the same (seeded) release again


def test_a_seeded_release_stays_seeded_after_a_save(tmp_path: Path) -> None:
    """Issue 28: a TreeGenerator's bytes did not record that its noise was seeded (a
    loaded seeded release said nothing of NOT PRIVATE). Now they do, loading one needs
    the opt-in, and bytes saved before the flag (version 1) load as not seeded."""
    p = PrivHP(1, 2, **BASE)
    p.update(uniform(100, 2, 0))
    g = p.release(rng=Rng(seed=1))
    assert g.noise_seeded
    data = g.to_bytes()
    for loaded in seeded_checkpoint_loads(
        g, TreeGenerator.from_bytes, "TreeGenerator", tmp_path / "g.dpst"
    ):
        assert loaded.noise_seeded
    # A private release needs no opt-in and stays private.
    q = PrivHP(1, 2, **BASE)
    q.update(uniform(100, 2, 0))
    private = q.release()
    back = TreeGenerator.from_bytes(private.to_bytes())
    assert not back.noise_seeded and "NOT PRIVATE" not in repr(back)
    assert back.to_bytes() == private.to_bytes()
    # Version 1: the header's version 1 and no flags byte (as dpstream wrote it before).
    payload = data[21:-4]
    body = data[:8] + struct.pack("<HHQ", 1, 1, len(payload)) + payload
    old = TreeGenerator.from_bytes(body + struct.pack("<I", zlib.crc32(body)))
    assert not old.noise_seeded
    for a, b in zip(old.cells(), g.cells(), strict=True):
        assert np.array_equal(a, b)


# ---------------------------------------------------------------------------------------
# The ε split
# ---------------------------------------------------------------------------------------

epsilons = st.one_of(
    st.fractions(min_value=Fraction(1, 1000), max_value=100, max_denominator=10**9),
    st.floats(1e-3, 100.0),
    st.sampled_from([1, 2, Fraction(1, 3), 0.1]),
)


@given(
    epsilons,
    st.integers(1, 9),
    st.one_of(st.integers(1, 70), st.sampled_from([1, 2, 3, 64, 1000, 2**16])),
    st.integers(1, 60),
    st.sampled_from(["optimal", "uniform"]),
)
def test_sigmas_sum_to_at_most_epsilon_exactly(
    eps, dim: int, k: int, depth: int, budget: str
) -> None:
    p = PrivHP(eps, dim, k=k, width=1, depth=depth, budget=budget)
    sigmas = p.sigmas
    assert len(sigmas) == depth + 1
    assert all(isinstance(s, Fraction) and s > 0 for s in sigmas)
    total = sum(sigmas, Fraction(0))
    exact_eps = Fraction(eps)
    assert p.epsilon == exact_eps
    assert total <= exact_eps, f"Σσ = {total} > ε = {exact_eps}"
    # And nearly all of it is used (the split is on a 2^-40 grid).
    assert total >= exact_eps * (1 - Fraction(depth + 2, 2**40))
    if budget == "uniform":
        assert len(set(sigmas)) == 1


def eq23_weights(dim: int, k: int, depth: int) -> list[float]:
    """Equation (23): level l <= L_k gets sqrt(Γ_{l-1}) with Γ_l = 2^l 2^-floor(l/d) and
    Γ_{-1} = 1; level l > L_k gets sqrt(k 2^-floor((l-1)/d))."""
    l_k = math.floor(math.log2(k))

    def gamma_big(lev: int) -> float:
        return 1.0 if lev < 0 else 2.0**lev * 2.0 ** -(lev // dim)

    return [
        math.sqrt(gamma_big(lev - 1)) if lev <= l_k else math.sqrt(k * 2.0 ** -((lev - 1) // dim))
        for lev in range(depth + 1)
    ]


@pytest.mark.parametrize(("dim", "k", "depth"), [(2, 8, 10), (3, 5, 12), (1, 4, 5)])
def test_optimal_split_follows_equation_23(dim: int, k: int, depth: int) -> None:
    eps = Fraction(3, 2)
    sigmas = PrivHP(eps, dim, k=k, width=1, depth=depth).sigmas
    w = eq23_weights(dim, k, depth)
    s = sum(w)
    for lev, (sigma, wl) in enumerate(zip(sigmas, w, strict=True)):
        want = float(eps) * wl / s
        assert abs(float(sigma) - want) <= 1e-9 * want, (lev, float(sigma), want)
    if (dim, k, depth) == (2, 8, 10):
        # Written out: 1, 1, √2, √2 | 2, √2, √2, 1, 1, √½, √½.
        r = math.sqrt(2)
        assert w == pytest.approx([1, 1, r, r, 2, r, r, 1, 1, 1 / r, 1 / r], rel=1e-15)


# ---------------------------------------------------------------------------------------
# Update
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(("batch", "error", "message"), BAD_BATCHES)
def test_bad_batches_raise_and_change_nothing(batch, error, message) -> None:
    good1, good2 = uniform(300, 2, 10), uniform(200, 2, 11)
    p = PrivHP(1, 2, rng=Rng(seed=5), **BASE)
    twin = PrivHP(1, 2, rng=Rng(seed=5), **BASE)
    p.update(good1)
    twin.update(good1)
    memory = p.memory_bytes()
    with pytest.raises(error, match=message):
        p.update(batch)
    assert p.points_seen == 300
    assert p.memory_bytes() == memory
    p.update(good2)
    twin.update(good2)
    assert p.points_seen == twin.points_seen == 500
    a = p.release(rng=Rng(seed=6))
    b = twin.release(rng=Rng(seed=6))
    assert a.to_bytes() == b.to_bytes()


def test_update_accepts_exact_conversions() -> None:
    pts = np.array([[0.25, 0.5], [1.0, 0.0], [0.75, 0.125]])
    expected = _release_bytes(pts)
    variants = [
        pts.astype(np.float32),
        pts.tolist(),
        np.asfortranarray(pts),
        np.repeat(pts, 2, axis=1)[:, ::2],  # non-contiguous
    ]
    for v in variants:
        p = PrivHP(1, 2, rng=Rng(seed=5), **BASE)
        p.update(v)
        p.update(np.zeros((0, 2)))  # empty batches are fine
        assert p.points_seen == 3
        assert p.release(rng=Rng(seed=1)).to_bytes() == expected
    ints = PrivHP(1, 2, rng=Rng(seed=5), **BASE)
    ints.update(np.array([[1, 0], [0, 1]], dtype=np.int8))
    assert ints.points_seen == 2
    one_d = PrivHP(1, 1, rng=Rng(seed=5), **BASE)
    one_d.update([0.1, 0.5, 1.0])  # 1-D input is n points when dim = 1
    assert one_d.points_seen == 3


def _release_bytes(pts: np.ndarray) -> bytes:
    p = PrivHP(1, 2, rng=Rng(seed=5), **BASE)
    p.update(pts)
    return p.release(rng=Rng(seed=1)).to_bytes()


# ---------------------------------------------------------------------------------------
# Release and the generator
# ---------------------------------------------------------------------------------------


def leaf_levels_and_thetas(g: TreeGenerator) -> tuple[np.ndarray, np.ndarray]:
    """Each leaf's level and path, recovered from its corners (and checked against them)."""
    lower, upper, _ = g.cells()
    sides = upper - lower
    log_sides = np.log2(sides)
    assert np.array_equal(log_sides, np.round(log_sides)), "leaf sides are not powers of two"
    levels = (-log_sides.sum(axis=1)).astype(np.int64)
    thetas = np.zeros(len(levels), dtype=np.uint64)
    for level in np.unique(levels):
        idx = np.nonzero(levels == level)[0]
        t = partition.encode(lower[idx], int(level))
        lo, hi = partition.cell_bounds(t, int(level), g.dim)
        assert np.array_equal(lo, lower[idx]) and np.array_equal(hi, upper[idx]), (
            "a leaf is not a cell of the binary partition"
        )
        thetas[idx] = t
    return levels, thetas


def leaf_of(g: TreeGenerator, points: np.ndarray) -> np.ndarray:
    """Index of the leaf containing each point; asserts that it is exactly one leaf."""
    levels, thetas = leaf_levels_and_thetas(g)
    deepest = int(levels.max())
    paths = partition.encode(points, deepest)
    owner = np.full(len(points), -1, dtype=np.int64)
    for level in np.unique(levels):
        idx = np.nonzero(levels == level)[0]
        order = np.argsort(thetas[idx])
        sorted_thetas = thetas[idx][order]
        prefix = paths >> np.uint64(deepest - int(level))
        pos = np.clip(np.searchsorted(sorted_thetas, prefix), 0, len(idx) - 1)
        hit = sorted_thetas[pos] == prefix
        assert not (hit & (owner >= 0)).any(), "two leaves overlap"
        owner[hit] = idx[order][pos[hit]]
    assert (owner >= 0).all(), "a point lies in no leaf"
    return owner


@pytest.mark.parametrize(
    ("dim", "k", "width", "rows", "depth", "sketch", "budget"),
    [
        (2, 16, 64, 1, 10, "count-min", "optimal"),
        (2, 5, 32, 3, 9, "count", "optimal"),
        (1, 2, 4, 1, 8, "count-min", "uniform"),
        (3, 8, 64, 2, 12, "count-min", "optimal"),
        (2, 64, 8, 1, 5, "count-min", "optimal"),  # k > 2^depth: no sketch levels
    ],
)
def test_release_is_a_consistent_pruned_partition(
    dim, k, width, rows, depth, sketch, budget
) -> None:
    n = 20_000
    x = uniform(n, dim, 21)
    p, g = released(
        x, k=k, width=width, rows=rows, depth=depth, sketch=sketch, budget=budget, seed=3
    )
    assert p.released and p.points_seen == n
    assert g.dim == dim and 1 <= g.depth <= depth
    # The noisy total is n up to a few noise scales of the root (scale 1/σ_0).
    scale = 1 / float(p.sigmas[0])
    assert abs(g.total - n) <= 20 * scale, (g.total, n, scale)
    lower, upper, counts = g.cells()
    leaves = g.n_leaves
    assert lower.shape == upper.shape == (leaves, dim) and counts.shape == (leaves,)
    l_k = exact_levels(k, depth)
    assert leaves <= 2**l_k + 2 * k * (depth - l_k)
    assert leaves <= 2**l_k + k * (depth - l_k)  # each expanded hot cell adds one leaf
    assert (counts >= 0).all() and np.isfinite(counts).all()
    # Consistency: the leaves add up to the root.
    assert math.isclose(counts.sum(), g.total, rel_tol=1e-12, abs_tol=1e-9)
    # The leaves tile [0,1]^d: dyadic cells, volumes adding to 1, every point in one leaf.
    assert ((lower >= 0) & (upper <= 1) & (lower < upper)).all()
    levels, _ = leaf_levels_and_thetas(g)
    assert sum(Fraction(1, 2 ** int(v)) for v in levels) == 1
    assert int(levels.max()) == g.depth
    leaf_of(g, x[:2000])
    leaf_of(g, np.vstack([np.zeros(dim), np.ones(dim)]))
    # At most k cells are expanded below the exact levels: at most 2k leaves per level.
    for level in range(l_k + 1, depth + 1):
        assert np.count_nonzero(levels == level) <= 2 * k


def test_release_is_final() -> None:
    x = uniform(1000, 2, 4)
    p, g = released(x)
    data = g.to_bytes()
    with pytest.raises(ValueError, match="released"):
        p.update(x[:3])
    assert p.points_seen == 1000
    again = p.release(rng=Rng(seed=99))
    assert again.to_bytes() == data, "a second release drew new noise"
    assert p.release().to_bytes() == data
    assert p.released
    with pytest.raises(ValueError, match="released summaries cannot be merged"):
        p.merge(PrivHP(1, 2, rng=Rng(seed=1), **BASE))
    fresh = PrivHP(1, 2, rng=Rng(seed=1), **BASE)
    with pytest.raises(ValueError, match="released summaries cannot be merged"):
        fresh.merge(p)


def test_too_small_an_epsilon_is_refused_cleanly() -> None:
    # ε so small that a noise scale exceeds the sampler's limit (2^56). Either the
    # constructor refuses it, naming epsilon, or release refuses and the summary is
    # untouched and still usable.
    try:
        p = PrivHP(2.0**-70, 2, rng=Rng(seed=1), **BASE)
    except ValueError as e:
        assert "epsilon" in str(e)
        return
    p.update([[0.5, 0.5]])
    with pytest.raises(ValueError, match="scale"):
        p.release(rng=Rng(seed=1))
    assert not p.released
    p.update([[0.25, 0.5]])
    assert p.points_seen == 2


def test_sampling() -> None:
    x = uniform(5000, 2, 8)
    _, g = released(x, k=16, width=64, depth=10)
    for m in (0, 1, 1000):
        s = g.sample(m, rng=Rng(seed=1))
        assert s.shape == (m, 2) and s.dtype == np.float64
        assert ((s >= 0) & (s <= 1)).all()
    a = g.sample(500, rng=Rng(seed=1))
    assert np.array_equal(a, g.sample(500, rng=Rng(seed=1)))
    assert not np.array_equal(a, g.sample(500, rng=Rng(seed=2)))
    assert g.sample(10).shape == (10, 2)  # OS-seeded
    with pytest.raises(ValueError, match="m must be non-negative"):
        g.sample(-1)
    with pytest.raises(TypeError, match="m must be an int"):
        g.sample(2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rng"):
        g.sample(2, rng=np.random.default_rng(0))  # type: ignore[arg-type]


def test_samples_follow_the_leaf_counts() -> None:
    """Root-to-leaf sampling picks leaf i with probability count_i / total (the counts are
    consistent): chi-square at ALPHA; leaves of count 0 are never sampled."""
    x = np.random.default_rng(9).beta(2, 5, size=(20_000, 2))
    _, g = released(x, k=16, width=64, depth=10)
    _, _, counts = g.cells()
    m = 200_000
    s = g.sample(m, rng=Rng(seed=12))
    owner = leaf_of(g, s)
    observed = np.bincount(owner, minlength=len(counts))
    assert observed[counts == 0].sum() == 0, "a leaf of count 0 was sampled"
    positive = counts > 0
    probs = counts[positive] / counts[positive].sum()
    obs, pr = merge_small_categories(observed[positive], probs, m)
    assert_chi_square(obs, pr, "leaf frequencies", ALPHA)


def test_tree_generator_is_only_made_by_release() -> None:
    with pytest.raises(TypeError, match="release"):
        TreeGenerator(object())  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Persistence
# ---------------------------------------------------------------------------------------


def _small_generator() -> TreeGenerator:
    _, g = released(np.array([[0.1], [0.3], [0.3], [0.8]]), k=2, width=4, depth=3)
    return g


def test_generator_bytes_and_files_round_trip(tmp_path: Path) -> None:
    _, g = released(uniform(3000, 3, 5), k=8, width=32, depth=9)
    data = g.to_bytes()
    assert data[:8] == b"DPSTREAM"
    back = TreeGenerator.from_bytes(data, allow_seeded=True)  # `released` seeds the noise
    assert back.noise_seeded
    assert back.to_bytes() == data
    assert (back.dim, back.n_leaves, back.depth, back.total) == (
        g.dim,
        g.n_leaves,
        g.depth,
        g.total,
    )
    for a, b in zip(back.cells(), g.cells(), strict=True):
        assert np.array_equal(a, b)
    assert np.array_equal(back.sample(100, rng=Rng(seed=3)), g.sample(100, rng=Rng(seed=3)))
    path = tmp_path / "gen.dpst"
    dpstream.save(g, path)
    loaded = dpstream.load(path, allow_seeded=True)
    assert isinstance(loaded, TreeGenerator)
    assert loaded.to_bytes() == data
    assert path.read_bytes() == data
    assert [p.name for p in tmp_path.iterdir()] == ["gen.dpst"]
    spent = PrivHP(1, 2, **BASE)
    spent.release()
    with pytest.raises(ValueError, match="has been released"):
        dpstream.save(spent, tmp_path / "summary.dpst")  # unreleased summaries: see below
    assert [p.name for p in tmp_path.iterdir()] == ["gen.dpst"]


def test_corrupted_generator_bytes_raise(tmp_path: Path) -> None:
    data = _small_generator().to_bytes()
    path = tmp_path / "bad.dpst"
    assert_corrupt_checkpoints_refused(TreeGenerator.from_bytes, data, path)
    newer = bytearray(data[:-4])
    newer[8] = 3  # format version 3
    path.write_bytes(bytes(newer) + zlib.crc32(bytes(newer)).to_bytes(4, "little"))
    with pytest.raises(ValueError, match="format version 3"):
        dpstream.load(path)
    sketch = dpstream.sketch.CountMinSketch(1, 4, rng=Rng(seed=1)).to_bytes()
    with pytest.raises(ValueError, match="expected a TreeGenerator, found a Sketch"):
        TreeGenerator.from_bytes(sketch)


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4))
def test_valid_checksums_over_bad_generator_payloads_never_crash(edits) -> None:
    """A mangled payload under a valid checksum decodes to a valid generator or raises
    ValueError: never a crash, a hang or an out-of-range sample."""
    data = bytearray(_small_generator().to_bytes()[:-4])
    for pos, value in edits:
        data[20 + pos % (len(data) - 20)] = value
    body = bytes(data)
    try:
        g = TreeGenerator.from_bytes(
            body + zlib.crc32(body).to_bytes(4, "little"), allow_seeded=True
        )
    except ValueError:
        return
    s = g.sample(50, rng=Rng(seed=1))
    assert s.shape == (50, g.dim) and ((s >= 0) & (s <= 1)).all()
    _, _, counts = g.cells()
    assert (counts >= 0).all() and np.isfinite(counts).all()


# ---------------------------------------------------------------------------------------
# Sizing for a memory budget
# ---------------------------------------------------------------------------------------


def ref_depth(epsilon, n: int) -> int:
    """``ceil(log2(ε n))`` in exact arithmetic, clamped to 1..60."""
    en = Fraction(epsilon) * n
    r = 1
    while Fraction(2**r) < en and r < 60:
        r += 1
    return r


@pytest.mark.parametrize(
    ("epsilon", "dim", "n", "budget", "rows", "sketch"),
    [
        (1, 2, 5000, 200_000, 1, "count-min"),
        (1, 2, 10**6, 1 << 20, 1, "count-min"),
        (Fraction(1, 2), 3, 10**5, 64 << 10, 1, "count-min"),
        (2, 1, 10**4, 10**6, 3, "count"),
        (Fraction(1, 3), 2, 3 * 2**10 + 1, 10**6, 1, "count-min"),  # εn = 2^10 + 1/3
        (1, 2, 2**20, 10**6, 2, "count-min"),  # εn = 2^20 exactly
        (0.25, 4, 2**17, 300_000, 1, "count"),  # εn = 2^15 exactly
        (1, 2, 2, 10**6, 1, "count-min"),  # εn <= 2: depth 1
        (1, 2, 3, 10**6, 1, "count-min"),  # εn = 3: depth 2
    ],
)
def test_for_memory_fits_the_budget(epsilon, dim, n, budget, rows, sketch) -> None:
    p = PrivHP.for_memory(epsilon, dim, n, budget, rows=rows, sketch=sketch, rng=Rng(seed=1))
    assert p.depth == ref_depth(epsilon, n)
    assert p.memory_bytes() <= budget
    assert p.k & (p.k - 1) == 0 and p.width == 2 * p.k
    assert (p.dim, p.rows, p.epsilon) == (dim, rows, Fraction(epsilon))
    # "A PrivHP whose summary *and* largest release fit in memory_bytes."
    p.update(uniform(min(n, 20_000), dim, 3))
    g = p.release(rng=Rng(seed=2))
    assert p.memory_bytes() + g.memory_bytes() <= budget


def test_for_memory_errors() -> None:
    with pytest.raises(ValueError, match="memory_bytes = 10 is too small"):
        PrivHP.for_memory(1, 2, 5000, 10)
    with pytest.raises(ValueError, match=r"\bdim\b"):
        PrivHP.for_memory(1, 0, 5000, 10**6)
    with pytest.raises(ValueError, match="epsilon"):
        PrivHP.for_memory(0, 2, 5000, 10**6)
    with pytest.raises(ValueError, match="expected_n"):
        PrivHP.for_memory(1, 2, -5, 10**6)
    with pytest.raises(ValueError, match=r"\bsketch\b"):
        PrivHP.for_memory(1, 2, 5000, 10**6, sketch="cms")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# Merging
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("sketch", ["count-min", "count"])
def test_merged_halves_release_like_the_whole(sketch: str) -> None:
    x = uniform(6001, 2, 17)
    params = {"k": 8, "width": 64, "rows": 2, "depth": 11, "sketch": sketch}
    a = PrivHP(1, 2, rng=Rng(seed=40), **params)
    b = PrivHP(1, 2, rng=Rng(seed=40), **params)
    whole = PrivHP(1, 2, rng=Rng(seed=40), **params)
    a.update(x[:2500])
    b.update(x[2500:4000])
    b.update(x[4000:])
    whole.update(x)
    a.merge(b)
    assert a.points_seen == whole.points_seen == 6001
    assert b.points_seen == 3501 and not b.released
    ga = a.release(rng=Rng(seed=41))
    gw = whole.release(rng=Rng(seed=41))
    assert ga.to_bytes() == gw.to_bytes()


def test_merge_refusals_change_nothing() -> None:
    x = uniform(1000, 2, 18)
    params = {"k": 4, "width": 16, "depth": 8}
    p = PrivHP(1, 2, rng=Rng(seed=50), **params)
    twin = PrivHP(1, 2, rng=Rng(seed=50), **params)
    p.update(x)
    twin.update(x)
    others = [
        (PrivHP(1, 2, rng=Rng(seed=51), **params), ValueError, "different hash functions"),
        (
            PrivHP(1, 2, rng=Rng(seed=50), k=4, width=16, depth=9),
            ValueError,
            "different parameters",
        ),
        (PrivHP(2, 2, rng=Rng(seed=50), **params), ValueError, "different parameters"),
        (PrivHP(1, 2, rng=Rng(seed=50), rows=2, **params), ValueError, "different parameters"),
        (
            PrivHP(1, 2, rng=Rng(seed=50), sketch="count", **params),
            ValueError,
            "different parameters",
        ),
        (p, ValueError, "itself"),
        ("summary", TypeError, "can only merge a PrivHP"),
    ]
    for other, error, message in others:
        if isinstance(other, PrivHP) and other is not p:
            other.update(x[:100])
        with pytest.raises(error, match=message):
            p.merge(other)  # type: ignore[arg-type]
        assert p.points_seen == 1000
    assert p.release(rng=Rng(seed=3)).to_bytes() == twin.release(rng=Rng(seed=3)).to_bytes()


# ---------------------------------------------------------------------------------------
# Accuracy
# ---------------------------------------------------------------------------------------


def test_accuracy_smoke() -> None:
    x = uniform(20_000, 2, 123)
    _, g = released(x, k=64, width=256, depth=12, seed=124, release_seed=125)
    synthetic = g.sample(2000, rng=Rng(seed=126))
    w = metrics.wasserstein1(x[:2000], synthetic)
    assert w < 0.1, f"W1(data, synthetic) = {w:.4f}"


# ---------------------------------------------------------------------------------------
# Fixed memory
# ---------------------------------------------------------------------------------------


@needs_statm
def test_ten_million_points_in_fixed_memory() -> None:
    p = PrivHP(1, 2, k=256, width=1024, rows=2, depth=20, rng=Rng(seed=1))
    reported = p.memory_bytes()
    assert reported > 12 * 2 * 1024 * 8  # 12 sketch levels of 2 x 1024 cells

    def each(_: int, batch: np.ndarray) -> None:
        p.update(batch)
        assert p.memory_bytes() == reported

    grown = rss_growth(p.update, each)
    assert p.points_seen == 10**7
    assert grown <= 4 * 2**20, f"RSS grew by {grown / 2**20:.1f} MiB over 10^7 points"
    g = p.release(rng=Rng(seed=3))
    assert p.memory_bytes() == reported
    assert abs(g.total - 10**7) <= 20 / float(p.sigmas[0])


def test_one_and_two_threads_release_the_same() -> None:
    x = np.random.default_rng(5).random((50_000, 2))
    gens = []
    for threads in (1, 2):
        p = PrivHP(1, 2, k=16, width=64, rows=2, depth=14, rng=Rng(seed=8))
        p.threads = threads
        assert p.threads == threads
        p.update(x)
        gens.append(p.release(rng=Rng(seed=9)).to_bytes())
    assert gens[0] == gens[1]
    with pytest.raises(ValueError, match=r"threads must be in 1\.\.=2"):
        p.threads = 3
    with pytest.raises(TypeError, match="threads must be an int"):
        p.threads = 1.0  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------
# Encoding of unreleased summaries (checkpoints, pickling, shipping between machines)
# ---------------------------------------------------------------------------------------


def _summary(n: int = 3000, *, sketch: str = "count-min", seed: int = 70) -> PrivHP:
    p = PrivHP(
        Fraction(2, 3), 2, k=8, width=32, rows=2, depth=10, sketch=sketch, rng=Rng(seed=seed)
    )
    if n:
        p.update(uniform(n, 2, seed + 1))
    return p


@pytest.mark.parametrize("sketch", ["count-min", "count"])
@pytest.mark.parametrize("n", [0, 1, 3000])
def test_summary_bytes_round_trip_and_continue(sketch: str, n: int, tmp_path: Path) -> None:
    p = _summary(n, sketch=sketch)
    data = p.to_bytes()
    assert data[:8] == b"DPSTREAM" and dpstream._core.state_kind(data) == "PrivHP"
    back = PrivHP.from_bytes(data)
    assert back.to_bytes() == data
    assert (back.epsilon, back.dim, back.k, back.width, back.rows, back.depth) == (
        p.epsilon,
        p.dim,
        p.k,
        p.width,
        p.rows,
        p.depth,
    )
    assert (back.sigmas, back.points_seen, back.released) == (p.sigmas, n, False)
    assert back.memory_bytes() == p.memory_bytes()
    assert "NOT PRIVATE" not in repr(back)
    path = tmp_path / "summary.dpst"
    dpstream.save(p, path)
    loaded = dpstream.load(path)
    assert isinstance(loaded, PrivHP) and loaded.to_bytes() == data
    more = uniform(500, 2, 99)
    for s in (p, back, loaded):
        s.update(more)
    gens = [s.release(rng=Rng(seed=5)).to_bytes() for s in (p, back, loaded)]
    assert gens[0] == gens[1] == gens[2]


def test_merging_decoded_summaries_equals_one_summary() -> None:
    x = uniform(7000, 2, 80)
    template = _summary(0)
    parts = []
    for chunk in np.array_split(x, 4):
        s = PrivHP.from_bytes(template.to_bytes())
        s.update(chunk)
        parts.append(s.to_bytes())
    merged = PrivHP.from_bytes(parts[0])
    for b in parts[1:]:
        merged.merge(PrivHP.from_bytes(b))
    whole = PrivHP.from_bytes(template.to_bytes())
    whole.update(x)
    assert merged.to_bytes() == whole.to_bytes()
    assert template.points_seen == 0


def test_summaries_pickle_and_copy_but_rng_does_not() -> None:
    import copy
    import pickle

    p = _summary()
    data = p.to_bytes()
    for clone in (pickle.loads(pickle.dumps(p)), copy.copy(p), copy.deepcopy(p)):
        assert isinstance(clone, PrivHP) and clone is not p
        assert clone.to_bytes() == data
    clone.update(uniform(10, 2, 1))
    assert p.points_seen == 3000  # copies are independent
    with pytest.raises(TypeError, match="cannot be copied or pickled"):
        pickle.dumps(Rng(seed=1))
    with pytest.raises(TypeError, match="cannot be copied or pickled"):
        pickle.dumps((p, Rng()))
    p.release()
    with pytest.raises(ValueError, match=r"has been released.*TreeGenerator"):
        pickle.dumps(p)
    with pytest.raises(ValueError, match="has been released"):
        p.to_bytes()


def test_corrupted_summary_bytes_raise() -> None:
    data = PrivHP(1, 2, k=2, width=4, depth=3, rng=Rng(seed=1)).to_bytes()
    assert_truncations_and_flips_refused(PrivHP.from_bytes, data, 0x04)
    with pytest.raises(ValueError, match="expected a PrivHP, found a TreeGenerator"):
        PrivHP.from_bytes(_small_generator().to_bytes())
    with pytest.raises(TypeError, match="data must be bytes"):
        PrivHP.from_bytes("DPSTREAM")  # type: ignore[arg-type]


@given(st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4))
def test_valid_checksums_over_bad_summary_payloads_never_crash(edits) -> None:
    """A mangled payload under a valid checksum decodes to a consistent summary or
    raises ValueError: never a crash, a hang or a huge allocation."""
    data = bytearray(_summary(200, sketch="count").to_bytes()[:-4])
    for pos, value in edits:
        data[20 + pos % (len(data) - 20)] = value
    body = bytes(data)
    try:
        p = PrivHP.from_bytes(body + zlib.crc32(body).to_bytes(4, "little"))
    except ValueError as e:
        assert str(e).startswith("invalid dpstream state")
        return
    p.update(uniform(10, p.dim, 3))
    g = p.release(rng=Rng(seed=1))
    assert g.total >= 0


def test_update_accepts_misaligned_buffers() -> None:
    """C-contiguous but misaligned float64 data (e.g. a pickle-5 buffer from another
    process) is counted like an aligned copy."""
    x = uniform(100, 2, 90)
    raw = bytearray(x.nbytes + 1)
    raw[1:] = x.tobytes()
    view = np.frombuffer(raw, dtype=np.float64, offset=1).reshape(100, 2)
    assert not view.flags.aligned and view.flags.c_contiguous
    a, b = _summary(0), _summary(0)
    a.update(view)
    b.update(x)
    assert a.to_bytes() == b.to_bytes()

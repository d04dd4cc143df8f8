"""The bound on a step's work for wide tables (issue 31): ``Adaptive(max_scored=m)`` scores a
public random subset of ``m`` workloads per step, and the workload tables are computed when
read (:mod:`dpstream.tabular.tables`)."""

from __future__ import annotations

import hashlib
import math

import dpstream
import numpy as np
import pytest
from dpstream import streams
from dpstream.tabular import Adaptive, Domain, Paper, TabularStream
from dpstream.tabular.pgm import tree_cells
from dpstream.tabular.policy import MAX_SCORED, pool_key, scored_pool


def latent(columns: int) -> Domain:
    return Domain({f"c{j}": streams.LATENT_VALUES for j in range(columns)})


#: Selections per step and a digest of the final synthetic table of the runs below, recorded
#: with the code before the bound (commit 24222cf): 14 columns (91 workloads, the Adult
#: case) are scored in full by the default, so nothing may change, bit for bit.
BEFORE = {
    "default": (
        [[(2, 7), (0, 2)], [(6, 10), (2, 5)], [(12, 13), (3, 6)], [(7, 13), (1, 5)],
         [(11, 12), (8, 11)], [(0, 5), (7, 10)], [(1, 6), (6, 11)], [(2, 6), (0, 4)]],
        "f2e8eaee6d81b657",
    ),
    "model": (
        [[(2, 7), (0, 2)], [(6, 10), (2, 5)], [(12, 13), (1, 11)], [(7, 11), (3, 5)],
         [(2, 10), (5, 13)], [(1, 5), (10, 13)], [(12, 13), (9, 13)], [(0, 11), (0, 8)]],
        "3ba2aa2480bb966f",
    ),
    "paper": (
        [[(2, 13), (5, 6), (0, 10)], [(3, 13), (7, 10), (0, 10)], [(3, 5), (1, 11), (10, 12)],
         [(7, 11), (2, 7), (2, 13)], [(0, 3), (9, 11), (8, 11)], [(4, 8), (8, 11), (5, 6)],
         [(4, 11), (5, 7), (6, 13)], [(6, 12), (5, 12), (5, 6)]],
        "7c0160008285e0ce",
    ),
}  # fmt: skip
POLICIES = {
    "default": Adaptive(),
    "model": Adaptive(remainder="model", refit="selection"),
    "paper": Paper(),
}


@pytest.mark.parametrize("name", sorted(BEFORE))
def test_fourteen_columns_select_and_release_as_before_the_bound(name: str) -> None:
    rows = streams.latent_class(8 * 300, 14, seed=31)
    s = TabularStream(latent(14), 1, policy=POLICIES[name], iters=30, rng=dpstream.Rng(seed=31))
    assert len(s.workloads) <= MAX_SCORED and s._pool_key is None
    selected = []
    for t in range(8):
        s.step(rows[t * 300 : (t + 1) * 300])
        selected.append([tuple(w) for w in s.last_selected])
    digest = hashlib.sha256(s.synthetic_codes().tobytes()).hexdigest()[:16]
    assert (selected, digest) == BEFORE[name]


def test_every_workload_scored_draws_nothing_from_the_generator() -> None:
    states = []
    for cap in (None, 15, MAX_SCORED):  # 15 workloads: all of them scored each time
        rng = dpstream.Rng(seed=4)
        s = TabularStream(latent(6), 1, policy=Adaptive(max_scored=cap), rng=rng)
        assert s._pool_key is None
        states.append(rng._checkpoint_state())
    assert states[0] == states[1] == states[2]


def test_the_subset_depends_on_the_key_and_the_time_only() -> None:
    """Two streams of the same seed on different data score the same workloads at every step
    (the subset reads no record), and select only among them."""
    d, cap = 9, 8
    picks: list[list[list[int]]] = []
    for data_seed in (1, 2):
        rows = streams.latent_class(6 * 200, d, seed=data_seed)
        policy = Adaptive(max_scored=cap)
        s = TabularStream(latent(d), 1, policy=policy, iters=10, rng=dpstream.Rng(seed=9))
        assert s._pool_key is not None
        pools = []
        for t in range(6):
            pool = scored_pool(policy, len(s.workloads), s._pool_key, t)
            assert pool is not None and len(pool) == cap == len(set(pool))
            s.step(rows[t * 200 : (t + 1) * 200])
            assert set(s._last_selected) <= set(pool)  # every workload fits: no fallback
            pools.append(pool)
        picks.append(pools)
    assert picks[0] == picks[1]
    assert len({tuple(p) for p in picks[0]}) > 1  # a new subset each step


def test_the_subsets_are_uniform() -> None:
    """Each workload is in a step's subset with probability m/W (α ≈ 1e-7 per workload)."""
    workloads, cap, steps = 28, 10, 3000
    key = pool_key(Adaptive(max_scored=cap), workloads, dpstream.Rng(seed=12))
    counts = np.zeros(workloads)
    for t in range(steps):
        pool = scored_pool(Adaptive(max_scored=cap), workloads, key, t)
        assert pool is not None and pool == sorted(set(pool)) and len(pool) == cap
        counts[pool] += 1
    p = cap / workloads
    sd = math.sqrt(steps * p * (1 - p))
    assert np.all(np.abs(counts - steps * p) <= 5.5 * sd)


def test_a_subset_keeps_the_model_within_max_model_cells_and_falls_back_when_none_fits() -> None:
    """max_scored=1 and k=2: the second selection finds its subset taken and scores every
    workload (a public rule), so each step still makes both; the model never exceeds its
    bound."""
    d, limit = 10, 1_500
    rows = streams.latent_class(15 * 200, d, seed=3)
    domain = latent(d)
    s = TabularStream(
        domain, 1, policy=Adaptive(max_scored=1), iters=10, max_model_cells=limit,
        rng=dpstream.Rng(seed=3),
    )  # fmt: skip
    for t in range(15):
        s.step(rows[t * 200 : (t + 1) * 200])
        assert len(s.last_selected) == 2
        assert tree_cells(domain.sizes, s._model.junction_tree) <= limit  # type: ignore[union-attr]
    assert tree_cells(domain.sizes, s._model.junction_tree) > limit // 2  # type: ignore[union-attr]


def test_tables_computed_when_read_equal_the_eager_ones() -> None:
    d = 9
    rows = streams.latent_class(4 * 200, d, seed=5)
    s = TabularStream(latent(d), 1, policy=Adaptive(max_scored=8), iters=10, rng=dpstream.Rng(5))
    for t in range(4):
        s.step(rows[t * 200 : (t + 1) * 200])
    assert s._model is not None
    for i, clique in enumerate(s.workloads):
        want = s._model.marginal(clique) * (s.size / max(s._model.total, 1e-300))
        assert np.array_equal(s._synthetic_marginals[i], want)
        if i not in s._last_selected:
            assert np.array_equal(s._remainder[i], want - s._release(i)[0])


def test_a_resumed_stream_draws_the_same_subsets_and_a_bad_key_is_refused() -> None:
    d = 8
    rows = streams.latent_class(6 * 200, d, seed=1)
    policy = Adaptive(max_scored=10)
    s = TabularStream(latent(d), 1, policy=policy, iters=10, rng=dpstream.Rng(seed=5))
    for t in range(3):
        s.step(rows[t * 200 : (t + 1) * 200])
    data = s.to_bytes()
    c = TabularStream.from_bytes(data, allow_seeded=True)
    assert c._pool_key == s._pool_key
    for t in range(3, 6):
        assert s.step(rows[t * 200 : (t + 1) * 200]).equals(c.step(rows[t * 200 : (t + 1) * 200]))
    import io
    import json

    magic = b"DPSTREAM-TABULAR"
    npz = np.load(io.BytesIO(data[len(magic) :]))
    arrays = {k: npz[k] for k in npz.files}
    header = json.loads(arrays["header"].tobytes())
    header["pool_key"] = None
    arrays["header"] = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="corrupt TabularStream state: pool key"):
        TabularStream.from_bytes(magic + buf.getvalue(), allow_seeded=True)

"""The tabular stream's default policy (``Adaptive``: epochs, :mod:`dpstream.tabular.epochs`)."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from dpstream import Rng
from dpstream.tabular import Adaptive, Domain, Paper, TabularStream, tv_errors
from dpstream.tabular.epoch_split import SPLIT, shared, split, weights
from dpstream.tabular.epochs import EXTRA_ROUNDS, merged_groups, pair_candidates

DOMAIN = Domain({"a": 4, "b": 3, "c": ["x", "y"], "d": 5})


def drifting(n: int, seed: int) -> np.ndarray:
    """A table whose columns drift with the row index and depend on each other."""
    rng = np.random.default_rng(seed)
    phase = np.arange(n) / n
    a = np.minimum((phase * 4 + rng.random(n)).astype(int), 3)
    b = (a + rng.integers(0, 2, n)) % 3
    c = (rng.random(n) < 0.2 + 0.6 * phase).astype(int)
    d = np.where(rng.random(n) < 0.7, a + c, rng.integers(0, 5, n)) % 5
    return np.stack([a, b, c, d], axis=1)


def run(x: np.ndarray, r: int, **kwargs: object) -> TabularStream:
    stream = TabularStream(DOMAIN, 1, rng=Rng(seed=3), **kwargs)  # type: ignore[arg-type]
    for batch in np.array_split(x, r):
        stream.step(batch)
    return stream


def test_the_split_sums_to_epsilon_and_every_batch_spends_what_the_ledger_says() -> None:
    parts = split(Fraction(3, 2))
    total = parts.fresh + parts.settle + parts.select + parts.tree + parts.fresh_tree + parts.size
    assert total + parts.extra == Fraction(3, 2)
    assert sum(shared(Fraction(1), [4, 9, 100]), Fraction(0)) == 1
    stream = run(drifting(3000, 0), 12)
    mech = stream._epochs
    assert mech is not None
    # Every batch of a closed epoch spent exactly ε on its own rows (the sum of Δ/scale
    # over the noise it was given); a batch of the open epoch only its fresh shares.
    closed = {t for e in mech.epochs for t in range(e.first, e.last + 1)}
    assert closed and len(mech.ledger) == 12
    for t, spent in enumerate(mech.ledger):
        if t in closed:
            assert spent == stream.epsilon
        else:
            assert spent == (SPLIT.fresh + SPLIT.fresh_tree + SPLIT.size) * stream.epsilon


def test_a_column_with_merged_categories_gets_part_of_the_fresh_tree_share() -> None:
    # "a" has 5 common categories and 25 that never occur (merged at the first close);
    # "b" has the same size and 30 common ones (none merged): the open epoch measures
    # "a"'s 1-way marginal with more ε (smaller noise variance), out of the fresh tree
    # share, so the batch still spends exactly its fresh shares
    rng = np.random.default_rng(11)
    n = 30000
    x = np.stack([rng.integers(0, 5, n), rng.integers(0, 30, n), rng.integers(0, 2, n)], axis=1)
    domain = Domain({"a": 30, "b": 30, "c": 2})
    stream = TabularStream(domain, 1, rng=Rng(seed=5))
    stream.step(x[:20000])
    stream.step(x[20000:])
    mech = stream._epochs
    assert mech is not None and len(mech.epochs) == 1 and mech.t == 2
    groups = merged_groups(mech.epochs[0].maps)
    assert groups[0] >= 20 and groups[1] == 0
    assert mech.ones_var[0] < 0.8 * mech.ones_var[1]
    assert mech.ledger[1] == (SPLIT.fresh + SPLIT.fresh_tree + SPLIT.size) * stream.epsilon


def test_the_tree_passes_over_a_pair_too_large_to_measure() -> None:
    # three independent columns: the exact 60×60 marginal of 6,000 rows is sparse, so its
    # ℓ1 distance from the product of the 1-way marginals is large (about 3,600) although
    # nothing depends; its measurement's noise (4 per cell on 3,600 cells) would be larger
    # still, so the tree's score counts it against the pair and the tree takes the small
    # pairs
    rng = np.random.default_rng(12)
    n = 6000
    x = np.stack([rng.integers(0, 60, n), rng.integers(0, 60, n), rng.integers(0, 2, n)], axis=1)
    stream = TabularStream(Domain({"a": 60, "b": 60, "c": 2}), 1, rng=Rng(seed=6))
    stream.step(x)
    mech = stream._epochs
    assert mech is not None and len(mech.epochs) == 1
    assert mech.epochs[0].spanning == [(0, 2), (1, 2)]


def test_every_fit_runs_until_it_reproduces_its_sums() -> None:
    # a chain of eight 16-category columns at ε = 50, where the noise is tiny: a fit that
    # stops at a fixed 100 propagations leaves its 1-way marginals about 0.0012 (closed
    # epoch) and 0.0017 (open epoch) in TV from the sums it was fitted to; fits that run
    # until converged reproduce them
    rng = np.random.default_rng(3)
    n = 70000
    cols = [rng.integers(0, 16, n)]
    for _ in range(7):
        drift = (cols[-1] + rng.integers(0, 3, n)) % 16
        cols.append(np.where(rng.random(n) < 0.9, drift, rng.integers(0, 16, n)))
    x = np.stack(cols, axis=1)
    stream = TabularStream(Domain({k: 16 for k in "abcdefgh"}), 50, rng=Rng(seed=1))
    stream.step(x[:50000])
    stream.step(x[50000:])
    mech = stream._epochs
    assert mech is not None and len(mech.epochs) == 1 and mech.open_model is not None
    e = mech.epochs[0]
    assert e.model is not None

    def gap(model_ones: np.ndarray, sums: np.ndarray) -> float:
        p, q = np.clip(model_ones, 0, None), np.clip(sums, 0, None)
        return 0.5 * float(np.abs(p / p.sum() - q / q.sum()).sum())

    closed = max(gap(e.model.marginal((j,))[e.maps[j]], e.ones[j]) for j in range(8))
    opened = max(gap(mech.open_model.marginal((j,))[e.maps[j]], mech.ones[j]) for j in range(8))
    assert closed < 5e-4
    assert opened < 1e-3


def test_epochs_close_at_growth_and_cover_every_batch_once() -> None:
    stream = run(drifting(4000, 1), 20, policy=Adaptive(growth=2.0))
    mech = stream._epochs
    assert mech is not None
    spans = [(e.first, e.last) for e in mech.epochs]
    assert spans[0] == (0, 0)
    assert all(b[0] == a[1] + 1 for a, b in itertools.pairwise(spans))
    assert mech.first == spans[-1][1] + 1
    for e in mech.epochs[1:]:
        assert len(e.spanning) == len(DOMAIN) - 1  # a spanning tree of the candidate pairs
        assert len(e.tree) <= len(DOMAIN) - 1 + EXTRA_ROUNDS


def test_extra_pairs_catch_what_a_tree_cannot_and_survive_a_checkpoint() -> None:
    # four columns that all copy one hidden value (each with noise): given any spanning
    # tree, the pairs off the tree still depend on each other, so the rounds add some
    rng = np.random.default_rng(7)
    z = rng.integers(0, 5, 40000)
    x = np.stack([np.where(rng.random(z.size) < 0.8, z, rng.integers(0, 5, z.size))
                  for _ in range(4)], axis=1)  # fmt: skip
    domain = Domain({k: 5 for k in "abcd"})
    stream = TabularStream(domain, 1, rng=Rng(seed=2))
    stream.step(x[:20000])
    mech = stream._epochs
    assert mech is not None
    first = mech.epochs[0]
    assert first.extra >= 1 and len(first.spanning) == 3
    assert first.tree[len(first.spanning) :] != []
    assert mech.open_tree == first.spanning  # the open epoch measures the tree alone
    assert mech.ledger[0] == stream.epsilon
    with_extras = tv_errors(x[:20000], stream.synthetic_codes(), domain).mean_2way
    again = TabularStream.from_bytes(stream.to_bytes(), allow_seeded=True)
    assert again._epochs is not None and again._epochs.epochs[0].extra == first.extra
    pd.testing.assert_frame_equal(stream.step(x[20000:]), again.step(x[20000:]))
    assert with_extras < 0.05


def test_no_column_is_left_uniform_and_the_release_follows_a_drifting_table() -> None:
    x = drifting(20000, 2)
    stream = run(x, 12)
    synth = stream.synthetic_codes()
    assert abs(len(synth) - len(x)) < 200
    err = tv_errors(x, synth, DOMAIN)
    assert err.max_1way < 0.05
    assert err.mean_2way < 0.06


def test_a_checkpoint_continues_exactly_and_stores_no_model() -> None:
    x = drifting(3000, 3)
    batches = np.array_split(x, 9)
    a = TabularStream(DOMAIN, 1, rng=Rng(seed=5))
    for batch in batches[:5]:
        a.step(batch)
    b = TabularStream.from_bytes(a.to_bytes(), allow_seeded=True)
    assert b.t == a.t and b.size == a.size and b.policy == Adaptive()
    for batch in batches[5:]:
        ra, rb = a.step(batch), b.step(batch)
        pd.testing.assert_frame_equal(ra, rb)
    assert a.to_bytes() == b.to_bytes()
    with pytest.raises(ValueError, match="seeded"):
        TabularStream.from_bytes(a.to_bytes())


def test_bad_input_changes_nothing() -> None:
    x = drifting(600, 4)
    stream = run(x, 2)
    before = stream.to_bytes()
    with pytest.raises(ValueError, match=r"insertions only.*Paper"):
        stream.step(x[:10], deletions=x[:5])
    with pytest.raises(ValueError):
        stream.step(np.full((3, 4), 9))
    assert stream.to_bytes() == before
    for option, value in (("counter", "block"), ("horizon", 5), ("estimator", "mw")):
        # Options of Paper()/Baseline() (counter, horizon) or of Baseline() alone.
        with pytest.raises(TypeError, match=option):
            TabularStream(DOMAIN, 1, **{option: value})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="growth"):
        Adaptive(growth=1.0)
    with pytest.raises(TypeError, match="growth"):
        Adaptive(growth="2")  # type: ignore[arg-type]


def test_released_sizes_follow_the_table() -> None:
    x = drifting(3000, 9)
    stream = TabularStream(DOMAIN, 1, rng=Rng(seed=4))
    for k, batch in enumerate(np.array_split(x, 10), start=1):
        stream.step(batch)
        # the noisy row count (ε/40 a batch, scale 40) keeps the size within a few sds
        assert abs(stream.size - 300 * k) < 6 * 57 * np.sqrt(k)


def test_public_sizes_release_the_exact_size() -> None:
    x = drifting(1000, 5)
    stream = run(x, 5, public_sizes=True)
    assert stream.size == len(x) == len(stream.synthetic_codes())


def test_empty_batches_and_none_are_steps() -> None:
    stream = TabularStream(DOMAIN, 1, rng=Rng(seed=1))
    out = stream.step(None)
    assert len(out) == 0 and stream.t == 1
    stream.step(np.zeros((0, 4), dtype=np.int64))
    stream.step(drifting(500, 6))
    assert stream.t == 3 and stream.size > 0


def test_workloads_restrict_the_tree_to_their_pairs() -> None:
    assert pair_candidates([(0, 1, 2), (2, 3)]) == [(0, 1), (0, 2), (1, 2), (2, 3)]
    stream = run(drifting(2000, 7), 4, workloads=[(0, 1), (1, 2)])
    mech = stream._epochs
    assert mech is not None
    assert all(set(e.tree) <= {(0, 1), (1, 2)} for e in mech.epochs)
    assert weights([4, 100]) == [Fraction(2), Fraction(10)]


def test_paper_still_takes_deletions() -> None:
    x = drifting(400, 8)
    stream = TabularStream(DOMAIN, 1, policy=Paper(), rng=Rng(seed=2))
    stream.step(x[:200])
    stream.step(x[200:], deletions=x[:50])
    assert stream.t == 2

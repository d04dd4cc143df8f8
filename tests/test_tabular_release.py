"""Issue 42: a release is drawn in chunks of a public size (:mod:`dpstream.tabular.release`);
the chunks drawn on a 2-worker cluster (a Dask DataFrame back from a step of a Dask batch)
are the rows one machine draws, byte for byte."""

from __future__ import annotations

import numpy as np
import pytest
from dpstream import Rng
from dpstream.tabular import Adaptive, Baseline, Domain, ModelOptions, Paper, TabularStream, release
from dpstream.tabular.release import ReleasePlan, shares

pd = pytest.importorskip("pandas")
dd = pytest.importorskip("dask.dataframe")
pytest.importorskip("dask.distributed")

from test_distributed import client as _two_workers  # noqa: E402, F401


@pytest.fixture(scope="module")
def client(_two_workers: object) -> object:  # noqa: F811 (the imported fixture)
    """The 2-worker in-process cluster of ``test_distributed.py``."""
    return _two_workers


@pytest.fixture
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> int:
    """Chunks of 97 rows, so that a small release has several."""
    monkeypatch.setattr(release, "CHUNK_ROWS", 97)
    return 97


DOMAIN = Domain({"a": 3, "b": ["x", "y", "z"], "c": 4, "d": 2})


def records(n: int, seed: int) -> object:
    g = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": g.integers(0, 3, n),
            "b": g.choice(["x", "y", "z"], n, p=[0.6, 0.3, 0.1]),
            "c": g.choice(4, n, p=[0.5, 0.3, 0.15, 0.05]),
            "d": g.integers(0, 2, n),
        }
    )


@pytest.mark.parametrize(
    ("policy", "sampling"),
    [
        (Adaptive(), "round"),
        (Adaptive(), "iid"),
        (Paper(k=2), "round"),
        (Paper(k=2), "iid"),
        (Baseline(k=2), "round"),
    ],
    ids=["default", "default-iid", "paper", "paper-iid", "baseline"],
)
def test_a_release_drawn_on_the_workers_equals_one_machine(
    client, small_chunks: int, policy: object, sampling: str
) -> None:
    frame = records(2400, 4)
    one = TabularStream(
        DOMAIN, 1, policy=policy, model=ModelOptions(sampling=sampling, iters=20), rng=Rng(seed=5)
    )
    two = TabularStream(
        DOMAIN, 1, policy=policy, model=ModelOptions(sampling=sampling, iters=20), rng=Rng(seed=5)
    )
    for part in (frame.iloc[:600], frame.iloc[600:1500], frame.iloc[1500:]):
        want = one.step(part)
        got = two.step(dd.from_pandas(part, npartitions=3))
        assert isinstance(got, dd.DataFrame)
        assert got.npartitions == -(-len(want) // small_chunks) > 1
        computed = got.compute()
        assert want.equals(computed) and want.index.equals(computed.index)
        assert one.to_bytes() == two.to_bytes()
        # Later releases of the same step: the same on both (a plan is drawn per release).
        codes = one.synthetic_codes()
        assert np.array_equal(DOMAIN.encode(two.synthetic_dask().compute()), codes)
        assert codes.shape == (one.size, 4)


def test_chunks_drawn_in_any_order_are_the_same_rows(small_chunks: int) -> None:
    s = TabularStream(DOMAIN, 1, model=ModelOptions(iters=20), rng=Rng(seed=8))
    for part in (records(500, 1), records(900, 2), records(1300, 3)):
        s.step(part)
    plan = s._release_plan()
    assert plan.stored is None and len(plan.parts) >= 2  # models, not rows
    whole = plan.sample()
    backwards = {i: plan.chunk(i) for i in reversed(range(plan.chunks))}
    assert np.array_equal(np.concatenate([backwards[i] for i in range(plan.chunks)]), whole)
    # The default policy's release is a function of the step: the same at every call.
    assert np.array_equal(s.synthetic_codes(), whole)


@pytest.mark.parametrize(
    "sizes",
    [[5000], [3, 4000, 1, 0, 777], [1] * 300, [100_000, 2, 50_000], [0, 0]]
    + [[int(n) for n in np.random.default_rng(k).integers(0, 3000, k % 6 + 1)] for k in range(20)],
)
def test_every_part_gives_its_rows_and_every_chunk_is_full(small_chunks: int, sizes) -> None:
    counts = shares(sizes)
    total = sum(sizes)
    assert counts.shape == (-(-total // small_chunks), len(sizes))
    assert (counts >= 0).all() and counts.sum(axis=0).tolist() == sizes
    chunk = [
        ReleasePlan(1, rows=total, chunk_rows=small_chunks).bounds(i) for i in range(len(counts))
    ]
    assert counts.sum(axis=1).tolist() == [b - a for a, b in chunk]
    if total:  # each chunk mixes the parts in proportion to their sizes, within a row
        expected = np.outer([b - a for a, b in chunk], np.array(sizes) / total)
        assert np.abs(np.cumsum(counts - expected, axis=0)).max() < 1


def test_a_release_computed_after_later_steps_is_its_own_step(client, small_chunks) -> None:
    one = TabularStream(DOMAIN, 1, model=ModelOptions(iters=20), rng=Rng(seed=6))
    two = TabularStream(DOMAIN, 1, model=ModelOptions(iters=20), rng=Rng(seed=6))
    parts = [records(400, 1), records(700, 2), records(300, 3)]
    want = [one.step(p) for p in parts]
    got = [two.step(dd.from_pandas(p, npartitions=2)) for p in parts]
    assert all(w.equals(g.compute()) for w, g in zip(want, got, strict=True))


def test_an_empty_release_is_one_empty_partition(client) -> None:
    s = TabularStream(DOMAIN, 1, public_sizes=True, rng=Rng(seed=1))  # size 0, exactly
    got = s.step(dd.from_pandas(records(0, 1), npartitions=1))
    computed = got.compute()
    assert len(computed) == 0 and list(computed.columns) == list(DOMAIN.names)


def test_a_release_is_written_as_parquet_by_the_workers(client, small_chunks, tmp_path) -> None:
    s = TabularStream(DOMAIN, 1, model=ModelOptions(iters=20), rng=Rng(seed=2))
    table = s.step(dd.from_pandas(records(1000, 2), npartitions=2))
    table.to_parquet(tmp_path / "release")
    back = pd.read_parquet(tmp_path / "release").sort_index()  # the rows' places
    assert np.array_equal(DOMAIN.encode(back), s.synthetic_codes())


@pytest.mark.parametrize(
    "policy", [Adaptive(), Paper(k=2), Baseline(k=2)], ids=["default", "paper", "baseline"]
)
def test_a_step_drawn_later_is_a_function_of_the_state_before_it(
    small_chunks: int, policy: object
) -> None:
    """``step(draw=False)`` then ``synthetic_codes()``: the table ``step`` returns; a stream
    loaded from ``to_bytes()`` taken between the two draws it again, the same rows, and
    ends in the same state (what ``dpstream table --dask`` resumes from)."""
    one = TabularStream(DOMAIN, 1, policy=policy, model=ModelOptions(iters=20), rng=Rng(seed=3))
    two = TabularStream(DOMAIN, 1, policy=policy, model=ModelOptions(iters=20), rng=Rng(seed=3))
    for part in (records(500, 1), records(700, 2)):
        want = one.step(part)
        assert two.step(part, draw=False) is None
        state = two.to_bytes()
        codes = two.synthetic_codes()
        assert np.array_equal(DOMAIN.encode(want), codes)
        again = TabularStream.from_bytes(state, allow_seeded=True)
        assert np.array_equal(again.synthetic_codes(), codes)
        assert again.to_bytes() == two.to_bytes() == one.to_bytes()


@pytest.mark.parametrize(
    "policy", [Adaptive(), Paper(k=2), Baseline(k=2)], ids=["default", "paper", "baseline"]
)
def test_a_draw_that_is_not_a_bool_is_refused_and_changes_nothing(policy: object) -> None:
    stream = TabularStream(DOMAIN, 1, policy=policy, rng=Rng(seed=3))
    stream.step(records(200, 1))
    before = bytes(stream.to_bytes())
    with pytest.raises(TypeError, match="draw must be True or False, got str"):
        stream.step(records(200, 2), draw="no")  # type: ignore[arg-type]
    assert bytes(stream.to_bytes()) == before

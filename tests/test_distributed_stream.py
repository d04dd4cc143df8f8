"""Issue 30: the tabular stream and the online synthesizer take Dask collections. The
counting runs on a 2-worker LocalCluster; the client's state, checkpoint and releases are
byte for byte those of one process on the same records with the same seed; bad input is
refused on the client with the pandas errors and changes nothing."""

from __future__ import annotations

import numpy as np
import pytest
from dpstream import OnlineSynthesizer, PrivHP, Rng, distributed
from dpstream.online import EpochsSynthesizer, PrivHPSynthesizer
from dpstream.partition import encode
from dpstream.tabular import Adaptive, Baseline, Domain, Paper, TabularStream
from dpstream.tabular.marginals import BatchMarginals

pd = pytest.importorskip("pandas")
dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
dist = pytest.importorskip("dask.distributed")

from test_distributed import client as _two_workers  # noqa: E402, F401


@pytest.fixture(scope="module")
def client(_two_workers: object) -> object:  # noqa: F811 (the imported fixture)
    """The 2-worker in-process cluster of ``test_distributed.py``."""
    return _two_workers


DOMAIN = Domain({"a": 3, "b": ["x", "y", "z"], "c": 4, "d": 2})


def records(n: int, seed: int) -> object:
    g = np.random.default_rng(seed)
    # Skewed columns, so that the releases depend on the counts.
    return pd.DataFrame(
        {
            "c": g.choice(4, n, p=[0.5, 0.3, 0.15, 0.05]),
            "a": g.integers(0, 3, n),
            "b": g.choice(["x", "y", "z"], n, p=[0.6, 0.3, 0.1]),
            "d": g.integers(0, 2, n),
        }
    )


def steps(frame: object) -> list[object]:
    return [frame.iloc[:700], frame.iloc[700:2500], frame.iloc[2500:2500], frame.iloc[2500:]]


@pytest.mark.parametrize(
    "policy", [Adaptive(), Paper(), Baseline()], ids=["default", "paper", "baseline"]
)
def test_tabular_steps_on_dask_equal_pandas_byte_for_byte(client, policy: object) -> None:
    frame = records(4000, 1)
    one = TabularStream(DOMAIN, 1, policy=policy, rng=Rng(seed=7))
    two = TabularStream(DOMAIN, 1, policy=policy, rng=Rng(seed=7))
    three = TabularStream(DOMAIN, 1, policy=policy, rng=Rng(seed=7))
    for part in steps(frame):
        want = one.step(part if len(part) else None)
        ddf = dd.from_pandas(part, npartitions=3)
        got = two.step(ddf).compute()  # counted, and the release drawn, on the cluster
        counted = distributed.batch_marginals(ddf, DOMAIN, three.workloads, split_every=2)
        also = three.step(counted)
        assert want.equals(got) and want.equals(also)
        assert one.to_bytes() == two.to_bytes() == three.to_bytes()


def test_deletions_and_arrays_of_codes(client) -> None:
    frame = records(3000, 2)
    codes = DOMAIN.encode(frame)
    # The default policy takes a Dask array of codes too (insertions only).
    a, b = TabularStream(DOMAIN, 1, rng=Rng(seed=3)), TabularStream(DOMAIN, 1, rng=Rng(seed=3))
    assert a.step(frame).equals(b.step(da.from_array(codes, chunks=(700, 2))).compute())
    assert a.to_bytes() == b.to_bytes()
    one = TabularStream(DOMAIN, 1, policy=Paper(), rng=Rng(seed=3))
    two = TabularStream(DOMAIN, 1, policy=Paper(), rng=Rng(seed=3))
    one.step(frame)
    two.step(da.from_array(codes, chunks=(700, 2)))  # uneven blocks, split columns
    gone = frame.iloc[100:400]
    want = one.step(frame.iloc[:50], deletions=gone)
    got = two.step(frame.iloc[:50], deletions=dd.from_pandas(gone, npartitions=2)).compute()
    assert want.equals(got) and one.to_bytes() == two.to_bytes()
    # The marginals of the deletions are counted too; their repr shows no count.
    m = distributed.batch_marginals(None, DOMAIN, one.workloads, deletions=gone)
    assert m.rows_inserted == 0 and m.rows_deleted == 300 and m.has_deletions
    assert "300" not in repr(m) and "sensitive" in repr(m)


def test_marginals_are_a_tree_reduction_of_integer_counts(client) -> None:
    frame = records(2000, 3)
    ddf = dd.from_pandas(frame, npartitions=20)
    graph = distributed.marginals_graph(ddf, DOMAIN, [(0, 1), (2,)], split_every=4)
    adds = [k for k in dict(graph.dask) if str(k).startswith("_add_counted")]
    assert len(adds) == 5 + 2 + 1  # 20 -> 5 -> 2 -> 1
    (rows, counts) = dask.compute(graph)[0]
    local = BatchMarginals.of(DOMAIN, [(0, 1), (2,)], frame)
    assert rows == 2000 and all(c.dtype == np.int64 for c in counts)
    assert all(np.array_equal(a, b) for a, b in zip(counts, local.inserted, strict=True))


def test_bad_dask_batches_are_refused_like_pandas_and_change_nothing(client) -> None:
    frame = records(1200, 4)
    s = TabularStream(DOMAIN, 1, rng=Rng(seed=1))
    s.step(frame.iloc[:200])
    before = s.to_bytes()
    out_of_domain = frame.copy()
    out_of_domain.loc[1000, "c"] = 7
    unknown = frame.copy()
    unknown.loc[900, "b"] = "w"
    cases = [
        (frame.rename(columns={"c": "e"}), ValueError, r"missing \['c'\], unexpected \['e'\]"),
        (frame.assign(a=frame["a"].astype(str)), TypeError, "column 'a' must hold integer"),
        (frame.assign(d=frame["d"] > 0), TypeError, "column 'd' must hold integer codes, got bool"),
        (out_of_domain, ValueError, r"partition 3: column 'c' has code 7 in row \d+"),
        (unknown, ValueError, "partition [0-9]: column 'b' has unknown category 'w'"),
        (frame.assign(c=frame["c"] + 0.5), ValueError, "column 'c' holds non-integer values"),
    ]
    for bad, error, message in cases:
        # The pandas error for the same records names the same column.
        with pytest.raises(error, match=message.split(": ", 1)[-1].replace("partition 3", "")):
            s.step(bad)
        with pytest.raises(error, match=message):
            s.step(dd.from_pandas(bad, npartitions=4))
        assert s.to_bytes() == before
    with pytest.raises(ValueError, match=r"must have shape \(n, 4\)"):
        s.step(da.zeros((5, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="pass deletions=None"):
        s.step(BatchMarginals.of(DOMAIN, s.workloads, frame), deletions=frame)
    with pytest.raises(ValueError, match="other workloads"):
        s.step(BatchMarginals.of(DOMAIN, s.workloads[:3], frame))
    with pytest.raises(TypeError, match="a dask DataFrame, a dask Array or a list of dask"):
        distributed.batch_marginals(dask.delayed(frame), DOMAIN, s.workloads)
    assert s.to_bytes() == before


def points(n: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    x = g.random((n, 2)) * 0.3 + 0.1  # clustered, so the releases are not uniform
    x[: n // 4] = np.round(x[: n // 4], 2)  # repeated points: counts above 1
    return x


def synthesizers(method: str) -> tuple[OnlineSynthesizer, OnlineSynthesizer]:
    def make() -> OnlineSynthesizer:
        if method == "privhp":
            return OnlineSynthesizer.for_memory(
                1, 2, memory_bytes=1 << 20, expected_n=50_000, max_releases=8, rng=Rng(seed=5)
            )
        return OnlineSynthesizer(1, 2, rng=Rng(seed=5))

    return make(), make()


@pytest.mark.parametrize("method", ["epochs", "privhp"])
def test_online_updates_on_dask_equal_one_process_byte_for_byte(client, method: str) -> None:
    one, two = synthesizers(method)
    x = points(30_000, 1)
    for i, part in enumerate(np.array_split(x, [4000, 4000, 19_000])):
        one.update(part)
        if i % 2:
            frame = pd.DataFrame(part, columns=["lon", "lat"])
            two.update(dd.from_pandas(frame, npartitions=3))
        else:
            two.update(da.from_array(part, chunks=(3000, 1)))  # split columns too
        assert one.t == two.t and one.to_bytes() == two.to_bytes()
        assert one.memory_bytes() == two.memory_bytes()
        assert np.array_equal(one.release(), two.release())
    assert np.array_equal(one.release(500), two.release(500))


def test_counts_and_summaries_feed_the_open_epoch_exactly() -> None:
    x = points(5000, 2)
    one, two = synthesizers("epochs")
    one.update(x)
    cells, counts = np.unique(encode(x, 63), return_counts=True)
    two.update_counts(cells[::-1], counts[::-1])  # any order
    assert one.to_bytes() == two.to_bytes()
    a, b = synthesizers("privhp")
    a.update(x)
    summary = b.summary_template()
    summary.update(x)
    b.merge_summary(summary)
    assert a.to_bytes() == b.to_bytes()
    with pytest.raises(ValueError, match="other parameters or hash keys"):
        b.merge_summary(PrivHP(1, 2, k=16, width=64, depth=12))
    # Each method's own operations are on its class only.
    assert isinstance(two, EpochsSynthesizer) and isinstance(b, PrivHPSynthesizer)
    assert not hasattr(b, "update_counts") and not hasattr(two, "merge_summary")
    with pytest.raises(ValueError, match="same length"):
        two.update_counts(cells, counts[:-1])
    with pytest.raises(ValueError, match="non-negative"):
        two.update_counts(cells[:1], np.array([-1]))
    with pytest.raises(ValueError, match="does not fit in 63 bits"):
        two.update_counts(np.array([2**63], dtype=np.uint64), np.array([1]))
    assert one.to_bytes() == two.to_bytes()


@pytest.mark.parametrize("method", ["epochs", "privhp", "paper"])
def test_bad_dask_points_are_refused_and_change_nothing(client, method: str) -> None:
    if method == "paper":
        s = OnlineSynthesizer(1, 2, method="paper", rng=Rng(seed=1))
    else:
        s, _ = synthesizers(method)
    s.update(points(100, 3))
    before = s.to_bytes()
    x = points(3000, 4)
    x[2500, 1] = 1.5
    message = "tests every time step in order" if method == "paper" else r"= 1.5 is outside"
    with pytest.raises(ValueError, match=message):
        s.update(da.from_array(x, chunks=(500, 2)))
    with pytest.raises(ValueError, match="tests every time step" if method == "paper" else "3"):
        s.update(da.from_array(points(10, 5)[:, :1].repeat(3, axis=1)))
    assert s.to_bytes() == before


@pytest.mark.slow
def test_worker_processes(tmp_path) -> None:
    """Real worker processes: encodings, counts and summaries cross process boundaries."""
    x = points(20_000, 6)
    frame = records(3000, 6)
    with (
        dist.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        dist.Client(cluster),
    ):
        for method in ("epochs", "privhp"):
            one, two = synthesizers(method)
            one.update(x)
            two.update(da.from_array(x, chunks=(3000, 2)))
            assert one.to_bytes() == two.to_bytes(), method
        s1 = TabularStream(DOMAIN, 1, rng=Rng(seed=2))
        s2 = TabularStream(DOMAIN, 1, rng=Rng(seed=2))
        assert s1.step(frame).equals(s2.step(dd.from_pandas(frame, npartitions=4)).compute())
        assert s1.to_bytes() == s2.to_bytes()


def test_spark_patterns_without_spark() -> None:
    """mapPartitions(count_records / cell_counts / summarize) + treeReduce, by hand."""
    import functools

    frame = records(2000, 8)
    names = list(DOMAIN.names)
    one = TabularStream(DOMAIN, 1, rng=Rng(seed=4))
    two = TabularStream(DOMAIN, 1, rng=Rng(seed=4))
    rows = [tuple(r) for r in frame[names].itertuples(index=False)]
    partitions = [rows[:500], rows[500:1700], [], rows[1700:]]
    counted = [
        distributed.count_records(
            pd.DataFrame(p, columns=names) if p else None, DOMAIN, two.workloads
        )
        for p in partitions
    ]
    inserted = functools.reduce(distributed.add_record_counts, counted)
    assert one.step(frame).equals(
        two.step(distributed.marginals_of(DOMAIN, two.workloads, inserted))
    )
    assert one.to_bytes() == two.to_bytes()
    x = points(3000, 9)
    a, b = synthesizers("epochs")
    a.update(x)
    for part in np.array_split(x, 4):
        b.update_counts(*distributed.cell_counts([tuple(p) for p in part], 2))
    assert a.to_bytes() == b.to_bytes()
    a, b = synthesizers("privhp")
    a.update(x)
    shipped = b.summary_template().to_bytes()
    encoded = [distributed.summarize(shipped, part).to_bytes() for part in np.array_split(x, 3)]
    b.merge_summary(PrivHP.from_bytes(functools.reduce(distributed.merge_bytes, encoded)))
    assert a.to_bytes() == b.to_bytes()


def _slow_square(i: int) -> int:
    import time

    if i == 99:
        raise ValueError("task 99 refuses")
    time.sleep(0.02 * (5 - i))  # the later tasks finish first
    return i * i


def test_gather_in_order_yields_in_order_and_only_when_every_task_finished(client) -> None:
    """On a cluster: results in the tasks' order whatever order they finish in (the next
    one is fetched while the caller works on the current one), and a failing task is
    raised before anything is yielded."""
    square = dask.delayed(_slow_square, pure=True)
    with client.as_current():
        assert list(distributed.gather_in_order([square(i) for i in range(6)])) == [
            i * i for i in range(6)
        ]
        assert list(distributed.gather_in_order([])) == []
        got: list[int] = []
        with pytest.raises(ValueError, match="task 99 refuses"):
            for r in distributed.gather_in_order([square(i) for i in (0, 1, 99, 3)]):
                got.append(r)
        assert got == []

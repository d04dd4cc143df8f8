"""dpstream.distributed (issue 6, more than one machine): exact summaries per partition on
a Dask LocalCluster, merged by a tree reduction, equal byte for byte to a single-machine
summary of the same points, released once on the client."""

from __future__ import annotations

import functools
import pickle
from collections.abc import Iterator

import numpy as np
import pytest
from dpstream import PrivHP, Rng, TreeGenerator, distributed

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
db = pytest.importorskip("dask.bag")
dd = pytest.importorskip("dask.dataframe")
dist = pytest.importorskip("dask.distributed")

PARAMS = {"k": 16, "width": 64, "rows": 2, "depth": 14}


@pytest.fixture(scope="module")
def client() -> Iterator[object]:
    """Two single-threaded workers (in-process: fast to start; the summaries still go
    through the task graph and the reduction), their statistical profiler off: in
    pytest's process its frame walks are a crash risk on CPython 3.11 (see the
    ``scheduler`` fixture of test_cli_dask.py)."""
    with (
        dask.config.set({"distributed.worker.profile.enabled": False}),
        dist.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        dist.Client(cluster) as c,
    ):
        yield c


def points(n: int, seed: int, dim: int = 2) -> np.ndarray:
    return np.random.default_rng(seed).random((n, dim))


def template(sketch: str = "count-min", dim: int = 2) -> PrivHP:
    # An OS-seeded construction rng: the hash keys are public and travel with the template.
    return PrivHP(1, dim, sketch=sketch, **PARAMS)  # type: ignore[arg-type]


def single_machine(t: PrivHP, x: np.ndarray) -> PrivHP:
    s = PrivHP.from_bytes(t.to_bytes())
    s.update(x)
    return s


@pytest.mark.parametrize("sketch", ["count-min", "count"])
def test_cluster_summary_equals_single_machine_byte_for_byte(client, sketch: str) -> None:
    x = points(20_011, 1)
    t = template(sketch)
    empty = t.to_bytes()
    arr = da.from_array(x, chunks=((5000, 3, 7000, 0, 8008), (1, 1)))  # uneven, split columns
    merged = distributed.build_privhp(arr, t, split_every=2)
    whole = single_machine(t, x)
    assert merged.points_seen == 20_011 and not merged.released
    assert merged.to_bytes() == whole.to_bytes()
    assert t.to_bytes() == empty  # the template is never modified
    # The same noise gives the same release; the client releases once.
    g1 = merged.release(rng=Rng(seed=7))
    g2 = whole.release(rng=Rng(seed=7))
    assert g1.to_bytes() == g2.to_bytes()
    assert merged.release().to_bytes() == g1.to_bytes()  # no second noise draw


def test_release_with_os_noise_is_accurate(client) -> None:
    x = points(50_000, 2)
    t = PrivHP(1, 2, k=64, width=256, rows=1, depth=16)
    summary = distributed.build_privhp(da.from_array(x, chunks=(6000, 2)), t)
    gen = summary.release()  # OS-seeded: the private way
    assert isinstance(gen, TreeGenerator)
    assert "NOT PRIVATE" not in repr(gen)
    assert abs(gen.total - 50_000) < 50 / float(summary.sigmas[0])
    y = gen.sample(2000)
    assert y.shape == (2000, 2) and ((y >= 0) & (y <= 1)).all()
    # Both coordinates keep the uniform mean (a coarse utility check).
    assert np.all(np.abs(y.mean(axis=0) - 0.5) < 0.05)


def test_every_input_kind_gives_the_same_summary(client) -> None:
    import pandas as pd

    x = points(3001, 3)
    t = template()
    want = single_machine(t, x).to_bytes()
    frame = dd.from_pandas(pd.DataFrame(x, columns=["a", "b"]), npartitions=3)
    bag = db.from_sequence([tuple(p) for p in x], npartitions=4)
    delayed = [dask.delayed(np.asarray)(part) for part in np.array_split(x, 5)]
    for data in (frame, bag, delayed, da.from_array(x, chunks=(1000, 2))):
        got = distributed.build_privhp(data, t, split_every=3)
        assert got.to_bytes() == want, type(data).__name__


def test_many_partitions_reduce_as_a_tree(client) -> None:
    x = points(4000, 4)
    t = template()
    arr = da.from_array(x, chunks=(100, 2))  # 40 partitions
    graph = distributed.summary_graph(arr, t, split_every=4)
    merges = [k for k in dict(graph.dask) if str(k).startswith("_merge_many")]
    assert len(merges) == 10 + 3 + 1  # 40 -> 10 -> 3 -> 1
    (got,) = dask.compute(graph)
    assert got.to_bytes() == single_machine(t, x).to_bytes()


def test_local_scheduler_and_empty_input() -> None:
    x = points(2500, 5)
    t = template()
    with dask.config.set(scheduler="threads"):
        got = distributed.build_privhp(da.from_array(x, chunks=(700, 2)), t, threads=2)
        assert got.to_bytes() == single_machine(t, x).to_bytes()
        empty = distributed.build_privhp(da.zeros((0, 2), chunks=(10, 2)), t)
        assert empty.points_seen == 0 and empty.to_bytes() == t.to_bytes()
        nothing = distributed.build_privhp([], t)
        assert nothing.to_bytes() == t.to_bytes()


def test_bad_arguments_are_refused(client) -> None:
    t = template()
    x = da.from_array(points(100, 6), chunks=(50, 2))
    used = template()
    used.update(points(3, 7))
    spent = template()
    spent.release()
    cases = [
        ((x, used), ValueError, "template has counted 3 points"),
        ((x, spent), ValueError, "template has been released"),
        ((x, "template"), TypeError, "template must be a PrivHP"),
        ((da.from_array(points(10, 8, dim=3)), t), ValueError, "must have 2 columns"),
        ((da.zeros((4, 2, 1)), t), ValueError, "must be 2-D"),
        ((points(10, 9), t), TypeError, "data must be a dask Array"),
        (([1, 2], t), TypeError, "dask.delayed objects only"),
    ]
    for args, error, message in cases:
        with pytest.raises(error, match=message):
            distributed.build_privhp(*args)
    with pytest.raises(ValueError, match="split_every"):
        distributed.build_privhp(x, t, split_every=1)
    with pytest.raises(ValueError, match="threads"):
        distributed.build_privhp(x, t, threads=3)
    # A point outside [0,1]^d fails its task; the error reaches the client.
    bad = da.from_array(np.array([[0.5, 0.5], [0.5, 1.5]]), chunks=(1, 2))
    with pytest.raises(ValueError, match=r"points\[0, 1\] = 1.5 is outside \[0, 1\]"):
        distributed.build_privhp(bad, t)


@pytest.mark.slow
def test_worker_processes_ship_summaries_as_bytes() -> None:
    """Real worker processes: blocks and summaries are pickled between processes (blocks
    arrive as possibly misaligned protocol-5 buffers)."""
    x = points(30_000, 12)
    t = template()
    with (
        dist.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        dist.Client(cluster),
    ):
        got = distributed.build_privhp(da.from_array(x, chunks=(4000, 2)), t, split_every=2)
    assert got.to_bytes() == single_machine(t, x).to_bytes()


def test_summaries_survive_dask_serialization(client) -> None:
    """What a worker sends to another worker or to the client: the summary's bytes."""
    from distributed.protocol import deserialize, serialize

    s = single_machine(template(), points(1000, 10))
    back = deserialize(*serialize(s))
    assert back.to_bytes() == s.to_bytes()
    assert pickle.loads(pickle.dumps(s)).to_bytes() == s.to_bytes()
    with pytest.raises(TypeError, match="cannot be copied or pickled"):
        pickle.dumps(Rng())


def test_spark_pattern_with_summarize_and_merge_bytes() -> None:
    """mapPartitions(summarize -> bytes) + treeReduce(merge_bytes), without Spark."""
    x = points(5000, 11)
    t = template("count")
    shipped = t.to_bytes()
    partitions = [[tuple(p) for p in part] for part in np.array_split(x, 7)]
    partitions.append([])  # an empty partition still yields a summary
    encoded = [
        distributed.summarize(shipped, rows, batch_size=300).to_bytes() for rows in partitions
    ]
    merged = PrivHP.from_bytes(functools.reduce(distributed.merge_bytes, encoded))
    assert merged.to_bytes() == single_machine(t, x).to_bytes()
    # Batches and single points mix; the template argument may be the PrivHP itself.
    mixed = distributed.summarize(t, [x[:10], *x[10:20], x[20:]])
    assert mixed.to_bytes() == merged.to_bytes()
    with pytest.raises(ValueError, match="points \\(1-D\\) or \\(m, d\\) batches"):
        distributed.summarize(t, [np.zeros((1, 1, 2))])
    with pytest.raises(ValueError, match="batch_size"):
        distributed.summarize(t, [], batch_size=0)
    with pytest.raises(ValueError, match="template must be an empty summary"):
        distributed.summarize(merged.to_bytes(), [])

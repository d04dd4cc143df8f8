"""The online release drawn in chunks of a public size: on one machine
(``release(chunk_rows=...)``) and on Dask workers (``release_dask``) the same points,
byte for byte; bad chunk arguments refused before anything changes."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from dpstream import OnlineSynthesizer, Rng, _core
from dpstream.online import CHUNK_ROWS

da = pytest.importorskip("dask.array")
dist = pytest.importorskip("dask.distributed")

Make = Callable[[], OnlineSynthesizer]


def _fed(method: str) -> Make:
    x = np.random.default_rng(4).random((3000, 2))

    def make() -> OnlineSynthesizer:
        rng = Rng(seed=11)
        if method == "privhp":
            s: OnlineSynthesizer = OnlineSynthesizer.for_memory(
                1, 2, memory_bytes=1 << 22, expected_n=10_000, max_releases=8, rng=rng
            )
        else:
            s = OnlineSynthesizer(1, 2, method=method, rng=rng)
        s.update(x[:2000])
        s.release()  # an earlier release: two epochs
        s.update(x[2000:])
        return s

    return make


METHODS = ["epochs", "paper", "privhp"]


@pytest.fixture(scope="module")
def client() -> Iterator[object]:
    with (
        dist.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        dist.Client(cluster) as c,
    ):
        yield c


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("size", [None, 1001])
def test_dask_release_equals_the_one_machine_release(method: str, size: int | None) -> None:
    make = _fed(method)
    a, b, c = make(), make(), make()
    one = a.release(size, chunk_rows=128)
    arr = b.release_dask(size, chunk_rows=128)
    rows = 3000 if size is None else size
    assert arr.shape == (rows, 2) and arr.dtype == np.float64
    assert arr.chunks[0] == (128,) * (rows // 128) + (rows % 128,)
    assert a.to_bytes() == b.to_bytes()  # the same state afterwards
    got = arr.compute(scheduler="sync")
    assert one.tobytes() == got.tobytes()
    assert arr.compute(scheduler="sync").tobytes() == got.tobytes()  # fixed when drawn
    # The default chunking: one chunk here, the same as before on both sides.
    assert c.release(size).tobytes() == make().release_dask(size).compute().tobytes()
    assert one.shape == (rows, 2) and ((one >= 0) & (one <= 1)).all()


@pytest.mark.parametrize("method", METHODS)
def test_on_a_cluster_the_workers_draw_the_same_points(method: str, client: object) -> None:
    make = _fed(method)
    a, b = make(), make()
    arr = b.release_dask(chunk_rows=500)
    # The graph holds the released structure once, never the points: 100 times the
    # rows in one chunk, the same graph but for its shapes.
    size = [
        len(pickle.dumps(dict(make().release_dask(n, chunk_rows=n).dask))) for n in (10**3, 10**5)
    ]
    assert abs(size[1] - size[0]) < 100
    got = client.compute(arr).result()  # type: ignore[attr-defined]
    assert got.tobytes() == a.release(chunk_rows=500).tobytes()


def test_placed_rows_follow_the_leaf_counts_whatever_the_chunks() -> None:
    s = _fed("paper")()
    lower, upper, counts = s.cells()
    for chunk_rows in (1, 77, CHUNK_ROWS):
        y = s.release(chunk_rows=chunk_rows)
        inside = np.all((y[:, None, :] >= lower[None]) & (y[:, None, :] < upper[None]), axis=2).sum(
            axis=0
        )
        assert np.array_equal(inside, counts)


@pytest.mark.parametrize("method", METHODS)
def test_bad_chunk_arguments_are_refused_and_change_nothing(method: str) -> None:
    s = _fed(method)()
    before = s.to_bytes()
    for call in (s.release, s.release_dask):
        with pytest.raises(ValueError, match="chunk_rows"):
            call(chunk_rows=0)
        with pytest.raises(TypeError, match="chunk_rows"):
            call(chunk_rows=2.5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="chunk_rows"):
            call(chunk_rows=2**64)
    assert s.to_bytes() == before


def test_an_empty_release_and_a_bad_encoding() -> None:
    s = OnlineSynthesizer(1, 3, rng=Rng(seed=1))
    assert s.release_dask().compute().shape == (0, 3)
    before = s.to_bytes()
    with pytest.raises(ValueError, match="no point"):
        s.release_dask(5)
    assert s.to_bytes() == before
    with pytest.raises(ValueError):
        _core.OnlineRelease.from_bytes(b"DPSTREAM not a release")
    with pytest.raises(ValueError, match="chunk 3 out of range"):
        _fed("epochs")()._inner.release_sampler(10, 4).chunk(3)

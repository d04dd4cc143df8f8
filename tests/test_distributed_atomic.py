"""Issue 41: every distributed update of the online synthesizer is all or nothing,
including a failure while fetching a later partition; a retry counts each point once.
The failure is injected after the first partition by a ``gather`` that yields one
result and then raises (the local scheduler: no cluster needed)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from dpstream import OnlineSynthesizer, Rng, distributed

da = pytest.importorskip("dask.array")


class FetchFailedError(RuntimeError):
    pass


def failing_after_first(tasks: list[Any]) -> Iterator[Any]:
    """Yield the first partition's result, then fail as a lost worker would."""
    results = distributed.gather_in_order(tasks)
    yield next(results)
    raise FetchFailedError("connection to the worker holding partition 1 lost")


def make(method: str) -> OnlineSynthesizer:
    if method == "privhp":
        return OnlineSynthesizer.for_memory(
            1, 2, memory_bytes=400_000, expected_n=10_000, max_releases=8, rng=Rng(seed=3)
        )
    return OnlineSynthesizer(1, 2, rng=Rng(seed=3))


@pytest.mark.parametrize("method", ["epochs", "privhp"])
def test_a_failed_fetch_changes_nothing_and_a_retry_counts_each_point_once(method: str) -> None:
    x = np.random.default_rng(5).random((4000, 2))
    s, want = make(method), make(method)
    for t in (s, want):
        t.update(x[:500])
        t.release(1)
    before = s.to_bytes()
    batch = da.from_array(x, chunks=(1000, 2))  # 4 partitions
    with pytest.raises(FetchFailedError):
        distributed.update_online(s, batch, gather=failing_after_first)
    assert s.t == 500  # not 1500: the first partition was taken back
    assert s.to_bytes() == before
    distributed.update_online(s, batch)  # the natural retry
    want.update(x)
    assert s.t == want.t == 4500
    assert s.to_bytes() == want.to_bytes()
    np.testing.assert_array_equal(s.release(), want.release())


def test_a_refused_later_partition_takes_back_the_earlier_ones() -> None:
    s = make("epochs")
    s.update(np.full((10, 2), 0.5))
    before = s.to_bytes()
    parts = [
        (np.array([1, 2], dtype=np.uint64), np.array([3, 4], dtype=np.uint64)),
        (np.array([5], dtype=np.uint64), np.array([1, 1], dtype=np.uint64)),  # bad
    ]
    with pytest.raises(ValueError, match="same length"):
        s._update_counts_all(parts)
    assert s.t == 10 and s.to_bytes() == before

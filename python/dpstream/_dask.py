"""Dask for the capabilities' cluster ingestion: imported only when first needed, one
task per partition, a tree reduction, an ordered all-or-nothing gather.

Dask is optional (``pip install "dpstream[distributed]"``); ``import dpstream`` never
imports it. Nothing here is private or noisy: the tasks count exactly, and each
capability adds its noise on the client.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

from dpstream._params import int_param

if TYPE_CHECKING:
    from dask.delayed import Delayed

__all__ = [
    "delayed_list",
    "gather_in_order",
    "is_collection",
    "map_partitions",
    "naming_partition",
    "require",
    "row_blocks",
    "tree_reduce",
]


def require(
    module: str = "dask", *, error: type[Exception] = ImportError, what: str = "Dask input"
) -> Any:
    """Import a Dask (or pyarrow) module when it is first needed, or raise ``error``
    saying how to install it (Dask's annotations are partial, so its objects are untyped
    here)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise error(f"{module} is needed for {what}: pip install 'dpstream[distributed]'") from e


def is_collection(data: object) -> bool:
    """Whether ``data`` is a Dask collection (an array, a DataFrame, a bag, a delayed)."""
    return hasattr(data, "__dask_graph__")


def delayed_list(data: object) -> list[Delayed] | None:
    """``data`` as a list when it is a sequence of ``dask.delayed`` partitions; ``None``
    when it is not a sequence; ``TypeError`` for a sequence holding anything else."""
    if not isinstance(data, Sequence) or isinstance(data, (str, bytes)):
        return None
    if not all(is_collection(d) for d in data):
        raise TypeError("a sequence given as data must hold dask.delayed objects only")
    return list(data)


def row_blocks(array: Any) -> list[Delayed]:
    """One ``dask.delayed`` block per chunk of rows of a 2-D Dask array, whole rows per
    block (every task sees complete records)."""
    return list(array.rechunk({1: -1}).to_delayed().ravel())


def map_partitions(task: Callable[..., Any], parts: Sequence[Any], *args: Any) -> list[Delayed]:
    """``task(part, *args, index)`` for every partition, as pure ``dask.delayed`` calls."""
    call = require().delayed(task, pure=True)
    return [call(p, *args, i) for i, p in enumerate(parts)]


@contextlib.contextmanager
def naming_partition(index: int) -> Iterator[None]:
    """In a task body: a ``TypeError`` or ``ValueError`` is raised again with the
    partition's number in front (row numbers in the message are within it)."""
    try:
        yield
    except (TypeError, ValueError) as e:
        raise type(e)(f"partition {index}: {e}") from None


def tree_reduce(
    shared: Any,
    split_every: int,
    partitions: Callable[[Delayed], list[Delayed]],
    merge_many: Callable[..., Any],
) -> Delayed:
    """One result from every partition: ``partitions(key)`` makes a task per partition,
    given the public ``shared`` as one graph key (shipped once per worker), and their
    results are reduced by ``merge_many(shared, *inputs)`` tasks of ``split_every``
    inputs (at least 2; ``merge_many(shared)`` alone when there is no partition)."""
    dask = require()
    fan_in = int_param(split_every, "split_every", low=2)
    key = dask.delayed(shared, pure=True)
    level = partitions(key)
    merge = dask.delayed(merge_many, pure=True)
    if not level:
        return cast("Delayed", merge(key))
    while len(level) > 1:
        level = [merge(key, *level[i : i + fan_in]) for i in range(0, len(level), fan_in)]
    return level[0]


def gather_in_order(tasks: list[Delayed]) -> Iterator[Any]:
    """Compute every task in one submission (shared inputs are computed once), then
    yield the results one by one.

    On a ``dask.distributed`` client every task has finished without error before the
    first result is yielded, and the results stay on the workers until just before
    their turn: while the caller works on one result, the next is fetched (the client
    holds at most two, and the first is fetched while the cluster computes). On the
    local scheduler they are computed together."""
    try:
        client = require("dask.distributed").get_client()
    except (ImportError, ValueError):
        client = None
    if client is None:
        yield from require().compute(*tasks)
        return
    futures = client.compute(tasks)
    if not futures:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="dpstream-fetch") as fetch:
        ahead = fetch.submit(futures[0].result)
        require("dask.distributed").wait(futures)
        for f in futures:
            if f.status != "finished":
                f.result()  # raises the task's error on the client
        for i, f in enumerate(futures):
            result = ahead.result()
            if i + 1 < len(futures):
                ahead = fetch.submit(futures[i + 1].result)
            yield result
            del result
            f.release()

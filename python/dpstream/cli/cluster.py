"""The Dask cluster of ``--dask``: a scheduler address, or ``local:N`` worker processes
started with the settings of :data:`LOCAL_CLUSTER_CONFIG`."""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Mapping
from typing import Any

from dpstream._dask import require
from dpstream._params import int_param
from dpstream.inputs import InputError

__all__ = ["LOCAL_CLUSTER_CONFIG", "connect", "local_cluster", "require_dask"]


def require_dask(module: str = "dask") -> Any:
    """``module`` (Dask or pyarrow), or an :class:`~dpstream.inputs.InputError` saying
    how to install it."""
    return require(module, error=InputError, what="partitioned inputs and --dask")


#: Dask settings of the workers :func:`local_cluster` starts (a cluster given by its
#: address keeps its own):
#:
#: * glibc's allocator in each worker keeps large blocks in its heap: blocks under 32 MiB
#:   come from the heap instead of fresh ``mmap`` pages, and up to 256 MiB of freed heap
#:   is kept rather than returned to the system (Dask's default returns everything above
#:   64 KiB). A partition's arrays are then reused from one task to the next instead of
#:   being faulted in and zeroed by the kernel every task. A worker's resident memory
#:   stays up to 256 MiB above its live data.
#: * the workers' statistical profiler (a thread sampling every running task 100 times a
#:   second for the dashboard) is off: the counting does not need it.
#: * the scheduler hands a single-threaded worker one partition at a time
#:   (``worker-saturation`` 1.0; Dask's 1.1 rounds up to two, so with few partitions one
#:   worker could hold two while the other idles).
#:
#: ``benches/bench_distributed.py --part streams`` measures the table's counting on
#: clusters with these settings and with Dask's defaults, in the same run (on a 2-core
#: machine the 2-worker figures vary by about ±0.2× between runs).
LOCAL_CLUSTER_CONFIG: dict[str, Any] = {
    "distributed.nanny.pre-spawn-environ.MALLOC_MMAP_THRESHOLD_": 32 << 20,
    "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 256 << 20,
    "distributed.worker.profile.enabled": False,
    "distributed.scheduler.worker-saturation": 1.0,
}


_PRE_SPAWN = "distributed.nanny.pre-spawn-environ"


def local_cluster(n_workers: int) -> Any:
    """The LocalCluster of ``--dask local:N``: ``n_workers`` worker processes of one thread
    each, with :data:`LOCAL_CLUSTER_CONFIG`, whatever the client's environment holds; the
    caller closes it. The client's ``os.environ`` is as it was afterwards. ``n_workers``
    must be a positive int (``ValueError`` or ``TypeError`` otherwise, before anything
    starts)."""
    int_param(n_workers, "n_workers", low=1)
    return _start_local(n_workers, LOCAL_CLUSTER_CONFIG)


def _start_local(n_workers: int, config: Mapping[str, Any]) -> Any:
    """A LocalCluster of ``n_workers`` one-thread worker processes whose settings are
    Dask's with ``config`` on top, and nothing else: while its workers start, the
    client's environment holds exactly the configured ``pre-spawn-environ``, and is
    restored afterwards. (Dask's nanny lets the client's environment override that
    setting and writes the result back into it when it spawns a worker, so otherwise a
    cluster started earlier in the process, or a variable the client happens to have,
    would decide the workers' settings.)"""
    dist = require_dask("dask.distributed")
    dask = require_dask()
    with dask.config.set(dict(config)):
        wanted = dask.config.get(_PRE_SPAWN, {})
        saved = {k: os.environ.get(k) for k in wanted}
        _put_environ({k: None if v is None else str(v) for k, v in wanted.items()})
        try:
            return dist.LocalCluster(
                n_workers=n_workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
        finally:
            _put_environ(saved)


def _put_environ(env: Mapping[str, str | None]) -> None:
    for k, v in env.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def connect(spec: str) -> tuple[Any, Any]:
    """A ``dask.distributed`` client for ``--dask``: ``local:N`` starts
    :func:`local_cluster` of ``N`` workers, anything else is a scheduler address. Returns
    ``(client, cluster or None)``; an unreachable scheduler is an :class:`InputError` of one
    line."""
    dist = require_dask("dask.distributed")
    logging.getLogger("distributed").setLevel(logging.ERROR)
    if spec.startswith("local:"):
        try:
            n = int(spec.removeprefix("local:"))
        except ValueError:
            n = 0
        if n < 1:
            raise InputError(f"--dask local:N needs a positive number of workers, got {spec!r}")
        cluster = local_cluster(n)
        return dist.Client(cluster), cluster
    try:
        # Probed first: a Client that fails to connect stays Dask's default scheduler,
        # and later computations in the process would wait for it forever.
        asyncio.run(_probe(spec, dist))
        return dist.Client(spec, timeout="5s"), None
    except ValueError as e:  # not an address
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(
            f"--dask: {spec!r} is neither local:N nor a scheduler address such as "
            f"tcp://host:8786 ({first})"
        ) from None
    except (OSError, TimeoutError) as e:
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise InputError(f"--dask: cannot reach the scheduler at {spec!r} ({first})") from None


async def _probe(address: str, dist: Any) -> None:
    """Open and close one connection to the scheduler at ``address`` (5 s at most)."""
    args = dist.Security().get_connection_args("client")
    comm = await dist.comm.connect(address, timeout="5s", **args)
    await comm.close()

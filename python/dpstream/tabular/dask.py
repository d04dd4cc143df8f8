"""The tabular stream on more than one machine: exact workload marginals per partition,
one tree reduction; selection, noise, counters and the fit on the client; the synthetic
rows drawn on the workers (:func:`release_frame`).

A step reads its batch only through the workloads' histograms
(:class:`~dpstream.tabular.marginals.BatchMarginals`). :func:`batch_marginals` counts
each partition's histograms (int64) on its worker and sums them by a tree reduction;
``TabularStream.step`` takes the result (or the Dask collection itself, through
:func:`step_marginals`). The step is identical, bit for bit, to the step of the same
records as one pandas batch. Wrong columns or dtypes are refused on the client from the
collection's metadata; values outside the domain on the worker, raised on the client
naming the column and the partition; the stream is unchanged. The counts are exact:
the cluster, its network and the client are trusted with the raw data.

These functions are also :mod:`dpstream.distributed`'s. On Spark (``mapPartitions`` to
integer counts, then ``treeReduce``; the domain and workloads are public, the counts
exact and sensitive)::

    import pandas as pd
    from dpstream import distributed

    shipped = spark.sparkContext.broadcast((stream.domain, stream.workloads))  # public
    names = list(stream.domain.names)

    def count(rows):  # one partition -> (rows, int64 histogram per workload)
        domain, workloads = shipped.value
        rows = list(rows)  # an empty partition counts as None (no record)
        frame = pd.DataFrame(rows, columns=names) if rows else None
        yield distributed.count_records(frame, domain, workloads)

    for month in months:  # the public schedule
        batch = df.where(df.month == month).select(*names).rdd
        inserted = batch.mapPartitions(count).treeReduce(distributed.add_record_counts, depth=2)
        marginals = distributed.marginals_of(stream.domain, stream.workloads, inserted)
        table = stream.step(marginals)  # selection, noise, fit: on the driver
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dpstream._dask import (
    is_collection,
    map_partitions,
    naming_partition,
    require,
    row_blocks,
    tree_reduce,
)
from dpstream.tabular.domain import Domain
from dpstream.tabular.marginals import BatchMarginals, add_counts, count_columns
from dpstream.tabular.release import ReleasePlan

if TYPE_CHECKING:
    from dask.delayed import Delayed

__all__ = [
    "add_record_counts",
    "batch_marginals",
    "count_records",
    "marginals_graph",
    "marginals_of",
    "release_frame",
    "step_marginals",
]

Clique = tuple[int, ...]
_Counted = tuple[int, tuple[Any, ...]]
_Shared = tuple[Domain, tuple[Clique, ...]]


def count_records(data: Any, domain: Domain, workloads: Sequence[Clique]) -> _Counted:
    """``(rows, counts)`` of one partition of records: its row count and the exact int64
    histogram of every workload (:func:`dpstream.tabular.marginals.count_codes`).
    ``data`` takes every form a pandas step does; refused with the same errors.
    Exact: **sensitive**. For engines other than Dask (the Spark pattern above)."""
    columns = domain.encode_columns(data)
    return columns.shape[1], count_columns(columns, domain.sizes, workloads)


def add_record_counts(*parts: _Counted) -> _Counted:
    """The sum of several :func:`count_records` results (for a tree reduction, e.g.
    Spark's ``treeReduce``): exact integers, **sensitive**."""
    return sum(p[0] for p in parts), add_counts(*(p[1] for p in parts))


def _count_block(block: Any, shared: _Shared, index: int) -> _Counted:
    """Task body: :func:`count_records` of one partition (a refusal names the partition:
    row numbers are within it)."""
    with naming_partition(index):
        return count_records(block, *shared)


def _count_frame(block: Any, shared: _Shared, partition_info: Any = None) -> _Counted:
    """Task body of ``map_partitions``: :func:`_count_block` of a DataFrame partition."""
    return _count_block(block, shared, int((partition_info or {}).get("number", 0)))


def _add_counted(shared: _Shared, *parts: _Counted) -> _Counted:
    """Task body of the reduction (no input: the counts of no record)."""
    return add_record_counts(*parts) if parts else count_records(None, *shared)


def _counted_partitions(data: Any, domain: Domain, shared: _Shared, key: Delayed) -> list[Delayed]:
    """One ``dask.delayed`` ``(rows, counts)`` per partition. A collection whose columns
    or dtypes a pandas batch would be refused for is refused first, on the client (same
    errors); a list of ``dask.delayed`` partitions has no metadata: it is checked on the
    workers.

    A DataFrame is counted by ``map_partitions``, so that the counting is fused with
    what makes the partition (e.g. the Parquet read): one task per partition, whose
    output is the counts, and no partition left in a worker's memory to be moved to
    another one."""
    dd = require("dask.dataframe")
    da = require("dask.array")
    if isinstance(data, dd.DataFrame):
        domain.encode(data._meta)  # the empty frame with the collection's columns and dtypes
        counted = data.map_partitions(
            _count_frame, shared, meta=(None, object), enforce_metadata=False
        )
        return list(counted.to_delayed())
    if isinstance(data, list) and all(is_collection(p) for p in data):
        parts = data
    elif isinstance(data, da.Array):
        d = len(domain)
        if data.ndim != 2 or data.shape[1] != d:
            raise ValueError(f"a batch array must have shape (n, {d}), got {data.shape}")
        domain.encode(np.zeros((1, d), dtype=data.dtype))  # the dtype check
        parts = row_blocks(data)
    else:
        raise TypeError(
            "a Dask batch must be a dask DataFrame, a dask Array or a list of dask.delayed "
            f"partitions, got {type(data).__name__}"
        )
    return map_partitions(_count_block, parts, key)


def marginals_graph(
    data: object,
    domain: Domain,
    workloads: Sequence[Clique],
    *,
    split_every: int = 8,
) -> Delayed:
    """The lazy computation behind :func:`batch_marginals` for one collection (or a
    list of ``dask.delayed`` partitions): a
    ``dask.delayed`` object computing ``(rows, counts)`` (counts as
    :func:`dpstream.tabular.marginals.count_codes` returns them), summed by a tree
    reduction of ``split_every`` inputs per task. Exact: sensitive."""
    shared = (domain, tuple(tuple(w) for w in workloads))

    def counted(key: Delayed) -> list[Delayed]:
        return _counted_partitions(data, domain, shared, key)

    return tree_reduce(shared, split_every, counted, _add_counted)


def batch_marginals(
    batch: object,
    domain: Domain,
    workloads: Sequence[Clique],
    *,
    deletions: object = None,
    split_every: int = 8,
) -> BatchMarginals:
    """The exact workload marginals of one step, counted on the Dask cluster.

    Each partition is encoded and counted on its worker (int64 histograms, one per
    workload); the counts are summed by a tree reduction and only they reach the
    client: ``sum`` of the cells of the workloads, never the records. Give the result
    to :meth:`dpstream.tabular.TabularStream.step` (which also does this itself when
    given a Dask collection): the step is identical, bit for bit, to the step of the
    same records as one pandas batch.

    Args:
        batch, deletions: a ``dask.dataframe.DataFrame`` with the domain's columns, a
            ``dask.array.Array`` ``(n, d)`` of codes, or anything a pandas step takes
            (counted on the client), or ``None``.
        domain, workloads: the stream's (:attr:`TabularStream.domain`,
            :attr:`TabularStream.workloads`).
        split_every: inputs per reduction task (at least 2).

    Returns:
        A :class:`~dpstream.tabular.marginals.BatchMarginals`: exact counts, **sensitive**
        (keep them in the trusted cluster and client).

    Raises:
        ValueError, TypeError: the errors a pandas batch gets. Wrong columns or dtypes
            are refused on the client before anything runs; a value outside the domain
            is found on a worker and raised on the client, with the column and the
            partition named. Nothing is changed (the stream is not involved yet).
    """
    dask = require()
    cliques = [tuple(int(c) for c in w) for w in workloads]
    graphs: dict[str, Delayed] = {}
    local: dict[str, _Counted] = {}
    for name, data in (("batch", batch), ("deletions", deletions)):
        if is_collection(data):
            graphs[name] = marginals_graph(data, domain, cliques, split_every=split_every)
        else:
            local[name] = count_records(data, domain, cliques)
    counted = {**local, **dict(zip(graphs, dask.compute(*graphs.values()), strict=True))}
    return marginals_of(
        domain, cliques, counted["batch"], counted["deletions"], deletions is not None
    )


def marginals_of(
    domain: Domain,
    workloads: Sequence[Clique],
    inserted: _Counted,
    deleted: _Counted | None = None,
    has_deletions: bool | None = None,
) -> BatchMarginals:
    """The :class:`~dpstream.tabular.marginals.BatchMarginals` of a step from the
    :func:`count_records` sums of its insertions and (optionally) deletions, e.g. from
    Spark's ``treeReduce``. ``has_deletions`` (public) defaults to ``deleted is not None``."""
    gone = count_records(None, domain, workloads) if deleted is None else deleted
    flag = deleted is not None if has_deletions is None else has_deletions
    return BatchMarginals(domain.sizes, workloads, inserted[1], gone[1], inserted[0], gone[0], flag)


def step_marginals(
    domain: Domain, workloads: Sequence[Clique], batch: Any, deletions: Any
) -> BatchMarginals:
    """The exact workload marginals of a step's records (what :meth:`TabularStream.step`
    takes): counted here, counted on a Dask cluster (a Dask collection), or given (a
    :class:`BatchMarginals`, with ``deletions=None``)."""
    if isinstance(batch, BatchMarginals):
        if deletions is not None:
            raise ValueError(
                "precomputed BatchMarginals hold the deletions too: pass deletions=None"
            )
        batch.check(domain, workloads)
        return batch
    if any(is_collection(b) for b in (batch, deletions)):
        return batch_marginals(batch, domain, workloads, deletions=deletions)
    return BatchMarginals.of(domain, workloads, batch, deletions)


def _release_chunk(shared: tuple[ReleasePlan, Domain], index: int) -> Any:
    """Task body: chunk ``index`` of the release, decoded, indexed by its rows' places
    in the whole release."""
    plan, domain = shared
    frame = domain.decode(plan.chunk(index))
    frame.index = require("pandas").RangeIndex(*plan.bounds(index))
    return frame


def release_frame(plan: ReleasePlan, domain: Domain) -> Any:
    """A release as a Dask DataFrame, one partition per chunk of ``plan``
    (:mod:`dpstream.tabular.release`), drawn and decoded on the workers: the graph
    holds the plan (the models, small, public), never the rows. Computed, it equals
    ``domain.decode(plan.sample())``, rows, order and index."""
    dask = require()
    dd = require("dask.dataframe")
    shared = dask.delayed((plan, domain), pure=True)
    task = dask.delayed(_release_chunk, pure=True)
    chunks = range(max(plan.chunks, 1))  # an empty release: one empty partition
    bounds = [plan.bounds(i)[0] for i in chunks] + [max(plan.rows - 1, 0)]
    # the dtypes of decoded rows (of no row when the release is empty)
    meta = domain.decode(np.zeros((min(plan.rows, 1), plan.width), dtype=np.int64)).iloc[:0]
    return dd.from_delayed([task(shared, i) for i in chunks], meta=meta, divisions=bounds)

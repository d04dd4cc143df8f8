"""Every capability on more than one machine: exact counts per partition, one tree
reduction, noise drawn once on the client.

The heavy part of each mechanism is exact integer counting, which is linear in the
records, so a cluster can do it partition by partition; only counts reach the client,
which adds the noise exactly as on one machine. With the same seed, the results are byte
for byte those of one process on the same records.

* **PrivHP** (one release): :func:`build_privhp` (below).
* **Tabular stream**: :func:`batch_marginals` counts each partition's workload histograms
  (int64) on its worker and sums them by a tree reduction; ``TabularStream.step`` takes
  the result (or the Dask collection itself) and runs selection, noise, counters and the
  fit on the client. Wrong columns or dtypes are refused on the client from the
  collection's metadata; values outside the domain on the worker, raised on the client
  naming the column and the partition; the stream is unchanged.
* **Online synthesizer**: :func:`update_online` (``OnlineSynthesizer.update`` of a Dask
  array). ``"epochs"``: each partition's distinct finest cells and their counts
  (:func:`cell_counts`), fed to ``update_counts`` one partition after another (the
  next fetched while the current is fed); ``"privhp"``
  (``for_memory``): summaries on the synthesizer's public template, merged, fed to
  ``merge_summary``; ``"paper"`` cannot be split and refuses Dask input.

The rest of this docstring is PrivHP's; the Spark patterns for all three close it.

PrivHP on more than one machine: exact summaries per partition, one merge, one release.

PrivHP's summary (exact counts of the top ``floor(log2 k)`` levels, one
count-min or count sketch per deeper level) is a *linear* function of the
multiset of points once the hash keys are fixed: counting is integer addition,
so it does not depend on the order of the points or on how they are split.
:func:`build_privhp` uses this on a Dask cluster:

1. The client makes an empty **template** summary: ``PrivHP(ε, d, k=..., ...)``.
   Its parameters and hash keys are public (they are drawn independently of
   the data), so shipping its encoding to every task costs no privacy.
2. Every partition of the data is counted by its own copy of the template
   (:func:`summarize`), on the worker that holds it. Nothing is noisy yet.
3. The per-partition summaries are merged by a tree reduction
   (:meth:`PrivHP.merge`, ``split_every`` summaries per task) into one summary
   that is **byte for byte** the summary one machine would have built from all
   the points (same hashes, same exact counts).
4. The client calls :meth:`PrivHP.release` on it, once: the noise is drawn
   there, from an OS-seeded generator, exactly as in a single-machine run. The
   release therefore has the same distribution (and the same ε-DP guarantee
   under add/remove-one-point neighbours) as a single-machine run, whatever
   the partitioning.

Privacy of the intermediate results: every per-partition and merged summary
holds **exact** counts (see :meth:`PrivHP.to_bytes`). They travel between
workers and to the client, so the cluster, its network and the client must be
trusted with the raw data (they already hold it); use Dask's TLS settings on an
untrusted network. Do not persist or publish anything but the released
:class:`dpstream.TreeGenerator`. Release the merged summary once: releasing
several copies of it, or summaries of overlapping data, spends ε each time.

Resources: each in-flight task holds one summary (``template.memory_bytes()``,
fixed, independent of the number of points) plus its partition; a merge task
holds ``split_every + 1`` summaries. Work is ``O(depth · rows)`` per point,
spread over the workers, plus ``O(memory_bytes)`` per merged summary.

Dask (``pip install "dpstream[distributed]"``) is imported only when a
function here needs it; ``import dpstream`` never does. Without a
``dask.distributed.Client`` the computation runs on Dask's local scheduler.

Example (Dask)::

    import dask.array as da
    from dpstream import PrivHP, distributed

    x = da.random.random((10**8, 2), chunks=(10**6, 2))  # points in [0,1]^2
    template = PrivHP.for_memory(1, 2, expected_n=10**8, memory_bytes=1 << 20)
    summary = distributed.build_privhp(x, template)       # exact: keep it private
    generator = summary.release()                          # ε-DP, noise drawn once
    synthetic = generator.sample(10_000)

The same pattern on Spark (``mapPartitions`` + a tree reduction of the
encodings; scale the columns to ``[0,1]`` with *public* bounds first)::

    from dpstream import PrivHP, distributed

    template = PrivHP.for_memory(1, 2, expected_n=10**10, memory_bytes=1 << 20)
    shipped = spark.sparkContext.broadcast(template.to_bytes())  # public

    def count(rows):  # one exact summary per partition, as bytes
        yield distributed.summarize(shipped.value, rows).to_bytes()

    merged = (
        df.select("x", "y").rdd
        .mapPartitions(count)
        .treeReduce(distributed.merge_bytes, depth=2)  # exact, sensitive
    )
    generator = PrivHP.from_bytes(merged).release()  # on the driver, once

(``summarize`` takes any iterable of points or of ``(m, d)`` batches, so
``mapInPandas``/Arrow batches work too and avoid per-row Python work.)

The tabular stream on Spark (``mapPartitions`` to integer counts, then ``treeReduce``;
the domain and workloads are public, the counts exact and sensitive)::

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

The online synthesizer on Spark: the default method takes each partition's finest cells
and counts (one partition at a time on the driver); the fixed-memory method takes a tree
reduction of summaries counted on its public template::

    import numpy as np
    from dpstream import PrivHP, distributed

    def cells(rows):  # points already scaled to [0,1]^2 with public bounds
        yield distributed.cell_counts(np.array([tuple(r) for r in rows]).reshape(-1, 2), 2)

    synth = OnlineSynthesizer(1, 2)  # method="epochs"
    for cell, count in df.select("x", "y").rdd.mapPartitions(cells).toLocalIterator():
        synth.update_counts(cell, count)

    synth = OnlineSynthesizer.for_memory(1, 2, memory_bytes=1 << 24, expected_n=10**10,
                                         max_releases=120)
    shipped = spark.sparkContext.broadcast(synth.summary_template().to_bytes())  # public

    def summary(rows):
        yield distributed.summarize(shipped.value, rows).to_bytes()

    merged = df.select("x", "y").rdd.mapPartitions(summary).treeReduce(distributed.merge_bytes)
    synth.merge_summary(PrivHP.from_bytes(merged))
    synthetic = synth.release()  # noise drawn on the driver

(With ``toLocalIterator`` the driver holds one partition's counts at a time; a failing
partition stops the loop with the earlier partitions already fed, so validate the points
first or count them all before feeding, as :func:`update_online` does on Dask.)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dpstream._arrays import points_array
from dpstream._params import int_param
from dpstream.partition import encode as encode_points
from dpstream.privhp import PrivHP
from dpstream.tabular.domain import Domain
from dpstream.tabular.marginals import BatchMarginals, add_counts, count_columns

if TYPE_CHECKING:
    from dask.delayed import Delayed

    from dpstream.online import EpochsSynthesizer, OnlineSynthesizer, PrivHPSynthesizer

__all__ = [
    "add_record_counts",
    "batch_marginals",
    "build_privhp",
    "cell_counts",
    "count_records",
    "gather_in_order",
    "marginals_graph",
    "marginals_of",
    "merge_bytes",
    "summarize",
    "summary_graph",
    "update_online",
]

Clique = tuple[int, ...]
_Counted = tuple[int, tuple[Any, ...]]

#: The level of the finest cells the online synthesizer keeps (its 63-bit paths).
PATH_BITS = 63

#: Points buffered before one ``PrivHP.update`` call when :func:`summarize` is
#: fed single points.
DEFAULT_BATCH = 65_536


def _dask(module: str = "dask") -> Any:
    """Import a Dask module when it is first needed (Dask's annotations are partial,
    so its objects are untyped here)."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"dpstream.distributed needs {module}: pip install 'dpstream[distributed]'"
        ) from e


def _template_bytes(template: PrivHP | bytes) -> bytes:
    """The encoding of an empty, unreleased template summary."""
    if isinstance(template, PrivHP):
        if template.released:
            raise ValueError("template has been released; pass an unreleased, empty PrivHP")
        if template.points_seen:
            raise ValueError(
                f"template has counted {template.points_seen} points; pass an empty PrivHP "
                "(its counts would be added once per partition)"
            )
        return template.to_bytes()
    if isinstance(template, (bytes, bytearray, memoryview)):
        return bytes(template)
    raise TypeError(f"template must be a PrivHP or its bytes, got {type(template).__name__}")


def summarize(
    template: PrivHP | bytes,
    data: Iterable[Any],
    *,
    batch_size: int = DEFAULT_BATCH,
    threads: int = 1,
) -> PrivHP:
    """The exact summary of ``data``, counted by a fresh copy of ``template``.

    Args:
        template: an empty, unreleased :class:`PrivHP` or its :meth:`~PrivHP.to_bytes`
            (public: parameters and hash keys only). It is not modified.
        data: an iterable of points (length-``d`` sequences, e.g. Spark rows) and/or
            ``(m, d)`` batches (numpy arrays, pandas frames); values in ``[0,1]``.
            Single points are buffered and counted ``batch_size`` at a time.
        batch_size: points per ``update`` call for single points.
        threads: counting threads of the summary (1 or 2). Keep 1 where the
            engine already runs one task per core.

    Returns:
        An unreleased summary with exact counts (**not private**: see the module
        docstring). A partition with no points gives an empty summary.
    """
    summary = PrivHP.from_bytes(_template_bytes(template))
    if summary.points_seen:
        raise ValueError("template must be an empty summary (it has counted points)")
    size = int_param(batch_size, "batch_size", low=1)
    summary.threads = threads
    buffer: list[Any] = []

    def flush() -> None:
        if buffer:
            summary.update(np.asarray(buffer))
            buffer.clear()

    for item in data:
        a = np.asarray(item)
        if a.ndim == 2:
            flush()
            summary.update(a)
        elif a.ndim == 1:
            buffer.append(a)
            if len(buffer) >= size:
                flush()
        else:
            raise ValueError(
                f"data must yield points (1-D) or (m, d) batches, got an item of shape {a.shape}"
            )
    flush()
    return summary


def _merge_many(template: bytes, *summaries: PrivHP) -> PrivHP:
    """A new summary holding the sum of ``summaries`` (the inputs are not modified,
    so a retried task never counts anything twice)."""
    merged = PrivHP.from_bytes(template)
    for s in summaries:
        merged.merge(s)
    return merged


def merge_bytes(a: bytes, b: bytes) -> bytes:
    """The encoding of the merge of two encoded summaries (for Spark's ``treeReduce``).

    Both must come from copies of one template (same parameters and hash keys).
    The result holds exact counts, like its inputs: **not private**.
    """
    merged = PrivHP.from_bytes(a)
    merged.merge(PrivHP.from_bytes(b))
    return merged.to_bytes()


def _summarize_block(template: bytes, block: Any, threads: int, index: int = 0) -> PrivHP:
    """Task body: one partition (an array, a pandas frame or a list of points); a
    refusal names the partition (row numbers are within it)."""
    batch = isinstance(block, np.ndarray) or hasattr(block, "to_numpy")
    items = [block] if batch else block
    try:
        return summarize(template, items, threads=threads)
    except (TypeError, ValueError) as e:
        raise type(e)(f"partition {index}: {e}") from None


def _partitions(data: object, dim: int) -> list[Delayed]:
    """One delayed object per partition of a Dask collection (or the list given)."""
    dask = _dask()
    if isinstance(data, Sequence) and not isinstance(data, (str, bytes)):
        if not all(dask.is_dask_collection(d) for d in data):
            raise TypeError("a sequence given as data must hold dask.delayed objects only")
        return list(data)
    da = _dask("dask.array")
    if isinstance(data, da.Array):
        if data.ndim != 2:
            raise ValueError(f"a dask array of points must be 2-D (n, d), got {data.ndim}-D")
        cols = data.shape[1]
        if not np.isnan(cols) and cols != dim:
            raise ValueError(f"points must have {dim} columns (the template's dim), got {cols}")
        # Whole rows per block, so that every task sees complete points.
        blocks = data.rechunk({1: -1}).to_delayed()
        return list(blocks.ravel())
    db = _dask("dask.bag")
    if isinstance(data, db.Bag):
        return list(data.to_delayed())
    try:
        dd = _dask("dask.dataframe")
    except ImportError:  # Dask without its dataframe extra
        dd = None
    if dd is not None and isinstance(data, dd.DataFrame):
        if len(data.columns) != dim:
            raise ValueError(
                f"the dataframe must have {dim} columns (the template's dim), got "
                f"{len(data.columns)}: select them first, e.g. ddf[['x', 'y']]"
            )
        return list(data.to_delayed())
    raise TypeError(
        "data must be a dask Array (n, d), a dask DataFrame with d columns, a dask Bag of "
        f"points, or a list of dask.delayed partitions; got {type(data).__name__}"
    )


def summary_graph(
    data: object,
    template: PrivHP,
    *,
    split_every: int = 8,
    threads: int = 1,
) -> Delayed:
    """The lazy computation behind :func:`build_privhp`: a ``dask.delayed`` object
    whose result is the merged exact summary (compute it with ``dask.compute``
    or ``client.compute``, alongside other work)."""
    dask = _dask()
    tmpl = _template_bytes(template)
    fan_in = int_param(split_every, "split_every", low=2)
    threads = int_param(threads, "threads", low=1, high=2)
    shared = dask.delayed(tmpl, pure=True)  # one graph key, shipped once per worker
    parts = _partitions(data, template.dim)
    summarize_block = dask.delayed(_summarize_block, pure=True)
    level: list[Delayed] = [summarize_block(shared, p, threads, i) for i, p in enumerate(parts)]
    return _tree_reduce(level, _merge_many, shared, fan_in)


def _tree_reduce(level: list[Delayed], merge_many: Any, shared: Any, fan_in: int) -> Delayed:
    """Reduce ``level`` by ``merge_many(shared, *inputs)`` tasks of ``fan_in`` inputs
    (``merge_many(shared)`` alone for no input)."""
    merge = _dask().delayed(merge_many, pure=True)
    if not level:
        return cast("Delayed", merge(shared))
    while len(level) > 1:
        level = [merge(shared, *level[i : i + fan_in]) for i in range(0, len(level), fan_in)]
    return level[0]


def build_privhp(
    data: object,
    template: PrivHP,
    *,
    split_every: int = 8,
    threads: int = 1,
) -> PrivHP:
    """Count a Dask collection of points into one exact PrivHP summary.

    Each partition is counted on its worker by a copy of ``template``; the
    summaries are merged by a tree reduction; the merged summary is returned to
    the caller **unreleased**. Call :meth:`PrivHP.release` on it once (with the
    default OS-seeded generator) for the ε-DP generator: the result has the same
    distribution as a single-machine run on the same points.

    Args:
        data: a ``dask.array.Array`` of shape ``(n, d)``, a ``dask.dataframe.DataFrame``
            with exactly ``d`` numeric columns, a ``dask.bag.Bag`` of points, or a
            list of ``dask.delayed`` objects each computing an ``(m, d)`` array or a
            list of points. Values must already lie in ``[0,1]^d`` (scale with
            *public* bounds, never bounds computed from the data).
        template: an empty, unreleased :class:`PrivHP` fixing ε, the parameters and
            the (public) hash keys. It is not modified.
        split_every: summaries merged per reduction task (at least 2).
        threads: counting threads per task (1 or 2; Dask already runs one task per
            worker thread).

    Returns:
        The merged summary: exact counts, **not private** until released.

    Runs on the active Dask scheduler (a ``dask.distributed.Client`` if one is
    connected). A point outside ``[0,1]^d`` fails its task with ``ValueError``.
    """
    (summary,) = _dask().compute(
        summary_graph(data, template, split_every=split_every, threads=threads)
    )
    if not isinstance(summary, PrivHP):  # pragma: no cover - defensive
        raise TypeError(f"the computation returned {type(summary).__name__}, not a PrivHP")
    return summary


# ----------------------------------------------------------------------------- tabular stream


def _is_dask(data: object) -> bool:
    return hasattr(data, "__dask_graph__")


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


def _count_block(block: Any, shared: tuple[Domain, tuple[Clique, ...]], index: int) -> _Counted:
    """Task body: :func:`count_records` of one partition (a refusal names the partition:
    row numbers are within it)."""
    try:
        return count_records(block, *shared)
    except (TypeError, ValueError) as e:
        raise type(e)(f"partition {index}: {e}") from None


def _count_frame(
    block: Any, shared: tuple[Domain, tuple[Clique, ...]], partition_info: Any = None
) -> _Counted:
    """Task body of ``map_partitions``: :func:`_count_block` of a DataFrame partition."""
    return _count_block(block, shared, int((partition_info or {}).get("number", 0)))


def _add_counted(shared: tuple[Domain, tuple[Clique, ...]], *parts: _Counted) -> _Counted:
    """Task body of the reduction (no input: the counts of no record)."""
    return add_record_counts(*parts) if parts else count_records(None, *shared)


def _counted_partitions(
    data: Any, domain: Domain, shared: tuple[Domain, tuple[Clique, ...]], key: Delayed
) -> list[Delayed]:
    """One ``dask.delayed`` ``(rows, counts)`` per partition. A collection whose columns
    or dtypes a pandas batch would be refused for is refused first, on the client (same
    errors); a list of ``dask.delayed`` partitions has no metadata: it is checked on the
    workers.

    A DataFrame is counted by ``map_partitions``, so that the counting is fused with
    what makes the partition (e.g. the Parquet read): one task per partition, whose
    output is the counts, and no partition left in a worker's memory to be moved to
    another one."""
    dask = _dask()
    dd = _dask("dask.dataframe")
    da = _dask("dask.array")
    if isinstance(data, dd.DataFrame):
        domain.encode(data._meta)  # the empty frame with the collection's columns and dtypes
        counted = data.map_partitions(
            _count_frame, shared, meta=(None, object), enforce_metadata=False
        )
        return list(counted.to_delayed())
    if isinstance(data, list) and all(_is_dask(p) for p in data):
        parts = data
    elif isinstance(data, da.Array):
        d = len(domain)
        if data.ndim != 2 or data.shape[1] != d:
            raise ValueError(f"a batch array must have shape (n, {d}), got {data.shape}")
        domain.encode(np.zeros((1, d), dtype=data.dtype))  # the dtype check
        parts = list(data.rechunk({1: -1}).to_delayed().ravel())
    else:
        raise TypeError(
            "a Dask batch must be a dask DataFrame, a dask Array or a list of dask.delayed "
            f"partitions, got {type(data).__name__}"
        )
    count = dask.delayed(_count_block, pure=True)
    return [count(p, key, i) for i, p in enumerate(parts)]


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
    dask = _dask()
    fan_in = int_param(split_every, "split_every", low=2)
    shared = (domain, tuple(tuple(w) for w in workloads))
    key = dask.delayed(shared, pure=True)  # one graph key, shipped once per worker
    level = _counted_partitions(data, domain, shared, key)
    return _tree_reduce(level, _add_counted, key, fan_in)


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
    dask = _dask()
    cliques = [tuple(int(c) for c in w) for w in workloads]
    graphs: dict[str, Delayed] = {}
    local: dict[str, _Counted] = {}
    for name, data in (("batch", batch), ("deletions", deletions)):
        if _is_dask(data):
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


# ----------------------------------------------------------------------------- online synthesizer


def cell_counts(points: Any, dim: int) -> tuple[Any, Any]:
    """The distinct finest cells (level-63 paths) of ``(n, dim)`` points in ``[0,1]^dim``
    and their counts, both uint64: what :meth:`OnlineSynthesizer.update_counts` takes
    (the default method). Refused as ``update`` refuses the points. Exact: **sensitive**.
    For engines other than Dask (the Spark pattern above)."""
    cells, counts = _unique_cells(points, dim)
    return cells, counts.astype(np.uint64)


def _unique_cells(points: Any, dim: int) -> tuple[Any, Any]:
    """The distinct level-63 paths of ``points`` and their counts (int64)."""
    paths = encode_points(points_array(_block_array(points), dim), PATH_BITS)
    return np.unique(paths, return_counts=True)


def _cell_counts(block: Any, dim: int, index: int) -> tuple[Any, Any, Any]:
    """Task body: :func:`cell_counts` of one partition (a refusal names it), as what the
    client fetches: the distinct cells (uint64), and the positions and counts of the
    cells that hold more than one point (every other cell holds one). 8 bytes per
    distinct cell, plus 8 per cell holding more; the positions and counts are uint32 when
    the partition has fewer than 2^32 points (else uint64): a dtype that depends on that
    number only (public: the time steps the partition adds), never on where the points
    fell."""
    try:
        cells, counts = _unique_cells(block, dim)
    except (TypeError, ValueError) as e:
        raise type(e)(f"partition {index}: {e}") from None
    narrow = np.uint32 if int(counts.sum()) < 1 << 32 else np.uint64
    more = np.flatnonzero(counts != 1)
    return cells, more.astype(narrow), counts[more].astype(narrow)


def _counts_of(cells: Any, more: Any, counts: Any) -> Any:
    """The uint64 count of every cell from :func:`_cell_counts`'s positions and counts."""
    out = np.ones(len(cells), dtype=np.uint64)
    out[more] = counts
    return out


def _block_array(block: Any) -> Any:
    if hasattr(block, "to_numpy"):
        return block.to_numpy()
    return block if isinstance(block, np.ndarray) else np.asarray(list(block))


def gather_in_order(tasks: list[Delayed]) -> Iterator[Any]:
    """Compute every task in one submission (shared inputs are computed once), then
    yield the results one by one.

    On a ``dask.distributed`` client every task has finished without error before the
    first result is yielded, and the results stay on the workers until just before
    their turn: while the caller works on one result, the next is fetched (the client
    holds at most two, and the first is fetched while the cluster computes). On the
    local scheduler they are computed together."""
    try:
        client = _dask("dask.distributed").get_client()
    except (ImportError, ValueError):
        client = None
    if client is None:
        yield from _dask().compute(*tasks)
        return
    futures = client.compute(tasks)
    if not futures:
        return
    with ThreadPoolExecutor(1, thread_name_prefix="dpstream-fetch") as fetch:
        ahead = fetch.submit(futures[0].result)
        _dask("dask.distributed").wait(futures)
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


def update_online(
    synth: OnlineSynthesizer,
    data: object,
    *,
    split_every: int = 8,
    threads: int = 1,
    gather: Callable[[list[Delayed]], Iterator[Any]] = gather_in_order,
) -> None:
    """Feed a Dask collection of points to ``synth`` as one :meth:`~OnlineSynthesizer.update`.

    * ``method="epochs"`` (default): each partition's points are encoded to their
      level-63 cells on its worker and counted (distinct cells, integer counts); the
      client feeds the counts with :meth:`OnlineSynthesizer.update_counts`, one
      partition at a time, once every partition has been counted without error.
    * ``method="privhp"`` (:meth:`OnlineSynthesizer.for_memory`): each partition is
      counted by a copy of :meth:`~OnlineSynthesizer.summary_template` and the
      summaries are merged by a tree reduction (:func:`build_privhp`); the client adds
      the merged summary with :meth:`~OnlineSynthesizer.merge_summary`. Client memory:
      two summaries, fixed.
    * ``method="paper"`` runs its counters one time step after another, so its work
      cannot be split: refused (``ValueError``).

    The synthesizer's state afterwards is byte for byte the state ``synth.update(x)``
    gives on the computed points ``x`` (same seed, same releases). The counts are
    exact: they stay in the trusted cluster and client. Noise is drawn only by the
    synthesizer's releases, on the client.

    Args:
        data: a ``dask.array.Array`` ``(n, d)`` in ``[0,1]^d``, a
            ``dask.dataframe.DataFrame`` with exactly ``d`` numeric columns, a Dask bag
            of points, or a list of ``dask.delayed`` partitions.
        split_every: summaries merged per reduction task (``"privhp"``).
        threads: counting threads per task (``"privhp"``; 1 or 2).
        gather: computes the counting tasks and yields their results in order, all or
            nothing (:func:`gather_in_order`; ``LazyBatch.gather`` of the command line
            computes a batch's digest in the same pass).

    Raises:
        ValueError, TypeError: a point outside ``[0,1]^d``, NaN, a wrong shape or dtype
            (found on a worker, raised on the client naming the partition): nothing is
            fed. Every method is all or nothing, a failure while fetching included:
            ``"epochs"`` feeds the partitions one by one and takes them all back if a
            later one fails (:meth:`OnlineSynthesizer._update_counts_all`);
            ``"privhp"`` adds one merged summary. A retry counts each point once.
    """
    if synth.method == "paper":
        raise ValueError(
            "method='paper' tests every time step in order, so its counting cannot be split "
            "over a cluster: it refuses Dask input; use the default method='epochs' or "
            "OnlineSynthesizer.for_memory (method='privhp'), or compute the points first"
        )
    if synth.method == "privhp":
        privhp = cast("PrivHPSynthesizer", synth)
        template = privhp.summary_template()
        graph = summary_graph(data, template, split_every=split_every, threads=threads)
        (summary,) = gather([graph])
        privhp.merge_summary(summary)
        return
    dask = _dask()
    cell_counts = dask.delayed(_cell_counts, pure=True)
    tasks = [cell_counts(p, synth.dim, i) for i, p in enumerate(_partitions(data, synth.dim))]
    # All or nothing: a failure while fetching a later partition (or a refused one)
    # takes back the partitions already fed, so that a retry counts each point once.
    cast("EpochsSynthesizer", synth)._update_counts_all(
        (cells, _counts_of(cells, more, counts)) for cells, more, counts in gather(tasks)
    )

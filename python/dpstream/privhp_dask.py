"""PrivHP on more than one machine: exact summaries per partition, one merge, one release.

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
These functions are also :mod:`dpstream.distributed`'s.

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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from dpstream import _dask
from dpstream._params import int_param
from dpstream.privhp import PrivHP

if TYPE_CHECKING:
    from dask.delayed import Delayed

__all__ = ["build_privhp", "merge_bytes", "point_partitions", "summarize", "summary_graph"]

#: Points buffered before one ``PrivHP.update`` call when :func:`summarize` is
#: fed single points.
DEFAULT_BATCH = 65_536


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


def _summarize_block(block: Any, template: bytes, threads: int, index: int = 0) -> PrivHP:
    """Task body: one partition (an array, a pandas frame or a list of points); a
    refusal names the partition (row numbers are within it)."""
    batch = isinstance(block, np.ndarray) or hasattr(block, "to_numpy")
    items = [block] if batch else block
    with _dask.naming_partition(index):
        return summarize(template, items, threads=threads)


def point_partitions(data: object, dim: int) -> list[Delayed]:
    """One delayed object per partition of a Dask collection of ``dim``-dimensional
    points (or the list of ``dask.delayed`` partitions given)."""
    given = _dask.delayed_list(data)
    if given is not None:
        return given
    da = _dask.require("dask.array")
    if isinstance(data, da.Array):
        if data.ndim != 2:
            raise ValueError(f"a dask array of points must be 2-D (n, d), got {data.ndim}-D")
        cols = data.shape[1]
        if not np.isnan(cols) and cols != dim:
            raise ValueError(f"points must have {dim} columns (the template's dim), got {cols}")
        return _dask.row_blocks(data)
    db = _dask.require("dask.bag")
    if isinstance(data, db.Bag):
        return list(data.to_delayed())
    try:
        dd = _dask.require("dask.dataframe")
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
    tmpl = _template_bytes(template)
    threads = int_param(threads, "threads", low=1, high=2)

    def summaries(key: Delayed) -> list[Delayed]:
        parts = point_partitions(data, template.dim)
        return _dask.map_partitions(_summarize_block, parts, key, threads)

    return _dask.tree_reduce(tmpl, split_every, summaries, _merge_many)


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
    (summary,) = _dask.require().compute(
        summary_graph(data, template, split_every=split_every, threads=threads)
    )
    if not isinstance(summary, PrivHP):  # pragma: no cover - defensive
        raise TypeError(f"the computation returned {type(summary).__name__}, not a PrivHP")
    return summary

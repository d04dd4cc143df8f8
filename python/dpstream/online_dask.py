"""The online synthesizer on more than one machine: exact counts per partition, fed on
the client, where the releases draw the noise; a release's points drawn on the workers.

:func:`update_online` is ``OnlineSynthesizer.update`` of a Dask collection.
``"epochs"`` (the default): each partition's distinct finest cells and their counts
(:func:`cell_counts`), fed to ``update_counts`` one partition after another (the next
fetched while the current is fed); ``"privhp"`` (``for_memory``): summaries on the
synthesizer's public template, merged by a tree reduction
(:mod:`dpstream.privhp_dask`), fed to ``merge_summary``; ``"paper"`` cannot be split
and refuses Dask input. With the same seed the state is byte for byte that of one
process on the same points. Every count is exact: the cluster, its network and the
client are trusted with the raw data (they hold it). :func:`release_array` draws a
release's chunks on the workers from the released structure (post-processing).

These functions are also :mod:`dpstream.distributed`'s. On Spark, the default method
takes each partition's finest cells and counts (one partition at a time on the
driver); the fixed-memory method takes a tree reduction of summaries counted on its
public template::

    import numpy as np
    from dpstream import OnlineSynthesizer, PrivHP, distributed

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

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from dpstream import _core
from dpstream._arrays import points_array
from dpstream._dask import gather_in_order, map_partitions, naming_partition, require
from dpstream.partition import encode as encode_points
from dpstream.privhp_dask import point_partitions, summary_graph

if TYPE_CHECKING:
    from dask.delayed import Delayed

    from dpstream.online import EpochsSynthesizer, OnlineSynthesizer, PrivHPSynthesizer

__all__ = ["cell_counts", "release_array", "update_online"]

#: The level of the finest cells the online synthesizer keeps (its 63-bit paths).
PATH_BITS = 63


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
    with naming_partition(index):
        cells, counts = _unique_cells(block, dim)
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
      summaries are merged by a tree reduction
      (:func:`~dpstream.privhp_dask.build_privhp`); the client adds the merged summary
      with :meth:`~OnlineSynthesizer.merge_summary`. Client memory: two summaries,
      fixed.
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
            nothing (:func:`~dpstream._dask.gather_in_order`; ``LazyBatch.gather`` of the
            command line computes a batch's digest in the same pass).

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
    tasks = map_partitions(_cell_counts, point_partitions(data, synth.dim), synth.dim)
    # All or nothing: a failure while fetching a later partition (or a refused one)
    # takes back the partitions already fed, so that a retry counts each point once.
    cast("EpochsSynthesizer", synth)._update_counts_all(
        (cells, _counts_of(cells, more, counts)) for cells, more, counts in gather(tasks)
    )


def _release_chunk(release: bytes, index: int) -> Any:
    """Task body: chunk ``index`` of an encoded release, ``(rows, d)`` float64."""
    return _core.OnlineRelease.from_bytes(release).chunk(index)


def release_array(release: _core.OnlineRelease) -> Any:
    """A release (``OnlineSynthesizer.release_dask``) as a Dask array ``(rows, d)``,
    one block per chunk, drawn on the workers: the graph holds the encoded release once
    (the released trees or leaf counts and the sampling key: small, public), never the
    points. Chunk ``i`` is drawn from its own generator, so computed it equals
    ``release.sample()``, byte for byte."""
    da = require("dask.array")
    shared = require().delayed(release.to_bytes(), pure=True)
    task = require().delayed(_release_chunk, pure=True)
    blocks = []
    for i in range(release.n_chunks):
        start, stop = release.chunk_bounds(i)
        shape = (stop - start, release.dim)
        blocks.append(da.from_delayed(task(shared, i), shape=shape, dtype=np.float64))
    if not blocks:
        return da.zeros((0, release.dim), dtype=np.float64)
    return da.concatenate(blocks, axis=0)

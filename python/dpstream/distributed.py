"""Every capability on more than one machine: exact counts per partition, one tree
reduction, noise drawn once on the client.

The heavy part of each mechanism is exact integer counting, which is linear in the
records, so a cluster can do it partition by partition; only counts reach the client,
which adds the noise exactly as on one machine. With the same seed, the results are byte
for byte those of one process on the same records. Each capability owns its cluster
ingestion; this module gathers their public functions in one place:

* **PrivHP** (one release): :func:`build_privhp`, :func:`summarize`,
  :func:`merge_bytes`, :func:`summary_graph` (:mod:`dpstream.privhp_dask`, with the
  privacy and resource notes and the Spark pattern).
* **Tabular stream**: :func:`batch_marginals`, :func:`marginals_graph`,
  :func:`count_records`, :func:`add_record_counts`, :func:`marginals_of`
  (:mod:`dpstream.tabular.dask`); ``TabularStream.step`` also takes a Dask collection.
* **Online synthesizer**: :func:`update_online`, :func:`cell_counts`
  (:mod:`dpstream.online_dask`); ``OnlineSynthesizer.update`` also takes a Dask
  collection.
* :func:`gather_in_order`: computes tasks in one submission and yields their results
  in order, all or nothing (:mod:`dpstream._dask`).

Dask (``pip install "dpstream[distributed]"``) is imported only when a function needs
it; ``import dpstream`` never does.
"""

from __future__ import annotations

from dpstream._dask import gather_in_order
from dpstream.online_dask import cell_counts, update_online
from dpstream.privhp_dask import build_privhp, merge_bytes, summarize, summary_graph
from dpstream.tabular.dask import (
    add_record_counts,
    batch_marginals,
    count_records,
    marginals_graph,
    marginals_of,
)

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

"""High-dimensional categorical tables that change over time (Kumar, Strohmer, Vershynin).

* :class:`Domain` — the public schema; :func:`workload_errors` — the paper's metrics.
* :class:`TabularStream` — ε-DP synthetic tables for a stream of records, run by a
  policy: :class:`Adaptive` (the default; insertions), :class:`Paper` (Algorithm 3 as
  printed; insertions and deletions) or :class:`Baseline` (Algorithm 2); its fit and
  rows by :class:`ModelOptions`.
* Estimators (:func:`estimate_pgm`, :func:`estimate_mw`) turn noisy marginals into a
  distribution: post-processing of released measurements (no privacy cost).
"""

from dpstream.tabular.domain import Domain
from dpstream.tabular.estimation import Measurement, l2_loss, marginal_counts
from dpstream.tabular.model import (
    GraphicalModel,
    JunctionTree,
    build_junction_tree,
    estimate_pgm,
    junction_tree_size,
)
from dpstream.tabular.model_options import ModelOptions
from dpstream.tabular.mw import DenseModel, estimate_mw
from dpstream.tabular.policy_options import Adaptive, Baseline, Paper
from dpstream.tabular.selection import Budget
from dpstream.tabular.stream import TabularStream
from dpstream.tabular.workloads import (
    TVErrors,
    WorkloadErrors,
    all_workloads,
    marginal,
    tv_errors,
    workload_errors,
)

__all__ = [
    "Adaptive",
    "Baseline",
    "Budget",
    "DenseModel",
    "Domain",
    "GraphicalModel",
    "JunctionTree",
    "Measurement",
    "ModelOptions",
    "Paper",
    "TVErrors",
    "TabularStream",
    "WorkloadErrors",
    "all_workloads",
    "build_junction_tree",
    "estimate_mw",
    "estimate_pgm",
    "junction_tree_size",
    "l2_loss",
    "marginal",
    "marginal_counts",
    "tv_errors",
    "workload_errors",
]

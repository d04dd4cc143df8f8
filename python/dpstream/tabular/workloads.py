"""Marginal workloads and the error metrics of Kumar, Strohmer and Vershynin (Section 7.3).

A ``k``-way *workload* is a sorted tuple of ``k`` column indices; its queries
are the cells of the marginal on those columns (Definition 7.1). A record
falls in exactly one cell, so the workload's histogram has ℓ1-sensitivity 1
(one record added or removed).

Metrics (Section 7.3) compare a real table ``f`` and a synthetic table ``g``
through their *normalised* marginals (each cell's count divided by the
table's number of rows):

* ``WE(W) = (1/|W|) Σ_q |q(f) − q(g)|`` — mean absolute error over the cells,
* ``RelWE(W) = (1/|W|) Σ_q |q(f) − q(g)| / q(f)`` — over the cells with
  ``q(f) > 0`` (the paper leaves ``q(f) = 0`` undefined; those cells are
  skipped, and ``|W|`` counts the cells kept),
* AvgWE / MaxWE / AvgRelWE / MaxRelWE: mean and maximum over the workloads,
* ``TV(W) = ½ Σ_q |q(f) − q(g)|`` — the total variation distance of the workload's
  normalised marginals (what a user reads off a marginal; a per-cell mean hides a wrong
  marginal among many cells): mean and maximum over the workloads, and
  :func:`tv_errors` over every 1-way and 2-way marginal with the worst column.

These are evaluation tools: they read the real data and are **not private**.
"""

from __future__ import annotations

import itertools
import numbers
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from dpstream.tabular.domain import Codes, Domain
from dpstream.tabular.estimation import marginal_counts

__all__ = [
    "TVErrors",
    "WorkloadErrors",
    "all_workloads",
    "marginal",
    "marginal_errors",
    "tv_errors",
    "workload_errors",
    "workload_list",
]

Clique = tuple[int, ...]


def all_workloads(domain: Domain, k: int = 2) -> list[Clique]:
    """Every ``k``-way workload of ``domain`` (sorted column tuples, lexicographic order)."""
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, numbers.Integral):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if not 1 <= int(k) <= len(domain):
        raise ValueError(f"k must be between 1 and the number of columns {len(domain)}, got {k}")
    return list(itertools.combinations(range(len(domain)), int(k)))


def workload_list(domain: Domain, workloads: object) -> list[Clique]:
    """The workloads a stream is given: ``k`` for all ``k``-way workloads, or a non-empty
    list, without repeats, of strictly increasing column-index tuples (checked)."""
    if isinstance(workloads, (int, np.integer)) and not isinstance(workloads, bool):
        return all_workloads(domain, int(workloads))
    if not isinstance(workloads, list):
        raise TypeError("workloads must be an int k or a list of column-index tuples")
    cliques = []
    for w in workloads:
        if not isinstance(w, tuple) or not w:
            raise TypeError(f"a workload is a non-empty tuple of column indices, got {w!r}")
        cols = tuple(int(c) for c in w)
        if list(cols) != sorted(set(cols)) or cols[0] < 0 or cols[-1] >= len(domain):
            raise ValueError(f"workload {w!r} must be strictly increasing column indices")
        cliques.append(cols)
    if not cliques or len(set(cliques)) != len(cliques):
        raise ValueError("workloads must be a non-empty list without repeats")
    return cliques


def marginal(codes: Codes, domain: Domain, clique: Clique) -> npt.NDArray[np.float64]:
    """Counts of the marginal on ``clique`` (C order over the clique's columns).

    ``codes`` is an ``(n, d)`` array of valid codes (see :meth:`Domain.encode`).
    """
    return marginal_counts(codes, domain.sizes, clique)


class WorkloadErrors(NamedTuple):
    """Workload error metrics of a synthetic table (Section 7.3), on normalised marginals.

    ``avg_rel_we``/``max_rel_we`` are the printed RelWE (mean over a workload's cells
    with ``q(f) > 0`` of ``|q(f) − q(g)| / q(f)``). ``avg_rel_l2``/``max_rel_l2`` are
    the relative ℓ2 errors ``‖W(f) − W(g)‖₂ / ‖W(f)‖₂`` per workload, which the paper's
    published RelWE figures appear to be (see research/tabular_paper.md): rare cells do not
    dominate them. ``avg_tv``/``max_tv`` are the mean and largest total variation
    distance (½ ℓ1 of the normalised marginals, in [0, 1]) over the workloads.
    """

    avg_we: float
    max_we: float
    avg_rel_we: float
    max_rel_we: float
    avg_rel_l2: float
    max_rel_l2: float
    avg_tv: float
    max_tv: float


def workload_errors(
    real: Any, synthetic: Any, domain: Domain, workloads: int | list[Clique] = 2
) -> WorkloadErrors:
    """AvgWE, MaxWE, AvgRelWE, MaxRelWE (and relative ℓ2) of ``synthetic`` against ``real``.

    Args:
        real, synthetic: tables accepted by :meth:`Domain.encode` (DataFrames or
            ``(n, d)`` code arrays); both must be non-empty.
        domain: their common domain.
        workloads: ``k`` for all ``k``-way workloads, or an explicit list.

    Not private: this reads the real data (an evaluation tool).
    """
    f = domain.encode(real)
    cliques = all_workloads(domain, workloads) if isinstance(workloads, int) else workloads
    real_counts = [marginal(f, domain, tuple(c)) for c in cliques]
    return marginal_errors(real_counts, f.shape[0], synthetic, domain, cliques)


def marginal_errors(
    real_counts: list[npt.NDArray[Any]],
    real_rows: int,
    synthetic: Any,
    domain: Domain,
    workloads: list[Clique],
) -> WorkloadErrors:
    """:func:`workload_errors` from the real table's exact marginals (``real_counts[i]``
    the counts of ``workloads[i]``, e.g. summed on a cluster by
    :func:`dpstream.distributed.batch_marginals`) and its number of rows: the real
    records themselves are not needed. Not private (an evaluation tool)."""
    g = domain.encode(synthetic)
    if real_rows == 0 or g.shape[0] == 0:
        raise ValueError("both tables must have at least one row")
    if not workloads:
        raise ValueError("no workloads given")
    we = np.empty(len(workloads))
    rel = np.empty(len(workloads))
    rel_l2 = np.empty(len(workloads))
    tv = np.empty(len(workloads))
    for i, clique in enumerate(workloads):
        qf = np.asarray(real_counts[i], dtype=np.float64) / real_rows
        qg = marginal(g, domain, tuple(clique)) / g.shape[0]
        err = np.abs(qf - qg)
        we[i] = err.mean()
        kept = qf > 0
        rel[i] = float((err[kept] / qf[kept]).mean())
        rel_l2[i] = float(np.linalg.norm(err) / np.linalg.norm(qf))
        tv[i] = 0.5 * float(err.sum())
    return WorkloadErrors(
        float(we.mean()),
        float(we.max()),
        float(rel.mean()),
        float(rel.max()),
        float(rel_l2.mean()),
        float(rel_l2.max()),
        float(tv.mean()),
        float(tv.max()),
    )


class TVErrors(NamedTuple):
    """Total variation distances (½ ℓ1 of the normalised marginals, in [0, 1]) of a
    synthetic table against a real one: mean and max over every 1-way marginal, over
    every 2-way marginal, and each column's 1-way TV (``columns[j]`` for column ``j``)."""

    mean_1way: float
    max_1way: float
    mean_2way: float
    max_2way: float
    columns: tuple[float, ...]


def tv_errors(real: Any, synthetic: Any, domain: Domain) -> TVErrors:
    """TV of every 1-way and 2-way marginal of ``synthetic`` against ``real`` (both
    non-empty tables accepted by :meth:`Domain.encode`). With one column the 2-way
    figures are those of the 1-way marginal. Not private: this reads the real data."""
    f = domain.encode(real)
    g = domain.encode(synthetic)
    if f.shape[0] == 0 or g.shape[0] == 0:
        raise ValueError("both tables must have at least one row")

    def tv(clique: Clique) -> float:
        qf = marginal(f, domain, clique) / f.shape[0]
        qg = marginal(g, domain, clique) / g.shape[0]
        return 0.5 * float(np.abs(qf - qg).sum())

    ones = [tv((j,)) for j in range(len(domain))]
    twos = [tv(c) for c in itertools.combinations(range(len(domain)), 2)] or ones
    return TVErrors(
        float(np.mean(ones)), float(max(ones)), float(np.mean(twos)), float(max(twos)),
        tuple(ones),
    )  # fmt: skip

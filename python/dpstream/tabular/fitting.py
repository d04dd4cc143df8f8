"""The fit of the tabular stream and the public rule on its size (post-processing).

* :func:`make_fit`: measurements → model (the built-in graphical model, or multiplicative
  weights for ``Baseline(estimator="mw")``). Post-processing of released measurements.
* :class:`CellLimit`: a workload is a selection candidate only if the model's junction tree
  with it stays within ``max_model_cells`` (a public rule on public structure, as in
  MWEM+PGM), which bounds the fit's time and memory.
* Rough standard deviations of counter releases (they weigh the fit; post-processing of
  the counters' public parameters).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

from dpstream.counters import Counter
from dpstream.tabular.domain import Domain
from dpstream.tabular.estimation import MarginalModel, Measurement
from dpstream.tabular.model import GraphicalModel, estimate_pgm, junction_tree_size, model_tree
from dpstream.tabular.mw import estimate_mw
from dpstream.tabular.policy_options import EstimatorName
from dpstream.tabular.workloads import Clique

if TYPE_CHECKING:
    from dpstream.tabular.model import ModelTree

__all__ = ["CellLimit", "Structure", "make_fit"]

#: Belief propagations of a fit at most (``ModelOptions(iters=None)``).
FIT_ITERS = 100
#: The PGM fit stops once ten propagations lower its loss by less than this fraction.
FIT_TOL = 0.03
#: Up to this many columns, a candidate that the insertion bound of the model's junction
#: tree rejects is checked again by a greedy triangulation (one rebuild per candidate;
#: see :meth:`CellLimit.fits`). Wider tables rely on the bound alone.
EXACT_CHECK_COLUMNS = 20


class Structure(NamedTuple):
    """What :meth:`CellLimit.fits` reads: the tree the next fit starts from, and the
    cliques it will have."""

    tree: ModelTree
    cliques: frozenset[Clique]


def check_model_cells(sizes: tuple[int, ...], workloads: list[Clique], limit: int) -> None:
    """Refuse workloads that no model within ``limit`` cells can hold: the smallest holds
    the workload's marginal and one cell per category of every other column."""
    total = sum(sizes)
    need = [math.prod(sizes[c] for c in w) + total - sum(sizes[c] for c in w) for w in workloads]
    if max(need) > limit:
        k = next(k for k, n in enumerate(need) if n > limit)
        w, cells = workloads[k], math.prod(sizes[c] for c in workloads[k])
        raise ValueError(
            f"workload {w} alone needs a model of {need[k]} cells (its marginal {cells}, the "
            f"other columns {need[k] - cells}), more than max_model_cells={limit}: raise "
            f"max_model_cells to at least {max(need)} or leave out the larger workloads"
        )


class CellLimit:
    """The public rule ``max_model_cells`` on the model a fit builds (``"pgm"`` only; the
    other estimators have no junction tree and every workload fits)."""

    def __init__(
        self, domain: Domain, workloads: list[Clique], estimator: EstimatorName, limit: int
    ) -> None:
        self._domain = domain
        self._workloads = workloads
        self._active = estimator == "pgm"
        self.limit = limit
        if self._active:
            check_model_cells(domain.sizes, workloads, limit)
        self._cache: dict[tuple[frozenset[Clique], int], bool] = {}

    def structure(self, model: MarginalModel | None, order: list[int]) -> Structure | None:
        """``"pgm"``: the cliques the next fit will have (``model``'s and this step's
        selections ``order``), and the junction tree it starts from: ``model``'s (one node
        per column before the first) with the selections inserted in order, as the fit
        will insert them (:class:`~dpstream.tabular.model.ModelTree`). Public structure."""
        if not self._active:
            return None
        base = model.junction_tree if isinstance(model, GraphicalModel) else None
        tree = model_tree(self._domain.sizes, base)
        for i in order:
            tree = tree.added(self._workloads[i])
        cliques = frozenset([*getattr(model, "cliques", ()), *(self._workloads[i] for i in order)])
        return Structure(tree, cliques)

    def fits(self, structure: Structure | None, i: int) -> bool:
        """Whether workload ``i`` may join a model of ``structure`` (:meth:`structure`):
        the fit's junction tree with it stays within ``max_model_cells``.

        The tree with the workload inserted answers first (no rebuild; exact for a
        workload inside a node). On tables of at most ``EXACT_CHECK_COLUMNS`` columns, a
        workload it rejects gets a second chance from the greedy triangulation of all
        the cliques (the only check before 2026-11; one rebuild per candidate). Either
        way the fit, which keeps the smaller of the two trees, stays within the bound."""
        if structure is None:
            return True
        tree, cliques = structure
        w = self._workloads[i]
        if tree.fits(w, self.limit):
            return True
        if len(self._domain) > EXACT_CHECK_COLUMNS:
            return False
        key = (cliques, i)
        if key not in self._cache:
            size = junction_tree_size(self._domain.sizes, [*cliques, w])
            self._cache[key] = size <= self.limit
        return self._cache[key]

    def any_fits(self, structure: Structure | None) -> bool:
        """Whether some workload may join a model of ``structure``."""
        return any(self.fits(structure, i) for i in range(len(self._workloads)))


def noise_scale(counter: Counter) -> float:
    """The largest Laplace scale (sensitivity / ε) among a counter's noisy values."""
    return max(float((s.sensitivity or 1) / s.epsilon) for s in counter.epsilon_split())


def release_stddev(counter: Counter) -> float:
    """Rough standard deviation of a counter's release (weights the fit only)."""
    scale = noise_scale(counter)
    t = max(counter.time, 1)
    terms = t if counter.kind == "simple" else max(1.0, math.log2(t + 1))
    return math.sqrt(2 * terms) * scale


def make_fit(estimator: EstimatorName, sizes: tuple[int, ...], iters: int) -> Any:
    """The fit step ``(measurements, total, warm start) -> model`` (post-processing)."""
    if estimator == "pgm":

        def fit_pgm(ms: list[Measurement], total: float, warm: Any) -> MarginalModel:
            return estimate_pgm(sizes, ms, total, iters=iters, warm_start=warm, tol=FIT_TOL)

        return fit_pgm

    def fit_mw(ms: list[Measurement], total: float, warm: Any) -> MarginalModel:
        return estimate_mw(sizes, ms, total, iters=iters, warm_start=warm)

    return fit_mw

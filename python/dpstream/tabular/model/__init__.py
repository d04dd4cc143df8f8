"""Private-PGM: a graphical model fitted to noisy marginals (McKenna, Sheldon, Miklau 2019).

The model is ``P_θ(x) ∝ exp(Σ_C θ_C(x_C))`` over a set of cliques ``C`` (the measured
ones, plus any the caller wants kept), scaled to a fixed total count. Marginals come
from sum-product belief propagation on a junction tree of the triangulated
interaction graph, with scaled probability tables (log space where those could
underflow). :func:`estimate_pgm` fits ``θ`` by entropic mirror descent with an
Armijo line search on the loss ``Σ_m ||μ_{C_m} − y_m||² / σ_m²`` (Algorithm 1 of the
paper; the loss is convex in the marginals ``μ``).

This is **post-processing** of released measurements: no privacy noise, no privacy
cost. Units: marginals, totals and measurements are counts (rows); potentials are
natural logarithms; the loss is dimensionless.

Modules, each importing only those above it:

* :mod:`~dpstream.tabular.model.junction_tree` — triangulation, the tree, its index;
* :mod:`~dpstream.tabular.model.growth` — the tree grown one clique at a time;
* :mod:`~dpstream.tabular.model.factors` — tables over cliques and their contraction;
* :mod:`~dpstream.tabular.model.inference` — belief propagation, elimination plans;
* :mod:`~dpstream.tabular.model.graphical_model` — :class:`GraphicalModel`: marginals,
  sampling;
* :mod:`~dpstream.tabular.model.fit` — :func:`estimate_pgm`.
"""

from dpstream.tabular.model.fit import estimate_pgm
from dpstream.tabular.model.graphical_model import GraphicalModel
from dpstream.tabular.model.growth import ModelTree, model_tree
from dpstream.tabular.model.junction_tree import (
    MAX_CLIQUE_CELLS,
    JunctionTree,
    build_junction_tree,
    junction_tree_size,
    tree_cells,
)

__all__ = [
    "MAX_CLIQUE_CELLS",
    "GraphicalModel",
    "JunctionTree",
    "ModelTree",
    "build_junction_tree",
    "estimate_pgm",
    "junction_tree_size",
    "model_tree",
    "tree_cells",
]

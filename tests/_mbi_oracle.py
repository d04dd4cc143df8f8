"""Private-PGM by its authors' package ``mbi``: the test oracle of :mod:`dpstream.tabular.model`.

:func:`estimate_mbi` fits the same model as :func:`dpstream.tabular.model.estimate_pgm`
— ``total · P_θ`` with ``P_θ(x) ∝ exp(Σ_C θ_C(x_C))`` over the measured cliques, on the
loss ``Σ_m ||μ_{C_m} − y_m||² / σ_m²`` — with ``mbi.estimation.MirrorDescent``
(McKenna, Sheldon, Miklau 2019, Algorithm 1 with an Armijo line search; mbi minimises
half this loss, which has the same minimiser). The loss is strictly convex in the
measured marginals, so the two estimators converge to the same measured marginals
(and, from the same warm start, to the same model): the tests compare them on the
same measurements (``make test-mbi``; it is not a dpstream option).

``mbi`` (``pip install mbi``, which pulls in jax) is imported lazily, by
:func:`load_mbi` on the first fit; this module imports without it. jax computes in
float32 by default: every call into mbi here runs inside ``jax.enable_x64(True)`` (a
context manager; jax's global setting is left as it was), so counts keep float64
precision. The fitted model's junction-tree marginals are copied to numpy once; its
queries and sampling are numpy.

This is **post-processing** of released measurements: no privacy noise, no privacy
cost. The only randomness is the sampling of synthetic rows, from a caller-supplied
:class:`numpy.random.Generator` (mbi's own ``synthetic_data`` draws from numpy's
global generator, so it is not used). Units: marginals, totals and measurements are
counts (rows); potentials are natural logarithms.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Sequence
from operator import attrgetter
from typing import Any

import numpy as np
from dpstream.tabular import estimation as est
from dpstream.tabular.estimation import Clique, FloatArray, IntArray, Measurement
from dpstream.tabular.model import GraphicalModel
from dpstream.tabular.model.graphical_model import _sample_conditional

__all__ = ["INSTALL_HINT", "MbiModel", "estimate_mbi", "load_mbi"]

#: How to get the optional package.
INSTALL_HINT = "pip install mbi  (Private-PGM; it pulls in jax)"


def load_mbi() -> Any:
    """The ``mbi`` module, or an ImportError that says how to install it.

    mbi warns at import that jax runs in float32 and that jax's compilation cache is
    on; both warnings are silenced here (the fits run in float64).
    """
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="JAX is running in float32 mode")
            warnings.filterwarnings("ignore", message="JAX persistent compilation cache")
            return importlib.import_module("mbi")
    except ImportError as exc:
        raise ImportError(
            "the Private-PGM oracle needs the package mbi, which is not installed: "
            f"{INSTALL_HINT} (make test-mbi installs it in .venv-mbi)"
        ) from exc


def _x64() -> Any:
    """A context manager under which jax computes in float64."""
    return importlib.import_module("jax").enable_x64(True)


def _maximal(cliques: Sequence[Clique]) -> list[Clique]:
    """The cliques not contained in another one, sorted (duplicates removed)."""
    out: list[Clique] = []
    for c in sorted(set(cliques), key=lambda c: (-len(c), c)):
        if not any(set(c) <= set(o) for o in out):
            out.append(c)
    return sorted(out)


class MbiModel:
    """A fitted ``mbi.MarkovRandomField`` behind the :class:`MarginalModel` protocol.

    Built by :func:`estimate_mbi`. Its cliques are the measured ones and those of the
    warm start; mbi's model also has a (zero) singleton potential for each column in
    none of them, so such columns are uniform and independent of the rest, as in
    :class:`~dpstream.tabular.model.GraphicalModel`. At construction the marginals of
    the nodes of mbi's junction tree are computed once (mbi's HUGIN belief
    propagation, float64) and kept as numpy arrays; queries and sampling read those.
    All queries are post-processing.

    Attributes:
        sizes: domain size of each column.
        total: the total count the marginals sum to.
        cliques: the measured and warm-start cliques, sorted (as ``GraphicalModel``).
        potentials: copies of mbi's log-potentials ``θ_C`` over its (maximal) model
            cliques, flattened in C order: ``GraphicalModel(sizes, potentials,
            total)`` is the same distribution.
        iterations: mirror-descent steps mbi ran (``iters`` rounded up to mbi's
            block of 50; 0 without measurements).
        mrf: the underlying ``mbi.MarkovRandomField`` (jax arrays, float64).
    """

    sizes = property(attrgetter("_sizes"))
    total = property(attrgetter("_total"))
    cliques = property(attrgetter("_cliques"))

    def __init__(
        self,
        sizes: tuple[int, ...],
        total: float,
        cliques: Sequence[Clique],
        mrf: Any,
        iterations: int,
    ) -> None:
        mbi = load_mbi()
        self._sizes = sizes
        self._total = total
        self._cliques = tuple(sorted(set(cliques)))
        self.mrf = mrf
        self.iterations = iterations
        self._nodes: list[Clique] = []
        self._tables: list[FloatArray] = []
        with _x64():
            self._theta = {
                _columns(factor): _table(factor).reshape(-1)
                for factor in (mrf.potentials[c] for c in mrf.potentials.cliques)
            }
            jtree, order = mbi.junction_tree.make_junction_tree(mrf.domain, list(mrf.cliques))
            nodes = list(mbi.junction_tree.maximal_cliques(jtree))
            beliefs = mbi.marginal_oracles.message_passing_stable(
                mrf.potentials.expand(nodes), total
            )
            for node in nodes:
                self._nodes.append(_columns(beliefs[node]))
                self._tables.append(_table(beliefs[node]))
        index = {node: i for i, node in enumerate(nodes)}
        self._edges = tuple((index[a], index[b]) for a, b in jtree.edges())
        # Forward sampling visits the columns in reverse elimination order.
        self._order = tuple(int(a) for a in reversed(order))

    @property
    def potentials(self) -> dict[Clique, FloatArray]:
        """Copies of the log-potentials ``θ_C``, flattened in C order."""
        return {c: t.copy() for c, t in self._theta.items()}

    def __repr__(self) -> str:
        return f"MbiModel(sizes={self.sizes}, cliques={self.cliques}, total={self.total:g})"

    def marginal(self, clique: Sequence[int]) -> FloatArray:
        """Counts of the marginal of ``clique``, flattened in C order; they sum to ``total``.

        Read off the smallest junction-tree node that contains ``clique``; otherwise
        contracted (numpy einsum) from the node marginals of the smallest subtree that
        covers it: on a calibrated junction tree, the joint of a subtree's columns is
        the product of its nodes' marginals over those of its separators.
        """
        cl = est.check_clique(clique)
        est.check_clique_in(cl, self.sizes)
        best: tuple[int, int] | None = None
        for i, node in enumerate(self._nodes):
            if set(cl) <= set(node):
                key = (est.clique_cells(self.sizes, node), i)
                best = key if best is None or key < best else best
        if best is None:
            return self._contract(cl).reshape(-1)
        node, table = self._nodes[best[1]], self._tables[best[1]]
        axes = tuple(k for k, c in enumerate(node) if c not in cl)
        out: FloatArray = np.sum(table, axis=axes).reshape(-1)
        return out

    def _contract(self, cl: Clique) -> FloatArray:
        """The marginal (counts) of ``cl``, a clique in no single node."""
        keep = set(range(len(self._nodes)))
        edges = set(self._edges)
        want = set(cl)
        pruned = True
        while pruned:  # drop leaves that hold no wanted column their neighbour lacks
            pruned = False
            for i in sorted(keep):
                nbrs = [b if a == i else a for a, b in edges if i in (a, b)]
                needed = want & set(self._nodes[i])
                if len(nbrs) > 1 or (needed and not nbrs):
                    continue
                if not needed or needed <= set(self._nodes[nbrs[0]]):
                    keep.discard(i)
                    edges = {e for e in edges if i not in e}
                    pruned = True
        # Probabilities; the trees of a forest are independent (their product).
        label = {c: k for k, c in enumerate(sorted({c for i in keep for c in self._nodes[i]}))}
        args: list[Any] = []
        for i in sorted(keep):
            args += [self._tables[i] / self.total, [label[c] for c in self._nodes[i]]]
        for a, b in sorted(edges):
            sep = tuple(c for c in self._nodes[a] if c in self._nodes[b])
            axes = tuple(k for k, c in enumerate(self._nodes[a]) if c not in sep)
            marg = np.sum(self._tables[a], axis=axes) / self.total
            inv = np.divide(1.0, marg, out=np.zeros_like(marg), where=marg > 0)
            args += [inv, [label[c] for c in sep]]
        out: FloatArray = np.einsum(*args, [label[c] for c in cl], optimize="greedy")
        return out * self.total

    def sample(self, n: int, rng: np.random.Generator, *, method: str = "iid") -> IntArray:
        """``n`` synthetic rows ``(n, d)`` (int64 codes) from the model (post-processing).

        Forward sampling in the reverse of mbi's elimination order (as mbi's
        ``synthetic_data``, but from ``rng``): each column given the already drawn
        columns it shares a junction-tree node with, from the marginal of those
        columns (they lie in one node: the elimination order is perfect for the
        triangulated graph). ``method="iid"`` draws each value independently
        (mbi's ``method="sample"``); ``method="round"`` allocates the first column's
        values, then each column's values within each group of rows sharing the
        conditioning columns, by controlled rounding
        (:func:`~dpstream.tabular.estimation.round_rows`, mbi's ``method="round"``
        with its remainder allocated without bias), and shuffles the rows at the end.
        """
        n = est.check_sample_size(n)
        rounded = est.check_sample_method(method) == "round"
        sizes = self.sizes
        out = np.zeros((n, len(sizes)), dtype=np.int64)
        if n == 0:
            return out
        done: set[int] = set()
        for col in self._order:
            parents = tuple(sorted({c for nd in self._nodes if col in nd for c in nd} & done))
            cl = tuple(sorted((*parents, col)))
            table = self.marginal(cl).reshape(est.clique_shape(sizes, cl))
            joint = np.moveaxis(table, cl.index(col), -1).reshape(-1, sizes[col])
            if parents:
                rows = np.ravel_multi_index(
                    tuple(out[:, c] for c in parents), est.clique_shape(sizes, parents)
                )
                if rounded:
                    out[:, col] = est.round_rows(joint, rows, n, rng)
                else:
                    out[:, col] = _sample_conditional(joint, rows, rng)
            elif rounded:
                out[:, col] = est.round_rows(joint.reshape(-1), None, n, rng)
            else:
                out[:, col] = est.sample_rows(joint.reshape(-1), n, rng)
            done.add(col)
        if rounded:
            out = out[rng.permutation(n)]
        return out


def _columns(factor: Any) -> Clique:
    """The columns of an mbi factor (ints, as listed by its domain)."""
    return tuple(int(a) for a in factor.domain.attributes)


def _table(factor: Any) -> FloatArray:
    """An mbi factor's values as float64 numpy, axes in increasing column order."""
    cols = _columns(factor)
    values = np.asarray(factor.datavector(flatten=False), dtype=np.float64)
    table: FloatArray = np.ascontiguousarray(np.transpose(values, np.argsort(cols)))
    return table


def estimate_mbi(
    sizes: Sequence[int],
    measurements: Sequence[Measurement],
    total: float,
    *,
    iters: int = 200,
    warm_start: MbiModel | GraphicalModel | None = None,
) -> MbiModel:
    """Fit a graphical model with mbi's mirror descent (post-processing; needs ``mbi``).

    Minimises ``Σ_m ||μ_{C_m} − y_m||² / σ_m²`` over models ``total · P_θ`` whose
    cliques are those of the measurements and of ``warm_start``, with
    ``mbi.estimation.MirrorDescent`` (Armijo line search from the step
    ``2 / (L · total)``, ``L`` the loss's smoothness constant). Same model and loss as
    :func:`~dpstream.tabular.model.estimate_pgm`; see the module docstring.

    Args:
        sizes: domain size of each column.
        measurements: the released noisy marginals (counts).
        total: the total count of the model (positive).
        iters: mirror-descent steps, each two belief propagations (the point and the
            trial step; ``estimate_pgm`` counts propagations). mbi runs them in
            blocks of 50, so ``iters`` is rounded up to a multiple of 50.
        warm_start: a previous fit over the same columns (an :class:`MbiModel`, or a
            :class:`~dpstream.tabular.model.GraphicalModel`, e.g. one restored from a
            checkpoint); its potentials start ``θ`` (each kept on its clique, which
            stays in the model).

    Raises:
        ImportError: mbi is not installed (the message says how to install it).
        ValueError: bad sizes, measurements, total, iters or warm start.
    """
    sz = est.check_sizes(sizes)
    meas = est.check_measurements(sz, measurements)
    tot = est.check_total(total)
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise ValueError(f"iters must be a non-negative int, got {iters!r}")
    cliques: list[Clique] = [m.clique for m in meas]
    if warm_start is not None:
        if not isinstance(warm_start, (MbiModel, GraphicalModel)):
            raise ValueError(
                "warm_start must be an MbiModel or a GraphicalModel, got "
                f"{type(warm_start).__name__}"
            )
        if warm_start.sizes != sz:
            raise ValueError(
                f"warm_start has sizes {warm_start.sizes}, but the domain has sizes {sz}"
            )
        cliques += warm_start.cliques
    mbi = load_mbi()
    covered = {c for cl in cliques for c in cl}
    singletons = [(j,) for j in range(len(sz)) if j not in covered]
    model_cliques = _maximal([*(c for c in cliques if c), *singletons])
    steps = int(iters) if meas else 0
    with _x64():
        jnp = importlib.import_module("jax.numpy")
        domain = mbi.Domain(tuple(range(len(sz))), sz)
        linear = [mbi.LinearMeasurement(jnp.asarray(m.values), m.clique, m.stddev) for m in meas]
        base = mbi.marginal_loss.from_linear_measurements(linear, domain)
        # The same loss, over the model's cliques (measured, warm-start, singletons).
        loss = mbi.MarginalLossFn(model_cliques, base.loss_fn, base.data, base.lipschitz)
        warm = None
        if warm_start is not None:
            tables = {
                c: mbi.Factor(domain.project(c), jnp.asarray(t.reshape(est.clique_shape(sz, c))))
                for c, t in warm_start.potentials.items()
                if c
            }
            warm = mbi.CliqueVector(domain, list(tables), tables)
        mrf = mbi.estimation.MirrorDescent().estimate(
            domain, loss, tot, iters=steps, warm_start=warm
        )
    block = int(mbi.estimation.CALLBACK_EVERY)
    return MbiModel(sz, tot, cliques, mrf, -(-steps // block) * block)

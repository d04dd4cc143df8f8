"""The fitted graphical model: ``total · P_θ`` with ``P_θ(x) ∝ exp(Σ_C θ_C(x_C))``.

:class:`GraphicalModel` answers marginal queries (read off a calibrated junction-tree
node, or by variable elimination) and samples synthetic rows. All of it is
post-processing of released measurements. Units: marginals and totals are counts
(rows); potentials are natural logarithms.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from dpstream.tabular.estimation import (
    Clique,
    FloatArray,
    IntArray,
    check_clique,
    check_clique_in,
    check_sample_method,
    check_sample_size,
    check_sizes,
    check_total,
    clique_cells,
    clique_shape,
    round_rows,
    sample_rows,
)
from dpstream.tabular.model.factors import contract, expand, marginalize
from dpstream.tabular.model.inference import elimination_plan, leaves_first, propagate
from dpstream.tabular.model.junction_tree import (
    MAX_CLIQUE_CELLS,
    JunctionTree,
    build_junction_tree,
    given_tree,
    node_of,
    smallest_containing,
    tree_index,
)

#: Cells of the probability tables and elimination messages a model keeps of the
#: marginals asked of it (32 MB).
_CACHED_CELLS = 1 << 22


class GraphicalModel:
    """A fitted graphical model: ``total · P_θ`` with ``P_θ(x) ∝ exp(Σ_C θ_C(x_C))``.

    Construct it from log-potentials (``{clique: θ_C}``, each flattened in C order or
    shaped by the clique's sizes), or get one from
    :func:`~dpstream.tabular.model.fit.estimate_pgm`. Columns in no clique are uniform
    and independent of the rest. All queries are post-processing.

    ``junction_tree`` (optional): the nodes of the tree to compute on, as a model's
    ``junction_tree.nodes`` (a fit may keep a tree other than the greedy one: see
    :class:`~dpstream.tabular.model.growth.ModelTree`); they must be the maximal
    cliques of a chordal graph holding every clique, else a ValueError. Default: the
    greedy triangulation.

    Attributes:
        sizes: domain size of each column.
        total: the total count the marginals sum to.
        cliques: the cliques that carry potentials, sorted.
        junction_tree: the tree the marginals are computed on.
        iterations: line-search steps of the fit that produced the model (0 if built
            directly); ``losses[t]`` is the loss after step ``t``, ``losses[0]`` at start.
    """

    def __init__(
        self,
        sizes: Sequence[int],
        potentials: Mapping[Sequence[int], npt.ArrayLike],
        total: float,
        *,
        max_clique_cells: int = MAX_CLIQUE_CELLS,
        junction_tree: Sequence[Sequence[int]] | None = None,
    ) -> None:
        sz = check_sizes(sizes)
        theta: dict[Clique, FloatArray] = {}
        for key, value in potentials.items():
            cl = check_clique(key, "potential clique")
            check_clique_in(cl, sz, "potential clique")
            arr = np.array(value, dtype=np.float64, copy=True)
            if arr.size != clique_cells(sz, cl):
                raise ValueError(
                    f"potential of clique {cl} has {arr.size} values, but the clique has "
                    f"{clique_cells(sz, cl)} cells (sizes {clique_shape(sz, cl)})"
                )
            if not np.all(np.isfinite(arr)):
                raise ValueError(f"potential of clique {cl} must be finite")
            arr = arr.reshape(clique_shape(sz, cl))
            theta[cl] = theta[cl] + arr if cl in theta else arr
        if junction_tree is None:
            jt = build_junction_tree(sz, theta, max_clique_cells)
        else:
            jt = given_tree(sz, theta, junction_tree, max_clique_cells)
        self._init(sz, theta, check_total(total), jt, max_clique_cells)

    def _init(
        self,
        sizes: tuple[int, ...],
        theta: dict[Clique, FloatArray],
        total: float,
        jt: JunctionTree,
        max_clique_cells: int,
        probs: list[FloatArray] | None = None,
    ) -> None:
        self._sizes = sizes
        self._theta = {c: theta[c] for c in sorted(theta)}
        self._total = total
        self._jt = jt
        self._max_cells = max_clique_cells
        self._assign = {c: node_of(jt, sizes, c) for c in self._theta}
        if probs is None:
            probs, _ = propagate(jt, sizes, self._theta, self._assign)
        self._probs = probs
        # node i's table conditioned on its separator with neighbour j, by (i, j): the
        # factors of _eliminate, computed once per model (a stream asks many marginals)
        self._conditionals: dict[tuple[int, int], FloatArray] = {}
        # probability tables of cliques asked before (a stream asks every workload's, and
        # the one-way tables of their columns over and over), up to _CACHED_CELLS in all
        self._probabilities: dict[Clique, FloatArray] = {}
        # messages of variable elimination (:meth:`_eliminate`), by what determines them
        self._message_ids: dict[tuple[int, int, Clique, tuple[int, ...]], int] = {}
        self._messages: dict[int, FloatArray] = {}
        self._cached_cells = 0
        self.iterations = 0
        self.losses: tuple[float, ...] = ()
        self.step_scale = 1.0

    @classmethod
    def _from_fit(
        cls,
        sizes: tuple[int, ...],
        theta: dict[Clique, FloatArray],
        total: float,
        jt: JunctionTree,
        max_clique_cells: int,
        probs: list[FloatArray],
    ) -> GraphicalModel:
        model = cls.__new__(cls)
        model._init(sizes, theta, total, jt, max_clique_cells, probs)
        return model

    @property
    def sizes(self) -> tuple[int, ...]:
        return self._sizes

    @property
    def total(self) -> float:
        return self._total

    @property
    def cliques(self) -> tuple[Clique, ...]:
        return tuple(self._theta)

    @property
    def junction_tree(self) -> JunctionTree:
        return self._jt

    @property
    def potentials(self) -> dict[Clique, FloatArray]:
        """Copies of the log-potentials ``θ_C``, flattened in C order."""
        return {c: t.reshape(-1).copy() for c, t in self._theta.items()}

    def __repr__(self) -> str:
        widest = max(clique_cells(self._sizes, n) for n in self._jt.nodes)
        return (
            f"GraphicalModel(columns={len(self._sizes)}, cliques={len(self._theta)}, "
            f"junction_tree_nodes={len(self._jt.nodes)}, widest_node_cells={widest}, "
            f"total={self._total:g})"
        )

    def marginal(self, clique: Sequence[int]) -> FloatArray:
        """Counts of the marginal of ``clique``, flattened in C order; they sum to ``total``.

        A clique inside one junction-tree node is read off that node; otherwise the
        marginal is computed by variable elimination over the smallest subtree that
        covers it (a ValueError if an intermediate table would exceed
        ``max_clique_cells``).
        """
        cl = check_clique(clique)
        check_clique_in(cl, self._sizes)
        return self._probability(cl).reshape(-1) * self._total

    def _probability(self, cl: Clique) -> FloatArray:
        """Probability table of ``cl`` (axes in column order): read off a node, the product
        of its parts' tables when its columns lie in independent parts of the tree (joined
        only by empty separators), else by :meth:`_eliminate`. Not to be written to: it
        may be a node's table or a cached one."""
        out = self._probabilities.get(cl)
        if out is None:
            out = self._compute_probability(cl)
            if self._cached_cells + out.size <= _CACHED_CELLS:
                self._probabilities[cl] = out
                self._cached_cells += out.size
        return out

    def _compute_probability(self, cl: Clique) -> FloatArray:
        node = smallest_containing(self._jt, self._sizes, cl)
        if node is not None:
            return np.asarray(marginalize(self._probs[node], self._jt.nodes[node], cl))
        part = tree_index(self._jt, self._sizes).part
        groups: dict[int, list[int]] = {}
        for c in cl:
            groups.setdefault(part[c], []).append(c)
        if len(groups) == 1:
            return self._eliminate(cl)
        out = np.ones(clique_shape(self._sizes, cl))
        for cols in groups.values():
            out = out * expand(self._probability(tuple(cols)), tuple(cols), cl, self._sizes)
        return out

    def _eliminate(self, target: Clique) -> FloatArray:
        """Probability table of ``target`` by variable elimination on a subtree.

        The joint of the columns of a subtree of a calibrated junction tree is the
        root's table times each other node's table conditioned on its separator; the
        factors of the smallest subtree covering ``target`` are contracted by
        :func:`numpy.einsum` along a greedy path whose intermediates are checked
        against ``max_clique_cells``.
        """
        jt, sizes = self._jt, self._sizes
        plan = elimination_plan(jt, sizes, target)
        parent = dict(plan)
        factors: dict[int, tuple[Clique, FloatArray]] = {}
        for i, p in plan:
            node, table = jt.nodes[i], self._probs[i]
            if p >= 0:
                cond = self._conditionals.get((i, p))
                if cond is None:
                    sep = tuple(sorted(set(node) & set(jt.nodes[p])))
                    sep_marg = expand(marginalize(table, node, sep), sep, node, sizes)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        cond = np.where(sep_marg > 0, table / sep_marg, 0.0)
                    self._conditionals[(i, p)] = cond
                table = cond
            factors[i] = (node, table)
        # Eliminate leaf-first along the subtree: a node's message to its parent keeps
        # only the separator and the target columns seen so far, so intermediates stay
        # near (separator × target) cells; one global einsum path can blow up instead.
        # A message is kept under what determines it (node, parent, scope and the
        # messages it was made of), so targets that share a column reuse its messages.
        want = set(target)
        messages: dict[int, list[tuple[Clique, FloatArray]]] = {i: [] for i, _ in plan}
        made_of: dict[int, list[int]] = {i: [] for i, _ in plan}
        for i in leaves_first(plan):
            ops = [factors[i], *messages[i]]
            involved = set().union(*(set(c) for c, _ in ops))
            p = parent[i]
            keep = involved & want
            if p >= 0:
                keep |= involved & set(jt.nodes[p])
            scope = tuple(sorted(keep))
            if p < 0:
                return contract(ops, scope, sizes, self._max_cells)
            key = (i, p, scope, tuple(made_of[i]))
            ident = self._message_ids.setdefault(key, len(self._message_ids))
            kept = self._messages.get(ident)
            if kept is None:
                kept = contract(ops, scope, sizes, self._max_cells)
                if self._cached_cells + kept.size <= _CACHED_CELLS:
                    self._messages[ident] = kept
                    self._cached_cells += kept.size
            messages[p].append((scope, kept))
            made_of[p].append(ident)
        raise AssertionError("an elimination plan has a root")  # pragma: no cover

    def sample(self, n: int, rng: np.random.Generator, *, method: str = "iid") -> IntArray:
        """``n`` synthetic rows ``(n, d)`` (int64 codes) from ``P_θ`` (post-processing).

        Forward sampling along the junction tree: the root node's cells from its
        marginal, then each node's new columns given its separator with its parent.
        ``method="iid"`` draws the rows independently. ``method="round"`` allocates
        them by controlled rounding (:func:`~dpstream.tabular.estimation.round_rows`):
        each root cell gets the floor or the ceiling of ``n·p(cell)`` rows; the rows
        of each separator value (``c`` of them) get the new columns' values rounded
        from ``c·p(new | separator)`` and shuffled within the group; the rows are
        shuffled at the end. Every cell's expected count is ``n·p(cell)`` either way;
        ``"round"`` has far less spread on the model's marginals.
        """
        n = check_sample_size(n)
        rounded = check_sample_method(method) == "round"
        jt, sizes = self._jt, self._sizes
        if n == 0:
            return np.zeros((n, len(sizes)), dtype=np.int64)
        # column-major while the columns are drawn one block at a time (contiguous reads
        # and writes of a column), row-major when returned
        out = np.zeros((n, len(sizes)), dtype=np.int64, order="F")
        for i in jt.order:
            node = jt.nodes[i]
            sep = jt.separators[i]
            new = tuple(c for c in node if c not in sep)
            if not new:
                continue
            table = self._probs[i]
            perm = [node.index(c) for c in sep] + [node.index(c) for c in new]
            n_sep = clique_cells(sizes, sep)
            n_new = clique_cells(sizes, new)
            cond = np.ascontiguousarray(np.transpose(table, perm)).reshape(n_sep, n_new)
            if not sep:
                if rounded:
                    flat = round_rows(cond, None, n, rng)
                else:
                    flat = sample_rows(cond.reshape(-1), n, rng)
            else:
                sep_idx = np.ravel_multi_index(
                    tuple(out[:, c] for c in sep), clique_shape(sizes, sep)
                )
                if rounded:
                    flat = round_rows(cond, sep_idx, n, rng)
                else:
                    flat = _sample_conditional(cond, sep_idx, rng)
            cols = np.unravel_index(flat, clique_shape(sizes, new))
            for c, v in zip(new, cols, strict=True):
                out[:, c] = v
        if rounded:
            out = out[rng.permutation(n)]
        return np.ascontiguousarray(out)


def _sample_conditional(
    joint: FloatArray, rows: npt.NDArray[np.intp], rng: np.random.Generator
) -> npt.NDArray[np.intp]:
    """One draw of a column index from row ``rows[k]`` of ``joint`` (normalised per row).

    All rows are searched at once: row ``r``'s cumulative distribution is shifted by
    ``r`` and concatenated, so a uniform ``u`` becomes ``r + u``.
    """
    n_rows, n_cols = joint.shape
    mass = joint.sum(axis=1, keepdims=True)
    cond = np.where(mass > 0, joint / np.where(mass > 0, mass, 1.0), 1.0 / n_cols)
    cum = np.cumsum(cond, axis=1)
    cum[:, -1] = 1.0
    cum += np.arange(n_rows, dtype=np.float64)[:, None]
    pos = np.searchsorted(cum.reshape(-1), rows + rng.random(rows.size), side="right")
    idx: npt.NDArray[np.intp] = np.clip(pos - rows * n_cols, 0, n_cols - 1)
    return idx

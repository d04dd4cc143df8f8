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
"""

from __future__ import annotations

import functools
import importlib
import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from dpstream.tabular.estimation import (
    Clique,
    FloatArray,
    IntArray,
    Measurement,
    check_clique,
    check_clique_in,
    check_measurements,
    check_sample_method,
    check_sample_size,
    check_sizes,
    check_total,
    clique_cells,
    clique_shape,
    round_rows,
    sample_rows,
)

try:  # the kernels numpy.einsum runs on a contraction path (numpy ≥ 2.4)
    _einsumfunc: Any = importlib.import_module("numpy._core.einsumfunc")
except ImportError:  # pragma: no cover - numpy 1.x
    _einsumfunc = None
#: ``None`` on older numpy, where ``np.einsum`` plans each call.
_bmm_einsum: Any = getattr(_einsumfunc, "bmm_einsum", None)
_c_einsum: Any = getattr(_einsumfunc, "c_einsum", None)

#: Default bound on the cells of one junction-tree clique (80 MB of float64).
MAX_CLIQUE_CELLS = 10**7


# ---------------------------------------------------------------------------------------
# Junction tree
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JunctionTree:
    """A junction tree over the columns ``0 .. d-1``.

    ``nodes[i]`` is a maximal clique of the triangulated graph; ``parent[i]`` is the
    index of its parent (``-1`` for the root, node 0); ``order`` lists the nodes root
    first, every parent before its children; ``separators[i]`` is
    ``nodes[i] ∩ nodes[parent[i]]`` (``()`` for the root or across components).
    """

    nodes: tuple[Clique, ...]
    parent: tuple[int, ...]
    order: tuple[int, ...]
    separators: tuple[Clique, ...]

    @functools.cached_property
    def children(self) -> tuple[tuple[int, ...], ...]:
        kids: list[list[int]] = [[] for _ in self.nodes]
        for i in self.order[1:]:
            kids[self.parent[i]].append(i)
        return tuple(tuple(k) for k in kids)


def _elimination_cliques(sizes: tuple[int, ...], adj: list[set[int]], rule: str) -> list[Clique]:
    """Cliques created by greedy elimination (``rule`` ``"min-fill"`` or ``"min-size"``).

    Min-fill counts each fill-in edge ``(a, b)`` with weight ``sizes[a]·sizes[b]``;
    ties break on the cells of the eliminated clique, then on the column index.
    """
    graph = [set(a) for a in adj]
    alive = set(range(len(sizes)))
    out: list[Clique] = []
    while alive:
        best: tuple[int, int, int] | None = None
        for v in sorted(alive):
            nbrs = sorted(graph[v])
            fill = sum(
                sizes[a] * sizes[b] for a, b in itertools.combinations(nbrs, 2) if b not in graph[a]
            )
            cells = sizes[v] * math.prod(sizes[a] for a in nbrs)
            key = (fill, cells, v) if rule == "min-fill" else (cells, fill, v)
            if best is None or key < best:
                best = key
        assert best is not None
        v = best[2]
        nbrs = sorted(graph[v])
        for a, b in itertools.combinations(nbrs, 2):
            graph[a].add(b)
            graph[b].add(a)
        for a in nbrs:
            graph[a].discard(v)
        alive.discard(v)
        out.append(tuple(sorted([v, *nbrs])))
    return out


def _maximal(cliques: Iterable[Clique]) -> list[Clique]:
    """The cliques not contained in another one, sorted."""
    by_size = sorted(set(cliques), key=lambda c: (-len(c), c))
    kept: list[Clique] = []
    for c in by_size:
        if not any(set(c) <= set(k) for k in kept):
            kept.append(c)
    return sorted(kept)


def build_junction_tree(
    sizes: Sequence[int],
    cliques: Iterable[Sequence[int]],
    max_clique_cells: int = MAX_CLIQUE_CELLS,
) -> JunctionTree:
    """Junction tree of the graph whose edges join the columns of each clique.

    The graph is triangulated by greedy elimination, with both the weighted min-fill
    and the min-size rules; the tree with fewer total cells is kept. Its nodes are
    joined by a maximum-weight spanning tree on separator sizes (a valid junction
    tree for the cliques of a chordal graph; disconnected parts are joined by empty
    separators). Raises ValueError if a node would exceed ``max_clique_cells`` cells.
    """
    sz = check_sizes(sizes)
    checked = [_checked_clique(sz, c, f"cliques[{i}]") for i, c in enumerate(cliques)]
    nodes = _greedy_nodes(sz, checked)
    _check_node_cells(sz, nodes, max_clique_cells)
    return _tree_of_nodes(sz, nodes)


def _checked_clique(sizes: tuple[int, ...], clique: Sequence[int], name: str) -> Clique:
    cl = check_clique(clique, name)
    check_clique_in(cl, sizes, name)
    return cl


def _greedy_nodes(sizes: tuple[int, ...], cliques: Iterable[Clique]) -> list[Clique]:
    """Maximal cliques of the better greedy triangulation (fewer cells, then a smaller
    largest node) of the graph joining the columns of each clique; every column is in
    one at least."""
    adj: list[set[int]] = [set() for _ in sizes]
    for cl in cliques:
        for a, b in itertools.combinations(cl, 2):
            adj[a].add(b)
            adj[b].add(a)
    best: list[Clique] | None = None
    best_cost: tuple[int, int] | None = None
    for rule in ("min-fill", "min-size"):
        nodes = _maximal(_elimination_cliques(sizes, adj, rule))
        cells = [clique_cells(sizes, n) for n in nodes]
        cost = (sum(cells), max(cells))
        if best_cost is None or cost < best_cost:
            best, best_cost = nodes, cost
    assert best is not None
    return best


def _check_node_cells(sizes: tuple[int, ...], nodes: Iterable[Clique], max_cells: int) -> None:
    for n in nodes:
        if clique_cells(sizes, n) > max_cells:
            raise ValueError(
                f"the junction tree needs clique {n} with sizes {clique_shape(sizes, n)}, "
                f"{clique_cells(sizes, n)} cells > max_clique_cells={max_cells}; "
                "measure fewer or smaller marginals, or raise max_clique_cells"
            )


def _tree_of_nodes(sizes: tuple[int, ...], nodes: Sequence[Clique]) -> JunctionTree:
    """The junction tree on ``nodes``, the maximal cliques of a chordal graph (sorted):
    a maximum spanning tree on separator sizes (Kruskal; ties to separators with fewer
    cells, then to lower node indices), walked breadth-first from node 0."""
    edges = sorted(
        (
            (-len(set(a) & set(b)), clique_cells(sizes, tuple(set(a) & set(b))), i, j)
            for (i, a), (j, b) in itertools.combinations(enumerate(nodes), 2)
        ),
    )
    root_of = list(range(len(nodes)))

    def find(i: int) -> int:
        while root_of[i] != i:
            root_of[i] = root_of[root_of[i]]
            i = root_of[i]
        return i

    nbrs: list[list[int]] = [[] for _ in nodes]
    for _, _, i, j in edges:
        ri, rj = find(i), find(j)
        if ri != rj:
            root_of[ri] = rj
            nbrs[i].append(j)
            nbrs[j].append(i)
    parent = [-1] * len(nodes)
    order = [0]
    seen = {0}
    for i in order:  # breadth-first; the list grows while we walk it
        for j in sorted(nbrs[i]):
            if j not in seen:
                seen.add(j)
                parent[j] = i
                order.append(j)
    seps = tuple(
        () if parent[i] < 0 else tuple(sorted(set(n) & set(nodes[parent[i]])))
        for i, n in enumerate(nodes)
    )
    return JunctionTree(tuple(nodes), tuple(parent), tuple(order), seps)


def junction_tree_size(sizes: Sequence[int], cliques: Iterable[Sequence[int]]) -> int:
    """Total cells of the greedy junction tree of ``cliques`` (:func:`build_junction_tree`).

    No ``max_clique_cells`` bound is applied. A stream's select step asks
    :class:`ModelTree` instead, which answers without a rebuild per candidate.
    """
    sz = check_sizes(sizes)
    tree = build_junction_tree(sz, cliques, max_clique_cells=math.prod(sz))
    return sum(clique_cells(sz, n) for n in tree.nodes)


def tree_cells(sizes: Sequence[int], tree: JunctionTree) -> int:
    """Total cells of the nodes of ``tree`` (the model's size that ``max_model_cells`` bounds)."""
    return sum(clique_cells(sizes, n) for n in tree.nodes)


#: An insertion candidate: added cells, order key, columns added per node, new node.
_Option = tuple[int, tuple[int, int], dict[int, set[int]], Clique | None]


class ModelTree:
    """The junction tree of a model grown one clique at a time, and the cost of a clique.

    What the select step of a stream asks of every candidate workload: would the model
    stay within ``max_model_cells`` cells if it joined? A greedy triangulation per
    candidate answers exactly but costs a rebuild each (thousands per step at 100
    columns). This answers from the current tree instead:

    * a clique inside one node costs nothing: the tree does not change;
    * any other clique is *inserted*: a node ``r`` is chosen, and each column of the
      clique that ``r`` lacks is added to the nodes on the tree path from its nearest
      holder to ``r``, so that ``r`` holds the clique and every column's nodes stay a
      connected subtree (a valid junction tree of the larger graph). Parts of the tree
      joined by empty separators are independent: a column held in another part is
      added to ``r`` alone (after the part's columns of the clique are gathered in one
      of its nodes the same way), and ``r`` is linked to that node. ``r`` is the node of
      least added cells (then the lowest index) among the nodes on the paths joining
      the clique's columns. Nodes that become subsets of others are dropped.

    :meth:`added` is that insertion and :meth:`cells_with` its cells, without building
    it. :func:`estimate_pgm` grows the same chain from its warm start's tree with the
    fit's new cliques, in order, and keeps it when it has fewer cells than the greedy
    triangulation of all its cliques. A stream that admits a candidate only if
    :meth:`cells_with` is within ``max_model_cells``, and fits from the model it checked
    against, therefore never gets a larger model. Everything here reads only the
    public structure. Instances are immutable; their answers are cached.
    """

    def __init__(self, sizes: Sequence[int], tree: JunctionTree | None = None) -> None:
        sz = check_sizes(sizes)
        if tree is None:  # no clique yet: every column a node of its own
            tree = _tree_of_nodes(sz, [(c,) for c in range(len(sz))])
        self.sizes = sz
        self.tree = tree
        self.cells = tree_cells(sz, tree)
        self._node_cells = [clique_cells(sz, n) for n in tree.nodes]
        self._holders: list[set[int]] = [set() for _ in sz]
        for i, n in enumerate(tree.nodes):
            for c in n:
                self._holders[c].add(i)
        depth = [0] * len(tree.nodes)
        part = list(range(len(tree.nodes)))  # the part (joined by non-empty separators)
        for i in tree.order[1:]:
            p = tree.parent[i]
            depth[i] = depth[p] + 1
            if tree.separators[i]:
                part[i] = part[p]
        self._depth = depth
        self._part = part
        # per column: its first holder and its part; per part: the cells of its nodes
        self._first = [min(h) for h in self._holders]
        self._column_part = [part[i] for i in self._first]
        self._part_cells: dict[int, int] = {}
        for i, p in enumerate(part):
            self._part_cells[p] = self._part_cells.get(p, 0) + self._node_cells[i]
        self._cells_with: dict[Clique, int] = {}
        self._children: dict[Clique, ModelTree] = {}
        self._paths: dict[tuple[int, int], list[int]] = {}
        self._node_sets = [frozenset(n) for n in tree.nodes]

    def covers(self, clique: Clique) -> bool:
        """Whether ``clique`` lies inside one node."""
        if not clique:
            return True
        return bool(set.intersection(*(self._holders[c] for c in clique)))

    def cells_with(self, clique: Clique) -> int:
        """The cells of :meth:`added` ``(clique)``, without building it."""
        out = self._cells_with.get(clique)
        if out is None:
            out = self.cells
            if not self.covers(clique):
                out += self._exact_extra(*self._insertion(clique))
            self._cells_with[clique] = out
        return out

    def fits(self, clique: Clique, limit: int) -> bool:
        """Whether :meth:`cells_with` ``(clique)`` is at most ``limit``, the same answer,
        found without the insertion search while a bound settles it.

        The bound: :meth:`_insertion` picks the option of least added cells (every node
        counted), and among its options is one that adds to each node it changes only
        columns of the clique, on nodes of the parts that hold the clique's columns (a
        node ``r`` of one of them gets the clique). Each such node grows at most
        ``|clique|``-fold (``|clique|`` its cells), and dropping redundant nodes only
        lowers the count, so ``cells_with ≤ cells + (|clique| − 1) · (cells of those
        parts)``."""
        known = self._cells_with.get(clique)
        if known is not None:
            return known <= limit
        parts = {self._column_part[c] for c in clique}
        grows = clique_cells(self.sizes, clique) - 1
        if self.cells + grows * sum(self._part_cells[p] for p in parts) <= limit:
            return True
        return self.cells_with(clique) <= limit

    def added(self, clique: Sequence[int]) -> ModelTree:
        """The tree with ``clique`` inserted (itself if the clique lies in a node)."""
        cl = _checked_clique(self.sizes, clique, "clique")
        if cl in self._children:
            return self._children[cl]
        if self.covers(cl):
            out = self
        else:
            grow, new = self._insertion(cl)
            nodes = [
                tuple(sorted(set(n) | grow[i])) if i in grow else n
                for i, n in enumerate(self.tree.nodes)
            ]
            if new is not None:
                nodes.append(new)
            out = ModelTree(self.sizes, _tree_of_nodes(self.sizes, _maximal(nodes)))
        self._children[cl] = out
        return out

    def _path(self, a: int, b: int) -> list[int]:
        """Nodes on the tree path from node ``a`` to node ``b``, both included (cached; not
        to be written to)."""
        out = self._paths.get((a, b))
        if out is None:
            out = self._paths[(a, b)] = self._walk(a, b)
        return out

    def _walk(self, a: int, b: int) -> list[int]:
        parent, depth = self.tree.parent, self._depth
        head: list[int] = []
        tail: list[int] = []
        while a != b:
            if depth[a] >= depth[b]:
                head.append(a)
                a = parent[a]
            else:
                tail.append(b)
                b = parent[b]
        return [*head, a, *reversed(tail)]

    def _targets(self, cols: list[int]) -> tuple[list[int], list[int]]:
        """Where ``cols`` (columns of one part) may meet: nodes (the holders of a single
        column; else the nodes on the paths between each two columns' subtrees, or the
        first node they share) and edges (by child node) on those paths."""
        holders = self._holders
        if len(cols) == 1:
            return sorted(holders[cols[0]]), []
        nodes: set[int] = set()
        edges: set[int] = set()
        parent = self.tree.parent
        for a, b in itertools.combinations(cols, 2):
            path = self._path(self._first[a], self._first[b])
            both = [i for i in path if i in holders[a] and i in holders[b]]
            if both:
                nodes.add(both[0])
                continue
            start = max(k for k, i in enumerate(path) if i in holders[a])
            end = next(k for k in range(start, len(path)) if path[k] in holders[b])
            seg = path[start : end + 1]
            nodes.update(seg)
            edges.update(u if parent[u] == v else v for u, v in itertools.pairwise(seg))
        return sorted(nodes), sorted(edges)

    def _grow(self, cols: Iterable[int], r: int, avoid: int = -1) -> dict[int, set[int]]:
        """Columns added per node to bring ``cols`` (of ``r``'s part) into node ``r``: each
        along the path from its nearest holder (where that path enters its subtree).
        ``avoid``: a neighbour of ``r``; columns whose path runs through it are left out
        (the other end of an edge brings them)."""
        grow: dict[int, set[int]] = {}
        for c in cols:
            held = self._holders[c]
            if r in held:
                continue
            path = self._path(r, self._first[c])
            if len(path) > 1 and path[1] == avoid:
                continue
            for i in path:
                if i in held:
                    break
                grow.setdefault(i, set()).add(c)
        return grow

    def _extra(self, grow: Mapping[int, set[int]], new: Clique | None = None) -> int:
        """Cells added by ``grow`` and the ``new`` node, counting every node (none dropped)."""
        sizes, cells = self.sizes, self._node_cells
        added = 0
        for i, cols in grow.items():
            factor = 1
            for c in cols:
                factor *= sizes[c]
            added += cells[i] * (factor - 1)
        return added + (clique_cells(sizes, new) if new is not None else 0)

    def _exact_extra(self, grow: Mapping[int, set[int]], new: Clique | None) -> int:
        """Cells added by an insertion once the nodes it makes redundant are dropped (a
        node inside a changed one, or the later of two equal ones, as :func:`_maximal`)."""
        sets = self._node_sets
        changed = {i: sets[i] | cols for i, cols in grow.items()}
        if new is not None:
            changed[len(self.tree.nodes)] = frozenset(new)
        near = {j for n in changed.values() for c in n for j in self._holders[c]}
        dropped = 0
        pairs = list(changed.items())
        for j in near | changed.keys():
            nj = changed.get(j) or sets[j]
            for i, ni in pairs:
                if i != j and nj <= ni and (nj != ni or i < j):
                    dropped += clique_cells(self.sizes, tuple(nj))
                    break
        return self._extra(grow, new) - dropped

    def _insertion(self, clique: Clique) -> tuple[dict[int, set[int]], Clique | None]:
        """The cheapest insertion of ``clique`` (class docstring): the columns added per
        node, and the new node if one is made. The candidates: a node ``r`` that gets the
        clique; a new node ``separator ∪ clique`` on an edge, whose two ends bring the
        clique's columns from their sides; a new node ``clique`` linked to each part. The
        least added cells (every node counted) wins, then the first in that order."""
        parts: dict[int, list[int]] = {}
        for c in clique:
            parts.setdefault(self._column_part[c], []).append(c)
        targets = {k: self._targets(cols) for k, cols in parts.items()}
        # each part's columns brought to each of its target nodes (read, never written)
        to_node = {k: {r: self._grow(cols, r) for r in targets[k][0]} for k, cols in parts.items()}
        # each part's columns gathered in the cheapest of its nodes, for the other parts
        gathered: dict[int, dict[int, set[int]]] = {}
        if len(parts) > 1:
            for k in parts:
                gathered[k] = min(to_node[k].values(), key=self._extra)
        options: list[_Option] = []
        for k, cols in parts.items():
            rest = {i: g for j, gs in gathered.items() if j != k for i, g in gs.items()}
            others = {c for c in clique if c not in cols}
            for r in targets[k][0]:
                grow = {**rest, **to_node[k][r]}
                if others:
                    grow[r] = grow.get(r, set()) | others
                options.append((self._extra(grow), (0, r), grow, None))
            for i in targets[k][1]:
                p = self.tree.parent[i]
                new = tuple(sorted(set(self.tree.separators[i]) | set(clique)))
                grow = {**rest, **self._grow(cols, i, avoid=p), **self._grow(cols, p, avoid=i)}
                options.append((self._extra(grow, new), (1, i), grow, new))
        if len(parts) > 1:
            grow = {i: g for gs in gathered.values() for i, g in gs.items()}
            options.append((self._extra(grow, clique), (2, 0), grow, clique))
        _, _, chosen, made = min(options, key=lambda o: o[:2])
        return chosen, made


def _given_tree(
    sizes: tuple[int, ...],
    cliques: Iterable[Clique],
    nodes: Sequence[Sequence[int]],
    max_clique_cells: int,
) -> JunctionTree:
    """The junction tree on given ``nodes``, or a ValueError if they are not the maximal
    cliques of a chordal graph that hold every column and every clique."""
    checked = [_checked_clique(sizes, n, f"junction_tree[{i}]") for i, n in enumerate(nodes)]
    if not checked or _maximal(checked) != sorted(checked):
        raise ValueError("junction_tree must list distinct maximal cliques")
    jt = _tree_of_nodes(sizes, sorted(checked))
    for col in range(len(sizes)):
        holders = {i for i, n in enumerate(jt.nodes) if col in n}
        # running intersection: the nodes holding c are a connected subtree
        tops = [i for i in holders if jt.parent[i] not in holders]
        if len(tops) != 1:
            raise ValueError(f"junction_tree is not a junction tree for column {col}")
    for c in cliques:
        if _smallest_containing(jt, sizes, c) is None:
            raise ValueError(f"clique {c} lies in no node of junction_tree")
    _check_node_cells(sizes, jt.nodes, max_clique_cells)
    return jt


@functools.lru_cache(maxsize=4)  # a stream needs the current model's; each holds W answers
def model_tree(sizes: tuple[int, ...], tree: JunctionTree | None = None) -> ModelTree:
    """The :class:`ModelTree` of ``tree`` (shared, so that its cached answers are reused by
    every select step and fit that starts from the same model)."""
    return ModelTree(sizes, tree)


def _model_nodes(
    sizes: tuple[int, ...], cliques: Sequence[Clique], base: JunctionTree | None
) -> list[Clique]:
    """Nodes of the junction tree of a fit over ``cliques``: the greedy triangulation,
    unless inserting the cliques one by one into ``base`` (the warm start's tree, or one
    node per column) gives fewer cells (:class:`ModelTree`)."""
    nodes = _greedy_nodes(sizes, cliques)
    chain = model_tree(sizes, base)
    for c in cliques:
        chain = chain.added(c)
    if chain.cells < sum(clique_cells(sizes, n) for n in nodes):
        return list(chain.tree.nodes)
    return nodes


# ---------------------------------------------------------------------------------------
# Tables over cliques (axes in increasing column order)
# ---------------------------------------------------------------------------------------


def _expand(table: FloatArray, cols: Clique, target: Clique, sizes: tuple[int, ...]) -> FloatArray:
    """``table`` over ``cols`` reshaped to broadcast against a table over ``target``."""
    return table.reshape(_expand_shape(cols, target, sizes))


@functools.lru_cache(maxsize=1 << 16)
def _expand_shape(cols: Clique, target: Clique, sizes: tuple[int, ...]) -> tuple[int, ...]:
    inside = set(cols)
    return tuple(sizes[c] if c in inside else 1 for c in target)


def _axes_not_in(cols: Clique, keep: Iterable[int]) -> tuple[int, ...]:
    return _axes_outside(cols, keep if isinstance(keep, tuple) else tuple(keep))


@functools.lru_cache(maxsize=1 << 16)
def _axes_outside(cols: Clique, keep: tuple[int, ...]) -> tuple[int, ...]:
    k = set(keep)
    return tuple(i for i, c in enumerate(cols) if c not in k)


def _sum_out(table: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """``table`` summed over ``axes`` (increasing), the other axes kept in order.

    numpy reduces over axes that are neither leading nor trailing with short strided
    inner loops: 5–12 times slower, on the node tables of a stream, than one contiguous
    copy with the reduced axes innermost (outermost when the kept cells outnumber the
    reduced ones) followed by a 2-D reduction along the long dimension.
    """
    if not axes:
        return table
    order, flat, axis, shape = _sum_plan(table.shape, axes)
    moved = table if order is None else table.transpose(order)
    out: FloatArray = np.ascontiguousarray(moved).reshape(flat).sum(axis=axis).reshape(shape)
    return out


@functools.lru_cache(maxsize=1 << 16)
def _sum_plan(
    dims: tuple[int, ...], axes: tuple[int, ...]
) -> tuple[tuple[int, ...] | None, tuple[int, int], int, tuple[int, ...]]:
    """How :func:`_sum_out` reduces a table of shape ``dims`` over ``axes``: the transpose
    (``None``: none), the 2-D shape, the axis summed and the result's shape."""
    kept = tuple(i for i in range(len(dims)) if i not in axes)
    shape = tuple(dims[i] for i in kept)
    n_kept = math.prod(shape)
    n_reduced = math.prod(dims) // n_kept if n_kept else 0
    if n_reduced >= n_kept:
        order, axis, flat = kept + axes, 1, (n_kept, n_reduced)
    else:
        order, axis, flat = axes + kept, 0, (n_reduced, n_kept)
    return (None if order == tuple(range(len(dims))) else order), flat, axis, shape


def _marginalize(table: FloatArray, cols: Clique, keep: Iterable[int]) -> FloatArray:
    """``table`` over ``cols`` summed over the columns not in ``keep``."""
    return _sum_out(table, _axes_not_in(cols, keep))


#: Smallest separator sum the scaled propagation accepts. Every cell it computes is a
#: product of factors in [0, 1], so an underflow costs at most ~1e-307 per cell; a sum
#: of ≤ 1e7 cells at least _TINY keeps its relative error below 1e-50.
_TINY = 1e-250
#: Largest total range of the potentials of one node exponentiated factor by factor:
#: no cell of the product is then below exp(-_SPAN) ≈ 1e-261 (no underflow).
_SPAN = 600.0


def _product(
    node: Clique, sizes: tuple[int, ...], factors: list[tuple[Clique, FloatArray]]
) -> FloatArray:
    """``Π_C factor_C`` as a table over ``node`` (each ``C`` a subset of ``node``).

    Built with the node's columns laid out by increasing size and transposed back at the
    end: a broadcast product then runs its inner loop over the largest column rather
    than over the last one (often income, 2 categories), 2–3 times faster on the nodes
    of a stream even with the final copy.
    """
    if not factors:
        return np.ones(clique_shape(sizes, node))
    layout, steps, back = _product_plan(node, tuple(c for c, _ in factors), sizes)
    table = np.empty(layout)
    for k, ((_, f), (shape, perm, spread)) in enumerate(zip(factors, steps, strict=True)):
        f = f.reshape(shape).transpose(perm).reshape(spread)
        if k == 0:
            table[...] = f
        else:
            table *= f
    if back is None:
        return table
    out: FloatArray = np.ascontiguousarray(table.transpose(back))
    return out


@functools.lru_cache(maxsize=1 << 14)
def _product_plan(
    node: Clique, cliques: tuple[Clique, ...], sizes: tuple[int, ...]
) -> tuple[
    tuple[int, ...],
    tuple[tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]], ...],
    tuple[int, ...] | None,
]:
    """:func:`_product`'s layout: the table's shape (the node's columns by increasing
    size), per factor its shape, transpose and broadcast shape, and the transpose back
    (``None``: the layout is the node's order)."""
    layout = tuple(sorted(node, key=lambda col: (sizes[col], col)))
    steps = []
    for c in cliques:
        inner = [col for col in layout if col in c]
        steps.append(
            (
                clique_shape(sizes, c),
                tuple(c.index(col) for col in inner),
                tuple(sizes[col] if col in c else 1 for col in layout),
            )
        )
    back = None if layout == node else tuple(layout.index(col) for col in node)
    return tuple(sizes[col] for col in layout), tuple(steps), back


def _node_factors(
    jt: JunctionTree,
    sizes: tuple[int, ...],
    theta: Mapping[Clique, FloatArray],
    assign: Mapping[Clique, int],
) -> tuple[list[FloatArray], list[float]]:
    """``exp`` of each node's log-potential, scaled: tables ``F_i`` and logs ``s_i``
    with ``exp(ψ_i) = exp(s_i) · F_i`` and ``max F_i ≤ 1``.

    A node is the product of the exponentiated ``θ_C`` assigned to it (one ``exp`` per
    clique cell rather than per node cell; the cliques are far smaller than the nodes)
    unless their ranges add up to more than ``_SPAN``: then its log-potential is summed
    and exponentiated about its maximum, so only cells below exp(-745) of it vanish.
    """
    assigned: list[list[Clique]] = [[] for _ in jt.nodes]
    for c in theta:
        assigned[assign[c]].append(c)
    tables: list[FloatArray] = []
    scales: list[float] = []
    for i, node in enumerate(jt.nodes):
        shape = clique_shape(sizes, node)
        tops = [float(theta[c].max()) for c in assigned[i]]
        span = sum(top - float(theta[c].min()) for c, top in zip(assigned[i], tops, strict=True))
        if span <= _SPAN:
            factors = [
                (c, np.exp(theta[c] - top)) for c, top in zip(assigned[i], tops, strict=True)
            ]
            table = _product(node, sizes, factors)
            scales.append(sum(tops))
        else:
            psi = np.zeros(shape)
            for c in assigned[i]:
                psi += _expand(theta[c], c, node, sizes)
            top = float(psi.max())
            table = np.exp(psi - top)
            scales.append(top)
        tables.append(table)
    return tables, scales


def _calibrate(
    jt: JunctionTree, sizes: tuple[int, ...], tables: list[FloatArray], scales: list[float]
) -> tuple[list[FloatArray], float] | None:
    """Sum-product on the junction tree with scaled probability tables (Hugin form).

    ``exp(scales[i]) · tables[i]`` is node ``i``'s potential (``tables`` are consumed).
    Messages are separator sums of products, rescaled to a maximum of 1, so each node
    costs products and sums but no ``exp``. Returns each node's probability table and
    log Z, or ``None`` if a separator sum falls below ``_TINY``, where underflow could
    matter (the caller then propagates in log space).
    """
    kids = jt.children
    n = len(jt.nodes)
    sums: list[FloatArray | None] = [None] * n
    messages: list[FloatArray | None] = [None] * n
    log_up = [0.0] * n
    log_node = list(scales)
    for i in reversed(jt.order):
        node, table = jt.nodes[i], tables[i]
        for k in kids[i]:
            msg = messages[k]
            assert msg is not None
            table *= _expand(msg, jt.separators[k], node, sizes)
            log_node[i] += log_up[k]
        if jt.parent[i] >= 0:
            r = _marginalize(table, node, jt.separators[i])
            if not float(r.min()) >= _TINY:
                return None
            top = float(r.max())
            sums[i], messages[i] = r, r / top
            log_up[i] = log_node[i] + math.log(top)
    root = jt.order[0]
    z = float(tables[root].sum())
    if not z >= _TINY:
        return None
    tables[root] /= z
    for i in jt.order[1:]:
        p, sep, up = jt.parent[i], jt.separators[i], sums[i]
        assert up is not None
        sep_marg = _marginalize(tables[p], jt.nodes[p], sep)
        tables[i] *= _expand(sep_marg / up, sep, jt.nodes[i], sizes)
    return tables, log_node[root] + math.log(z)


def _propagate(
    jt: JunctionTree,
    sizes: tuple[int, ...],
    theta: Mapping[Clique, FloatArray],
    assign: Mapping[Clique, int],
) -> tuple[list[FloatArray], float]:
    """Each node's probability table and log Z of ``P_θ``: scaled propagation, or log
    space where it could underflow. Both are exact up to rounding."""
    out = _calibrate(jt, sizes, *_node_factors(jt, sizes, theta, assign))
    if out is None:
        out = _calibrate_log(jt, sizes, _node_potentials(jt, sizes, theta, assign))
    return out


def _logsumexp(x: FloatArray, axes: tuple[int, ...]) -> FloatArray:
    """``log Σ exp(x)`` over ``axes``, shifted by the maximum for stability."""
    if not axes:
        return x
    # ndarray methods rather than np.max / np.sum / np.squeeze: the same reductions
    # without the wrappers' overhead (this runs ~10 times per belief propagation)
    m = x.max(axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    s = np.exp(x - m).sum(axis=axes, keepdims=True)
    with np.errstate(divide="ignore"):
        out = np.log(s) + m
    squeezed: FloatArray = out.squeeze(axis=axes)
    return squeezed


def _calibrate_log(
    jt: JunctionTree, sizes: tuple[int, ...], psi: list[FloatArray]
) -> tuple[list[FloatArray], float]:
    """Sum-product on the junction tree in log space: each node's probability table, log Z.

    ``psi[i]`` is the log-potential of node ``i``. Upward messages are computed in log
    space; the downward pass divides each node's separator marginal by its upward
    message (Hugin form), so every node table is exponentiated about twice. The
    fallback of :func:`_propagate` when the scaled propagation would underflow.
    """
    kids = jt.children
    up: list[FloatArray | None] = [None] * len(jt.nodes)
    inc: list[FloatArray | None] = [None] * len(jt.nodes)
    for i in reversed(jt.order):
        node = jt.nodes[i]
        acc = psi[i]
        for k in kids[i]:
            msg = up[k]
            assert msg is not None
            acc = acc + _expand(msg, jt.separators[k], node, sizes)
        inc[i] = acc
        if jt.parent[i] >= 0:
            up[i] = _logsumexp(acc, _axes_not_in(node, jt.separators[i]))
    root = jt.order[0]
    inc_root = inc[root]
    assert inc_root is not None
    log_z = float(_logsumexp(inc_root, tuple(range(inc_root.ndim))))
    probs: list[FloatArray | None] = [None] * len(jt.nodes)
    probs[root] = np.exp(inc_root - log_z)
    for i in jt.order[1:]:
        p = jt.parent[i]
        sep = jt.separators[i]
        parent_probs = probs[p]
        inc_i, up_i = inc[i], up[i]
        assert parent_probs is not None and inc_i is not None and up_i is not None
        sep_marg = _marginalize(parent_probs, jt.nodes[p], sep)
        with np.errstate(divide="ignore"):
            log_sep = np.log(sep_marg)
        probs[i] = np.exp(inc_i + _expand(log_sep - up_i, sep, jt.nodes[i], sizes))
    out: list[FloatArray] = []
    for t in probs:
        assert t is not None
        out.append(t)
    return out, log_z


# ---------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------


def _smallest_containing(jt: JunctionTree, sizes: tuple[int, ...], clique: Clique) -> int | None:
    s = set(clique)
    index = _tree_index(jt, sizes)
    best: tuple[int, int] | None = None
    for i in index.holders[clique[0]] if clique else range(len(jt.nodes)):
        if s <= set(jt.nodes[i]):
            key = (index.cells[i], i)
            if best is None or key < best:
                best = key
    return None if best is None else best[1]


#: Cells of the probability tables and elimination messages a model keeps of the
#: marginals asked of it (32 MB).
_CACHED_CELLS = 1 << 22


class GraphicalModel:
    """A fitted graphical model: ``total · P_θ`` with ``P_θ(x) ∝ exp(Σ_C θ_C(x_C))``.

    Construct it from log-potentials (``{clique: θ_C}``, each flattened in C order or
    shaped by the clique's sizes), or get one from :func:`estimate_pgm`. Columns in no
    clique are uniform and independent of the rest. All queries are post-processing.

    ``junction_tree`` (optional): the nodes of the tree to compute on, as a model's
    ``junction_tree.nodes`` (a fit may keep a tree other than the greedy one: see
    :class:`ModelTree`); they must be the maximal cliques of a chordal graph holding every
    clique, else a ValueError. Default: the greedy triangulation.

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
            jt = _given_tree(sz, theta, junction_tree, max_clique_cells)
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
        self._assign = {c: _node_of(jt, sizes, c) for c in self._theta}
        if probs is None:
            probs, _ = _propagate(jt, sizes, self._theta, self._assign)
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
        node = _smallest_containing(self._jt, self._sizes, cl)
        if node is not None:
            return np.asarray(_marginalize(self._probs[node], self._jt.nodes[node], cl))
        part = _tree_index(self._jt, self._sizes).part
        groups: dict[int, list[int]] = {}
        for c in cl:
            groups.setdefault(part[c], []).append(c)
        if len(groups) == 1:
            return self._eliminate(cl)
        out = np.ones(clique_shape(self._sizes, cl))
        for cols in groups.values():
            out = out * _expand(self._probability(tuple(cols)), tuple(cols), cl, self._sizes)
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
        plan = _elimination_plan(jt, sizes, target)
        parent = dict(plan)
        factors: dict[int, tuple[Clique, FloatArray]] = {}
        for i, p in plan:
            node, table = jt.nodes[i], self._probs[i]
            if p >= 0:
                cond = self._conditionals.get((i, p))
                if cond is None:
                    sep = tuple(sorted(set(node) & set(jt.nodes[p])))
                    sep_marg = _expand(_marginalize(table, node, sep), sep, node, sizes)
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
        for i in _leaves_first(plan):
            ops = [factors[i], *messages[i]]
            involved = set().union(*(set(c) for c, _ in ops))
            p = parent[i]
            keep = involved & want
            if p >= 0:
                keep |= involved & set(jt.nodes[p])
            scope = tuple(sorted(keep))
            if p < 0:
                return _contract(ops, scope, sizes, self._max_cells)
            key = (i, p, scope, tuple(made_of[i]))
            ident = self._message_ids.setdefault(key, len(self._message_ids))
            kept = self._messages.get(ident)
            if kept is None:
                kept = _contract(ops, scope, sizes, self._max_cells)
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


class _TreeIndex(NamedTuple):
    """What the marginal queries of a model read of its tree, computed once per tree."""

    holders: tuple[tuple[int, ...], ...]  # per column: the nodes holding it
    cells: tuple[int, ...]  # per node
    adj: tuple[tuple[int, ...], ...]  # per node: its tree neighbours
    part: tuple[int, ...]  # per column: its part (nodes joined by non-empty separators)


@functools.lru_cache(maxsize=64)
def _tree_index(jt: JunctionTree, sizes: tuple[int, ...]) -> _TreeIndex:
    holders: list[list[int]] = [[] for _ in sizes]
    for i, n in enumerate(jt.nodes):
        for c in n:
            holders[c].append(i)
    adj: list[list[int]] = [[] for _ in jt.nodes]
    node_part = list(range(len(jt.nodes)))
    for i in jt.order[1:]:
        adj[i].append(jt.parent[i])
        adj[jt.parent[i]].append(i)
        if jt.separators[i]:
            node_part[i] = node_part[jt.parent[i]]
    return _TreeIndex(
        tuple(tuple(h) for h in holders),
        tuple(clique_cells(sizes, n) for n in jt.nodes),
        tuple(tuple(a) for a in adj),
        tuple(node_part[h[0]] for h in holders),
    )


@functools.lru_cache(maxsize=4096)
def _elimination_plan(
    jt: JunctionTree, sizes: tuple[int, ...], target: Clique
) -> tuple[tuple[int, int], ...]:
    """The nodes of the smallest subtree covering ``target`` for :meth:`GraphicalModel.
    _eliminate`, as sorted ``(node, parent)`` pairs (parent ``-1`` for the subtree's root).

    The root is the node holding most of ``target`` (then the smallest, then the last);
    each other column of ``target`` is reached from its shallowest, smallest holder.
    Depends only on the tree's structure, so it is cached (a stream asks the same
    marginals of the same structure many times).
    """
    index = _tree_index(jt, sizes)
    want = set(target)
    # only a node holding a column of target can hold the most of it
    held = sorted({i for c in target for i in index.holders[c]})
    root = max(held, key=lambda i: (len(want & set(jt.nodes[i])), -index.cells[i], -i))
    par = {root: -1}
    depth = {root: 0}
    bfs = [root]
    for i in bfs:
        for j in index.adj[i]:
            if j not in par:
                par[j], depth[j] = i, depth[i] + 1
                bfs.append(j)
    keep = {root}
    for c in sorted(want - set(jt.nodes[root])):
        holder = min(index.holders[c], key=lambda i: (depth[i], index.cells[i], i))
        while holder not in keep:
            keep.add(holder)
            holder = par[holder]
    return tuple((i, par[i]) for i in sorted(keep))


def _leaves_first(plan: tuple[tuple[int, int], ...]) -> list[int]:
    """The nodes of an elimination plan ``(node, parent)`` ordered children before parents."""
    parent = dict(plan)

    def depth(i: int) -> int:
        d = 0
        while parent[i] >= 0:
            i, d = parent[i], d + 1
        return d

    return sorted(parent, key=lambda i: (-depth(i), i))


def _contract(
    factors: list[tuple[Clique, FloatArray]],
    target: Clique,
    sizes: tuple[int, ...],
    max_cells: int,
) -> FloatArray:
    """``Σ_{columns not in target} Π factors`` as a table over ``target`` (einsum).

    Raises ValueError if an intermediate of numpy's greedy contraction path would
    exceed ``max_cells`` cells.
    """
    labels, out, path, steps = _contraction_plan(
        tuple(f for f, _ in factors), target, sizes, max_cells
    )
    if steps is not None:  # numpy.einsum's own loop over its cached contraction list
        ops = [t for _, t in factors]
        for inds, eq in steps:
            taken = [ops.pop(k) for k in inds]
            ops.append(_bmm_einsum(eq, *taken) if len(taken) == 2 else _c_einsum(eq, *taken))
        return ops[0]
    args: list[Any] = []
    for (_, t), lab in zip(factors, labels, strict=True):
        args += [t, list(lab)]
    result: FloatArray = np.einsum(*args, list(out), optimize=path)
    return result


@functools.lru_cache(maxsize=1 << 14)
def _contraction_plan(
    cliques: tuple[Clique, ...], target: Clique, sizes: tuple[int, ...], max_cells: int
) -> tuple[
    tuple[tuple[int, ...], ...],
    tuple[int, ...],
    list[Any],
    tuple[tuple[tuple[int, ...], str], ...] | None,
]:
    """Labels, output labels, the checked greedy einsum path and, where numpy exposes the
    kernels its einsum runs (numpy ≥ 2.4), einsum's contraction list for that path, so
    that :func:`_contract` skips its planning (cached: a stream asks the same marginals
    of the same structure many times)."""
    cols = sorted({c for f in cliques for c in f} | set(target))
    if len(cols) > 52:
        raise ValueError(f"this marginal involves {len(cols)} columns; at most 52 are supported")
    label = {c: k for k, c in enumerate(cols)}
    labels = tuple(tuple(label[c] for c in f) for f in cliques)
    out = tuple(label[c] for c in target)
    args: list[Any] = []
    for f, lab in zip(cliques, labels, strict=True):
        args += [np.broadcast_to(np.zeros(()), tuple(sizes[c] for c in f)), list(lab)]
    path, _ = np.einsum_path(*args, list(out), optimize="greedy")
    # replay the path: each step contracts some operands into one over the columns
    # still needed by the remaining operands or the output
    live: list[set[int]] = [set(f) for f in cliques]
    for step in path[1:]:
        taken = [live[k] for k in step]
        live = [s for k, s in enumerate(live) if k not in step]
        needed = set(target).union(*live)
        merged = set().union(*taken) & needed
        live.append(merged)
        merged_cells = math.prod(sizes[c] for c in merged)
        work = set().union(*taken)
        work_cells = math.prod(sizes[c] for c in work)
        if merged_cells > max_cells or work_cells > 64 * max_cells:
            what, n = (merged, merged_cells) if merged_cells > max_cells else (work, work_cells)
            raise ValueError(
                f"this marginal needs a contraction over columns {tuple(sorted(what))} with "
                f"{n} cells (max_clique_cells={max_cells}); ask for a smaller clique"
            )
    steps = None
    if _bmm_einsum is not None and _c_einsum is not None:
        plan: Any = np.einsum_path  # einsum's own call: (operands, contraction list)
        _, contractions = plan(*args, list(out), optimize=path, einsum_call=True)
        if all(len(c) == 3 for c in contractions):  # (operands, equation, remaining)
            steps = tuple((tuple(int(k) for k in c[0]), str(c[1])) for c in contractions)
    return labels, out, path, steps


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


def _node_of(jt: JunctionTree, sizes: tuple[int, ...], clique: Clique) -> int:
    node = _smallest_containing(jt, sizes, clique)
    if node is None:  # the tree is built from these cliques, so this is a bug
        raise AssertionError(f"clique {clique} is in no junction-tree node")
    return node


def _node_potentials(
    jt: JunctionTree,
    sizes: tuple[int, ...],
    theta: Mapping[Clique, FloatArray],
    assign: Mapping[Clique, int],
) -> list[FloatArray]:
    """Log-potential of each junction-tree node: the sum of the ``θ_C`` assigned to it."""
    psi = [np.zeros(clique_shape(sizes, n)) for n in jt.nodes]
    for c, t in theta.items():
        i = assign[c]
        psi[i] += _expand(t, c, jt.nodes[i], sizes)
    return psi


# ---------------------------------------------------------------------------------------
# Estimation
# ---------------------------------------------------------------------------------------


def estimate_pgm(
    sizes: Sequence[int],
    measurements: Sequence[Measurement],
    total: float,
    *,
    iters: int = 200,
    warm_start: GraphicalModel | None = None,
    extra_cliques: Iterable[Sequence[int]] = (),
    max_clique_cells: int = MAX_CLIQUE_CELLS,
    tol: float | None = None,
    method: Literal["accelerated", "mirror-descent"] = "accelerated",
) -> GraphicalModel:
    """Fit a graphical model with marginals close to the measurements (post-processing).

    Minimises ``L(μ) = Σ_m ||μ_{C_m} − y_m||² / σ_m²`` over models ``total · P_θ`` whose
    cliques are those of the measurements, of ``extra_cliques`` and of ``warm_start``.
    Each step is an entropic mirror-descent step ``θ_C ← θ_C − α ∂L/∂μ_C`` (Algorithm 1
    of McKenna et al. 2019), kept only if it lowers ``L`` by at least half the decrease
    its gradient predicts (Armijo): ``α`` then grows by 10 %, and halves on a rejected
    step. ``method="accelerated"`` (default) takes the step from a Nesterov
    extrapolation of ``θ`` (FISTA momentum), restarting the momentum whenever the loss
    would rise (O'Donoghue and Candès 2015); ``"mirror-descent"`` takes plain steps.
    The first ``α`` is ``1 / (total · Σ_m 1/σ_m²)``, the inverse smoothness constant of
    ``L`` on the simplex (McKenna et al.), times ``warm_start.step_scale`` when
    warm-starting.

    Args:
        sizes: domain size of each column.
        measurements: the released noisy marginals (counts).
        total: the total count of the model (positive).
        iters: budget of belief propagations (one per trial point, the extrapolated
            points of the accelerated method included).
        warm_start: a previous fit over the same columns; its potentials start ``θ``
            (each is kept on its clique, which stays in the model).
        extra_cliques: cliques to keep in the model without measuring them.
        max_clique_cells: refuse (ValueError) a junction tree with a larger node.
        tol: stop early once ten propagations lower the loss by at most
            ``tol · max(loss, 1)``; ``None`` spends all ``iters``.
        method: ``"accelerated"`` or ``"mirror-descent"``.

    The returned model records ``iterations`` (propagations spent), ``losses`` (the
    loss of the current iterate after each, ``losses[0]`` at the start) and
    ``step_scale`` (the final ``α`` over the first, at least 1, for the next warm start).
    """
    sz = check_sizes(sizes)
    meas = check_measurements(sz, measurements)
    tot = check_total(total)
    if isinstance(iters, bool) or not isinstance(iters, (int, np.integer)) or iters < 0:
        raise ValueError(f"iters must be a non-negative int, got {iters!r}")
    if tol is not None and not (math.isfinite(tol) and tol >= 0):
        raise ValueError(f"tol must be a non-negative number or None, got {tol!r}")
    if method not in ("accelerated", "mirror-descent"):
        raise ValueError(f"method must be 'accelerated' or 'mirror-descent', got {method!r}")
    theta: dict[Clique, FloatArray] = {}
    scale = 1.0
    if warm_start is not None:
        if not isinstance(warm_start, GraphicalModel):
            raise ValueError(
                f"warm_start must be a GraphicalModel, got {type(warm_start).__name__}"
            )
        if warm_start.sizes != sz:
            raise ValueError(
                f"warm_start has sizes {warm_start.sizes}, but the domain has sizes {sz}"
            )
        theta = {c: t.copy() for c, t in warm_start._theta.items()}
        scale = warm_start.step_scale
    for i, c in enumerate(extra_cliques):
        cl = check_clique(c, f"extra_cliques[{i}]")
        check_clique_in(cl, sz, f"extra_cliques[{i}]")
        theta.setdefault(cl, np.zeros(clique_shape(sz, cl)))
    for m in meas:
        theta.setdefault(m.clique, np.zeros(clique_shape(sz, m.clique)))
    base = warm_start.junction_tree if warm_start is not None else None
    nodes = _model_nodes(sz, list(theta), base)
    _check_node_cells(sz, nodes, max_clique_cells)
    jt = _tree_of_nodes(sz, nodes)
    fit = _Fit(sz, meas, tot, jt, theta)
    inv_var = sum(
        1.0 / m.stddev**2 if isinstance(m.stddev, float) else float(np.mean(m.stddev**-2.0))
        for m in meas
    )
    alpha0 = 1.0 / (tot * inv_var) if inv_var > 0 else 0.0
    alpha = fit.run(
        alpha0 * scale, int(iters) if meas else 0, accelerated=method == "accelerated", tol=tol
    )
    point = fit.current
    model = GraphicalModel._from_fit(sz, point.theta, tot, jt, max_clique_cells, point.probs)
    model.iterations = len(fit.losses) - 1
    model.losses = tuple(fit.losses)
    model.step_scale = max(1.0, alpha / alpha0) if alpha0 > 0 else scale
    return model


#: Step-size factors of the line search (after an accepted / a rejected step).
_GROW = 1.1
_SHRINK = 0.5


class _Point(NamedTuple):
    """Potentials and what one belief propagation computes from them."""

    theta: dict[Clique, FloatArray]
    probs: list[FloatArray]
    mu: dict[Clique, FloatArray]
    loss: float
    grad: dict[Clique, FloatArray]


class _Fit:
    """The optimisation: evaluation of potentials, and the line-search loop."""

    def __init__(
        self,
        sizes: tuple[int, ...],
        measurements: list[Measurement],
        total: float,
        jt: JunctionTree,
        theta: dict[Clique, FloatArray],
    ) -> None:
        self.sizes, self.meas, self.total, self.jt = sizes, measurements, total, jt
        self.assign = {c: _node_of(jt, sizes, c) for c in theta}
        self.measured = sorted({m.clique for m in measurements})
        self.current = self.evaluate(theta)
        self.losses = [self.current.loss]

    def evaluate(self, theta: dict[Clique, FloatArray]) -> _Point:
        """Belief propagation at ``theta``: node tables, measured marginals, loss, gradient."""
        probs, _ = _propagate(self.jt, self.sizes, theta, self.assign)
        mu: dict[Clique, FloatArray] = {}
        for c in self.measured:
            i = self.assign[c]
            marg = _marginalize(probs[i], self.jt.nodes[i], c)
            mu[c] = np.asarray(marg).reshape(-1) * self.total
        loss = 0.0
        grad = {c: np.zeros_like(v) for c, v in mu.items()}
        for m in self.meas:
            diff = mu[m.clique] - m.values
            if isinstance(m.stddev, float):
                w = 1.0 / m.stddev**2
                loss += w * float(diff @ diff)
                grad[m.clique] += 2.0 * w * diff
            else:  # one standard deviation per count
                weighted = diff / np.square(m.stddev)
                loss += float(diff @ weighted)
                grad[m.clique] += 2.0 * weighted
        return _Point(theta, probs, mu, loss, grad)

    def _moved(
        self, base: dict[Clique, FloatArray], direction: Mapping[Clique, FloatArray], t: float
    ) -> dict[Clique, FloatArray]:
        """``base + t · direction`` on the measured cliques (the others never move)."""
        out = dict(base)
        for c in self.measured:
            out[c] = base[c] + t * direction[c].reshape(base[c].shape)
        return out

    def _converged(self, tol: float | None) -> bool:
        h = self.losses
        return tol is not None and len(h) > 10 and h[-11] - h[-1] <= tol * max(h[-1], 1.0)

    def run(self, alpha: float, budget: int, *, accelerated: bool, tol: float | None) -> float:
        """Spend up to ``budget`` propagations; returns the final step size."""
        spent = 0
        previous = self.current.theta  # θ_{k-1}; equal to θ_k means no momentum
        t_k = 1.0
        while spent < budget and not self._converged(tol):
            cur = self.current
            t_next = (1.0 + math.sqrt(1.0 + 4.0 * t_k * t_k)) / 2.0 if accelerated else 1.0
            beta = (t_k - 1.0) / t_next
            base = cur
            if beta > 0:
                momentum = {c: cur.theta[c] - previous[c] for c in self.measured}
                base = self.evaluate(self._moved(cur.theta, momentum, beta))
                spent += 1
                self.losses.append(cur.loss)
            accepted: _Point | None = None
            while spent < budget:
                neg_grad = {c: -g for c, g in base.grad.items()}
                trial = self.evaluate(self._moved(base.theta, neg_grad, alpha))
                spent += 1
                predicted = sum(
                    float(base.grad[c] @ (base.mu[c] - trial.mu[c])) for c in self.measured
                )
                if base.loss - trial.loss >= 0.5 * predicted and trial.loss <= base.loss:
                    alpha *= _GROW
                    accepted = trial
                    break
                alpha *= _SHRINK
                self.losses.append(cur.loss)
            if accepted is None:
                break
            previous = cur.theta
            if accepted.loss <= cur.loss:
                self.current, t_k = accepted, t_next
            else:  # the momentum overshot: drop the step and restart from θ_k
                t_k = 1.0
            self.losses.append(self.current.loss)
        return alpha

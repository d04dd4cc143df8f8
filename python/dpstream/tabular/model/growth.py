"""The junction tree of a model grown one clique at a time (:class:`ModelTree`).

The select step of a stream asks it whether a candidate workload keeps the model within
``max_model_cells``; :func:`model_nodes` gives a fit's tree. Public structure only.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Iterable, Mapping, Sequence

from dpstream.tabular.estimation import Clique, check_sizes, clique_cells
from dpstream.tabular.model.junction_tree import (
    JunctionTree,
    checked_clique,
    greedy_nodes,
    maximal,
    tree_cells,
    tree_of_nodes,
)

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
    it. :func:`~dpstream.tabular.model.fit.estimate_pgm` grows the same chain from its
    warm start's tree with the fit's new cliques, in order, and keeps it when it has
    fewer cells than the greedy triangulation of all its cliques. A stream that admits a
    candidate only if :meth:`cells_with` is within ``max_model_cells``, and fits from the
    model it checked against, therefore never gets a larger model. Everything here reads
    only the public structure. Instances are immutable; their answers are cached.
    """

    def __init__(self, sizes: Sequence[int], tree: JunctionTree | None = None) -> None:
        sz = check_sizes(sizes)
        if tree is None:  # no clique yet: every column a node of its own
            tree = tree_of_nodes(sz, [(c,) for c in range(len(sz))])
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
        cl = checked_clique(self.sizes, clique, "clique")
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
            out = ModelTree(self.sizes, tree_of_nodes(self.sizes, maximal(nodes)))
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
        node inside a changed one, or the later of two equal ones, as
        :func:`~dpstream.tabular.model.junction_tree.maximal`)."""
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


@functools.lru_cache(maxsize=4)  # a stream needs the current model's; each holds W answers
def model_tree(sizes: tuple[int, ...], tree: JunctionTree | None = None) -> ModelTree:
    """The :class:`ModelTree` of ``tree`` (shared, so that its cached answers are reused by
    every select step and fit that starts from the same model)."""
    return ModelTree(sizes, tree)


def model_nodes(
    sizes: tuple[int, ...], cliques: Sequence[Clique], base: JunctionTree | None
) -> list[Clique]:
    """Nodes of the junction tree of a fit over ``cliques``: the greedy triangulation,
    unless inserting the cliques one by one into ``base`` (the warm start's tree, or one
    node per column) gives fewer cells (:class:`ModelTree`)."""
    nodes = greedy_nodes(sizes, cliques)
    chain = model_tree(sizes, base)
    for c in cliques:
        chain = chain.added(c)
    if chain.cells < sum(clique_cells(sizes, n) for n in nodes):
        return list(chain.tree.nodes)
    return nodes

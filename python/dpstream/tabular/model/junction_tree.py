"""Junction trees of the model: triangulation by greedy elimination, the tree, its index.

A junction tree over the columns ``0 .. d-1`` joins maximal cliques of a triangulated
interaction graph so that each column's nodes form a connected subtree. Everything
here reads only the public structure (domain sizes and cliques). Units: cells (the
product of the domain sizes of a clique's columns).
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from dpstream.tabular.estimation import (
    Clique,
    check_clique,
    check_clique_in,
    check_sizes,
    clique_cells,
    clique_shape,
)

#: Default bound on the cells of one junction-tree clique (80 MB of float64).
MAX_CLIQUE_CELLS = 10**7


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


def maximal(cliques: Iterable[Clique]) -> list[Clique]:
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
    checked = [checked_clique(sz, c, f"cliques[{i}]") for i, c in enumerate(cliques)]
    nodes = greedy_nodes(sz, checked)
    check_node_cells(sz, nodes, max_clique_cells)
    return tree_of_nodes(sz, nodes)


def checked_clique(sizes: tuple[int, ...], clique: Sequence[int], name: str) -> Clique:
    cl = check_clique(clique, name)
    check_clique_in(cl, sizes, name)
    return cl


def greedy_nodes(sizes: tuple[int, ...], cliques: Iterable[Clique]) -> list[Clique]:
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
        nodes = maximal(_elimination_cliques(sizes, adj, rule))
        cells = [clique_cells(sizes, n) for n in nodes]
        cost = (sum(cells), max(cells))
        if best_cost is None or cost < best_cost:
            best, best_cost = nodes, cost
    assert best is not None
    return best


def check_node_cells(sizes: tuple[int, ...], nodes: Iterable[Clique], max_cells: int) -> None:
    for n in nodes:
        if clique_cells(sizes, n) > max_cells:
            raise ValueError(
                f"the junction tree needs clique {n} with sizes {clique_shape(sizes, n)}, "
                f"{clique_cells(sizes, n)} cells > max_clique_cells={max_cells}; "
                "measure fewer or smaller marginals, or raise max_clique_cells"
            )


def tree_of_nodes(sizes: tuple[int, ...], nodes: Sequence[Clique]) -> JunctionTree:
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
    :class:`~dpstream.tabular.model.growth.ModelTree` instead, which answers
    without a rebuild per candidate.
    """
    sz = check_sizes(sizes)
    tree = build_junction_tree(sz, cliques, max_clique_cells=math.prod(sz))
    return sum(clique_cells(sz, n) for n in tree.nodes)


def tree_cells(sizes: Sequence[int], tree: JunctionTree) -> int:
    """Total cells of the nodes of ``tree`` (the model's size that ``max_model_cells`` bounds)."""
    return sum(clique_cells(sizes, n) for n in tree.nodes)


def given_tree(
    sizes: tuple[int, ...],
    cliques: Iterable[Clique],
    nodes: Sequence[Sequence[int]],
    max_clique_cells: int,
) -> JunctionTree:
    """The junction tree on given ``nodes``, or a ValueError if they are not the maximal
    cliques of a chordal graph that hold every column and every clique."""
    checked = [checked_clique(sizes, n, f"junction_tree[{i}]") for i, n in enumerate(nodes)]
    if not checked or maximal(checked) != sorted(checked):
        raise ValueError("junction_tree must list distinct maximal cliques")
    jt = tree_of_nodes(sizes, sorted(checked))
    for col in range(len(sizes)):
        holders = {i for i, n in enumerate(jt.nodes) if col in n}
        # running intersection: the nodes holding c are a connected subtree
        tops = [i for i in holders if jt.parent[i] not in holders]
        if len(tops) != 1:
            raise ValueError(f"junction_tree is not a junction tree for column {col}")
    for c in cliques:
        if smallest_containing(jt, sizes, c) is None:
            raise ValueError(f"clique {c} lies in no node of junction_tree")
    check_node_cells(sizes, jt.nodes, max_clique_cells)
    return jt


class TreeIndex(NamedTuple):
    """What the marginal queries of a model read of its tree, computed once per tree."""

    holders: tuple[tuple[int, ...], ...]  # per column: the nodes holding it
    cells: tuple[int, ...]  # per node
    adj: tuple[tuple[int, ...], ...]  # per node: its tree neighbours
    part: tuple[int, ...]  # per column: its part (nodes joined by non-empty separators)


@functools.lru_cache(maxsize=64)
def tree_index(jt: JunctionTree, sizes: tuple[int, ...]) -> TreeIndex:
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
    return TreeIndex(
        tuple(tuple(h) for h in holders),
        tuple(clique_cells(sizes, n) for n in jt.nodes),
        tuple(tuple(a) for a in adj),
        tuple(node_part[h[0]] for h in holders),
    )


def smallest_containing(jt: JunctionTree, sizes: tuple[int, ...], clique: Clique) -> int | None:
    s = set(clique)
    index = tree_index(jt, sizes)
    best: tuple[int, int] | None = None
    for i in index.holders[clique[0]] if clique else range(len(jt.nodes)):
        if s <= set(jt.nodes[i]):
            key = (index.cells[i], i)
            if best is None or key < best:
                best = key
    return None if best is None else best[1]


def node_of(jt: JunctionTree, sizes: tuple[int, ...], clique: Clique) -> int:
    node = smallest_containing(jt, sizes, clique)
    if node is None:  # the tree is built from these cliques, so this is a bug
        raise AssertionError(f"clique {clique} is in no junction-tree node")
    return node

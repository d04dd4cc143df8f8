"""Marginal inference on a junction tree: sum-product belief propagation and the plans
of variable elimination.

:func:`propagate` calibrates the tree of ``P_θ(x) ∝ exp(Σ_C θ_C(x_C))``: scaled
probability tables, or log space where those could underflow; both exact up to
rounding. Post-processing; potentials are natural logarithms.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

import numpy as np

from dpstream.tabular.estimation import Clique, FloatArray, clique_shape
from dpstream.tabular.model.factors import axes_not_in, expand, marginalize, product
from dpstream.tabular.model.junction_tree import JunctionTree, tree_index

#: Smallest separator sum the scaled propagation accepts. Every cell it computes is a
#: product of factors in [0, 1], so an underflow costs at most ~1e-307 per cell; a sum
#: of ≤ 1e7 cells at least _TINY keeps its relative error below 1e-50.
_TINY = 1e-250
#: Largest total range of the potentials of one node exponentiated factor by factor:
#: no cell of the product is then below exp(-_SPAN) ≈ 1e-261 (no underflow).
_SPAN = 600.0


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
            table = product(node, sizes, factors)
            scales.append(sum(tops))
        else:
            psi = np.zeros(shape)
            for c in assigned[i]:
                psi += expand(theta[c], c, node, sizes)
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
            table *= expand(msg, jt.separators[k], node, sizes)
            log_node[i] += log_up[k]
        if jt.parent[i] >= 0:
            r = marginalize(table, node, jt.separators[i])
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
        sep_marg = marginalize(tables[p], jt.nodes[p], sep)
        tables[i] *= expand(sep_marg / up, sep, jt.nodes[i], sizes)
    return tables, log_node[root] + math.log(z)


def propagate(
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
    fallback of :func:`propagate` when the scaled propagation would underflow.
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
            acc = acc + expand(msg, jt.separators[k], node, sizes)
        inc[i] = acc
        if jt.parent[i] >= 0:
            up[i] = _logsumexp(acc, axes_not_in(node, jt.separators[i]))
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
        sep_marg = marginalize(parent_probs, jt.nodes[p], sep)
        with np.errstate(divide="ignore"):
            log_sep = np.log(sep_marg)
        probs[i] = np.exp(inc_i + expand(log_sep - up_i, sep, jt.nodes[i], sizes))
    out: list[FloatArray] = []
    for t in probs:
        assert t is not None
        out.append(t)
    return out, log_z


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
        psi[i] += expand(t, c, jt.nodes[i], sizes)
    return psi


@functools.lru_cache(maxsize=4096)
def elimination_plan(
    jt: JunctionTree, sizes: tuple[int, ...], target: Clique
) -> tuple[tuple[int, int], ...]:
    """The nodes of the smallest subtree covering ``target`` for the variable
    elimination of :class:`~dpstream.tabular.model.graphical_model.GraphicalModel`, as
    sorted ``(node, parent)`` pairs (parent ``-1`` for the subtree's root).

    The root is the node holding most of ``target`` (then the smallest, then the last);
    each other column of ``target`` is reached from its shallowest, smallest holder.
    Depends only on the tree's structure, so it is cached (a stream asks the same
    marginals of the same structure many times).
    """
    index = tree_index(jt, sizes)
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


def leaves_first(plan: tuple[tuple[int, int], ...]) -> list[int]:
    """The nodes of an elimination plan ``(node, parent)`` ordered children before parents."""
    parent = dict(plan)

    def depth(i: int) -> int:
        d = 0
        while parent[i] >= 0:
            i, d = parent[i], d + 1
        return d

    return sorted(parent, key=lambda i: (-depth(i), i))

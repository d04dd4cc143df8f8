"""Tables over cliques (axes in increasing column order): broadcast, sum out, multiply,
contract.

A clique's table has one axis per column, of the column's domain size. These are the
numerical kernels of belief propagation and of marginal queries; no privacy noise.
"""

from __future__ import annotations

import functools
import importlib
import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from dpstream.tabular.estimation import Clique, FloatArray, clique_shape

try:  # the kernels numpy.einsum runs on a contraction path (numpy ≥ 2.4)
    _einsumfunc: Any = importlib.import_module("numpy._core.einsumfunc")
except ImportError:  # pragma: no cover - numpy 1.x
    _einsumfunc = None
#: ``None`` on older numpy, where ``np.einsum`` plans each call.
_bmm_einsum: Any = getattr(_einsumfunc, "bmm_einsum", None)
_c_einsum: Any = getattr(_einsumfunc, "c_einsum", None)


def expand(table: FloatArray, cols: Clique, target: Clique, sizes: tuple[int, ...]) -> FloatArray:
    """``table`` over ``cols`` reshaped to broadcast against a table over ``target``."""
    return table.reshape(_expand_shape(cols, target, sizes))


@functools.lru_cache(maxsize=1 << 16)
def _expand_shape(cols: Clique, target: Clique, sizes: tuple[int, ...]) -> tuple[int, ...]:
    inside = set(cols)
    return tuple(sizes[c] if c in inside else 1 for c in target)


def axes_not_in(cols: Clique, keep: Iterable[int]) -> tuple[int, ...]:
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


def marginalize(table: FloatArray, cols: Clique, keep: Iterable[int]) -> FloatArray:
    """``table`` over ``cols`` summed over the columns not in ``keep``."""
    return _sum_out(table, axes_not_in(cols, keep))


def product(
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
    """:func:`product`'s layout: the table's shape (the node's columns by increasing
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


def contract(
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
    that :func:`contract` skips its planning (cached: a stream asks the same marginals
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

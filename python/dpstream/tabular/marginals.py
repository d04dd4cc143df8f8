"""The exact workload marginals of one time step: what :meth:`TabularStream.step` measures.

A step of the tabular stream reads its batch only through the histograms of the
workloads (the marginals of the insertions and of the deletions) and their row
counts. :class:`BatchMarginals` holds exactly that, so the counting can run
elsewhere — on the workers of a cluster (:func:`dpstream.tabular.dask.batch_marginals`)
— and the step then runs on the client from the counts alone. Both paths count with
:func:`count_codes` and the step turns the counts into its measurements in one
place (:meth:`BatchMarginals.differences`), so a step given the marginals of a batch
is identical, bit for bit, to a step given the batch (same seed, same releases).

**Sensitive.** The counts are exact: they are as private as the records. Keep a
:class:`BatchMarginals` inside the trusted cluster and client, never persist or
publish it; only the stream's releases are ε-DP. Its ``repr`` shows public values
only. Units: counts of records (integers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from dpstream.tabular.domain import Codes, Domain

__all__ = ["BatchMarginals", "add_counts", "count_codes", "count_columns"]

Clique = tuple[int, ...]
IntArray = npt.NDArray[np.int64]


#: The most cells of the joint histogram :func:`count_codes` counts all workloads from
#: at once (int64: 32 MiB); it does so only when these are no more than the rows.
JOINT_CELLS = 1 << 22

#: Rows per block when the 2-way workloads are counted pair by pair (the block's
#: cell indices stay in the CPU caches instead of one array per pair and row).
BLOCK_ROWS = 1 << 15


def count_codes(
    codes: Codes, sizes: Sequence[int], workloads: Sequence[Clique]
) -> tuple[IntArray, ...]:
    """The exact int64 histogram of every workload over ``codes`` (valid ``(n, d)`` codes,
    as :meth:`Domain.encode` returns them), each flattened in C order over its columns'
    sizes (the order of :func:`dpstream.tabular.marginal`)."""
    columns = np.ascontiguousarray(np.asarray(codes).T, dtype=np.int64)
    return count_columns(columns, sizes, workloads)


def count_columns(
    columns: IntArray, sizes: Sequence[int], workloads: Sequence[Clique]
) -> tuple[IntArray, ...]:
    """:func:`count_codes` of the ``(d, n)`` codes :meth:`Domain.encode_columns` returns
    (each column contiguous).

    When the joint domain of the workloads' columns has at most as many cells as there
    are rows (and at most :data:`JOINT_CELLS`), one ``bincount`` of every row's joint
    cell gives the joint histogram and each workload is summed from it; otherwise the
    2-way workloads are counted by blocks of rows and the others one at a time. Both give
    the same integers (exact counts); only the work differs."""
    joint = _joint_counts(columns, sizes, workloads)
    if joint is not None:
        return joint
    n = columns.shape[1]
    pairs = _pair_counts(columns, sizes, workloads)
    out = []
    for clique in workloads:
        pair = pairs.get(tuple(clique))
        if pair is not None:
            out.append(pair)
            continue
        if not clique:
            out.append(np.array([n], dtype=np.int64))
            continue
        cells = math.prod(int(sizes[c]) for c in clique)
        flat = _cell_index(columns, sizes, clique)
        out.append(np.bincount(flat, minlength=cells).astype(np.int64, copy=False))
    return tuple(out)


def _cell_index(columns: IntArray, sizes: Sequence[int], clique: Sequence[int]) -> IntArray:
    """Every row's C-order cell of ``clique`` (mixed radix over its columns' sizes, as
    ``numpy.ravel_multi_index`` computes it, on codes already checked by Domain.encode)."""
    flat: IntArray = columns[clique[0]].copy()
    for c in clique[1:]:
        flat *= int(sizes[c])
        flat += columns[c]
    return flat


def _joint_counts(
    columns: IntArray, sizes: Sequence[int], workloads: Sequence[Clique]
) -> tuple[IntArray, ...] | None:
    """Every workload's histogram summed from the joint histogram of the columns the
    workloads use (one pass over the rows), or ``None`` when that joint domain has more
    cells than rows or than :data:`JOINT_CELLS`."""
    used = sorted({int(c) for w in workloads for c in w})
    shape = [int(sizes[c]) for c in used]
    cells = math.prod(shape)
    n = columns.shape[1]
    if not used or cells > min(JOINT_CELLS, n):
        return None
    if any(len(set(w)) != len(w) for w in workloads):
        return None  # a column twice in a clique: counted one workload at a time
    # The joint cell of every row is below JOINT_CELLS: exact in int64.
    histogram = np.bincount(_cell_index(columns, sizes, used), minlength=cells).reshape(shape)
    # partial[k]: the joint histogram summed over the first k used columns, so that a
    # workload whose first used column is the k-th is summed from the smallest array.
    axis = {c: k for k, c in enumerate(used)}
    partial = [histogram]
    for _ in used[1:]:
        partial.append(partial[-1].sum(axis=0))
    out = []
    for clique in workloads:
        if not clique:
            out.append(np.array([n], dtype=np.int64))
            continue
        first = min(axis[c] for c in clique)
        kept = [axis[c] - first for c in clique]
        rest = tuple(k for k in range(len(used) - first) if k not in kept)
        counts = partial[first].sum(axis=rest) if rest else partial[first]
        # The remaining axes are the clique's columns in sorted order: put them in the
        # clique's order before flattening (C order over the clique's sizes).
        order = np.argsort(np.argsort(kept))
        out.append(np.ascontiguousarray(counts.transpose(order), dtype=np.int64).reshape(-1))
    return tuple(out)


def _pair_counts(
    columns: IntArray, sizes: Sequence[int], workloads: Sequence[Clique]
) -> dict[Clique, IntArray]:
    """The histograms of the 2-way workloads, those of one first column at once: one
    ``bincount`` of every pair's C-order cell index, shifted past the pairs before it,
    :data:`BLOCK_ROWS` rows at a time (the same integer counts as one pair at a time)."""
    seconds: dict[int, list[int]] = {}
    for clique in workloads:
        if len(clique) == 2:
            seconds.setdefault(int(clique[0]), []).append(int(clique[1]))
    out: dict[Clique, IntArray] = {}
    n = columns.shape[1]
    for a, bs in seconds.items():
        width = np.array([int(sizes[b]) for b in bs], dtype=np.int64)
        cells = int(sizes[a]) * width
        start = np.concatenate([[0], np.cumsum(cells)[:-1]])
        counts = np.zeros(int(cells.sum()), dtype=np.int64)
        for lo in range(0, n, BLOCK_ROWS):
            flat = columns[a, None, lo : lo + BLOCK_ROWS] * width[:, None]
            flat += columns[bs, lo : lo + BLOCK_ROWS]
            flat += start[:, None]
            counts += np.bincount(flat.reshape(-1), minlength=counts.size)
        for b, lo, m in zip(bs, start.tolist(), cells.tolist(), strict=True):
            out[(a, b)] = counts[lo : lo + m].copy()
    return out


def add_counts(*parts: tuple[IntArray, ...]) -> tuple[IntArray, ...]:
    """The cell-wise sum of several outputs of :func:`count_codes` (integer, exact)."""
    first, *rest = parts
    total = [a.copy() for a in first]
    for part in rest:
        for acc, a in zip(total, part, strict=True):
            acc += a
    return tuple(total)


class BatchMarginals:
    """The exact marginals of one step's insertions and deletions (**sensitive**).

    Give it to :meth:`TabularStream.step` in place of the batch (with
    ``deletions=None``): the step is then the step of the records it was counted
    from. Build it with :meth:`of` (records on this machine) or
    :func:`dpstream.tabular.dask.batch_marginals` (a Dask collection).

    Attributes:
        sizes: the domain's column sizes it was counted for (public).
        workloads: the workloads counted, in the stream's order (public).
        inserted, deleted: int64 counts per workload (exact: private).
        rows_inserted, rows_deleted: the records counted (private unless the
            stream's sizes are public).
        has_deletions: whether the step was given a ``deletions`` argument (public).
    """

    __slots__ = (
        "deleted",
        "has_deletions",
        "inserted",
        "rows_deleted",
        "rows_inserted",
        "sizes",
        "workloads",
    )

    def __init__(
        self,
        sizes: Sequence[int],
        workloads: Sequence[Clique],
        inserted: Sequence[IntArray],
        deleted: Sequence[IntArray],
        rows_inserted: int,
        rows_deleted: int,
        has_deletions: bool,
    ) -> None:
        self.sizes = tuple(int(s) for s in sizes)
        self.workloads = tuple(tuple(int(c) for c in w) for w in workloads)
        self.inserted = tuple(np.asarray(a, dtype=np.int64) for a in inserted)
        self.deleted = tuple(np.asarray(a, dtype=np.int64) for a in deleted)
        self.rows_inserted = int(rows_inserted)
        self.rows_deleted = int(rows_deleted)
        self.has_deletions = bool(has_deletions)
        for name, counts in (("inserted", self.inserted), ("deleted", self.deleted)):
            if len(counts) != len(self.workloads):
                raise ValueError(
                    f"{name} has {len(counts)} histograms for {len(self.workloads)} workloads"
                )
            for w, a in zip(self.workloads, counts, strict=True):
                cells = math.prod(self.sizes[c] for c in w)
                if a.shape != (cells,) or (a.size and int(a.min()) < 0):
                    raise ValueError(
                        f"{name} histogram of workload {w} must hold {cells} non-negative counts"
                    )
        if self.rows_deleted and not self.has_deletions:
            raise ValueError("rows_deleted > 0 needs has_deletions=True")

    @classmethod
    def of(
        cls, domain: Domain, workloads: Sequence[Clique], batch: Any, deletions: Any = None
    ) -> BatchMarginals:
        """Count a batch (and deletions) on this machine; ``batch`` and ``deletions``
        take every form :meth:`Domain.encode` does. Refused like a batch given to
        ``step`` (wrong columns or dtypes, unknown categories, codes outside the domain)."""
        ins = domain.encode_columns(batch)
        dels = domain.encode_columns(deletions)
        return cls(
            domain.sizes,
            workloads,
            count_columns(ins, domain.sizes, workloads),
            count_columns(dels, domain.sizes, workloads),
            ins.shape[1],
            dels.shape[1],
            deletions is not None,
        )

    def check(self, domain: Domain, workloads: Sequence[Clique]) -> None:
        """Refuse marginals counted for another domain or other workloads."""
        if self.sizes != domain.sizes or self.workloads != tuple(tuple(w) for w in workloads):
            raise ValueError(
                "these marginals were counted for other workloads or another domain than the "
                "stream's; count them with the stream's domain and workloads"
            )

    def project(self, workloads: Sequence[Clique]) -> BatchMarginals:
        """The marginals of other ``workloads``, each summed from the first counted
        workload that holds all its columns (exact integers: the same counts as counting
        the records again). ``ValueError`` naming a workload no counted one holds."""
        inserted: list[IntArray] = []
        deleted: list[IntArray] = []
        for w in workloads:
            want = tuple(int(c) for c in w)
            k = next((k for k, v in enumerate(self.workloads) if set(want) <= set(v)), None)
            if k is None:
                raise ValueError(
                    f"these marginals hold no workload with the columns {want}: count the "
                    "step's records with the stream's domain and workloads"
                )
            source = self.workloads[k]
            shape = tuple(self.sizes[c] for c in source)
            # the kept axes are in the source's column order: the workload's (both sorted)
            drop = tuple(a for a, c in enumerate(source) if c not in want)
            for out, counts in ((inserted, self.inserted[k]), (deleted, self.deleted[k])):
                summed = counts.reshape(shape).sum(axis=drop) if drop else counts.reshape(shape)
                out.append(np.ascontiguousarray(summed, dtype=np.int64).reshape(-1))
        return BatchMarginals(
            self.sizes, workloads, inserted, deleted, self.rows_inserted, self.rows_deleted,
            self.has_deletions,
        )  # fmt: skip

    def differences(self) -> list[npt.NDArray[np.float64]]:
        """Per workload, the histogram of the insertions minus that of the deletions
        (float64, exact: integers below 2^53), as the step measures it."""
        return [
            a.astype(np.float64) - b.astype(np.float64)
            for a, b in zip(self.inserted, self.deleted, strict=True)
        ]

    def __repr__(self) -> str:
        # The counts and row counts are private: only public values are shown.
        return (
            f"BatchMarginals(workloads={len(self.workloads)}, "
            f"has_deletions={self.has_deletions})  # exact counts: sensitive"
        )

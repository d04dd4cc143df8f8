"""The synthetic table's rows in chunks of a public size, drawn the same way on one
machine or on a Dask cluster (post-processing: no ε).

A release of ``n`` rows is cut into chunks of :data:`CHUNK_ROWS` rows (the last one
shorter). A :class:`ReleasePlan` holds what the rows are drawn from: the mixture's
parts (small model objects), the rows each part gives to each chunk (fixed from the
public sizes, :func:`shares`), the release's seed and the sampling method. Chunk ``i``
is drawn with ``numpy.random.default_rng([key, step, i])``: each part's share sampled
from its model, the chunk's rows shuffled. A chunk depends only on the plan and its
index, so chunks drawn anywhere, in any order, and concatenated are the same rows in
the same order: :meth:`ReleasePlan.sample` on one machine and
:func:`dpstream.tabular.dask.release_frame` on the workers give the same table, bit for
bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dpstream.tabular.estimation import MarginalModel

__all__ = ["CHUNK_ROWS", "Part", "ReleasePlan", "shares", "unmerge"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

#: Rows per chunk of a release (public; the last chunk is shorter).
CHUNK_ROWS = 1 << 20


def unmerge(
    maps: Sequence[IntArray],
    ones: Sequence[FloatArray],
    codes: IntArray,
    rng: np.random.Generator,
) -> IntArray:
    """Merged codes back to categories (``maps[j]``: category → merged code of column
    ``j``): a merged code becomes one of its categories, drawn in proportion to their
    released counts ``ones[j]`` (uniformly if none is positive)."""
    out = np.empty_like(codes)
    for j, m in enumerate(maps):
        count = np.bincount(m)
        alone = np.flatnonzero(count[m] == 1)
        inverse = np.full(count.size, -1, dtype=np.int64)
        inverse[m[alone]] = alone
        col = inverse[codes[:, j]]
        hit = col < 0
        if hit.any():
            group = np.flatnonzero(count[m] > 1)
            w = np.clip(ones[j][group], 0, None)
            p = w / w.sum() if w.sum() > 0 else np.full(group.size, 1.0 / group.size)
            col[hit] = rng.choice(group, size=int(hit.sum()), p=p)
        out[:, j] = col
    return out


@dataclass(frozen=True, eq=False)
class Part:
    """One model of a release's mixture. With ``maps`` (one array per column, category
    → merged code), its merged codes are drawn back to categories by :func:`unmerge`
    with the released 1-way counts ``ones``."""

    model: MarginalModel
    maps: tuple[IntArray, ...] = ()
    ones: tuple[FloatArray, ...] = ()

    def sample(self, n: int, rng: np.random.Generator, method: str) -> IntArray:
        codes = self.model.sample(n, rng, method=method)
        return unmerge(self.maps, self.ones, codes, rng) if self.maps else codes


def shares(sizes: Sequence[int], chunk_rows: int | None = None) -> IntArray:
    """``(chunks, parts)``: the rows of each part in each chunk (of ``chunk_rows`` rows,
    default :data:`CHUNK_ROWS`) of a release of ``sum(sizes)`` rows, part ``p`` giving
    ``sizes[p]`` rows in all (public rounding).

    Each chunk first gives every part the floor of its proportional share of the rows
    so far (``sizes[p]·stop/n``) minus what it has given, within what it has left; the
    chunk's missing rows then go to the parts furthest below their share, surplus rows
    are taken from those furthest above it (ties to the first part). Every part stays
    within one row of its share (the tests check it) and the last chunk takes exactly
    what remains. Exact integer arithmetic."""
    step = CHUNK_ROWS if chunk_rows is None else int(chunk_rows)
    sizes = [int(s) for s in sizes]
    total = sum(sizes)
    chunks = -(-total // step)
    out = np.zeros((chunks, len(sizes)), dtype=np.int64)
    given = [0] * len(sizes)
    parts = range(len(sizes))
    for i in range(chunks):
        stop = min((i + 1) * step, total)
        rows = stop - i * step
        share = [
            min(max(n * stop // total - g, 0), n - g) for n, g in zip(sizes, given, strict=True)
        ]
        while (gap := rows - sum(share)) != 0:
            need = [n * stop - total * (g + r) for n, g, r in zip(sizes, given, share, strict=True)]
            if gap > 0:
                room = [p for p in parts if given[p] + share[p] < sizes[p]]
                share[max(room, key=need.__getitem__)] += 1
            else:
                share[min((p for p in parts if share[p] > 0), key=need.__getitem__)] -= 1
        out[i] = share
        given = [g + s for g, s in zip(given, share, strict=True)]
    return out


@dataclass(frozen=True, eq=False)
class ReleasePlan:
    """How a release's rows are drawn (public, small: ship it to the workers).

    Args:
        width: the columns ``d``.
        parts: the mixture's models.
        counts: ``(chunks, parts)`` rows of each part in each chunk (:func:`shares`), or
            ``None``: each chunk's rows shared among the parts by a multinomial draw of
            equal weights (the chunk's first draw).
        seed: ``(key, step)``; chunk ``i`` is drawn from ``default_rng([key, step, i])``.
        method: each model's sampling, ``"round"`` or ``"iid"``.
        rows: the release's rows (the sum of ``counts``).
        stored: rows already drawn (the release is their chunks, not a sample).
        chunk_rows: rows per chunk (:data:`CHUNK_ROWS` when the plan is made; the plan
            carries it to the workers).
    """

    width: int
    parts: tuple[Part, ...] = ()
    counts: IntArray | None = None
    seed: tuple[int, int] = (0, 0)
    method: str = "round"
    rows: int = 0
    stored: IntArray | None = None
    chunk_rows: int = CHUNK_ROWS

    @classmethod
    def of_rows(cls, codes: IntArray) -> ReleasePlan:
        """The plan of rows already drawn."""
        return cls(int(codes.shape[1]), rows=len(codes), stored=codes, chunk_rows=CHUNK_ROWS)

    @classmethod
    def mixture(
        cls,
        width: int,
        parts: Sequence[Part],
        sizes: Sequence[int] | None,
        seed: tuple[int, int],
        method: str,
        rows: int | None = None,
    ) -> ReleasePlan:
        """Parts giving ``sizes[p]`` rows each, or (``sizes=None``) ``rows`` rows of
        their equal-weight mixture."""
        total = sum(int(s) for s in sizes) if sizes is not None else int(rows or 0)
        counts = shares(sizes, CHUNK_ROWS) if sizes is not None else None
        return cls(width, tuple(parts), counts, seed, method, total, chunk_rows=CHUNK_ROWS)

    @property
    def chunks(self) -> int:
        return -(-self.rows // self.chunk_rows)

    def bounds(self, i: int) -> tuple[int, int]:
        """The rows ``[start, stop)`` of chunk ``i`` in the release."""
        return i * self.chunk_rows, min((i + 1) * self.chunk_rows, self.rows)

    def chunk(self, i: int) -> IntArray:
        """Chunk ``i``'s rows ``(rows, width)``, int64 codes."""
        start, stop = self.bounds(i)
        if self.stored is not None:
            return self.stored[start:stop]
        if stop <= start:
            return np.zeros((0, self.width), dtype=np.int64)
        g = np.random.default_rng([*self.seed, i])
        if self.counts is None:
            counts = g.multinomial(stop - start, np.full(len(self.parts), 1.0 / len(self.parts)))
        else:
            counts = self.counts[i]
        rows = [p.sample(int(n), g, self.method) for p, n in zip(self.parts, counts, strict=True)]
        out: IntArray = np.concatenate(rows)[g.permutation(stop - start)]
        return out

    def sample(self) -> IntArray:
        """The whole release ``(rows, width)``: the chunks in order, on this machine."""
        if self.stored is not None:
            return self.stored
        out = np.empty((self.rows, self.width), dtype=np.int64)
        for i in range(self.chunks):
            start, stop = self.bounds(i)
            out[start:stop] = self.chunk(i)
        return out

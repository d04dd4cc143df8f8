"""Online ε-DP synthetic data on ``[0,1]^d`` with an infinite time horizon.

Points arrive one per time step ``t = 1, 2, ...``; :meth:`OnlineSynthesizer.release`
gives synthetic data for everything seen so far, at any time, as often as wanted,
and all the releases together are ε-DP. Two methods:

* ``method="epochs"`` (default): every release closes an *epoch* (the points since
  the previous release). Epochs are grouped by a 16-ary tree mechanism restarted at
  every power of 16 (super-block ``k`` holds epochs ``16^k .. 16^(k+1)-1``); each
  aligned block of epochs measures the exact counts of the cells of the binary
  partition of ``[0,1]^d`` down to a depth set by its public size, with exact
  discrete Laplace noise. A release pools the blocks that cover the stream, grows a
  tree where the pooled counts stand above the noise, fits it by variance-weighted
  least squares with the root fixed at ``t``, and places points uniformly in the
  leaves. The noise grows with the logarithm of the number of releases, not of ``t``.
* ``method="paper"``: Algorithm 1 of He, Vershynin and Zhu, "Online differentially
  private synthetic data generation", as printed: the partition deepens as ``t``
  grows (depth ``r`` once ``t >= ⌈2^r / ε⌉``), every region of depth ``1..r`` counts
  its points with an inhomogeneous sparse counter (Algorithm 3), the noisy counts are
  made non-negative and consistent (Algorithm 4), and the synthetic data are ``t``
  points placed in the depth-``r`` cells. Expected accuracy: Wasserstein-1 distance
  ``O(log(t) · t^(-1/d) / ε)`` for ``d >= 2``.
* ``method="privhp"`` (:meth:`OnlineSynthesizer.for_memory`): continual-release
  PrivHP in fixed memory (Holland et al., Appendix A): a binary mechanism over at
  most ``R`` release epochs whose blocks are exact PrivHP summaries, each released
  once at ``ε/(2L)`` (``L = floor(log2 R) + 1``); a release is the mixture of the
  live blocks' generators weighted by their (public) sizes. Memory is fixed at
  construction.

Privacy model (both methods):

* **Protected** (event level): two streams are neighbours if they differ in
  the point of *one* time step (one point replaced by another). Streams may be
  infinite.
* **Guarantee**: the whole sequence of outputs — every :meth:`~OnlineSynthesizer.release`
  and :meth:`~OnlineSynthesizer.cells` at any set of times, however many — is
  ε-DP jointly.
* **Public**: ε, the dimension ``d``, the time ``t`` (the number of points seen)
  and, for ``"epochs"``, the release times. **Release times must not depend on the
  data**: release on a calendar or every ``n`` points, never "when enough points
  have arrived in a region" or after looking at the points. A schedule read from
  the data breaks the guarantee.
* **How ε is split**: ``"epochs"``: a point of super-block ``k`` enters ``k + 1``
  blocks of ``ε/(k+1)`` each (see ``dpstream._core`` / ``rust/core/src/synth/epochs.rs``,
  ``block_epsilon``), a block's ``L`` levels share it, and a replaced point changes
  two cells per level by one, so the noise scale is ``2·L·(k+1)/ε``. ``"paper"``:
  the region counters of depth ``j`` at time level ``r`` run with ``ε_{j,r}``
  (equations (4.1) and (5.1) of the paper, see
  :func:`dpstream.counters.online_epsilon`), ``sup_r Σ_j ε_{j,r} <= ε/2``, two
  regions per depth.
* **Noise**: exact integer (discrete Laplace) noise from a ChaCha12
  cryptographically secure generator keyed by the operating system. A seeded
  :class:`dpstream.Rng` makes the synthesizer reproducible and gives **no
  privacy**; its ``repr`` then says so.

Where ``"epochs"`` departs from the paper: it counts per release epoch instead of
per time step (nothing is published between releases, so this costs nothing), it
measures exact histograms of aligned blocks of epochs instead of sparse counters
with thresholds, it fits the tree by least squares instead of Algorithm 4's
proportional consistency, and it never spreads a parent's mass over children whose
counts are below the noise (they are pruned: the parent stays a leaf). The accuracy
figures are in ``benches/RESULTS.md`` (``benches/bench_online_compare.py``), the
comparison with the paper's rates in ``research/online_paper.md``.

Units: points are coordinates in the unit cube ``[0,1]^d`` (unitless); time
``t`` counts points (one point per time step); ε is a bound on the privacy
loss in nats (every event's probability changes by a factor at most ``e^ε``);
:meth:`~OnlineSynthesizer.memory_bytes` is in bytes.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction
from typing import Any, ClassVar, Self

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._arrays import points_array
from dpstream._dask import is_collection, require
from dpstream._params import RealLike, core_rng, exact_fraction, int_param
from dpstream._rng import Rng, Seeded, refuse_copies, seeded_repr
from dpstream.online_dask import release_array, update_online
from dpstream.persistence import register, seeded_refusal
from dpstream.privhp import PrivHP

__all__ = [
    "CHUNK_ROWS",
    "MAX_DIM",
    "METHODS",
    "EpochsSynthesizer",
    "OnlineSynthesizer",
    "PaperSynthesizer",
    "PrivHPSynthesizer",
]

#: Rows per chunk of a release by default (public).
CHUNK_ROWS = _core.RELEASE_CHUNK_ROWS
#: Largest dimension accepted (the privacy schedule takes ``2d``-th roots).
MAX_DIM = 4096
#: The methods of :class:`OnlineSynthesizer`; the first is the default.
METHODS = ("epochs", "paper")

#: ``(lower, upper, counts)`` of :meth:`OnlineSynthesizer.cells`.
_Cells = tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64]]


def _counts_array(values: object, name: str) -> npt.NDArray[np.uint64]:
    """A 1-D array of non-negative integers as uint64, or a clear error."""
    arr = np.asarray(values)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        return np.zeros(0, dtype=np.uint64)
    if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        raise TypeError(f"{name} must hold integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "i" and int(arr.min()) < 0:
        raise ValueError(f"{name} must be non-negative, got {int(arr.min())}")
    # Aligned and contiguous: arrays shipped between processes can arrive misaligned.
    return np.require(arr, dtype=np.uint64, requirements=["C", "A"])


@refuse_copies("OnlineSynthesizer", "use dpstream.save/load (or to_bytes/from_bytes) to checkpoint")
class OnlineSynthesizer(Seeded):
    """ε-DP online synthetic data on ``[0,1]^d``, released at any public times.

    Feed points with :meth:`update` (``n`` rows are ``n`` consecutive time
    steps) and ask for synthetic data at any time with :meth:`release`. The
    whole sequence of outputs, at any set of times, is ε-DP for streams that
    differ in one point at one time step; see the module documentation for
    the privacy model. **Release times must not depend on the data** (release on
    a calendar or every ``n`` points).

    ``OnlineSynthesizer(epsilon, dim, method=...)`` returns its method's subclass,
    :class:`EpochsSynthesizer` or :class:`PaperSynthesizer`; :meth:`for_memory` a
    :class:`PrivHPSynthesizer`. What only one method has is on its class.

    Args:
        epsilon: privacy budget ε of the whole stream of releases (nats), exact:
            a float is the binary fraction it stores, :class:`fractions.Fraction`
            and :class:`decimal.Decimal` are taken as they are.
        dim: dimension ``d`` of the points, ``1 <= d <= 4096``.
        method: ``"epochs"`` (default): noisy histograms per release epoch, a tree
            mechanism over epochs, least squares and pruning; the accurate choice.
            ``"paper"``: He, Vershynin and Zhu's Algorithm 1 as printed.
        rng: ``None`` (default): the synthesizer keys its own generator from the
            operating system — private. A :class:`dpstream.Rng`: the synthesizer's
            generator is derived from it (256 bits drawn from ``rng``); a seeded
            ``rng`` makes every output reproducible and gives **no privacy**.

    Public values: ε, ``d``, the time ``t``, the depth and (``"epochs"``) the number
    of epochs and blocks — all functions of ε, ``d``, ``t`` and the release times.

    The object cannot be copied or pickled (a copy would repeat the same noise);
    save it with :func:`dpstream.save` / :meth:`to_bytes` instead. ``"paper"``: a
    loaded synthesizer whose noise came from the operating system gets a fresh OS
    key (its checkpoint never stores a private key), so its continuations are not
    tied to each other. ``"epochs"`` and :meth:`for_memory`: the checkpoint holds a
    secret master key; every block formed after a load (the open epoch's, every
    merged block) takes a key derived from it, the block's epochs and a digest of
    its points. Loading a checkpoint any number of times and feeding the same data
    gives the same releases, byte for byte (nothing to average); other data gives
    independent noise. A checkpoint supports one continuation: each continuation
    on other data spends the budget of the points it shares with the others again.
    A seeded synthesizer resumes its generator exactly, so save, load and continue
    gives the outputs of an uninterrupted run.
    """

    __slots__ = ("_epsilon", "_inner", "_released")

    _METHOD: ClassVar[str]  # "epochs", "paper" or "privhp"
    _CORE: ClassVar[Any]
    _inner: Any
    _epsilon: Fraction
    _released: bool

    def __init_subclass__(cls, *, method: str = "", core: Any = None) -> None:
        """A method's class names its method and its Rust class."""
        super().__init_subclass__()
        if method:
            cls._METHOD, cls._CORE = method, core

    def __new__(
        cls,
        epsilon: RealLike,
        dim: int,
        *,
        method: str = "epochs",
        rng: Rng | None = None,
    ) -> OnlineSynthesizer:
        eps = exact_fraction(epsilon, "epsilon")
        d = int_param(dim, "dim", low=1, high=MAX_DIM)
        if method == "privhp":
            raise ValueError(
                "method='privhp' (continual PrivHP in fixed memory) needs a memory budget: use "
                "OnlineSynthesizer.for_memory(epsilon, dim, memory_bytes=..., expected_n=..., "
                "max_releases=...)"
            )
        if method not in METHODS:
            raise ValueError(
                f"method must be one of {', '.join(map(repr, METHODS))}, got {method!r}"
            )
        variant = EpochsSynthesizer if method == "epochs" else PaperSynthesizer
        if not issubclass(variant, cls):
            raise ValueError(f"a {cls.__name__} comes from OnlineSynthesizer(...) or .for_memory")
        core = _core.EpochSynthesizer if method == "epochs" else _core.OnlineSynthesizer
        return variant._wrap(core(eps.numerator, eps.denominator, d, core_rng(rng)))

    @classmethod
    def for_memory(
        cls,
        epsilon: RealLike,
        dim: int,
        *,
        memory_bytes: int,
        expected_n: int,
        max_releases: int,
        rng: Rng | None = None,
    ) -> PrivHPSynthesizer:
        """Continual-release PrivHP in fixed memory (PrivHP paper, Appendix A): a
        :class:`PrivHPSynthesizer` (:attr:`method` ``"privhp"``).

        Every release closes an *epoch* (the points since the previous release). A
        binary mechanism over epochs keeps ``L = floor(log2 R) + 1`` exact PrivHP
        summaries (one per dyadic block of epochs, plus the open epoch) with one
        shared configuration and hash keys; when an epoch closes, the summaries of
        the smaller blocks merge into the next block, which is released once by
        PrivHP (noise, top-k pruning, consistency) at ``ε/(2L)``. A release is the
        mixture of the ``<= L`` live block generators, each weighted by its number
        of points (public).

        Privacy: all releases together are ε-DP for streams that differ in one
        point at one time step (PrivHP at ``ε/(2L)`` is ``ε/L``-DP under
        replacement, and a point is in at most ``L`` blocks). Public: ε, ``d``,
        ``memory_bytes``, ``expected_n``, ``max_releases``, the time ``t`` and the
        release times. **Release times must not depend on the data.**

        Args:
            epsilon: privacy budget ε of the whole stream of releases (nats), exact.
            dim: dimension ``d`` of the points, ``1 <= d <= 4096``.
            memory_bytes: budget in bytes for the whole state, including the
                transient copies a release makes; :meth:`memory_bytes` reports the
                reserved size (at most this) and never changes.
            expected_n: a public guess of the stream length (it sets the depth
                ``ceil(log2(ε/(2L) · expected_n))``), not a count of the data.
            max_releases: ``R``, the public cap on releases that have new points.
                A release that would close epoch ``R + 1`` raises ``ValueError``
                and changes nothing; releases without new points stay allowed.
            rng: as in :class:`OnlineSynthesizer` (seeded: reproducible, **not
                private**).

        Raises:
            ValueError: a non-positive ε, a bad ``dim``, ``expected_n`` or
                ``max_releases`` (``1 <= R <= 2^32``), or a ``memory_bytes`` too
                small for ``L + 3`` summaries.
        """
        eps = exact_fraction(epsilon, "epsilon")
        d = int_param(dim, "dim", low=1, high=MAX_DIM)
        mem = int_param(memory_bytes, "memory_bytes", low=1, high=2**63 - 1)
        n = int_param(expected_n, "expected_n", low=1, high=2**64 - 1)
        r = int_param(max_releases, "max_releases", low=1, high=2**32)
        inner = _core.ContinualPrivHP(eps.numerator, eps.denominator, d, mem, n, r, core_rng(rng))
        return PrivHPSynthesizer._wrap(inner)

    @classmethod
    def _wrap(cls, inner: Any) -> Self:
        obj = object.__new__(cls)
        obj._inner = inner
        num, den = inner.epsilon()
        obj._epsilon = Fraction(num, den)
        # Whether the saved object had released is not recorded: assume it had.
        obj._released = int(inner.time) > 0
        return obj

    @property
    def method(self) -> str:
        """``"epochs"`` (default), ``"paper"`` or ``"privhp"`` (:meth:`for_memory`; public)."""
        return self._METHOD

    @property
    def epsilon(self) -> Fraction:
        """Privacy budget ε of the whole stream of releases (nats; public)."""
        return self._epsilon

    @property
    def dim(self) -> int:
        """Dimension ``d`` (public)."""
        return int(self._inner.dim)

    @property
    def t(self) -> int:
        """Time: the number of points seen so far (public)."""
        return int(self._inner.time)

    @property
    def depth(self) -> int:
        """Depth of the partition (public; what it is: the method's class)."""
        return int(self._inner.depth)

    @property
    def n_regions(self) -> int:
        """Cells with a private count (public): see the method's class."""
        raise NotImplementedError

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent: from the first :meth:`release` on, what the worst-case point costs
        over all releases together (ε; how: the method's class); 0 before."""
        return self._spent() if self._released else Fraction(0)

    def _spent(self) -> Fraction:  # once something is released
        return Fraction(*self._inner.epsilon_ledger())

    @property
    def epsilon_remaining(self) -> Fraction:
        """ε not yet spent (ε before the first release, 0 after)."""
        return self.epsilon - self.epsilon_spent

    def memory_bytes(self) -> int:
        """Bytes held by the synthesizer: a public formula that does not depend on
        where the points fell (the method's class says which)."""
        return int(self._inner.memory_bytes())

    def update(self, points: object) -> None:
        """Feed a batch of ``(n, d)`` points in ``[0,1]^d``: ``n`` consecutive time steps.

        A 1-D array is ``n`` points when ``d = 1``. The work runs in Rust with the GIL
        released. The batch is all-or-nothing: a NaN, infinite or out-of-range value
        (or a wrong shape) raises ``ValueError`` and nothing is counted — ``t`` and the
        generator are unchanged. Splitting a stream into batches does not change any
        output: ``update(a); update(b)`` equals ``update(concat(a, b))``.

        A Dask array ``(n, d)`` or DataFrame with ``d`` columns is counted on the
        cluster (:func:`dpstream.online_dask.update_online`; ``"epochs"`` and
        ``"privhp"``): the same state as this call on the computed points.
        ``"paper"`` refuses it.
        """
        if is_collection(points):  # counted on the cluster
            update_online(self, points)
            return
        self._inner.update(points_array(points, self.dim))

    def release(
        self, size: int | None = None, *, chunk_rows: int = CHUNK_ROWS
    ) -> npt.NDArray[np.float64]:
        """Synthetic data from the current private state, float64 in ``[0,1]^d``.

        Args:
            size: ``None`` (default): exactly ``t`` rows, placed by the consistent
                integer leaf counts (uniform inside each leaf; the paper's ``Y_t`` for
                ``"paper"``, its rows shuffled within each chunk). An int ``m``: ``m``
                independent rows drawn from the same private state.
            chunk_rows: rows per chunk (public, at least 1; default :data:`CHUNK_ROWS`,
                ``2^20``); chunk ``i`` is drawn from a generator keyed by the release's
                key and ``i``, as :meth:`release_dask` draws it on a cluster.

        Returns ``(t, d)`` or ``(m, d)`` rows. ``ValueError``: ``size > 0`` before the
        first point (nothing to draw from), ``chunk_rows < 1``.

        Post-processing of the ε-DP counters: no privacy spent. It advances the
        synthesizer's generator (a seeded one's stream). ``"epochs"``: a release at a new
        time closes the open epoch: call it only at times fixed independently of the data.
        """
        m, c = self._release_args(size, chunk_rows)
        out: npt.NDArray[np.float64] = self._inner.release(m, c)
        self._released = True
        return out

    def release_dask(self, size: int | None = None, *, chunk_rows: int = CHUNK_ROWS) -> Any:
        """:meth:`release` as a Dask array drawn on the workers (needs Dask), one block
        per chunk from the released structure (fitted trees or leaf counts: small) and
        the sampling key (:func:`dpstream.online_dask.release_array`): the client never
        holds the points. Computed, it is byte for byte :meth:`release` with the same
        arguments on this state; it closes the epoch and advances the generator now.
        Public: the rows and ``chunk_rows``. Post-processing: no privacy spent."""
        m, c = self._release_args(size, chunk_rows)
        require("dask.array")  # before the state changes
        sampler = self._inner.release_sampler(m, c)
        self._released = True
        return release_array(sampler)

    def _release_args(self, size: object, chunk_rows: object) -> tuple[int | None, int]:
        m = None if size is None else int_param(size, "size", high=2**63 - 1)
        return m, int_param(chunk_rows, "chunk_rows", low=1, high=2**64 - 1)

    def cells(self) -> _Cells:
        """``(lower, upper, counts)`` of the leaves of the current private partition.

        ``lower`` and ``upper`` are ``(L, d)`` float64 corners of the cells (same path
        encoding as :mod:`dpstream.partition`); ``counts`` are the ``(L,)`` int64
        consistent, non-negative private counts, which sum to ``t`` (ε-DP together
        with every other output). Which cells: the method's class.
        """
        out = self._cells()
        self._released = True
        return out

    def _cells(self) -> _Cells:
        cells: _Cells = self._inner.cells()
        return cells

    def to_bytes(self) -> bytes:
        """Versioned, checksummed checkpoint (kind ``"EpochSynthesizer"``,
        ``"OnlineSynthesizer"`` for ``"paper"`` or ``"ContinualPrivHP"`` for ``"privhp"``).

        **Sensitive**: keep it as secret as the data (what it holds: the method's
        class). A seeded generator's state is stored, so a seeded synthesizer resumes
        exactly.
        """
        return bytes(self._inner.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes, *, allow_seeded: bool = False) -> OnlineSynthesizer:
        """Decode :meth:`to_bytes` output into its method's class; ``ValueError`` on
        corrupt or foreign data (or another method's state, called on a method's class).

        Checkpoints written before ``method="epochs"`` existed load as ``"paper"``.
        A checkpoint of a seeded synthesizer resumes its seeded generator, so
        everything it releases is reproducible and **not private**: it is refused
        (``ValueError``) unless ``allow_seeded=True``.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        raw = bytes(data)
        kind = _core.state_kind(raw)
        variant = _BY_KIND.get(kind, PaperSynthesizer)
        if not issubclass(variant, cls):
            raise ValueError(f"a {kind} state is not a {cls.__name__}")
        inner = variant._CORE.from_bytes(raw)
        if inner.seeded and not allow_seeded:
            raise ValueError(seeded_refusal("OnlineSynthesizer"))
        return variant._wrap(inner)

    def __repr__(self) -> str:
        text = (
            f"OnlineSynthesizer(epsilon={self._epsilon}, dim={self.dim}, "
            f"method={self._METHOD!r}, t={self.t}, depth={self.depth})"
        )
        return seeded_repr(text, self.seeded)


class _Epochal(OnlineSynthesizer):
    """The methods whose releases close epochs (``"epochs"``, ``"privhp"``)."""

    __slots__ = ()

    @property
    def epochs(self) -> int:
        """Releases that closed an epoch (had new points; public)."""
        return int(self._inner.epochs)


class EpochsSynthesizer(_Epochal, method="epochs", core=_core.EpochSynthesizer):
    """``OnlineSynthesizer(epsilon, dim)`` (``method="epochs"``, the default): noisy
    histograms per release epoch, a 16-ary tree mechanism over epochs, least squares and
    pruning (the module documentation states the mechanism and its ε split).

    :attr:`depth`: the deepest level any finished block measures (a function of the
    public block sizes); a release's leaves are cells of depth at most this.
    :meth:`memory_bytes`: 8 bytes per point seen (its exact cell path, kept to rebuild
    the histograms of merged blocks) plus a fixed size per live block. :meth:`to_bytes`
    holds the exact cell path of every point and the noise keys of the finished blocks.
    :attr:`epsilon_spent`: the largest sum of ``point_split`` (a point of super-block
    ``k`` in ``k + 1`` blocks of ``ε/(k+1)``) over the super-blocks reached: ε.
    """

    __slots__ = ()
    _inner: _core.EpochSynthesizer

    @property
    def n_regions(self) -> int:
        """The cells of depth ``1..depth`` that the blocks measure (public; lazily: a
        cell's noise is fixed when its block forms)."""
        return (1 << (int(self._inner.depth) + 1)) - 2

    def _cells(self) -> _Cells:
        """The leaves of the fitted tree (cells of depths up to :attr:`depth`, in
        depth-first order); like :meth:`release`, it closes the open epoch."""
        lower, upper, counts = self._inner.release_tree().cells()
        return lower, upper, np.rint(counts).astype(np.int64)

    def update_counts(self, cells: object, counts: object) -> None:
        """Feed the open epoch from exact counts of finest cells.

        ``counts[i]`` points lie in the cell ``cells[i]``, the level-63 path of
        :func:`dpstream.partition.encode` (``encode(points, 63)``); ``Σ counts`` time
        steps. The state afterwards is the state :meth:`update` gives on those points,
        byte for byte (:meth:`to_bytes`, every later release, seeded or not): the open
        epoch is a multiset. This is how a cluster's exact counts reach the client
        (:func:`dpstream.online_dask.update_online`). Cells may repeat; counts are
        non-negative integers. All-or-nothing. The counts are exact: as private as the
        points.
        """
        c = _counts_array(cells, "cells")
        n = _counts_array(counts, "counts")
        if c.shape != n.shape:
            raise ValueError(
                f"cells and counts must have the same length, got {c.size} and {n.size}"
            )
        self._inner.update_counts(c, n)

    def _update_counts_all(self, parts: Iterable[tuple[object, object]]) -> None:
        """:meth:`update_counts` of every ``(cells, counts)`` pair of ``parts``, all or
        nothing: if a pair is refused or ``parts`` raises (a failed fetch from a cluster),
        every pair fed so far is taken back and the state is the state before the call,
        byte for byte; a retry then counts each point once."""
        mark = self._inner.mark()
        try:
            for cells, counts in parts:
                self.update_counts(cells, counts)
        except BaseException:
            self._inner.rollback(mark)
            raise


class PaperSynthesizer(OnlineSynthesizer, method="paper", core=_core.OnlineSynthesizer):
    """``OnlineSynthesizer(epsilon, dim, method="paper")``: He, Vershynin and Zhu's
    Algorithm 1 as printed (the module documentation states it).

    :attr:`depth`: the depth ``r`` at time ``t``, the largest ``r`` with
    ``⌈2^r / ε⌉ <= t`` (0 before ``t = ⌈1/ε⌉``); the synthetic data live on the ``2^r``
    cells of depth ``r``, which :meth:`cells` returns by path θ. :meth:`memory_bytes`:
    the cell counters of depths ``1..depth`` (it grows at the public times
    ``⌈2^r / ε⌉``) and, for ``d = 1``, 8 bytes per point. :meth:`to_bytes` holds the
    exact counts inside the counters (and, for ``d = 1``, the cells of the points), never
    an OS-drawn generator key. :attr:`epsilon_spent`: ε (its schedule ``ε_{j,r}`` sums to
    less than ε/2 at every level, Proposition 4.1).
    """

    __slots__ = ()
    _inner: _core.OnlineSynthesizer

    @property
    def n_regions(self) -> int:
        """All cells of depth ``1..depth`` (public)."""
        return int(self._inner.n_regions)

    def _spent(self) -> Fraction:
        return self.epsilon


class PrivHPSynthesizer(_Epochal, method="privhp", core=_core.ContinualPrivHP):
    """:meth:`OnlineSynthesizer.for_memory` (``method="privhp"``): continual-release PrivHP
    in fixed memory.

    :attr:`depth`: the depth of every block's PrivHP summary (from ε, ``expected_n`` and
    ``max_releases``). :meth:`memory_bytes`: fixed at construction (``L + 3`` PrivHP
    summaries with their largest generators, at most ``memory_bytes``). :meth:`cells`:
    the leaves of every live block's generator, block after block (cells of different
    blocks may overlap: the release is their mixture), each block's counts scaled to its
    number of points and rounded; like :meth:`release`, it closes the open epoch.
    :meth:`to_bytes` holds the exact counts of every block summary and the released
    generators of the live blocks, so every load restores the same noisy generators.
    :attr:`epsilon_spent`: ``L`` blocks of ``2·ε/(2L)``: ε.
    """

    __slots__ = ()
    _inner: _core.ContinualPrivHP

    @property
    def max_releases(self) -> int:
        """The public cap ``R`` on epochs (releases with new points)."""
        return int(self._inner.max_releases)

    @property
    def n_regions(self) -> int:
        """Per block summary: the exact levels ``1..L_k`` and one sketch row per deeper
        level (public)."""
        depth, width = int(self._inner.depth), int(self._inner.width)
        l_k = min(int(self._inner.k).bit_length() - 1, depth)
        return (1 << (l_k + 1)) - 2 + (depth - l_k) * width

    def summary_template(self) -> PrivHP:
        """An empty PrivHP summary with this synthesizer's shared configuration and hash
        keys (public: drawn independently of the data), to count points elsewhere
        (:func:`dpstream.privhp_dask.summarize` on a cluster's workers) for
        :meth:`merge_summary`."""
        return PrivHP.from_bytes(self._inner.template())

    def merge_summary(self, summary: PrivHP) -> None:
        """Add the exact summary of points of the open epoch, counted by copies of
        :meth:`summary_template` (and merged): the same state as :meth:`update` of those
        points, byte for byte. All-or-nothing: a summary of another template or a
        released one is refused. The summary is exact: as private as the points."""
        if not isinstance(summary, PrivHP):
            raise TypeError(f"summary must be a PrivHP, got {type(summary).__name__}")
        self._inner.merge_summary(summary._inner)


#: The class of each checkpoint kind (:func:`dpstream._core.state_kind`), also
#: :func:`dpstream.load`'s; any other kind is read as ``"paper"``.
_BY_KIND: dict[str, type[OnlineSynthesizer]] = {
    "OnlineSynthesizer": PaperSynthesizer,
    "EpochSynthesizer": EpochsSynthesizer,
    "ContinualPrivHP": PrivHPSynthesizer,
}
for _kind, _variant in _BY_KIND.items():
    register(_variant.from_bytes, _kind)

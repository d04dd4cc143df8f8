"""PrivHP: differentially private synthetic data in small, fixed memory.

Implements Holland, Camtepe, Thapa and Xue, "Private Synthetic Data
Generation in Small Memory" (Algorithms 2–4): exact noisy counts for the top
``L_k = floor(log2 k)`` levels of the binary partition of ``[0,1]^d``, one
private sketch per deeper level, and at release a partition grown by keeping
the ``k`` hottest cells per level, made consistent, from which points are
sampled.

Privacy model:

* **Protected**: any single point — two streams are neighbours if one has one
  point more (add/remove). The whole release is ε-DP.
* **Public**: the domain ``[0,1]^d``, ε and its per-level split
  (:attr:`PrivHP.sigmas`), ``k``, ``width``, ``rows``, ``depth``, the sketch
  kind and its hash functions. None is derived from the data.
* **How ε is split**: level ``l`` gets ``σ_l`` with ``Σ σ_l ≤ ε`` (Eq. (23) of
  the paper by default; exact rationals, computed in the Rust core). Tree
  level ``l`` gets discrete Laplace noise of scale ``1/σ_l`` per count,
  sketch level ``l`` scale ``rows/σ_l`` per cell.
* Noise is added once, at :meth:`PrivHP.release`; afterwards the summary
  refuses more points (a second release of a longer stream would need a
  continual-release mechanism).

Before its release a summary holds **exact** counts: its encoding
(:meth:`PrivHP.to_bytes`, :func:`dpstream.save`, pickling) is not private and
must be protected like the raw data. Summaries built with the same hash keys
merge exactly (:meth:`PrivHP.merge`, :mod:`dpstream.privhp_dask`), so noise is
added once, to the merged summary.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._arrays import points_array
from dpstream._params import RealLike, core_rng, exact_fraction, int_param
from dpstream._rng import Rng
from dpstream.budget import BudgetExceededError
from dpstream.persistence import register

__all__ = ["PrivHP", "TreeGenerator"]

SketchName = Literal["count-min", "count"]
BudgetName = Literal["optimal", "uniform"]


class TreeGenerator:
    """A released PrivHP generator: a consistent partition of ``[0,1]^d`` with
    non-negative counts.

    Everything done with it is post-processing of an ε-DP release and spends
    no further privacy: sampling, listing cells, saving. Sampling randomness is
    not privacy noise (a seeded ``rng`` only makes samples reproducible). A
    release whose *privacy noise* was seeded is not private: it says so
    (:attr:`noise_seeded`), and its bytes record it.
    """

    __slots__ = ("_inner",)

    def __init__(self, inner: _core.TreeGenerator) -> None:
        if not isinstance(inner, _core.TreeGenerator):
            raise TypeError("TreeGenerator objects come from PrivHP.release() or load()")
        self._inner = inner

    @property
    def noise_seeded(self) -> bool:
        """True if the release's privacy noise came from a seeded generator:
        reproducible, **not private**."""
        return bool(self._inner.noise_seeded)

    @property
    def dim(self) -> int:
        """Dimension ``d`` of the points."""
        return int(self._inner.dim)

    @property
    def n_leaves(self) -> int:
        """Number of cells in the partition."""
        return int(self._inner.n_leaves)

    @property
    def total(self) -> float:
        """The noisy, consistent number of points at the root (ε-DP)."""
        return float(self._inner.total)

    @property
    def depth(self) -> int:
        """Deepest level of any cell."""
        return int(self._inner.depth)

    def sample(self, m: int, *, rng: Rng | None = None) -> npt.NDArray[np.float64]:
        """``m`` synthetic points, shape ``(m, d)``, in ``[0,1]^d``."""
        return self._inner.sample(int_param(m, "m"), core_rng(rng))

    def cells(
        self,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(lower, upper, counts)``: corners ``(L, d)`` and counts ``(L,)`` of the leaves."""
        return self._inner.cells()

    def memory_bytes(self) -> int:
        """Bytes held by the generator."""
        return int(self._inner.memory_bytes())

    def to_bytes(self) -> bytes:
        """Versioned, checksummed encoding, readable by Rust and Python; it
        records whether the release's noise was seeded."""
        return bytes(self._inner.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes, *, allow_seeded: bool = False) -> TreeGenerator:
        """Decode :meth:`to_bytes` output.

        A release made with seeded noise is **not private** and is refused
        unless ``allow_seeded=True``; loaded, it stays :attr:`noise_seeded`.
        A generator saved before the flag was recorded loads as not seeded.

        Raises:
            ValueError: corrupt or foreign data, or a seeded release and
                ``allow_seeded`` is false.
        """
        return cls(_core.TreeGenerator.from_bytes(bytes(data), bool(allow_seeded)))

    def __repr__(self) -> str:
        seeded = "  # seeded noise: NOT PRIVATE" if self.noise_seeded else ""
        return f"TreeGenerator(dim={self.dim}, leaves={self.n_leaves}, depth={self.depth}){seeded}"


register(TreeGenerator.from_bytes, "TreeGenerator")


class PrivHP:
    """One-pass, fixed-memory ε-DP synthetic data generator on ``[0,1]^d``.

    Args:
        epsilon: total privacy budget ε of the release.
        dim: dimension ``d``.
        k: pruning parameter — cells expanded per level (memory ``O(k)`` per level).
        width: sketch width ``w`` (memory ``O(rows * w)`` per level).
        rows: sketch rows ``j``.
        depth: partition depth ``r`` (1..60); the paper takes ``log2(ε n)``, see
            :meth:`for_memory`.
        sketch: ``"count-min"`` (the paper's analysis) or ``"count"``.
        budget: ``"optimal"`` (Eq. (23)) or ``"uniform"`` split of ε over levels.
        rng: generator for the hash keys only. The hash functions are public, so
            a seeded generator here costs no privacy (and lets summaries built on
            several machines share hashes for :meth:`merge`). The privacy noise
            comes from the ``rng`` given to :meth:`release`.

    Memory is allocated here and never grows: :meth:`memory_bytes` is constant.
    """

    __slots__ = ("_epsilon", "_inner", "_noise_seeded")

    def __init__(
        self,
        epsilon: RealLike,
        dim: int,
        *,
        k: int,
        width: int,
        rows: int = 1,
        depth: int,
        sketch: SketchName = "count-min",
        budget: BudgetName = "optimal",
        rng: Rng | None = None,
    ) -> None:
        eps = exact_fraction(epsilon, "epsilon")
        for name, value in (("sketch", sketch), ("budget", budget)):
            if not isinstance(value, str):
                raise TypeError(f"{name} must be a string, got {type(value).__name__}")
        self._inner = _core.PrivHP(
            eps.numerator,
            eps.denominator,
            int_param(dim, "dim", low=1, high=65536),
            int_param(k, "k", low=1, high=2**24),
            int_param(width, "width", low=1, high=2**30),
            int_param(rows, "rows", low=1, high=64),
            int_param(depth, "depth", low=1, high=60),
            sketch,
            budget,
            core_rng(rng),
        )
        self._epsilon = eps
        self._noise_seeded = False

    @classmethod
    def for_memory(
        cls,
        epsilon: RealLike,
        dim: int,
        expected_n: int,
        memory_bytes: int,
        *,
        rows: int = 1,
        sketch: SketchName = "count-min",
        rng: Rng | None = None,
    ) -> PrivHP:
        """A PrivHP whose summary *and* largest release fit in ``memory_bytes``.

        ``depth = ceil(log2(epsilon * expected_n))`` as in the paper, then the
        largest power-of-two ``k`` with ``width = 2k`` that fits. Only public
        values are used: ``expected_n`` is the data holder's guess of the
        stream length, not a count of the data.
        """
        eps = exact_fraction(epsilon, "epsilon")
        n = int_param(expected_n, "expected_n", high=2**64 - 1)
        mem = int_param(memory_bytes, "memory_bytes")
        params = _core.PrivHP.for_memory(
            eps.numerator,
            eps.denominator,
            int_param(dim, "dim", low=1, high=65536),
            n,
            mem,
            sketch,
            int_param(rows, "rows", low=1, high=64),
        )
        return cls(
            eps,
            dim,
            k=params["k"],
            width=params["width"],
            rows=params["rows"],
            depth=params["depth"],
            sketch=sketch,
            rng=rng,
        )

    @property
    def epsilon(self) -> Fraction:
        """Total privacy budget of the release."""
        return self._epsilon

    @property
    def sigmas(self) -> list[Fraction]:
        """Per-level budget ``σ_0 .. σ_depth`` (exact; sums to at most ε)."""
        return [Fraction(n, d) for n, d in self._inner.sigmas()]

    @property
    def dim(self) -> int:
        """Dimension ``d``."""
        return int(self._inner.dim)

    @property
    def k(self) -> int:
        """Pruning parameter."""
        return int(self._inner.k)

    @property
    def width(self) -> int:
        """Sketch width."""
        return int(self._inner.width)

    @property
    def rows(self) -> int:
        """Sketch rows."""
        return int(self._inner.rows)

    @property
    def depth(self) -> int:
        """Partition depth."""
        return int(self._inner.depth)

    @property
    def threads(self) -> int:
        """Threads :meth:`update` counts on: 2 by default on a machine with two or
        more cores (the sketched levels are split between them), else 1. Set it
        to 1 to keep updates on the calling thread; the counts are identical."""
        return int(self._inner.threads)

    @threads.setter
    def threads(self, value: int) -> None:
        self._inner.threads = int_param(value, "threads", low=1, high=2)

    @property
    def points_seen(self) -> int:
        """Points counted so far. **Not private** — for the data holder only."""
        return int(self._inner.points_seen)

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent: 0 before :meth:`release`, ε after (a second call spends nothing)."""
        return self._epsilon if self.released else Fraction(0)

    @property
    def epsilon_remaining(self) -> Fraction:
        """ε still available to this one-shot summary (ε before the release, 0 after)."""
        return self._epsilon - self.epsilon_spent

    @property
    def released(self) -> bool:
        """Whether :meth:`release` has been called."""
        return bool(self._inner.released)

    def memory_bytes(self) -> int:
        """Bytes held by the summary; equal to the value at construction."""
        return int(self._inner.memory_bytes())

    def update(self, points: object) -> None:
        """Count a batch of ``(n, d)`` points in ``[0,1]^d`` (float64 or exactly convertible).

        ``O(depth * rows)`` work per point in Rust with the GIL released. The
        batch is validated first: a NaN, infinite or out-of-range value raises
        ``ValueError`` naming it, and nothing is counted.
        """
        # Buffers received from another process (pickle protocol 5, as Dask sends
        # them) can be C-contiguous but misaligned; the core needs aligned float64.
        arr = np.require(points_array(points, self.dim), requirements=["C", "A"])
        self._inner.update(arr)

    def empty_copy(self) -> PrivHP:
        """An empty, unreleased summary with this one's parameters and hash keys (public):
        a template to count more points elsewhere (:mod:`dpstream.privhp_dask`) and
        :meth:`merge` them in. Refused after a release."""
        if self.released:
            raise BudgetExceededError("a released summary has no empty copy; copy it first")
        copy = PrivHP.__new__(PrivHP)
        copy._inner = self._inner.empty_copy()
        copy._epsilon = self._epsilon
        copy._noise_seeded = self._noise_seeded
        return copy

    def merge(self, other: PrivHP) -> None:
        """Add another unreleased summary with identical parameters and hash keys
        (a copy made before either saw data, e.g. on another machine)."""
        if not isinstance(other, PrivHP):
            raise TypeError(f"can only merge a PrivHP, got {type(other).__name__}")
        if self.released or other.released:
            raise BudgetExceededError(
                "released summaries cannot be merged (their ε is spent): merge the exact "
                "summaries first and release once"
            )
        self._inner.merge(other._inner)

    def release(self, *, rng: Rng | None = None) -> TreeGenerator:
        """The ε-DP release: add noise, grow the pruned partition, return the generator.

        Args:
            rng: generator of the privacy noise; ``None`` is OS-seeded (private).
                A seeded :class:`dpstream.Rng` makes the noise reproducible and
                gives **no privacy**; the object's ``repr`` then says so.

        Calling it again returns the same generator (no new noise, no new ε).
        """
        if not self.released:
            self._noise_seeded = rng is not None and rng.seeded
        return TreeGenerator(self._inner.release(core_rng(rng)))

    generator = release

    def to_bytes(self) -> bytes:
        """The unreleased summary as versioned, checksummed bytes (readable by Rust and
        Python): parameters, the public hash keys and the **exact** counts.

        For checkpoints (:func:`dpstream.save`) and for moving summaries between
        machines (:mod:`dpstream.privhp_dask`): :meth:`from_bytes` gives a summary
        that continues exactly, can be merged with its siblings and released once.

        **Not private**: the bytes hold exact counts (for instance the exact number
        of points in every cell of the top ``floor(log2 k)`` levels). Protect them
        like the raw data; only :meth:`release` output is private. Each summary
        decoded from the same bytes that is released spends its own ε.

        Raises:
            ValueError: the summary has been released (its exact counts are gone;
                save the :class:`TreeGenerator` instead).
        """
        return bytes(self._inner.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> PrivHP:
        """Decode :meth:`to_bytes` output into an unreleased summary.

        Raises:
            ValueError: truncated, corrupted or foreign data, or counts that no
                stream could have produced (the message starts with
                ``invalid dpstream state``).
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        inner = _core.PrivHP.from_bytes(bytes(data))
        self = cls.__new__(cls)
        num, den = inner.epsilon()
        self._inner = inner
        self._epsilon = Fraction(num, den)
        self._noise_seeded = False
        return self

    def __reduce__(self) -> tuple[object, tuple[bytes]]:
        # Pickling (e.g. by Dask) goes through to_bytes: the pickle holds exact
        # counts (protect it like the data) and released summaries are refused.
        return (_privhp_from_bytes, (self.to_bytes(),))

    def __repr__(self) -> str:
        seeded = "  # seeded noise: NOT PRIVATE" if self._noise_seeded else ""
        return (
            f"PrivHP(epsilon={self._epsilon}, dim={self.dim}, k={self.k}, width={self.width}, "
            f"rows={self.rows}, depth={self.depth}){seeded}"
        )


def _privhp_from_bytes(data: bytes) -> PrivHP:
    """Unpickle a :class:`PrivHP` (see ``PrivHP.__reduce__``)."""
    return PrivHP.from_bytes(data)


def _load_summary(data: bytes, *, allow_seeded: bool) -> PrivHP:
    """:func:`dpstream.load` of an unreleased summary: exact counts, no noise, so
    nothing seeded to refuse."""
    return PrivHP.from_bytes(data)


register(_load_summary, "PrivHP")

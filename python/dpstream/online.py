"""Online ε-DP synthetic data on ``[0,1]^d`` with an infinite time horizon.

Implements Algorithm 1 of He, Vershynin and Zhu, "Online differentially private
synthetic data generation": points arrive one per time step ``t = 1, 2, ...``;
the binary partition of ``[0,1]^d`` deepens as ``t`` grows (depth ``r`` once
``t >= ⌈2^r / ε⌉``), every region of depth ``1..r`` counts its points with an
inhomogeneous sparse counter (Algorithm 3), the noisy counts are made
non-negative and consistent (Algorithm 4), and at any time the synthetic data
are ``t`` points placed in the depth-``r`` cells independently of the data.
Expected accuracy: Wasserstein-1 distance ``O(log(t) · t^(-1/d) / ε)`` for
``d >= 2`` (polylogarithmic in ``t`` over ``t`` for ``d = 1``).

Privacy model:

* **Protected** (event level): two streams are neighbours if they differ in
  the point of *one* time step (one point replaced by another). Streams may be
  infinite.
* **Guarantee**: the whole sequence of outputs — every :meth:`~OnlineSynthesizer.release`
  and :meth:`~OnlineSynthesizer.cells` at any set of times, however many — is
  ε-DP jointly. Releases are post-processing of the same noisy counters, so
  asking for more of them spends no further privacy.
* **Public**: ε, the dimension ``d``, the time ``t`` (the number of points
  seen) and hence the partition depth and the number of regions.
* **How ε is split**: the region counters of depth ``j`` at time level ``r``
  run with ``ε_{j,r}`` (equations (4.1) and (5.1) of the paper, exact rationals
  rounded down, see :func:`dpstream.counters.online_epsilon`) with
  ``sup_r Σ_j ε_{j,r} <= ε/2``; a replaced point changes the counters of two
  regions per depth, so the total is at most ε.
* **Noise**: exact integer (discrete Laplace) noise from a ChaCha12
  cryptographically secure generator keyed by the operating system. A seeded
  :class:`dpstream.Rng` makes the synthesizer reproducible and gives **no
  privacy**; its ``repr`` then says so.

Units: points are coordinates in the unit cube ``[0,1]^d`` (unitless); time
``t`` counts points (one point per time step); ε is a bound on the privacy
loss in nats (every event's probability changes by a factor at most ``e^ε``);
:meth:`~OnlineSynthesizer.memory_bytes` is in bytes.
"""

from __future__ import annotations

from fractions import Fraction
from typing import NoReturn

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._arrays import int_param, points_array
from dpstream._params import RealLike, core_rng, exact_fraction
from dpstream._rng import Rng

__all__ = ["MAX_DIM", "OnlineSynthesizer"]

#: Largest dimension accepted (the privacy schedule takes ``2d``-th roots).
MAX_DIM = 4096


class OnlineSynthesizer:
    """ε-DP online synthetic data on ``[0,1]^d`` (He, Vershynin, Zhu, Algorithm 1).

    Feed points with :meth:`update` (``n`` rows are ``n`` consecutive time
    steps) and ask for synthetic data at any time with :meth:`release`. The
    whole sequence of outputs, at any set of times, is ε-DP for streams that
    differ in one point at one time step; see the module documentation for
    the privacy model.

    Args:
        epsilon: privacy budget ε of the whole stream of releases (nats), exact:
            a float is the binary fraction it stores, :class:`fractions.Fraction`
            and :class:`decimal.Decimal` are taken as they are.
        dim: dimension ``d`` of the points, ``1 <= d <= 4096``.
        rng: ``None`` (default): the synthesizer keys its own generator from the
            operating system — private. A :class:`dpstream.Rng`: the synthesizer's
            generator is derived from it (256 bits drawn from ``rng``); a seeded
            ``rng`` makes every output reproducible and gives **no privacy**.

    Public values: ε, ``d``, the time ``t``, the depth and the number of regions —
    all functions of ε, ``d`` and ``t`` only.

    The object cannot be copied or pickled (a copy would repeat the same noise);
    save it with :func:`dpstream.save` / :meth:`to_bytes` instead. A loaded
    synthesizer whose noise came from the operating system gets a fresh OS key
    (a checkpoint never stores a private key); a seeded one resumes its
    generator exactly, so save, load and continue gives the outputs of an
    uninterrupted run.
    """

    __slots__ = ("_epsilon", "_inner", "_released")

    def __init__(self, epsilon: RealLike, dim: int, *, rng: Rng | None = None) -> None:
        eps = exact_fraction(epsilon, "epsilon")
        d = int_param(dim, "dim", low=1, high=MAX_DIM)
        self._inner = _core.OnlineSynthesizer(eps.numerator, eps.denominator, d, core_rng(rng))
        self._epsilon = eps
        self._released = False

    @classmethod
    def _wrap(cls, inner: _core.OnlineSynthesizer) -> OnlineSynthesizer:
        obj = cls.__new__(cls)
        obj._inner = inner
        num, den = inner.epsilon()
        obj._epsilon = Fraction(num, den)
        # Whether the saved object had released is not recorded: assume it had.
        obj._released = int(inner.time) > 0
        return obj

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
        """Depth ``r`` of the partition at time ``t`` (public): the largest ``r``
        with ``⌈2^r / ε⌉ <= t``, or 0 before ``t = ⌈1/ε⌉``. The synthetic data
        live on the ``2^r`` cells of depth ``r``."""
        return int(self._inner.depth)

    @property
    def n_regions(self) -> int:
        """Regions with a private counter: all cells of depth ``1..depth`` (public)."""
        return int(self._inner.n_regions)

    @property
    def seeded(self) -> bool:
        """True if the noise comes from a seeded generator: reproducible, **not private**."""
        return bool(self._inner.seeded)

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent: ε from the first :meth:`release` on (all releases of the stream, at
        any times, are covered by it together), 0 before."""
        return self.epsilon if self._released else Fraction(0)

    @property
    def epsilon_remaining(self) -> Fraction:
        """ε not yet spent (ε before the first release, 0 after)."""
        return self.epsilon - self.epsilon_spent

    def memory_bytes(self) -> int:
        """Bytes held by the synthesizer.

        It grows with the number of regions, that is when the depth grows (at the
        public times ``⌈2^r / ε⌉``); for ``d = 1`` it also keeps 8 bytes per point (new
        cells count the points seen before they were created). Inside a level it stays
        constant, except that a region's counter grows a noise buffer by a few words
        when it closes a segment (a step of its private output), so on very
        concentrated data the footprint can grow slightly inside a level too.
        """
        return int(self._inner.memory_bytes())

    def update(self, points: object) -> None:
        """Feed a batch of ``(n, d)`` points in ``[0,1]^d``: ``n`` consecutive time steps.

        A 1-D array is ``n`` points when ``d = 1``. The work runs in Rust with the GIL
        released. The batch is all-or-nothing: a NaN, infinite or out-of-range value
        (or a wrong shape) raises ``ValueError`` and nothing is counted — ``t`` and the
        generator are unchanged. Splitting a stream into batches does not change any
        output: ``update(a); update(b)`` equals ``update(concat(a, b))``.
        """
        self._inner.update(points_array(points, self.dim))

    def release(self, size: int | None = None) -> npt.NDArray[np.float64]:
        """Synthetic data from the current private state, float64 in ``[0,1]^d``.

        Args:
            size: ``None`` (default): the paper's ``Y_t``, exactly ``t`` rows (the
                consistent leaf counts say how many points each depth-``r`` cell gets).
                An int ``m``: ``m`` independent rows drawn from the same private state.

        Returns:
            Array of shape ``(t, d)`` or ``(m, d)``.

        Raises:
            ValueError: ``size > 0`` before the first point (there is nothing to draw from).

        Post-processing of the ε-DP counters: it spends no privacy. It draws from the
        synthesizer's generator, so it advances the seeded stream of a seeded one.
        """
        m = None if size is None else int_param(size, "size", high=2**63 - 1)
        out = self._inner.release(m)
        self._released = True
        return out

    def cells(
        self,
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        """``(lower, upper, counts)`` of the ``L = 2^depth`` current leaves, by path θ.

        ``lower`` and ``upper`` are ``(L, d)`` float64 corners of the cells (same path
        encoding as :mod:`dpstream.partition`); ``counts`` are the ``(L,)`` int64
        consistent, non-negative private counts, which sum to ``t`` (ε-DP together
        with every other output).
        """
        cells = self._inner.cells()
        self._released = True
        return cells

    def to_bytes(self) -> bytes:
        """Versioned, checksummed checkpoint (kind ``"OnlineSynthesizer"``).

        **Sensitive**: it holds the exact counts inside the counters (and, for
        ``d = 1``, the cells of the points): keep it as secret as the data. It never
        holds an OS-drawn generator key; a seeded generator's state is stored, so a
        seeded synthesizer resumes exactly.
        """
        return bytes(self._inner.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> OnlineSynthesizer:
        """Decode :meth:`to_bytes` output; ``ValueError`` on corrupt or foreign data."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        return cls._wrap(_core.OnlineSynthesizer.from_bytes(bytes(data)))

    def _refuse_copy(self, *_: object) -> NoReturn:
        # A copy would replay the same noise: two continuations from identical
        # generators can be compared to cancel it.
        raise TypeError(
            "dpstream.OnlineSynthesizer cannot be copied or pickled: a copy would repeat "
            "the same noise; use dpstream.save/load (or to_bytes/from_bytes) to checkpoint"
        )

    __copy__ = _refuse_copy
    __deepcopy__ = _refuse_copy
    __reduce__ = _refuse_copy
    __reduce_ex__ = _refuse_copy

    def __repr__(self) -> str:
        text = (
            f"OnlineSynthesizer(epsilon={self._epsilon}, dim={self.dim}, t={self.t}, "
            f"depth={self.depth})"
        )
        if self.seeded:
            text += "  # seeded: reproducible, NOT PRIVATE"
        return text

"""Continual-release counters: a noisy running sum after every step, ε-DP for the whole stream.

A :class:`Counter` takes one integer increment per time step ``t = 1, 2, ...``
(negative values are deletions) and after each step releases the running sum
plus noise. A *vector* counter (``dim > 1``) takes an integer vector per step,
such as the change of a histogram, and releases a vector of noisy running sums.
The mechanisms are those of Chan, Shi and Song (2011), "Private and continual
release of statistics", and Algorithm 4 of Kumar, Strohmer and Vershynin:

==================  ===========================  ===================  ==================
kind                mechanism                    noise scale          error (std. dev.)
==================  ===========================  ===================  ==================
``simple``          Simple II                    ``1/ε``              ``O(√t / ε)``
``block``           Two-Level, blocks ``⌈√T⌉``   ``2/ε``              ``O(T^(1/4) / ε)``
``unbounded-block`` Algorithm 4 (KSV)            ``2/ε``              ``O(t^(1/3) / ε)``
``binary-tree``     Binary mechanism             ``L/ε``              ``O(log^1.5(T) / ε)``
``hybrid``          Hybrid mechanism             ``2/ε``, ``2k/ε``    ``O(log^1.5(t) / ε)``
==================  ===========================  ===================  ==================

``T`` is the horizon of a bounded counter, ``L = ⌈log2(T + 1)⌉`` the number
of levels of its tree, and ``k = ⌊log2 t⌋`` the hybrid counter's epoch. The
unbounded block counter cuts time into intervals of 4, 9, 16, ... steps with
blocks of 2, 3, 4, ...; its error grows like ``t^(1/3)`` (about ``t^(2/3)``
noisy block sums have finished by time ``t``).

Privacy model:

* **Protected** (event level): two streams are neighbours if they differ in
  the increment of *one* time step by a vector of ℓ1 norm at most 1 — one
  record added to or removed from one step (for ``dim = 1``: one increment
  changed by ±1). Streams may be infinite.
* **Guarantee**: the whole sequence of releases is ε-DP. An increment enters
  at most as many noisy values (step values, block sums, p-sums) as for a
  scalar counter, each by its ℓ1 norm, so the same per-coordinate noise
  scale that makes the scalar counter ε-DP makes the vector counter ε-DP.
* **Public**: the kind, ε, ``dim``, the horizon and the time ``t``.
* **How ε is split**: see :meth:`Counter.epsilon_split` — computed in the
  Rust core in one place; the shares sum to ε.
* Noise is exact discrete Laplace (integer) from a cryptographically secure
  generator; a seeded :class:`dpstream.Rng` makes a counter reproducible and
  **not private**.

Sparse counters (He, Vershynin, Zhu, "Online differentially private synthetic
data generation"), for streams of non-negative integers (Boolean in the paper)
that are mostly zero:

* :class:`SparseCounter` — Algorithm 2: a finite horizon ``T``; the timeline is
  cut into segments by a noisy threshold test against ``T_0 = ⌊9 ln T / ε⌋``
  and each closed segment's count is fed to a binary tree counter with
  ``ε/2``. The release is the private count of the closed segments. Error
  ``O((log T + log^1.5 n) / ε)`` with ``n`` non-zero values.
* :class:`InhomogeneousSparseCounter` — Algorithm 3: no horizon; time levels
  ``t_r = ⌈2^r / ε_time⌉``, one Algorithm-2 counter with ``ε_r / 2`` per
  level, a noisy level sum ``+ Lap_Z(2/ε_r)`` at each level's end, and steps
  before ``t_{r_0}`` ignored. A change at a step of level ``r`` costs
  ``ε_r`` (Lemma 3.3).
* :func:`online_epsilon` — the privacy schedule ``ε_{j,r}`` of the online
  synthesizer, equations (4.1) and (5.1), as exact rationals rounded down.

Checkpoints: every counter has ``to_bytes()`` and ``from_bytes(data, *,
rng=None, allow_seeded=False)`` (and works with :func:`dpstream.save` / :func:`dpstream.load`), a
versioned, checksummed encoding made by the Rust core. The bytes hold the
**exact** running sums, so they are as sensitive as the raw data: keep them
private. A :class:`Counter`'s bytes also hold its secret master key: the noise of
step ``t`` comes from a key derived from it, ``t`` and a digest of the increments so
far, so a checkpoint loaded any number of times and fed the same increments releases
the same values (the noisy values formed after a load, which cover released steps,
cannot be averaged); other increments give independent noise. A checkpoint supports
one continuation. The sparse counters store a master key too: each run of their tests
(from one count and threshold to the next; one uniform decides its first firing test),
each closing test and each level sum draws from a key derived from it, the run's first
step and a keyed digest of the values so far, whatever steps are skipped at once; the
same holds for them. A checkpoint written before the key draws one from ``rng`` (or a
fresh OS-seeded generator when ``rng`` is ``None``) at its next step. Every counter's
bytes also record whether its noise was seeded: loading such a checkpoint needs
``allow_seeded=True``, and the loaded counter stays marked NOT PRIVATE.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal, NamedTuple, Protocol

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._params import RealLike, core_rng, exact_fraction
from dpstream._rng import Rng

__all__ = [
    "KINDS",
    "Counter",
    "InhomogeneousSparseCounter",
    "KindName",
    "Share",
    "SparseCounter",
    "online_epsilon",
]

KindName = Literal["simple", "block", "unbounded-block", "binary-tree", "hybrid"]
#: The counter kinds, in the order of the table above.
KINDS: tuple[KindName, ...] = ("simple", "block", "unbounded-block", "binary-tree", "hybrid")
_I64_MIN, _I64_MAX = -(2**63), 2**63 - 1


class Share(NamedTuple):
    """The part of ε one family of noisy values spends.

    Each value of the family gets discrete Laplace noise of scale
    ``sensitivity / epsilon``: one increment enters at most ``sensitivity``
    values of the family. ``sensitivity`` is ``None`` for the hybrid counter's
    epoch trees, where it is the epoch ``k``: scale ``k / epsilon`` with this
    share's ``epsilon = ε/2``, i.e. ``2k/ε``.
    """

    family: str
    epsilon: Fraction
    sensitivity: int | None


def _count(value: object, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value!r}")
    return int(value)


def _int64(value: object, name: str) -> npt.NDArray[np.int64]:
    """``value`` as a C-contiguous int64 array of integers, or a clear error."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be integers, got bool")
    arr = np.asarray(value)
    if arr.dtype.kind in "fcO" and not isinstance(value, np.ndarray):
        # Python ints beyond int64 turn a list into floats or objects: look at the items.
        arr = np.asarray(value, dtype=object)
    if arr.dtype == object:
        flat = arr.ravel().tolist()
        if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in flat):
            raise TypeError(f"{name} must be integers")
        if any(not _I64_MIN <= int(v) <= _I64_MAX for v in flat):
            raise ValueError(f"{name} exceed the int64 range")
        arr = np.asarray([int(v) for v in flat], dtype=np.int64).reshape(arr.shape)
    elif arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if arr.size or arr.dtype != np.float64:  # [] and np.empty((0, d)) are fine
            raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    elif arr.dtype == np.uint64 and arr.size and int(arr.max()) > _I64_MAX:
        raise ValueError(f"{name} exceed the int64 range")
    return np.ascontiguousarray(arr, dtype=np.int64)


class _CoreStream(Protocol):
    @property
    def time(self) -> int: ...
    def memory_bytes(self) -> int: ...
    def to_bytes(self) -> bytes: ...


class _CoreScalarStream(_CoreStream, Protocol):
    @property
    def release(self) -> int: ...
    def step(self, value: int) -> int: ...
    def run(self, values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...


class _NoisyStream:
    """What every counter wrapper shares: the Rust object, time, seeding, memory, repr."""

    __slots__ = ("_inner", "_seeded")
    _inner: _CoreStream
    _seeded: bool

    @property
    def time(self) -> int:
        """Steps taken so far (public)."""
        return int(self._inner.time)

    @property
    def seeded(self) -> bool:
        """True if the noise comes from a seeded generator: reproducible, **not private**."""
        return self._seeded

    def _stream_epsilon(self) -> Fraction:
        eps: Fraction = getattr(self, "epsilon")  # noqa: B009 - subclasses define it
        return eps

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent: the stream's ε from the first step on (every release of the stream
        is covered by it), 0 before."""
        return self._stream_epsilon() if self.time > 0 else Fraction(0)

    @property
    def epsilon_remaining(self) -> Fraction:
        """ε not yet spent: the stream's ε before the first step, 0 after (later
        releases are inside the continual-release guarantee, not extra spending)."""
        return self._stream_epsilon() - self.epsilon_spent

    def memory_bytes(self) -> int:
        """Bytes held by the counter (its growth is stated in the class docs)."""
        return int(self._inner.memory_bytes())

    def to_bytes(self) -> bytes:
        """The counter's state as versioned, checksummed bytes (for :func:`dpstream.save`).

        **Sensitive**: the bytes hold the exact running sums (and, for the
        sparse counters, the exact counts and noisy thresholds): protect them
        like the raw data. The generator is not part of them; the bytes
        record whether the noise was seeded (see :meth:`Counter.from_bytes`).
        """
        return bytes(self._inner.to_bytes())

    def _describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        text = self._describe()
        if self._seeded:
            text += "  # seeded: reproducible, NOT PRIVATE"
        return text


class _ScalarStream(_NoisyStream):
    """Counters of non-negative scalar values (the sparse counters)."""

    __slots__ = ()
    _inner: _CoreScalarStream

    @property
    def release(self) -> int:
        """The private count after the last step (0 before the first output)."""
        return int(self._inner.release)

    def step(self, value: int) -> int:
        """Feed the next step's non-negative value; return the release after it.

        Refused with ``ValueError`` (negative value, horizon reached) or
        ``OverflowError`` (a count beyond ``2**62``); the counter and its
        generator are then unchanged.
        """
        return int(self._inner.step(_value(value)))

    def run(self, values: object) -> npt.NDArray[np.int64]:
        """Feed ``T`` values at once (shape ``(T,)``); return the ``T`` releases.

        Runs in Rust with the GIL released and equals ``T`` calls of
        :meth:`step`. All-or-nothing.
        """
        return self._inner.run(_values(values))


class Counter(_NoisyStream):
    """An ε-DP continual-release counter of integers or integer vectors.

    Args:
        kind: ``"simple"``, ``"block"``, ``"unbounded-block"``,
            ``"binary-tree"`` or ``"hybrid"`` (see :mod:`dpstream.counters`).
        epsilon: privacy parameter of the whole stream of releases (exact
            rational; ``0.1`` is the binary fraction it stores, pass
            ``Fraction(1, 10)`` for one tenth).
        dim: length of every increment and release (1 for a scalar counter).
        horizon: number of steps, required by ``"block"`` and
            ``"binary-tree"`` (which refuse further steps) and refused by the
            others, which run forever. Public.
        rng: generator of the noise; ``None`` gives the counter its own
            OS-seeded generator (private). A seeded :class:`dpstream.Rng`
            makes every release reproducible and gives **no privacy**.

    Privacy: the sequence of all releases is ε-DP when neighbouring streams
    differ in one step's increment by ℓ1 norm at most 1 (one record added or
    removed at one time). ε, ``kind``, ``dim``, ``horizon`` and the time are
    public. The counter keeps the exact running sum internally; only noisy
    sums leave it.

    Memory: ``O(dim)`` for the simple and block counters, ``O(dim · log T)``
    for the binary tree (allocated here) and ``O(dim · log t)`` for the hybrid
    counter; see :meth:`memory_bytes`.

    Raises:
        TypeError: a parameter has the wrong type.
        ValueError: unknown ``kind``; ``epsilon``, ``dim`` or ``horizon`` not
            positive; a horizon given to an unbounded counter or missing for a
            bounded one; ε so small that a noise scale exceeds ``2**56``.
    """

    __slots__ = ("_epsilon",)
    _inner: _core.Counter

    def __init__(
        self,
        kind: KindName,
        epsilon: RealLike,
        dim: int = 1,
        *,
        horizon: int | None = None,
        rng: Rng | None = None,
    ) -> None:
        if not isinstance(kind, str):
            raise TypeError(f"kind must be a string, got {type(kind).__name__}")
        eps = exact_fraction(epsilon, "epsilon")
        d = _count(dim, "dim", 1)
        h = None if horizon is None else _count(horizon, "horizon", 1)
        if h is not None and h > np.iinfo(np.uint64).max:
            raise ValueError(f"horizon must be below 2**64, got {h}")
        inner_rng = core_rng(rng)
        self._inner = _core.Counter(kind, eps.numerator, eps.denominator, d, h, inner_rng)
        self._epsilon = eps
        self._seeded = bool(self._inner.seeded)

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        rng: Rng | None = None,
        allow_seeded: bool = False,
    ) -> Counter:
        """Load a counter saved by :meth:`to_bytes` (or :func:`dpstream.save`).

        The loaded counter keys its noise with the checkpoint's master key (see
        the module docs): fed the same increments, every load gives the same
        releases as the saved counter would have, whatever ``rng`` is. ``rng``
        (``None``: a fresh OS-seeded generator) is used only by a counter saved
        before its first step or by an older dpstream, to draw its master key.

        The bytes record whether the saved counter's noise was seeded. Such a
        checkpoint is **not private** (its noise so far can be recomputed from
        the seed) and is refused unless ``allow_seeded=True``; loaded, the
        counter stays :attr:`seeded` (and its ``repr`` says NOT PRIVATE)
        whatever ``rng`` is. A counter saved by dpstream before the flag was
        recorded loads as not seeded.

        Raises:
            TypeError: ``data`` is not bytes, or ``rng`` is not a :class:`dpstream.Rng`.
            ValueError: the bytes are truncated, corrupted, of another kind
                or of a newer format version; or they hold a seeded counter
                and ``allow_seeded`` is false.
        """
        inner = _core.Counter.from_bytes(_data(data), core_rng(rng), bool(allow_seeded))
        obj = cls.__new__(cls)
        obj._inner = inner
        obj._epsilon = Fraction(*inner.epsilon())
        obj._seeded = bool(inner.seeded)
        return obj

    @property
    def kind(self) -> KindName:
        """The mechanism."""
        kind: KindName = self._inner.kind  # type: ignore[assignment]
        return kind

    @property
    def epsilon(self) -> Fraction:
        """The privacy parameter of the whole stream of releases (exact)."""
        return self._epsilon

    @property
    def dim(self) -> int:
        """Length of every increment and release."""
        return int(self._inner.dim)

    @property
    def horizon(self) -> int | None:
        """Number of steps a bounded counter accepts; ``None`` when unbounded."""
        h = self._inner.horizon
        return None if h is None else int(h)

    @property
    def release(self) -> npt.NDArray[np.int64]:
        """The noisy running sums after the last step, shape ``(dim,)`` (zeros before any step)."""
        return self._inner.release

    def epsilon_split(self) -> list[Share]:
        """How ε is divided between the families of noisy values; the shares sum to ε."""
        return [Share(f, Fraction(n, d), s) for f, n, d, s in self._inner.epsilon_split()]

    def step(self, increment: object) -> npt.NDArray[np.int64]:
        """Feed the next step's increment; return the release after it, shape ``(dim,)``.

        ``increment`` is an int (when ``dim == 1``) or ``dim`` integers. The
        step is refused with ``ValueError`` (wrong length, horizon reached) or
        ``OverflowError`` (a running sum beyond the int64 range), and then the
        counter and its generator are unchanged.
        """
        dim = self._inner.dim
        if isinstance(increment, (int, np.integer)) and not isinstance(increment, (bool, np.bool_)):
            if dim != 1:
                raise ValueError(
                    f"an int increment needs dim == 1; pass {dim} integers for dim {dim}"
                )
            value = int(increment)
            if not _I64_MIN <= value <= _I64_MAX:
                raise ValueError("increment exceed the int64 range")
            return self._inner.step(np.array([value], dtype=np.int64))
        arr = _int64(increment, "increment")
        if arr.shape != (dim,):
            raise ValueError(f"increment must have shape ({dim},), got {arr.shape}")
        return self._inner.step(arr)

    def run(self, increments: object) -> npt.NDArray[np.int64]:
        """Feed ``T`` steps at once; return the ``T`` releases, one row per step.

        ``increments`` has shape ``(T, dim)`` (or ``(T,)`` when ``dim == 1``,
        and then the result has shape ``(T,)`` too). The work runs in Rust with
        the GIL released; the result equals ``T`` calls of :meth:`step`.
        All-or-nothing: if any step is refused, or ``T`` steps would pass the
        horizon, nothing is counted and the generator is unchanged.
        """
        arr = _int64(increments, "increments")
        flat = arr.ndim == 1 and self.dim == 1
        if flat:
            arr = arr.reshape(-1, 1)
        if arr.ndim != 2 or arr.shape[1] != self.dim:
            raise ValueError(f"increments must have shape (T, {self.dim}), got {arr.shape}")
        out = self._inner.run(arr)
        return out.reshape(-1) if flat else out

    def _describe(self) -> str:
        horizon = "" if self.horizon is None else f", horizon={self.horizon}"
        return (
            f"Counter({self.kind!r}, epsilon={self.epsilon}, dim={self.dim}{horizon}, "
            f"time={self.time})"
        )


def _data(data: object) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    return bytes(data)


def _value(value: object, name: str = "value") -> int:
    """A non-negative int64 value, or a clear error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if v < 0:
        raise ValueError(f"{name} must be non-negative, got {v}")
    if v > _I64_MAX:
        raise ValueError(f"{name} exceeds the int64 range")
    return v


def _values(values: object) -> npt.NDArray[np.int64]:
    arr = _int64(values, "values")
    if arr.ndim != 1:
        raise ValueError(f"values must have shape (T,), got {arr.shape}")
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"values must be non-negative, got {int(arr.min())}")
    return arr


def online_epsilon(epsilon: RealLike, dim: int, j: int, r: int) -> Fraction:
    """The privacy parameter ``ε_{j,r}`` of a depth-``j`` cell at time level ``r``.

    The schedule of the online synthesizer on ``[0,1]^dim`` (He, Vershynin,
    Zhu): equation (4.1) for ``dim >= 2``, ``C_1 · ε · 2^((j−r)(1−1/d)/2)``
    with ``C_1 = (1 − 2^(−(1−1/d)/2)) / 2`` (levels ``r >= j``), and (5.1) for
    ``dim == 1``, ``3/π² · ε / (j+1)²`` (any ``r``). The value is an exact
    rational, rounded *down* from the irrational formula (rigorously, within
    relative distance ``2^-31``), so that ``Σ_{j=1}^{s} ε_{j,s} <= ε/2`` for
    every ``s`` — the condition of Proposition 4.1 — holds exactly.

    Raises:
        ValueError: ``epsilon`` not positive, ``dim`` outside ``1..4096``,
            ``j < 1``, or ``r < j`` when ``dim >= 2``.
    """
    eps = exact_fraction(epsilon, "epsilon")
    d = _count(dim, "dim", 1)
    jj = _count(j, "j", 1)
    rr = _count(r, "r", 0)
    if max(d, jj, rr) >= 2**32:
        raise ValueError("dim, j and r must be below 2**32")
    n, den = _core.online_epsilon(eps.numerator, eps.denominator, d, jj, rr)
    return Fraction(n, den)


class SparseCounter(_ScalarStream):
    """Sparse counting with a finite horizon (Algorithm 2 of He, Vershynin, Zhu).

    Args:
        epsilon: privacy parameter of the whole stream of releases (exact
            rational; ``0.1`` is the binary fraction it stores).
        horizon: the number of steps ``T`` (public); later steps are refused.
        rng: generator of the noise; ``None`` gives the counter its own
            OS-seeded generator (private). A seeded :class:`dpstream.Rng`
            makes the releases reproducible and gives **no privacy**.

    The timeline is cut into segments: segment ``j`` gets a noisy threshold
    ``T_0 + λ_j`` with the public ``T_0 = ⌊9 ln T / ε⌋`` (:attr:`threshold`),
    and before each value a test ``N_j + λ'_t <= T_0 + λ_j`` decides whether
    the segment goes on (``N_j`` is its exact count). A closed segment's count
    is fed to a binary tree counter with ``ε/2`` and horizon ``T``. The
    release is the tree's latest output — the private count of the closed
    segments — constant within a segment and *not* monotone. ``λ_j`` and
    ``λ'_t`` are ``Lap_Z(2/ε)``, the paper's scales verbatim.

    Privacy (Lemma 3.2): the sequence of releases (and :attr:`segments`) is
    ε-DP when neighbouring streams differ in one step's value by ±1: ``ε/2``
    for the partition into segments, ``ε/2`` for the tree. ``T``, ε, ``T_0``
    and the time are public.

    Raises:
        TypeError: a parameter has the wrong type.
        ValueError: ``epsilon`` or ``horizon`` not positive, or ε so small
            that a noise scale exceeds ``2**56``.
    """

    __slots__ = ("_epsilon",)
    _inner: _core.SparseCounter

    def __init__(self, epsilon: RealLike, horizon: int, *, rng: Rng | None = None) -> None:
        eps = exact_fraction(epsilon, "epsilon")
        h = _count(horizon, "horizon", 1)
        if h > np.iinfo(np.uint64).max:
            raise ValueError(f"horizon must be below 2**64, got {h}")
        self._inner = _core.SparseCounter(eps.numerator, eps.denominator, h, core_rng(rng))
        self._epsilon = eps
        self._seeded = bool(self._inner.seeded)

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        rng: Rng | None = None,
        allow_seeded: bool = False,
    ) -> SparseCounter:
        """Load a counter saved by :meth:`to_bytes`; the generator and the seeded
        flag as in :meth:`Counter.from_bytes` (a seeded checkpoint needs
        ``allow_seeded=True``; one saved before the flag was recorded loads as
        not seeded).

        Raises:
            TypeError: ``data`` is not bytes, or ``rng`` is not a :class:`dpstream.Rng`.
            ValueError: the bytes are truncated, corrupted, of another kind
                or of a newer format version; or they hold a seeded counter
                and ``allow_seeded`` is false.
        """
        inner = _core.SparseCounter.from_bytes(_data(data), core_rng(rng), bool(allow_seeded))
        obj = cls.__new__(cls)
        obj._inner = inner
        obj._epsilon = Fraction(*inner.epsilon())
        obj._seeded = bool(inner.seeded)
        return obj

    @property
    def epsilon(self) -> Fraction:
        """The privacy parameter of the whole stream (exact)."""
        return self._epsilon

    @property
    def horizon(self) -> int:
        """The number of steps ``T`` the counter accepts (public)."""
        return int(self._inner.horizon)

    @property
    def threshold(self) -> int:
        """The public partition threshold ``T_0 = ⌊9 ln T / ε⌋``."""
        return int(self._inner.threshold)

    @property
    def segments(self) -> int:
        """Number of closed segments (part of the ε-DP output)."""
        return int(self._inner.segments)

    def epsilon_split(self) -> list[Share]:
        """``ε/2`` for the segment partition, ``ε/2`` for the tree's p-sums; sums to ε."""
        return [Share(f, Fraction(n, d), s) for f, n, d, s in self._inner.epsilon_split()]

    def _describe(self) -> str:
        return (
            f"SparseCounter(epsilon={self.epsilon}, horizon={self.horizon}, "
            f"threshold={self.threshold}, time={self.time})"
        )


class InhomogeneousSparseCounter(_ScalarStream):
    """Inhomogeneous sparse counting (Algorithm 3 of He, Vershynin, Zhu); no horizon.

    Args:
        time_epsilon: the ε that defines the time levels ``t_r = ⌈2^r / ε⌉``
            (the synthesizer's total ε; public, exact).
        start_level: ``r_0``; steps before ``t_{r_0}`` are ignored (release 0).
        level_epsilons: ``ε_{r_0}, ε_{r_0+1}, ...`` (exact, positive). A step in
            a level past the end of this sequence is refused. See
            :meth:`online` for the synthesizer's infinite schedule.
        rng: as for :class:`SparseCounter`; seeded means **not private**.

    Within level ``r`` an Algorithm-2 counter (:class:`SparseCounter`) with
    ``ε_r / 2`` and horizon ``t_{r+1} − t_r`` gives ``c_t``; the release is
    ``S̃ + c_t``, and at the end of the level ``S̃`` grows by the level's exact
    sum plus ``Lap_Z(2/ε_r)``. Levels holding no step are skipped.

    Privacy (Lemma 3.3): if two streams differ in the value of one step of
    level ``r >= r_0`` by ±1, the whole sequence of releases is ``ε_r``-DP;
    if the step is before ``t_{r_0}`` the releases do not depend on it.
    ``time_epsilon``, ``r_0``, the schedule and the time are public.
    """

    __slots__ = ("_time_epsilon",)
    _inner: _core.InhomogeneousSparseCounter

    def __init__(
        self,
        time_epsilon: RealLike,
        start_level: int,
        level_epsilons: Sequence[RealLike],
        *,
        rng: Rng | None = None,
        _online: tuple[Fraction, int, int] | None = None,
    ) -> None:
        teps = exact_fraction(time_epsilon, "time_epsilon")
        r0 = _count(start_level, "start_level", 0)
        if r0 >= 2**32:
            raise ValueError("start_level must be below 2**32")
        if _online is None:
            if isinstance(level_epsilons, (str, bytes)) or not isinstance(level_epsilons, Sequence):
                raise TypeError("level_epsilons must be a sequence of numbers")
            table = [exact_fraction(e, "level epsilon") for e in level_epsilons]
            if not table:
                raise ValueError("level_epsilons must not be empty")
            pairs: list[tuple[int, int]] | None = [(e.numerator, e.denominator) for e in table]
            online = None
        else:
            eps, dim, depth = _online
            pairs, online = None, (eps.numerator, eps.denominator, dim, depth)
        self._inner = _core.InhomogeneousSparseCounter(
            teps.numerator, teps.denominator, r0, pairs, online, core_rng(rng)
        )
        self._time_epsilon = teps
        self._seeded = bool(self._inner.seeded)

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        rng: Rng | None = None,
        allow_seeded: bool = False,
    ) -> InhomogeneousSparseCounter:
        """Load a counter saved by :meth:`to_bytes`; the generator and the seeded
        flag as in :meth:`Counter.from_bytes` (a seeded checkpoint needs
        ``allow_seeded=True``; one saved before the flag was recorded loads as
        not seeded).

        The schedule (a table of level epsilons, or the online synthesizer's)
        is part of the bytes.

        Raises:
            TypeError: ``data`` is not bytes, or ``rng`` is not a :class:`dpstream.Rng`.
            ValueError: the bytes are truncated, corrupted, of another kind
                or of a newer format version; or they hold a seeded counter
                and ``allow_seeded`` is false.
        """
        inner = _core.InhomogeneousSparseCounter.from_bytes(
            _data(data), core_rng(rng), bool(allow_seeded)
        )
        obj = cls.__new__(cls)
        obj._inner = inner
        obj._time_epsilon = Fraction(*inner.time_epsilon())
        obj._seeded = bool(inner.seeded)
        return obj

    @classmethod
    def online(
        cls, epsilon: RealLike, dim: int, depth: int, *, rng: Rng | None = None
    ) -> InhomogeneousSparseCounter:
        """The counter of a depth-``depth`` cell of the online synthesizer on ``[0,1]^dim``.

        Time levels from ``epsilon``, ``r_0 = depth`` for ``dim >= 2`` and
        ``r_0 = 0`` for ``dim == 1``, and ``ε_r = online_epsilon(epsilon, dim,
        depth, r)``.
        """
        eps = exact_fraction(epsilon, "epsilon")
        d = _count(dim, "dim", 1)
        j = _count(depth, "depth", 1)
        if max(d, j) >= 2**32:
            raise ValueError("dim and depth must be below 2**32")
        return cls(eps, j if d >= 2 else 0, [], rng=rng, _online=(eps, d, j))

    @property
    def time_epsilon(self) -> Fraction:
        """The ε of the time levels (exact)."""
        return self._time_epsilon

    @property
    def start_level(self) -> int:
        """``r_0``."""
        return int(self._inner.start_level)

    @property
    def first_time(self) -> int:
        """``t_{r_0}``: the first step that is counted."""
        return int(self._inner.first_time)

    @property
    def level(self) -> int | None:
        """The time level of the last step; ``None`` before ``t_{r_0}``."""
        lv = self._inner.level
        return None if lv is None else int(lv)

    def level_epsilon(self, level: int) -> Fraction:
        """``ε_r`` of a level ``r >= r_0`` (exact)."""
        lv = _count(level, "level", 0)
        if lv >= 2**32:
            raise ValueError("level must be below 2**32")
        n, d = self._inner.level_epsilon(lv)
        return Fraction(n, d)

    def _stream_epsilon(self) -> Fraction:
        # Lemma 3.3: a change at a step of level r costs ε_r; the stream's guarantee is
        # the largest ε_r of the levels it has reached (0 before t_{r_0}).
        if self.level is None:
            return Fraction(0)
        return max(self.level_epsilon(r) for r in range(self.start_level, self.level + 1))

    def _describe(self) -> str:
        return (
            f"InhomogeneousSparseCounter(time_epsilon={self.time_epsilon}, "
            f"start_level={self.start_level}, time={self.time})"
        )

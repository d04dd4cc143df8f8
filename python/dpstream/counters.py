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
"""

from __future__ import annotations

import numbers
from fractions import Fraction
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._params import RealLike, core_rng, exact_fraction
from dpstream._rng import Rng

__all__ = ["KINDS", "Counter", "KindName", "Share"]

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


class Counter:
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

    __slots__ = ("_epsilon", "_inner", "_seeded")

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
    def time(self) -> int:
        """Steps taken so far (public)."""
        return int(self._inner.time)

    @property
    def seeded(self) -> bool:
        """True if the noise comes from a seeded generator: reproducible, **not private**."""
        return self._seeded

    @property
    def release(self) -> npt.NDArray[np.int64]:
        """The noisy running sums after the last step, shape ``(dim,)`` (zeros before any step)."""
        return self._inner.release

    def epsilon_split(self) -> list[Share]:
        """How ε is divided between the families of noisy values; the shares sum to ε."""
        return [Share(f, Fraction(n, d), s) for f, n, d, s in self._inner.epsilon_split()]

    def memory_bytes(self) -> int:
        """Bytes held by the counter: ``O(dim)``, or ``O(dim · log t)`` for the trees."""
        return int(self._inner.memory_bytes())

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

    def __repr__(self) -> str:
        horizon = "" if self.horizon is None else f", horizon={self.horizon}"
        text = (
            f"Counter({self.kind!r}, epsilon={self.epsilon}, dim={self.dim}{horizon}, "
            f"time={self.time})"
        )
        if self._seeded:
            text += "  # seeded: reproducible, NOT PRIVATE"
        return text

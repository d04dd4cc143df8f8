"""The continual-release counters of Chan, Shi and Song and Algorithm 4 of Kumar,
Strohmer and Vershynin (:class:`Counter`): a noisy running sum after every step, ε-DP for
the whole stream (see :mod:`dpstream.counters`).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._params import RealLike, core_rng, exact_fraction, int_param
from dpstream._rng import Rng
from dpstream.counters.base import (
    I64_MAX,
    I64_MIN,
    NoisyStream,
    Share,
    integer_array,
)
from dpstream.persistence import register

KindName = Literal["simple", "block", "unbounded-block", "binary-tree", "hybrid"]
#: The counter kinds, in the order of the table of :mod:`dpstream.counters`.
KINDS: tuple[KindName, ...] = ("simple", "block", "unbounded-block", "binary-tree", "hybrid")


class Counter(NoisyStream):
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

    __slots__ = ()
    _CORE = _core.Counter
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
        d = int_param(dim, "dim", low=1, high=None)
        h = None if horizon is None else int_param(horizon, "horizon", low=1, high=None)
        if h is not None and h > np.iinfo(np.uint64).max:
            raise ValueError(f"horizon must be below 2**64, got {h}")
        self._attach(_core.Counter(kind, eps.numerator, eps.denominator, d, h, core_rng(rng)))

    @property
    def kind(self) -> KindName:
        """The mechanism."""
        kind: KindName = self._inner.kind  # type: ignore[assignment]
        return kind

    @property
    def epsilon(self) -> Fraction:
        """The privacy parameter of the whole stream of releases (exact)."""
        return Fraction(*self._inner.epsilon())

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
            if not I64_MIN <= value <= I64_MAX:
                raise ValueError("increment exceed the int64 range")
            return self._inner.step(np.array([value], dtype=np.int64))
        arr = integer_array(increment, "increment")
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
        arr = integer_array(increments, "increments")
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


# A counter loaded by dpstream.load draws from a fresh OS-seeded generator; use
# from_bytes(data, rng=...) to give it one.
register(Counter.from_bytes, "Counter")

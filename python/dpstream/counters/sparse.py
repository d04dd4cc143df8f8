"""Sparse counters (He, Vershynin, Zhu, "Online differentially private synthetic data
generation") for non-negative streams that are mostly zero, and the online synthesizer's
privacy schedule (see :mod:`dpstream.counters`).
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from dpstream import _core
from dpstream._params import RealLike, core_rng, exact_fraction, int_param
from dpstream._rng import Rng
from dpstream.counters.base import ScalarStream, Share
from dpstream.persistence import register


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
    d = int_param(dim, "dim", low=1, high=None)
    jj = int_param(j, "j", low=1, high=None)
    rr = int_param(r, "r", low=0, high=None)
    if max(d, jj, rr) >= 2**32:
        raise ValueError("dim, j and r must be below 2**32")
    n, den = _core.online_epsilon(eps.numerator, eps.denominator, d, jj, rr)
    return Fraction(n, den)


class SparseCounter(ScalarStream):
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

    __slots__ = ()
    _CORE = _core.SparseCounter
    _inner: _core.SparseCounter

    def __init__(self, epsilon: RealLike, horizon: int, *, rng: Rng | None = None) -> None:
        eps = exact_fraction(epsilon, "epsilon")
        h = int_param(horizon, "horizon", low=1, high=None)
        if h > np.iinfo(np.uint64).max:
            raise ValueError(f"horizon must be below 2**64, got {h}")
        self._attach(_core.SparseCounter(eps.numerator, eps.denominator, h, core_rng(rng)))

    @property
    def epsilon(self) -> Fraction:
        """The privacy parameter of the whole stream (exact)."""
        return Fraction(*self._inner.epsilon())

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


register(SparseCounter.from_bytes, "SparseCounter")


class InhomogeneousSparseCounter(ScalarStream):
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
    ``time_epsilon``, ``r_0``, the schedule and the time are public. The schedule (a
    table of level epsilons, or the online synthesizer's) is part of :meth:`to_bytes`.
    """

    __slots__ = ()
    _CORE = _core.InhomogeneousSparseCounter
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
        r0 = int_param(start_level, "start_level", low=0, high=None)
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
        self._attach(
            _core.InhomogeneousSparseCounter(
                teps.numerator, teps.denominator, r0, pairs, online, core_rng(rng)
            )
        )

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
        d = int_param(dim, "dim", low=1, high=None)
        j = int_param(depth, "depth", low=1, high=None)
        if max(d, j) >= 2**32:
            raise ValueError("dim and depth must be below 2**32")
        return cls(eps, j if d >= 2 else 0, [], rng=rng, _online=(eps, d, j))

    @property
    def time_epsilon(self) -> Fraction:
        """The ε of the time levels (exact)."""
        return Fraction(*self._inner.time_epsilon())

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
        lv = int_param(level, "level", low=0, high=None)
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


register(InhomogeneousSparseCounter.from_bytes, "InhomogeneousSparseCounter")

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
(from one count and threshold to the next), each closing test and each level sum draws
from a key derived from it, the run's first step and a keyed digest of the values so
far, whatever steps are skipped at once; the same holds for them. A checkpoint written
before the key draws one from ``rng`` (or a fresh OS-seeded generator when ``rng`` is
``None``) at its next step. Every counter's bytes also record whether its noise was
seeded: loading such a checkpoint needs
``allow_seeded=True``, and the loaded counter stays marked NOT PRIVATE.
"""

from dpstream.counters.base import Share
from dpstream.counters.continual import KINDS, Counter, KindName
from dpstream.counters.sparse import InhomogeneousSparseCounter, SparseCounter, online_epsilon

__all__ = [
    "KINDS",
    "Counter",
    "InhomogeneousSparseCounter",
    "KindName",
    "Share",
    "SparseCounter",
    "online_epsilon",
]

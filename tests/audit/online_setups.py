"""Worst-case neighbours for the sharp audits of the online synthesizers (issue 28).

Each setup releases ``cells()`` (the released noisy leaf counts) and reduces it to one
statistic, ``D = count(A) − count(B)``: the released counts of two sibling cells ``A`` and
``B`` at the deepest measured level, where the neighbouring streams differ (the replaced
point lies in ``A`` in one stream and in ``B`` in the other). Everything else is shared,
so no other measurement depends on the replaced step.

Each setup also states its **analytical privacy loss**: the largest privacy loss of the
noisy measurements for this pair of neighbours, from the mechanism's own noise scales.
It is below ε when ε is split over depths, so the audits claim this pair loss (the
mechanism's guarantee for these neighbours), and a bug that spends twice the budget
(``tests/audit/test_audit_planted.py``) is flagged against it.

Used by ``test_audit_online_sharp.py`` (release build) and ``test_audit_planted.py``
(the ``planted-bugs`` build of ``make test-planted``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
from dpstream import OnlineSynthesizer, Rng
from dpstream.counters import online_epsilon

Box = tuple[np.ndarray, np.ndarray]


def cell(bits: list[int], dim: int = 2) -> Box:
    """The box of the binary-partition cell with path ``bits`` (coordinates split in turn,
    bit 0 the lower half), as in :mod:`dpstream.partition`."""
    lo, hi = np.zeros(dim), np.ones(dim)
    for i, b in enumerate(bits):
        c = i % dim
        mid = (lo[c] + hi[c]) / 2
        if b:
            lo[c] = mid
        else:
            hi[c] = mid
    return lo, hi


def centre(box: Box) -> np.ndarray:
    return (box[0] + box[1]) / 2


def released_count(lower: np.ndarray, upper: np.ndarray, counts: np.ndarray, box: Box) -> float:
    """The released count of ``box``: the sum of the leaves inside it, or NaN when a leaf
    straddles it (the tree was not grown down to the box: no event can count it)."""
    lo, hi = box
    inside = np.all(lower >= lo, axis=1) & np.all(upper <= hi, axis=1)
    overlap = np.all(np.minimum(upper, hi) - np.maximum(lower, lo) > 0, axis=1)
    if np.any(overlap & ~inside):
        return float("nan")
    return float(counts[inside].sum())


@dataclass(frozen=True)
class Setup:
    """A sharp audit: neighbours, the released statistic and the pair's analytical loss."""

    name: str
    epsilon: Fraction  # the synthesizer's ε
    loss: Fraction  # analytical privacy loss of this pair (≤ ε)
    neighbours: tuple[np.ndarray, np.ndarray]
    mechanism: Callable[[np.ndarray, Rng, int], np.ndarray]
    tails: tuple[int, int]  # the tails of D audited: {D >= upper}, {D <= lower}

    def audit(self, audited: Callable[..., Any], label: str, runs: int, seed: int) -> Any:
        """Audit the claim "this pair loses at most ``loss``" with ``runs`` runs per side
        (in batches of at most 30 000), counting the two tails of ``D``."""
        return audited(
            label,
            self.mechanism,
            self.neighbours,
            epsilon=self.loss,
            runs=runs,
            batch_size=min(runs, 30_000),
            events=tail_events(*self.tails),
            seed=seed,
        )


# ---------------------------------------------------------------------------------------
# The default online synthesizer (method="epochs")
# ---------------------------------------------------------------------------------------

EPOCHS_EPSILON = Fraction(6)
EPOCH1 = 6  # points of epoch 1 (uniform): block depth 5
EPOCH2 = 18  # points of epoch 2 (all in P): block depth 6
EPOCHS_DEPTHS = (5, 6)
# A and B: the two halves of the level-5 cell P = [0, 1/8) × [0, 1/4), at level 6.
EPOCHS_A = cell([0] * 6)
EPOCHS_B = cell([0] * 5 + [1])


def epochs_setup() -> Setup:
    """Two epochs (two releases), d = 2, ε = 6; the neighbours differ in step 12.

    * Epoch 1: 6 uniform points (seeded), then a release. Block 1 (super-block k = 0) has
      6 points: depth ``L_1 = 5`` (2^5·5·2 = 320 ≤ 16·6·6 = 576 < 2^6·6·2 = 768).
    * Epoch 2: 18 points, 9 at the centre of ``A`` and 9 at the centre of ``B`` (siblings
      at level 6 inside the level-5 cell ``P``), then a release. Step 12 (the 6th point of
      epoch 2) lies in ``A`` in stream ``a`` and in ``B`` in stream ``b``. Block 2 (k = 0)
      has 18 points: depth ``L_2 = 6`` (2^6·6·2 = 768 ≤ 16·18·6 = 1728 < 2^7·7·2 = 1792),
      noise scale ``λ_2 = 2·L_2·(k+1)/ε = 2``.
    * Two depths: levels 1–5 pool both blocks (scaled by ``t / 24``); level 6 is measured
      by block 2 alone (scale factor ``t / 18``). Threshold: the tree grows a cell while
      its pooled measurement is at least one standard deviation of its children's noise
      (``EXPAND_SDS``); the 18 points of ``P`` carry the growth across the threshold down
      to level 6 at ``A`` and ``B`` (in all but ≈ 0.3 % of runs: ``D`` is then NaN),
      while the cells of epoch 1's scattered points stay pruned above it.

    Analytical loss: steps of epoch 1 and the first release do not involve step 12. In
    block 2 the replaced point changes, at every level ``l ≤ 5``, no cell (``A`` and
    ``B`` share their ancestors), and at level 6 the count of ``A`` by +1 and of ``B``
    by −1: an ℓ1 change of 2 at scale ``λ_2 = 2``, a privacy loss of ``2/λ_2 = 1 = ε/6``
    (not ε: the block's ε is split over its 6 levels). The release (growth, least
    squares, rounding) is post-processing. The statistic ``D`` keeps the difference of
    the two level-6 measurements: for sibling leaves the least-squares fit changes
    ``x_A − x_B`` only through ``y_A − y_B`` (scaled).
    """
    g = np.random.default_rng(5)
    first = g.random((EPOCH1, 2))
    second = np.array([centre(EPOCHS_A) if i % 2 else centre(EPOCHS_B) for i in range(EPOCH2)])
    a = np.vstack([first, second])
    b = a.copy()
    a[EPOCH1 + 5], b[EPOCH1 + 5] = centre(EPOCHS_A), centre(EPOCHS_B)
    scale = Fraction(2 * EPOCHS_DEPTHS[1]) / EPOCHS_EPSILON
    return Setup(
        "online epochs: level-6 pair",
        EPOCHS_EPSILON,
        2 / scale,
        (a, b),
        epochs_mechanism,
        (4, -6),
    )


def two_releases(
    make: Callable[[Rng], OnlineSynthesizer],
    epoch1: int,
    boxes: tuple[Box, Box],
    points: np.ndarray,
    rng: Rng,
    size: int,
) -> np.ndarray:
    """``size`` runs of a synthesizer from ``make``: a release after the first ``epoch1``
    points and one after the rest; ``D = count(A) − count(B)`` of the second release."""
    out = np.empty(size)
    for i in range(size):
        s = make(rng)
        s.update(points[:epoch1])
        s.cells()
        s.update(points[epoch1:])
        cells = s.cells()
        out[i] = released_count(*cells, boxes[0]) - released_count(*cells, boxes[1])
    return out


def epochs_synthesizer(rng: Rng) -> OnlineSynthesizer:
    return OnlineSynthesizer(EPOCHS_EPSILON, 2, rng=rng)


def epochs_mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
    """``size`` runs: two releases (after epochs 1 and 2); ``D`` of the second one."""
    return two_releases(epochs_synthesizer, EPOCH1, (EPOCHS_A, EPOCHS_B), points, rng, size)


# ---------------------------------------------------------------------------------------
# He–Vershynin–Zhu Algorithm 1 (method="paper")
# ---------------------------------------------------------------------------------------

PAPER_EPSILON = Fraction(16)
PAPER_LEVEL = 7  # time level of the replaced step: t_7 = ⌈2^7/16⌉ = 8, t_8 = 16
PAPER_STEPS = 16  # the release is at t = 16 = t_8 (level 8, depth 8)
PAPER_STEP = 15  # the replaced step: the last of level 7
PAPER_A = cell([0] * 7)
PAPER_B = cell([0] * 6 + [1])


def paper_setup() -> Setup:
    """One release at t = 16, d = 2, ε = 16; the neighbours differ in step 15.

    * Time levels ``t_r = ⌈2^r/16⌉``: level 7 is steps 8–15, level 8 starts at 16. At
      ``t = 16`` the partition has depth 8; ``A`` and ``B`` are siblings at depth 7.
    * Odd steps put their point at the centre of ``B``, even steps at the centre of ``A``;
      step 15 is in ``A`` in stream ``a`` and in ``B`` in stream ``b``. In level 7 ``A``
      holds 5 (``a``) or 4 (``b``) points, ``B`` 3 or 4.
    * Two depths: the released depth-8 leaves below ``A`` and ``B`` and every ancestor's
      counter up to depth 1 enter the consistency step. Threshold: step 15 is the last
      step of level 7, so the counters of ``A`` and ``B`` close the level right after it
      and add their level sums with ``Lap_Z(2/ε_{7,7})`` noise. Their Algorithm-2
      (sparse) thresholds are ``T_0 = ⌊9 ln 8/(ε_{7,7}/2)⌋ = 29``: no segment closes here.

    Analytical loss: ``x`` and ``y`` share every cell of depth ≤ 6. For d ≥ 2 a depth-8
    cell starts at level 8 (``r_0 = 8``) and ignores step 15. So only the counters of
    ``A`` and ``B`` (Algorithm 3 with ``ε_{7,7} = online_epsilon(16, 2, 7, 7)``) see the
    replaced step, by ±1 each. Within level 7 the step is the last: Algorithm 2 tests
    before consuming each value, so no test of level 7 contains ``X_15`` and its segment
    never closes; the partition and ``A_sub`` have the same law on both streams. The only
    output that depends on ``X_15`` is the level sum ``S̃ + Σ X + Lap_Z(2/ε_{7,7})``:
    ``ε_{7,7}/2`` per counter, ``ε_{7,7} ≈ 1.273`` for the pair (not ε = 16: ε is split
    over depths, time levels and the two halves of each counter). Consistency is
    post-processing; it keeps ``count(A) − count(B)`` (up to the rounding of an odd
    excess) unless a child is clipped at 0.
    """
    steps = np.arange(1, PAPER_STEPS + 1)
    a = np.array([centre(PAPER_A) if s % 2 == 0 else centre(PAPER_B) for s in steps])
    b = a.copy()
    a[PAPER_STEP - 1], b[PAPER_STEP - 1] = centre(PAPER_A), centre(PAPER_B)
    return Setup(
        "online paper: depth-7 pair",
        PAPER_EPSILON,
        online_epsilon(PAPER_EPSILON, 2, PAPER_LEVEL, PAPER_LEVEL),
        (a, b),
        paper_mechanism,
        (3, -3),
    )


def one_paper_release(
    epsilon: Fraction, boxes: tuple[Box, Box], points: np.ndarray, rng: Rng, size: int
) -> np.ndarray:
    """``size`` runs of ``method="paper"`` at ``epsilon``: one release after all the
    points; ``D = count(A) − count(B)`` of it."""
    out = np.empty(size)
    for i in range(size):
        s = OnlineSynthesizer(epsilon, 2, method="paper", rng=rng)
        s.update(points)
        cells = s.cells()
        out[i] = released_count(*cells, boxes[0]) - released_count(*cells, boxes[1])
    return out


def paper_mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
    """``size`` runs: one release at ``t = 16``; its ``D``."""
    return one_paper_release(PAPER_EPSILON, (PAPER_A, PAPER_B), points, rng, size)


# ---------------------------------------------------------------------------------------
# method="paper" with the replaced step deciding two Algorithm-2 threshold crossings
# ---------------------------------------------------------------------------------------

THRESHOLD_EPSILON = Fraction(128)
THRESHOLD_LEVEL = 10  # t_10 = ⌈2^10/128⌉ = 8, t_11 = 16: level 10 is steps 8–15 (H = 8)
THRESHOLD_START = 8  # t_10: the replaced step, the first of level 10
THRESHOLD_STEPS = 15  # one release at t = 15 = t_11 − 1, the last step of level 10
THRESHOLD_HORIZON = 8  # H = t_11 − t_10: the horizon of level 10's Algorithm-2 counters
THRESHOLD_T0 = 3  # their public threshold ⌊9 ln 8 / (ε_{10,10}/2)⌋ (checked by a test)
THRESHOLD_TREE_LEVELS = 4  # L = ⌈log2(H + 1)⌉ of their A_sub (checked by a test)
# A and B: siblings at depth 10 (the deepest cells at level 10), children of P = cell([0] * 9).
THRESHOLD_A = cell([0] * THRESHOLD_LEVEL)
THRESHOLD_B = cell([0] * (THRESHOLD_LEVEL - 1) + [1])
THRESHOLD_ELSEWHERE = np.array([0.9, 0.9])  # outside P


def paper_threshold_loss(eps_r: Fraction) -> Fraction:
    """The pair's loss ``2 (ε_r/4 + ε_r/(4L)) = (ε_r/2)(1 + 1/L)`` with ``L = 4``."""
    return eps_r / 2 * (1 + Fraction(1, THRESHOLD_TREE_LEVELS))


def paper_threshold_setup() -> Setup:
    """One release at t = 15, d = 2, ε = 128; the replaced step 8 decides whether the
    Algorithm-2 counters of ``A`` and ``B`` cross their threshold.

    * Time levels ``t_r = ⌈2^r/128⌉``: levels 0–7 start at 1 (only level 7 holds a
      step), level 8 is steps 2–3, level 9 steps 4–7, level 10 steps 8–15. At ``t = 15``
      the partition has depth 10, and ``A``, ``B`` are siblings at depth 10: their
      counters start at level 10 (``r_0 = 10``, ``S̃ = 0``), each an Algorithm-2
      counter with ``ε_r/2``, ``ε_r = online_epsilon(128, 2, 10, 10) ≈ 10.18``, horizon
      ``H = 8``: threshold ``T_0 = ⌊9 ln 8/(ε_r/2)⌋ = 3``, test and threshold noise
      ``Lap_Z(4/ε_r)``, and ``A_sub`` a binary tree of ``L = 4`` levels with p-sums at
      scale ``4L/ε_r`` (both checked against the library by a test).
    * Steps 1–7 alternate between the centres of ``B`` and ``A`` (shared: only cells of
      depth ≤ 9 exist then, and they hold ``A`` and ``B`` together). Step 8, the first
      of level 10, is at the centre of ``A`` in stream ``a`` and of ``B`` in stream
      ``b``; steps 9–11 are in ``B``, steps 12–14 in ``A``, step 15 outside ``P``.
    * The crossings: the tests before steps 9–15 all count step 8. In stream ``a``
      ``A`` holds 4 = ``T_0 + 1`` points at its last test and ``B`` 3; in stream ``b``
      ``A`` holds 3 and ``B`` 4. Without noise the counter holding 4 closes its first
      segment (it crosses the threshold) and the one holding 3 does not: the replaced
      step decides both crossings. Several depths: the released depth-10 leaves and
      every ancestor's counter (depths 1–9, shared) enter the consistency step.

    Analytical loss: ``x`` and ``y`` share every cell of depth ≤ 9, so only the
    counters of ``A`` and ``B`` see step 8, by ±1 each, within level 10; the release at
    ``t = 15`` comes before level 10 ends, so no level sum (``Lap_Z(2/ε_r)``) is
    released. For each of the two counters the release is ``Ñ``, the tree's output at
    the number ``k`` of closed segments: a function of the partition into segments and
    of the p-sums of ``k``'s binary decomposition. The partition (the segment closing
    times) costs ``ε_r/4`` (Lemma 3.2's AboveThreshold argument, threshold and test
    noise ``Lap_Z(4/ε_r)``); given it, step 8 changes one segment's count by 1, which
    enters exactly one p-sum of the decomposition, at scale ``4L/ε_r``: ``ε_r/(4L)``.
    The pair loses ``2 (ε_r/4 + ε_r/(4L)) = (ε_r/2)(1 + 1/L) = 5ε_r/8 ≈ 6.364``
    (:func:`paper_threshold_loss`), not ε = 128: ε is split over depths, time levels,
    the two halves of each counter and the tree's levels. Consistency is
    post-processing; it keeps ``count(A) − count(B) = max(Ñ_A, 0) − max(Ñ_B, 0)`` (up
    to the rounding of an odd excess) unless a child is clipped at 0.
    """
    steps = np.arange(1, THRESHOLD_STEPS + 1)
    a_centre, b_centre = centre(THRESHOLD_A), centre(THRESHOLD_B)
    a = np.array([a_centre if s % 2 == 0 else b_centre for s in steps])
    a[8:11] = b_centre  # steps 9–11
    a[11:14] = a_centre  # steps 12–14
    a[14] = THRESHOLD_ELSEWHERE  # step 15
    b = a.copy()
    a[THRESHOLD_START - 1], b[THRESHOLD_START - 1] = a_centre, b_centre
    eps_r = online_epsilon(THRESHOLD_EPSILON, 2, THRESHOLD_LEVEL, THRESHOLD_LEVEL)
    return Setup(
        "online paper: threshold-crossing depth-10 pair",
        THRESHOLD_EPSILON,
        paper_threshold_loss(eps_r),
        (a, b),
        paper_threshold_mechanism,
        (4, -4),
    )


def paper_threshold_mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
    """``size`` runs: one release at ``t = 15``; its ``D``."""
    boxes = (THRESHOLD_A, THRESHOLD_B)
    return one_paper_release(THRESHOLD_EPSILON, boxes, points, rng, size)


# ---------------------------------------------------------------------------------------
# Continual PrivHP in fixed memory (OnlineSynthesizer.for_memory, method="privhp")
# ---------------------------------------------------------------------------------------

PRIVHP_EPSILON = Fraction(32)
PRIVHP_MEMORY = 40_000  # bytes: k = 4, width = 8, depth 8 (checked by the sharp audit)
PRIVHP_EXPECTED_N = 32
PRIVHP_RELEASES = 2  # R = 2: L = 2 levels, block budget ε_b = ε/(2L) = 8
PRIVHP_DEPTH = 8
PRIVHP_EPOCH1 = 4  # points of epoch 1
PRIVHP_EPOCH2 = 17  # points of epoch 2
PRIVHP_STEP = PRIVHP_EPOCH1 + 9  # the replaced step (1-based): the 9th point of epoch 2
# A and B: siblings at the deepest level 8, children of P = cell([0] * 7).
PRIVHP_A = cell([0] * PRIVHP_DEPTH)
PRIVHP_B = cell([0] * (PRIVHP_DEPTH - 1) + [1])


def privhp_sigma_deepest() -> float:
    """``σ_8`` of PrivHP at ``ε_b = 8``, d = 2, k = 4, depth 8 under the optimal rule
    (equation (23), ``dpstream.privhp``): weights ``w_l = sqrt(Γ_{l−1})`` for ``l <= L_k = 2``
    and ``sqrt(k γ_{l−1})`` beyond, with ``γ_l = 2^{−⌊l/2⌋}``, ``Γ_l = 2^l γ_l``
    (``Γ_{−1} = 1``): ``1, 1, √2, √2, √2, 1, 1, 1/√2, 1/√2``, summing to ``4 + 4√2``. So
    ``σ_8 = 8 · (1/√2) / (4 + 4√2) = 2 − √2`` (the library floors each ``σ_l`` onto a
    ``2^-40`` grid: its ``σ_8`` is at most this). Derived here, not read from the library,
    so that a planted bug in the library's split cannot move the claim."""
    return 2 - 2**0.5


def privhp_setup() -> Setup:
    """Two epochs (two releases), d = 2, ε = 32, R = 2; the neighbours differ in step 13.

    * ``OnlineSynthesizer.for_memory(32, 2, memory_bytes=40_000, expected_n=32,
      max_releases=2)``: ``L = 2``, every block is released by PrivHP at ``ε_b = 32/4 =
      8``, with depth ``⌈log2(8 · 32)⌉ = 8``, ``k = 4`` (exact counts on levels 0–2,
      ``L_k = 2``) and one count-min row of width 8 on each of levels 3–8.
    * Epoch 1: 4 points, alternately at the centres of ``B`` and ``A`` (siblings at level
      8 inside the level-7 cell ``P``), then a release (block ``α_0``, generator ``g_0``).
      Epoch 2: 17 points, alternately at ``B`` and ``A``; step 13 (the 9th point of epoch 2)
      lies in ``A`` in stream ``a`` and in ``B`` in stream ``b``. Then a release: epoch 2
      closes a dyadic block of two epochs, so ``α_0`` and the open epoch merge into
      ``α_1``, released into ``g_1``, and ``g_0`` is dropped: the release's cells are
      ``g_1``'s leaves scaled to ``n_1 = t = 21`` (public).
    * Two depths and a threshold: the exact levels 0–2 and six sketched levels; the
      release grows only the children of the top ``k = 4`` cells of each sketched level,
      and the 21 points of ``P`` carry ``P``'s ancestors into the top 4 at every level, so
      that the tree reaches ``A`` and ``B`` at level 8 (in all but a few runs in 10 000:
      ``D`` is then NaN).

    Analytical loss: release 1 closes epoch 1 alone, without step 13. In release 2 the
    replaced point changes no count of levels 0–7 (``A`` and ``B`` share their ancestors),
    and at level 8 the count-min bucket of ``A`` by +1 and that of ``B`` by −1 (nothing if
    the two share a bucket; the hash keys are drawn independently of the data): an ℓ1
    change of 2 at scale ``1/σ_8``, a privacy loss of ``2σ_8 = 4 − 2√2 ≈ 1.172``
    (:func:`privhp_sigma_deepest`), not ε = 32: ε is split over the ``L = 2`` blocks a
    point can reach, the two halves of a replacement, and the 9 levels. Pruning,
    consistency (top-down: it keeps ``count(A) − count(B)`` unless a child is clipped at 0)
    and the scaling to ``n_1`` are post-processing.
    """
    a = np.array(
        [
            centre(PRIVHP_A) if i % 2 else centre(PRIVHP_B)
            for i in [*range(PRIVHP_EPOCH1), *range(PRIVHP_EPOCH2)]
        ]
    )
    b = a.copy()
    a[PRIVHP_STEP - 1], b[PRIVHP_STEP - 1] = centre(PRIVHP_A), centre(PRIVHP_B)
    return Setup(
        "online privhp (for_memory): level-8 pair",
        PRIVHP_EPSILON,
        Fraction(2 * privhp_sigma_deepest()),
        (a, b),
        privhp_mechanism,
        (3, -3),
    )


def privhp_synthesizer(rng: Rng) -> OnlineSynthesizer:
    return OnlineSynthesizer.for_memory(
        PRIVHP_EPSILON,
        2,
        memory_bytes=PRIVHP_MEMORY,
        expected_n=PRIVHP_EXPECTED_N,
        max_releases=PRIVHP_RELEASES,
        rng=rng,
    )


def privhp_mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
    """``size`` runs: two releases (after epochs 1 and 2); ``D`` of the second one."""
    boxes = (PRIVHP_A, PRIVHP_B)
    return two_releases(privhp_synthesizer, PRIVHP_EPOCH1, boxes, points, rng, size)


def tail_events(upper: int, lower: int) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The events the analysis points to (chosen before the audit runs): the tails of ``D``
    on either side (stream ``a`` shifts ``D`` up). NaN (tree not grown) is in neither."""
    return {
        f"D >= {upper}": lambda d: np.nan_to_num(d, nan=-np.inf) >= upper,
        f"D <= {lower}": lambda d: np.nan_to_num(d, nan=np.inf) <= lower,
    }


# ---------------------------------------------------------------------------------------
# The default method with the replaced point in a merged block (issue 41)
# ---------------------------------------------------------------------------------------

MERGED_EPSILON = Fraction(8)
MERGED_POINTS = 12  # points of the replaced point's epoch: block depth 6 (k = 1)
MERGED_DEPTH = 6
MERGED_LAST = 31  # the release after epoch 31 merges epochs 16–31 into one block
# A and B: siblings at level 6 in P = cell([0] * 5), as for the two-epoch audit.
MERGED_A = cell([0] * 6)
MERGED_B = cell([0] * 5 + [1])
MERGED_Q = cell([0] * 4 + [1])  # the sibling of P at level 5


def merged_block_scale(epsilon: Fraction, k: int, depth: int) -> Fraction:
    """``2·depth·(k+1)/ε``: the noise scale of a block of super-block ``k`` measuring
    ``depth`` levels, derived here from the documented split (a point of super-block
    ``k`` is in ``k + 1`` blocks of ``ε/(k+1)``), not read from the library."""
    return Fraction(2 * depth * (k + 1)) / epsilon


def merged_streams(epoch: int) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Streams of 31 epochs, d = 2: one point per epoch at the centre of ``Q``, the
    sibling of ``P`` (so that every level above ``P`` holds every point and the tree
    grows down to ``P``), except epoch ``epoch``: 12 points, 6 at the centre of ``A``, 5
    at the centre of ``B``, and the replaced point (``A`` in stream ``a``, ``B`` in
    ``b``). Returns the streams and the epoch sizes."""
    sizes = [MERGED_POINTS if e == epoch else 1 for e in range(1, MERGED_LAST + 1)]
    rows = []
    for e in range(1, MERGED_LAST + 1):
        if e == epoch:
            rows += [centre(MERGED_A)] * 6 + [centre(MERGED_B)] * 5 + [centre(MERGED_A)]
        else:
            rows.append(centre(MERGED_Q))
    a = np.array(rows)
    b = a.copy()
    at = sum(sizes[: epoch - 1]) + MERGED_POINTS - 1  # the last point of the epoch
    b[at] = centre(MERGED_B)
    return a, b, sizes


def merged_runs(
    points: np.ndarray, sizes: list[int], reads: dict[int, int], rng: Rng, size: int
) -> np.ndarray:
    """``size`` runs of the default synthesizer at ε = 8: a release after each of the 31
    epochs; at epoch ``e`` in ``reads``, ``reads[e]`` releases (the later ones without
    new points). The statistic: the sum of ``D = count(A) − count(B)`` over those
    releases (NaN if one did not grow down to ``A`` and ``B``)."""
    ends = np.cumsum(sizes)
    out = np.zeros(size)
    for i in range(size):
        s = OnlineSynthesizer(MERGED_EPSILON, 2, rng=rng)
        inner: Any = s._inner  # the core object: the 29 other releases, without overhead
        start = 0
        for e, end in enumerate(ends, start=1):
            inner.update(points[start:end])
            start = end
            if e not in reads:
                inner.release_tree()
                continue
            for _ in range(reads[e]):
                cells = s.cells()
                out[i] += released_count(*cells, MERGED_A) - released_count(*cells, MERGED_B)
    return out


def merged_two_blocks_setup() -> Setup:
    """The replaced point in two released blocks (d = 2, ε = 8): epoch 20 (super-block
    ``k = 1``) holds it, and the release after epoch 31 merges epochs 16–31.

    * Block ``[20, 20]``: 12 points, depth 6 (``2^6·6·4 = 1536 ≤ 16·12·8 = 1536 <
      2^7·7·4``), read by the release after epoch 20. Block ``[16, 31]``: 27 points,
      depth 6 (``16·27·8 = 3456 < 3584``), read by the release after epoch 31. The
      blocks of super-block 0 (one point each) measure 4 levels, the single blocks of
      epochs 16–31 other than 20 three: neither reaches level 6.
    * Statistic: ``D`` of the release after epoch 20 plus ``D`` of the release after
      epoch 31.

    Analytical loss: in each of the two blocks the point changes the level-6 counts of
    ``A`` and ``B`` by ±1 (they share every ancestor; no block measures deeper), at
    scale ``λ = 2·6·2/8 = 3``: ``2/λ = 2/3`` each, ``4/3`` together (basic composition;
    the two blocks' noise is independent). No other release reads a block with the
    point at level 6 (epoch 20's block is dropped at the merge).
    """
    a, b, sizes = merged_streams(20)
    scale = merged_block_scale(MERGED_EPSILON, 1, MERGED_DEPTH)

    def mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
        return merged_runs(points, sizes, {20: 1, MERGED_LAST: 1}, rng, size)

    return Setup(
        "online epochs: point in 2 blocks (epoch 20, merge at 31)",
        MERGED_EPSILON,
        2 * (2 / scale),
        (a, b),
        mechanism,
        (28, -20),
    )


MERGED_REPEATS = 4  # releases after epoch 31 (the last three without new points)


def merged_repeated_setup(
    repeats: int = MERGED_REPEATS, tails: tuple[int, int] = (24, -24)
) -> Setup:
    """The replaced point in a merged block only, released 4 times (d = 2, ε = 8): epoch
    31 holds it; its close merges epochs 16–31 into block ``[16, 31]`` (27 points, depth
    6, scale 3) before any release reads block ``[31, 31]``. Four releases follow
    (three without new points: the same blocks). Statistic: the sum of their ``D``.

    Analytical loss: the releases read one noisy measurement of the point's block, the
    same one four times (its noise is a fixed function of the block's key): ``2/λ =
    2/3``. A point in ``k + 2`` blocks (the merged block measured twice) loses ``4/3``;
    noise redrawn at each release, ``4 · 2/3``.
    """
    a, b, sizes = merged_streams(MERGED_LAST)
    scale = merged_block_scale(MERGED_EPSILON, 1, MERGED_DEPTH)

    def mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
        return merged_runs(points, sizes, {MERGED_LAST: repeats}, rng, size)

    return Setup(
        f"online epochs: merged block read {repeats} times (epoch 31)",
        MERGED_EPSILON,
        2 / scale,
        (a, b),
        mechanism,
        tails,
    )


def privhp_two_blocks_setup() -> Setup:
    """``for_memory`` with the replaced point in two released blocks: as
    :func:`privhp_setup` (ε = 32, R = 2, depth 8, ``A`` and ``B`` at level 8) but with 17
    points in epoch 1, the replaced one among them (step 9), and 4 in epoch 2. Release 1
    releases block ``α_0`` (epoch 1) into ``g_0``; release 2 merges epochs 1–2 into
    ``α_1``, released into ``g_1``. Statistic: ``D`` of release 1 plus ``D`` of release 2.

    Analytical loss: in each of the two blocks the point changes the level-8 count-min
    buckets of ``A`` and ``B`` by ±1, at scale ``1/σ_8``: ``2σ_8`` per block, ``4σ_8 =
    8 − 4√2 ≈ 2.343`` together (``σ_8`` derived by hand, :func:`privhp_sigma_deepest`).
    """
    sizes = (17, 4)
    a = np.array(
        [
            centre(PRIVHP_A) if i % 2 else centre(PRIVHP_B)
            for i in [*range(sizes[0]), *range(sizes[1])]
        ]
    )
    b = a.copy()
    a[8], b[8] = centre(PRIVHP_A), centre(PRIVHP_B)

    def mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
        out = np.empty(size)
        for i in range(size):
            s = privhp_synthesizer(rng)
            total = 0.0
            for lo, hi in ((0, sizes[0]), (sizes[0], sizes[0] + sizes[1])):
                s.update(points[lo:hi])
                cells = s.cells()
                total += released_count(*cells, PRIVHP_A) - released_count(*cells, PRIVHP_B)
            out[i] = total
        return out

    return Setup(
        "online privhp (for_memory): point in 2 released blocks",
        PRIVHP_EPSILON,
        Fraction(4 * privhp_sigma_deepest()),
        (a, b),
        mechanism,
        (8, -8),
    )

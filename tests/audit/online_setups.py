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


def epochs_mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
    """``size`` runs: two releases (after epochs 1 and 2); ``D`` of the second one."""
    out = np.empty(size)
    for i in range(size):
        s = OnlineSynthesizer(EPOCHS_EPSILON, 2, rng=rng)
        s.update(points[:EPOCH1])
        s.cells()
        s.update(points[EPOCH1:])
        cells = s.cells()
        out[i] = released_count(*cells, EPOCHS_A) - released_count(*cells, EPOCHS_B)
    return out


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


def paper_mechanism(points: np.ndarray, rng: Rng, size: int) -> np.ndarray:
    """``size`` runs: one release at ``t = 16``; its ``D``."""
    out = np.empty(size)
    for i in range(size):
        s = OnlineSynthesizer(PAPER_EPSILON, 2, method="paper", rng=rng)
        s.update(points)
        cells = s.cells()
        out[i] = released_count(*cells, PAPER_A) - released_count(*cells, PAPER_B)
    return out


def tail_events(upper: int, lower: int) -> dict[str, Callable[[np.ndarray], np.ndarray]]:
    """The events the analysis points to (chosen before the audit runs): the tails of ``D``
    on either side (stream ``a`` shifts ``D`` up). NaN (tree not grown) is in neither."""
    return {
        f"D >= {upper}": lambda d: np.nan_to_num(d, nan=-np.inf) >= upper,
        f"D <= {lower}": lambda d: np.nan_to_num(d, nan=np.inf) <= lower,
    }

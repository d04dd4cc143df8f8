"""The neighbouring streams of the counters' privacy audits: for every kind of
:class:`dpstream.counters.Counter`, the step ``t0`` whose increment differs by +1,
chosen so that it enters as many noisy values as the mechanism allows, and those values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Setup:
    """Where the neighbours differ and which noisy values contain that step."""

    kind: str
    horizon: int | None
    t0: int  # the step whose increment differs
    steps: int  # releases observed: times 1..steps
    values: tuple[tuple[int, int], ...]  # noisy values r_b - r_a containing step t0
    scales: tuple[int, ...]  # their noise scales, in units of 1/ε


SETUPS = {
    # Simple II: step 3's noisy value is r_3 - r_2.
    "simple": Setup("simple", None, 3, 6, ((2, 3),), (1,)),
    # Block, T = 16, B = 4: step 2's value r_2 - r_1 and its block (0, 4].
    "block": Setup("block", 16, 2, 8, ((1, 2), (0, 4)), (2, 2)),
    # Algorithm 4: times 5..13 form the second interval (blocks of 3); step 6's value
    # r_6 - r_5 and its block (4, 7].
    "unbounded-block": Setup("unbounded-block", None, 6, 13, ((5, 6), (4, 7)), (2, 2)),
    # Binary tree, T = 15, L = 4: step 1 lies in the p-sums (0, 1], (0, 2], (0, 4], (0, 8],
    # each of which is a release.
    "binary-tree": Setup("binary-tree", 15, 1, 15, ((0, 1), (0, 2), (0, 4), (0, 8)), (4, 4, 4, 4)),
    # Hybrid: step 9 is the first of epoch 3 (tree over 9..15, 3 levels, scale 6/ε):
    # p-sums r_9 - r_8, r_10 - r_8, r_12 - r_8; and the power-of-two increment r_16 - r_8.
    "hybrid": Setup("hybrid", None, 9, 16, ((8, 9), (8, 10), (8, 12), (8, 16)), (6, 6, 6, 2)),
}

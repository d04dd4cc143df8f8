"""The ε split of the tabular default (:mod:`dpstream.tabular.epochs`), in one place.

Each batch spends ε on its own rows (batches compose in parallel); :data:`SPLIT` says how,
:func:`split` turns it into exact budgets, and :func:`shared` splits a budget over
marginals by the public :func:`weights`. A test sums the split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = ["SPLIT", "Split", "shared", "split", "weights"]

#: Weights are rounded to multiples of 1/WEIGHT_GRID (exact rationals).
WEIGHT_GRID = 64


@dataclass(frozen=True)
class Split:
    """Shares of ε that each batch spends on its own rows (they sum to 1): on arrival
    ``fresh`` (its 1-way marginals), ``fresh_tree`` (the last closed epoch's tree
    marginals) and ``size`` (its row count); at its epoch's close ``settle`` (the epoch's
    1-way marginals), ``select`` (the tree's selection), ``tree`` (its marginals) and
    ``extra`` (the rounds that may add pairs to the tree, :mod:`~dpstream.tabular.epochs`)."""

    fresh: Fraction
    settle: Fraction
    select: Fraction
    tree: Fraction
    fresh_tree: Fraction = Fraction(0)
    size: Fraction = Fraction(0)
    extra: Fraction = Fraction(0)


#: The default split, chosen on the tuning tables (``research/tabular_default.md``): most of
#: ε to the closed epochs' trees and extra pairs, a quarter to the open epoch's fresh tree.
SPLIT = Split(
    fresh=Fraction(1, 10),
    settle=Fraction(1, 8),
    select=Fraction(1, 8),
    tree=Fraction(1, 4),
    fresh_tree=Fraction(1, 4),
    size=Fraction(1, 40),
    extra=Fraction(1, 8),
)


def split(epsilon: Fraction, shares: Split = SPLIT) -> Split:
    """The ε of each part of a batch's spend (the one place the split is computed)."""
    parts = (
        shares.fresh, shares.settle, shares.select, shares.tree, shares.fresh_tree, shares.size,
        shares.extra,
    )  # fmt: skip
    if sum(parts) != 1 or min(parts) < 0:
        raise ValueError(f"the shares of ε must be non-negative and sum to 1, got {shares}")
    return Split(*(epsilon * s for s in parts))


def weights(cells: Sequence[float]) -> list[Fraction]:
    """The public weight of each measured marginal of ``cells`` cells: ``√cells`` on a
    rational grid (splitting a budget in proportion to ``√cells`` minimises the expected
    ℓ1 noise of the marginals)."""
    return [Fraction(max(1, round(math.sqrt(c) * WEIGHT_GRID)), WEIGHT_GRID) for c in cells]


def shared(budget: Fraction, cells: Sequence[float]) -> list[Fraction]:
    """``budget`` split over marginals of ``cells`` cells by :func:`weights` (exact)."""
    w = weights(cells)
    total = sum(w, Fraction(0))
    return [budget * x / total for x in w]

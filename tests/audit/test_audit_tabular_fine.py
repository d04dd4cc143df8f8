"""Audit of the default tabular stream's fine 1-way measurement: the open epoch's fresh
1-way marginal of a column with a merged group, measured with its fresh share plus its
part of the fresh tree share (:mod:`dpstream.tabular.epochs`, ``FINE_WEIGHT``).

**Setup.** ``Domain({"a": 9, "b": 2})``, ε = 4. Batch 1 (the first epoch, closed at once):
``N1 = 400`` records with ``a = 0``, half of them ``b = 1``; ``a``'s eight empty categories
are merged into one group (each is kept with probability about 0.7%: see below). Batch 2
(the open epoch; too small to close it): ``N2 = 100`` records ``(1, 0)``. Neighbours
(add/remove): ``b`` has one more record ``(1, 0)`` in batch 2.

**Observable**: the open epoch's fresh sum of ``a = 1``, ``O = N2 (+1 in b) + Z``, ``Z``
exact discrete Laplace of scale ``1/ε_a``: ``ε_a = ε (fresh · w_a / (w_a + w_b) +
fresh_tree · w_g / (w_tree + w_g))``, the weights ``√cells`` on the 1/64 grid (``w_a = 3``,
``w_b = √2``; the tree pair's merged cells ``2 × 2``; the group's ``g = 8`` categories).
The merge is a function of batch 1 alone, the same on both sides, so the observable is
the same mixture over merges on both sides and its loss is at most the largest ``ε_a``
over the merges: ``g = 8`` with the ``2 × 2`` tree (a kept category shrinks both ``g`` and
the fine part). Computed here from the documented split, not from the mechanism.

**Pass**: the honest bound of ``O <= N2`` is at most ``ε_a`` and reaches the tier's
fraction of it. **Plant**: every draw at half its scale (2ε behind a ledger of ε): the
loss is ``2 ε_a``; and a fine split that gives the column the whole fresh tree share
(``ε (fresh · w_a / (w_a + w_b) + fresh_tree)`` = 1.27). Each is flagged when the bound
passes ``ε_a`` (2,000 and 3,000 runs a side; the first 6,000 in the ``long`` tier).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import dpstream
import numpy as np
import pytest
from dpstream.tabular import Domain, ModelOptions, TabularStream
from dpstream.tabular.epoch_split import SPLIT
from dpstream.tabular.epochs import EpochMechanism

from .test_audit_tabular_default import _plant_double_epsilon

EPSILON = Fraction(4)
DOMAIN = Domain({"a": 9, "b": 2})
N1, N2 = 400, 100
SEEDS = (4201, 4202, 4203)
TIERS = {"fast": (500, 0.3), "long": (4_000, 0.6)}
TIER_PARAMS = [pytest.param("fast"), pytest.param("long", marks=pytest.mark.long)]


def _grid(cells: float) -> Fraction:
    """The documented weight of a marginal of ``cells`` cells: √cells on the 1/64 grid."""
    return Fraction(round(math.sqrt(cells) * 64), 64)


#: the fine 1-way measurement's ε (largest over the merges; see the module)
EPS_A = EPSILON * (
    SPLIT.fresh * _grid(9) / (_grid(9) + _grid(2))
    + SPLIT.fresh_tree * _grid(8) / (_grid(4) + _grid(8))
)


def _neighbours() -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    first = np.array([[0, i % 2] for i in range(N1)], dtype=np.int64)
    second = np.tile(np.array([[1, 0]], dtype=np.int64), (N2, 1))
    return (first, second), (first, np.vstack([second, [[1, 0]]]))


def _mechanism(stream_batches: tuple[np.ndarray, ...], rng: dpstream.Rng) -> float:
    stream = TabularStream(DOMAIN, EPSILON, rng=rng, model=ModelOptions(iters=1))
    for batch in stream_batches:
        stream.step(batch)
    mech = stream._epochs
    assert mech is not None and len(mech.epochs) == 1 and mech.t == 2  # batch 2 is open
    assert int(mech.epochs[0].maps[1].max()) == 1  # b is never merged
    return float(mech.ones[0][1])


def _audit(audited: Callable[..., Any], label: str, runs: int, seed: int) -> Any:
    return audited(
        f"{label}, claim {float(EPS_A):.3g}",
        _mechanism,
        _neighbours(),
        epsilon=float(EPS_A),
        runs=runs,
        seed=seed,
        events={f"O <= {N2}": lambda o: o <= N2},
    )


def _bound(result: Any) -> float:
    return max(e.lower_bound for e in result.events if e.direction == "a/b")


def test_the_claim() -> None:
    """``ε_a`` from the documented split, and the merge it assumes in most runs."""
    assert math.isclose(float(EPS_A), 0.857, abs_tol=1e-3)
    first = _neighbours()[0][0]
    stream = TabularStream(DOMAIN, EPSILON, rng=dpstream.Rng(seed=1), model=ModelOptions(iters=1))
    stream.step(first)
    assert stream._epochs is not None
    assert stream._epochs.epochs[0].maps[0].tolist() == [0, 1, 1, 1, 1, 1, 1, 1, 1]


@pytest.mark.parametrize("tier", TIER_PARAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_fine_one_way_measurement(audited, tier: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    runs, fraction = TIERS[tier]
    result = _audit(audited, f"tabular fine 1-way, {tier}, seed {seed}", runs, seed)
    assert result.passed, result
    assert _bound(result) >= fraction * float(EPS_A), result


@pytest.mark.parametrize("tier", TIER_PARAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_double_epsilon_is_flagged(audited, monkeypatch, tier: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    _plant_double_epsilon(monkeypatch)
    runs = {"fast": 2_000, "long": 6_000}[tier]
    label = f"PLANTED 2ε: tabular fine 1-way, {tier}, seed {seed}"
    result = _audit(audited, label, runs, seed + 10)
    assert not result.passed, result


@pytest.mark.parametrize("seed", SEEDS)
def test_planted_unsplit_fine_share_is_flagged(audited, monkeypatch, seed: int) -> None:  # type: ignore[no-untyped-def]
    fresh_split = EpochMechanism._fresh_split

    def unsplit(self: EpochMechanism) -> tuple[list[Fraction], dict[int, Fraction]]:
        tree, fine = fresh_split(self)
        return tree, {j: self.budget.fresh_tree for j in fine}

    monkeypatch.setattr(EpochMechanism, "_fresh_split", unsplit)
    label = f"PLANTED unsplit fine share, seed {seed}"
    result = _audit(audited, label, 3_000, seed + 20)
    assert not result.passed, result

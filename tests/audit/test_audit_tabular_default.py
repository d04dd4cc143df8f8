"""End-to-end audit of the tabular stream's default policy, ``Adaptive()``, and two planted
variants of it (issue 41, tabular part).

**Setup.** ``TabularStream(domain, ε, rng=...)`` with the default policy on two binary
columns, ε = 2, batches of ``N1 = 100`` and ``N2 = 300`` records per cell (every cell of
the 2×2 table). Neighbours (add/remove one record, the default relation): ``a`` without,
``b`` with one more record ``(1, 1)`` in batch 1. Batch 1 is the first epoch (it closes
at once); batch 2 makes the released table four times its size, so the second epoch
(batch 2) closes at step 2 (growth 2).

**Observable** (public releases, read after the steps): cell ``(1, 1)`` of each closed
epoch's noisy tree marginal, ``E0 = epochs[0].sums[0][3]`` and ``E1 = epochs[1].sums[0][3]``
(:mod:`dpstream.tabular.epochs`; the one candidate pair is always the tree, and with these
counts no category is merged: both are checked on every run). ``E0 = N1 (+1 in b) +
Lap(Δ/ε0)`` with ``ε0 = (tree + fresh_tree)·ε`` (the first epoch has no fresh tree, so
its tree takes that share too) and ``E1 = N2 + Lap(Δ/ε1)``, ``ε1 = tree·ε``, exact
discrete Laplace, ``Δ = 1``.

**Analytical loss** of each audited event, honest mechanism, ratio ``P_a / P_b``
(``P(Z <= 0) / P(Z <= -1) = e^{1/scale}`` for discrete Laplace ``Z``):

* ``E0 <= N1``: exactly ``ε0 = ε/2 = 1`` (with the default :data:`SPLIT`);
* ``E1 <= N2`` and ``E1 <= N1 + N2``: ``0`` (batch 1's rows are not in epoch 2);
* ``E0 <= N1 and E1 <= N1 + N2``: ``ε0``.

These are computed here from the documented shares, never from the mechanism's ledger.
The other direction of each event has loss ``<= 0``. The **pass condition** of the honest
stream: every event's high-confidence lower bound is at most its analytical loss (so at
most ε), and the bound for ``E0 <= N1`` reaches a stated fraction of ``ε0`` (35% with
500 runs a side, 70% with 4,000; measured 47-55% and 77-84%): an audit too weak to see
the loss it should see fails.

**Plants** (monkeypatched in the test; the mechanism's ledger still says ε per batch):

* *2ε*: every discrete Laplace draw of the mechanism at half its scale (and
  permute-and-flip at twice its ε): ``E0 <= N1`` then loses ``2ε0 = 2``. Flagged when
  its bound passes ``ε0`` (default tier) and ``1.5 ε0`` (``long`` tier; the plant's loss
  on this observable is ε itself, which no bound can pass).
* *overlap*: the open epoch's exact counts are not reset at a close, so batch 1's rows
  are measured again at epoch 2's close: ``E1 <= N1 + N2`` then loses ``ε1 = 0.5``
  (analytical 0) and the joint event ``ε0 + ε1 = 3ε/4`` (analytical ``ε0``). Flagged when
  a bound passes its event's analytical loss. (Its visible loss is 3ε/4, not more: its
  extra spend beyond ε is in the 1-way and selection releases, not audited here.)

Every audit runs at three seeds. The ``long`` variants (``pytest -m long
tests/audit/test_audit_tabular_default.py``; ``make audit-long`` runs only
``test_audit_long.py``) use 8-10 times the runs.

The streams use ``iters=1``: the fits are post-processing of the audited sums and only
cost time; :func:`test_the_observable_does_not_depend_on_the_fit` checks that the sums
are bit-identical with the default ``iters``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import dpstream
import numpy as np
import pytest
from dpstream.tabular import Domain, ModelOptions, TabularStream, epochs
from dpstream.tabular.epoch_split import SPLIT
from dpstream.tabular.epochs import EpochMechanism

EPSILON = Fraction(2)
#: The released ε of each audited tree marginal (from the documented shares, not the ledger).
EPS0 = EPSILON * (SPLIT.tree + SPLIT.fresh_tree)  # the first epoch's tree: ε/2
EPS1 = EPSILON * SPLIT.tree  # a later epoch's tree: ε/4
N1, N2 = 100, 300  # records per cell in batch 1 and batch 2
CELL = 3  # the record (1, 1), cell 3 of the flattened 2×2 marginal
DOMAIN = Domain({"a": 2, "b": 2})
SEEDS = (4101, 4102, 4103)

#: The honest loss of each event, ratio P_a / P_b (the other direction: <= 0).
EVENTS: dict[str, tuple[Callable[[tuple[float, ...]], bool], Fraction]] = {
    f"E0 <= {N1}": (lambda o: o[0] <= N1, EPS0),
    f"E1 <= {N2}": (lambda o: o[1] <= N2, Fraction(0)),
    f"E1 <= {N1 + N2}": (lambda o: o[1] <= N1 + N2, Fraction(0)),
    f"E0 <= {N1} and E1 <= {N1 + N2}": (lambda o: o[0] <= N1 and o[1] <= N1 + N2, EPS0),
}
FIRST = f"E0 <= {N1}"
JOINT = f"E0 <= {N1} and E1 <= {N1 + N2}"

#: (runs per side, the fraction of ε0 the honest bound must reach) per tier.
TIERS = {"fast": (500, 0.35), "long": (4_000, 0.7)}
TIER_PARAMS = [pytest.param("fast"), pytest.param("long", marks=pytest.mark.long)]


def _batch(per_cell: int) -> np.ndarray:
    return np.repeat(np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.int64), per_cell, axis=0)


def _neighbours(batches: int) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    a = (_batch(N1), _batch(N2))[:batches]
    b = (np.vstack([a[0], [[1, 1]]]), *a[1:])
    return a, b


def _mechanism(batches: int, iters: int = 1) -> Callable[..., tuple[float, ...]]:
    """The default stream on the batches; the audited cells of its closed epochs' trees."""

    def run(stream_batches: tuple[np.ndarray, ...], rng: dpstream.Rng) -> tuple[float, ...]:
        stream = TabularStream(DOMAIN, EPSILON, rng=rng, model=ModelOptions(iters=iters))
        for batch in stream_batches:
            stream.step(batch)
        mech = stream._epochs
        assert mech is not None and len(mech.epochs) == batches  # the setup's epochs
        for e in mech.epochs:  # the analytical loss's assumptions: the tree, no merge
            assert e.tree == [(0, 1)] and e.msizes == (2, 2), (e.tree, e.maps)
        return tuple(float(e.sums[0][CELL]) for e in mech.epochs)

    return run


def _excess(result: Any) -> dict[tuple[str, str], float]:
    """Each audited (event, direction) whose bound passes its analytical loss: by how much."""
    out = {}
    for ev in result.events:
        claim = float(EVENTS[ev.event][1]) if ev.direction == "a/b" else 0.0
        if ev.lower_bound > claim:
            out[(ev.event, ev.direction)] = ev.lower_bound - claim
    return out


def _bound(result: Any, event: str, direction: str = "a/b") -> float:
    return next(
        e.lower_bound for e in result.events if (e.event, e.direction) == (event, direction)
    )


def _run_audit(  # type: ignore[no-untyped-def]
    audited, label: str, batches: int, runs: int, seed: int, events: list[str], claim: Fraction
) -> Any:
    """Audit the stream on ``batches`` batches for ``events``; ``claim`` is the honest
    analytical loss of that observable (the largest of its events')."""
    assert claim == max(EVENTS[n][1] for n in events) and claim <= EPSILON
    return audited(
        f"{label}, claim {float(claim):g}",
        _mechanism(batches),
        _neighbours(batches),
        epsilon=float(claim),
        runs=runs,
        seed=seed,
        events={n: EVENTS[n][0] for n in events},
    )


# ---------------------------------------------------------------------------------------
# the plants
# ---------------------------------------------------------------------------------------


def _plant_double_epsilon(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every noise draw of the mechanism at 2ε; the scales it records (its ledger) unchanged."""
    laplace, flip = epochs.discrete_laplace, epochs.permute_and_flip

    def half_scale(scale: Any, size: Any, *, rng: Any = None) -> np.ndarray:
        return laplace(Fraction(scale) / 2, size, rng=rng)

    def double_eps(scores: Any, epsilon: Any, sensitivity: Any, *, rng: Any = None) -> int:
        return flip(scores, 2 * Fraction(epsilon), sensitivity, rng=rng)

    monkeypatch.setattr(epochs, "discrete_laplace", half_scale)
    monkeypatch.setattr(epochs, "permute_and_flip", double_eps)


def _plant_overlap(monkeypatch: pytest.MonkeyPatch) -> None:
    """A close that forgets to reset the exact counts: every batch is measured again at the
    next epoch's close (the ledger charges only the epoch's own batches, as before)."""
    reset = EpochMechanism._open_reset

    def leaky(self: EpochMechanism, base: int) -> None:
        carry = (self.pairs, self.exact_ones) if self.epochs else None
        reset(self, base)
        if carry is not None:
            self.pairs = {c: p.copy() for c, p in carry[0].items()}
            self.exact_ones = [x.copy() for x in carry[1]]

    monkeypatch.setattr(EpochMechanism, "_open_reset", leaky)


def _ledger(batches: int) -> list[Fraction]:
    stream = TabularStream(DOMAIN, EPSILON, rng=dpstream.Rng(seed=0), model=ModelOptions(iters=1))
    for batch in _neighbours(batches)[1]:
        stream.step(batch)
    assert stream._epochs is not None
    return list(stream._epochs.ledger)


# ---------------------------------------------------------------------------------------
# the tests
# ---------------------------------------------------------------------------------------


def test_the_analytical_losses() -> None:
    """The losses the audits compare with (default split: ε/2 and ε/4), and the exact
    ratio they rest on: ``P(Z <= 0) / P(Z <= -1) = e^{ε_m}`` for discrete Laplace at
    scale ``1/ε_m``."""
    assert sum((SPLIT.fresh, SPLIT.settle, SPLIT.select, SPLIT.tree, SPLIT.fresh_tree,
                SPLIT.size, SPLIT.extra)) == 1  # fmt: skip
    assert Fraction(1) == EPS0
    assert Fraction(1, 2) == EPS1
    for eps_m in (EPS0, EPS1, 2 * EPS0):
        q = math.exp(-float(eps_m))
        assert math.isclose(math.log((1 / (1 + q)) / (q / (1 + q))), float(eps_m))
    assert _ledger(2) == [EPSILON, EPSILON]  # the mechanism's own account: ε per batch


def test_the_observable_does_not_depend_on_the_fit() -> None:
    """The audited sums are bit-identical with ``iters=1`` and the default ``iters``."""
    for seed in SEEDS:
        outs = [
            _mechanism(2, iters)(_neighbours(2)[1], dpstream.Rng(seed=seed)) for iters in (1, 100)
        ]
        assert outs[0] == outs[1]


@pytest.mark.parametrize("tier", TIER_PARAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_default_tabular_stream(audited, tier: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    """The honest default: every event's bound at most its analytical loss (the audit's
    claim is the observable's, ε0 = ε/2 <= ε), and the bound of ``E0 <= N1`` at least the
    tier's fraction of ε0."""
    runs, fraction = TIERS[tier]
    label = f"tabular Adaptive() default, 2 epochs, {tier}, seed {seed}"
    result = _run_audit(audited, label, 2, runs, seed, list(EVENTS), EPS0)
    assert result.passed and result.lower_bound <= float(EPSILON), result
    assert not _excess(result), (_excess(result), result)
    assert _bound(result, FIRST) >= fraction * float(EPS0), result


@pytest.mark.parametrize("tier", TIER_PARAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_double_epsilon_is_flagged(audited, monkeypatch, tier: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Noise at 2ε behind a ledger of ε: ``E0 <= N1`` loses 2ε0 = 2, above its
    analytical ε0 = 1 (both tiers) and above 1.5 ε0 (the long tier)."""
    _plant_double_epsilon(monkeypatch)
    assert _ledger(1) == [EPSILON]  # the plant is invisible to the ledger
    runs = {"fast": 600, "long": 6_000}[tier]
    label = f"PLANTED 2ε: tabular Adaptive(), 1 epoch, {tier}, seed {seed}"
    result = _run_audit(audited, label, 1, runs, seed + 10, [FIRST], EPS0)
    assert not result.passed, result
    if tier == "long":
        assert result.lower_bound > 1.5 * float(EPS0), result  # well above the claim


@pytest.mark.parametrize("tier", TIER_PARAMS)
@pytest.mark.parametrize("seed", SEEDS)
def test_planted_epoch_overlap_is_flagged(audited, monkeypatch, tier: str, seed: int) -> None:  # type: ignore[no-untyped-def]
    """Batch 1 measured again at epoch 2's close behind a ledger of ε per batch. Fast
    tier: epoch 2's cell alone (claim 0: its distribution does not depend on the record
    in the honest stream) loses ε1 = 0.5. Long tier: all the events (claim ε0); the joint
    one loses ε0 + ε1 = 3ε/4."""
    _plant_overlap(monkeypatch)
    assert _ledger(2) == [EPSILON, EPSILON]  # the plant is invisible to the ledger
    runs = {"fast": 600, "long": 4_000}[tier]
    label = f"PLANTED overlap: tabular Adaptive(), 2 epochs, {tier}, seed {seed}"
    if tier == "fast":
        events = [n for n in EVENTS if n.startswith("E1")]
        result = _run_audit(audited, label, 2, runs, seed + 20, events, Fraction(0))
    else:
        result = _run_audit(audited, label, 2, runs, seed + 20, list(EVENTS), EPS0)
        assert (JOINT, "a/b") in _excess(result), result
    assert not result.passed, result
    assert (f"E1 <= {N1 + N2}", "a/b") in _excess(result), result

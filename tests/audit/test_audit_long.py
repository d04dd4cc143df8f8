"""Long audits, deselected from ``make test`` (marker ``long``); ``make audit-long`` runs them.

``method="paper"`` with the replaced step deciding two Algorithm-2 threshold crossings
(issue 28, item 6: ``paper_threshold_setup`` in :mod:`online_setups`, where the pair's
analytical loss ``(ε_r/2)(1 + 1/L) ≈ 6.364`` is derived). The thresholds are crossed
inside a time level only where each level's ε is large (``research/diag_paper_thresholds.py``),
so the pair's loss is several nats, its tails are rare and a run of the synthesizer
(depth 10, 2 046 cell counters brought up to date at the release) costs ≈ 4 ms of CPU:
the audit takes 2 × 50 000 runs, too many for ``make test``. The tails ``D >= 4`` and
``D <= -4`` were chosen on runs with other seeds (``research/diag_audit_tails.py
paper-threshold``).

Not here: a planted variant. With twice every ε (``test_audit_planted.py``'s hook) the
thresholds halve and this one release no longer separates the streams beyond the claim:
``diag_audit_tails.py paper-threshold --planted 2`` finds log ratios of at most ≈ 3.6 for
a claim of 6.364 (research/audits.md, "What is left").
"""

from __future__ import annotations

import pytest
from dpstream.counters import SparseCounter, online_epsilon

from .online_setups import (
    THRESHOLD_EPSILON,
    THRESHOLD_HORIZON,
    THRESHOLD_LEVEL,
    THRESHOLD_STEPS,
    THRESHOLD_T0,
    THRESHOLD_TREE_LEVELS,
    Setup,
    paper_threshold_loss,
    paper_threshold_setup,
)

RUNS, SEED = 50_000, 2821


def level_start(r: int) -> int:
    return -(-(2**r) // int(THRESHOLD_EPSILON))  # ⌈2^r/ε⌉ for the integer ε = 128


def test_the_threshold_setup_has_the_constants_its_loss_assumes() -> None:
    """Level 10 is steps 8–15 (the release at 15 is inside it); the library's threshold,
    split and tree of the level's depth-10 counters are those of the derivation."""
    assert (level_start(THRESHOLD_LEVEL), level_start(THRESHOLD_LEVEL + 1)) == (8, 16)
    assert level_start(THRESHOLD_LEVEL + 1) - level_start(THRESHOLD_LEVEL) == THRESHOLD_HORIZON
    assert level_start(THRESHOLD_LEVEL + 1) - 1 == THRESHOLD_STEPS
    eps_r = online_epsilon(THRESHOLD_EPSILON, 2, THRESHOLD_LEVEL, THRESHOLD_LEVEL)
    counter = SparseCounter(eps_r / 2, THRESHOLD_HORIZON)
    assert counter.threshold == THRESHOLD_T0
    partition, tree = counter.epsilon_split()
    assert (partition.epsilon, partition.sensitivity) == (eps_r / 4, 1)  # Lap_Z(4/ε_r) noise
    assert (tree.epsilon, tree.sensitivity) == (eps_r / 4, THRESHOLD_TREE_LEVELS)  # 4L/ε_r
    loss = paper_threshold_loss(eps_r)
    assert loss == 2 * (partition.epsilon + tree.epsilon / tree.sensitivity)
    assert loss < eps_r < THRESHOLD_EPSILON
    assert abs(float(loss) - 6.364) < 1e-3


@pytest.mark.long
def test_sharp_audit_of_a_threshold_crossing_step(audited) -> None:
    setup: Setup = paper_threshold_setup()
    label = f"{setup.name}, loss {float(setup.loss):.3f} (ε = {setup.epsilon})"
    result = setup.audit(audited, label, RUNS, SEED)
    assert result.passed, result  # no event beats the pair's analytical loss
    assert result.lower_bound >= 0.5 * float(setup.loss), result

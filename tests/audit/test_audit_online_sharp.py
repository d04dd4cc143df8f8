"""Sharp audits of the online synthesizers' released noisy counts (issue 28, item 6).

The audits of ``test_audit_synthesis.py`` reduce whole releases to box masses and reach
lower bounds near 0. Here each audit targets the worst case the analysis allows: two
neighbouring streams whose replaced point changes only two sibling cells at the deepest
measured level, a statistic of ``cells()`` that keeps their difference, and the tails of
that statistic. The claim audited is the pair's **analytical privacy loss** (derived in
:mod:`online_setups`), which the mechanism's split makes smaller than ε; the lower bound
must reach half of it (seeded: reproducible), with no false alarm at α = 1e-6. The same
setups with a planted bug (twice the budget) are flagged in ``test_audit_planted.py``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest
from dpstream import PrivHP, Rng

from .online_setups import (
    PRIVHP_DEPTH,
    Setup,
    epochs_setup,
    paper_setup,
    privhp_setup,
    privhp_sigma_deepest,
    privhp_synthesizer,
)

# (setup, runs per side, seed). Runs: the epochs synthesizer costs ≈ 0.3 ms a run, the
# paper's ≈ 2–3 ms (its level parameters are exact rationals), for_memory's ≈ 0.5 ms. The
# tails of D each setup counts were chosen on runs with other seeds
# (research/diag_audit_tails.py).
CASES = {
    "epochs": (epochs_setup, 60_000, 2801),
    "paper": (paper_setup, 12_000, 2802),
    "privhp": (privhp_setup, 30_000, 2803),
}


@pytest.mark.parametrize("method", list(CASES))
def test_sharp_audit_of_the_released_counts(audited, method: str) -> None:
    make, runs, seed = CASES[method]
    setup: Setup = make()
    label = f"{setup.name}, loss {float(setup.loss):.3f} (ε = {setup.epsilon})"
    result = setup.audit(audited, label, runs, seed)
    assert result.passed, result  # no event beats the pair's analytical loss
    assert result.lower_bound >= 0.5 * float(setup.loss), result  # sharp: half of it at least


def test_the_privhp_setup_has_the_configuration_its_loss_assumes() -> None:
    """The for_memory setup's analytical loss (``2σ_8``, derived by hand in
    ``online_setups``) assumes ε_b = 8, d = 2, k = 4, width 8, depth 8: check them, and
    that the library's ``σ_8`` is the derived one (at most it, up to its 2^-40 grid)."""
    inner: Any = privhp_synthesizer(Rng(seed=1))._inner  # the ContinualPrivHP core
    eps_b = Fraction(*inner.block_epsilon())
    assert (eps_b, inner.k, inner.width, inner.depth) == (8, 4, 8, PRIVHP_DEPTH)
    assert (inner.levels, inner.n_blocks) == (2, 0)
    sigmas = PrivHP(eps_b, 2, k=4, width=8, rows=1, depth=PRIVHP_DEPTH, sketch="count-min").sigmas
    assert len(sigmas) == PRIVHP_DEPTH + 1
    assert sum(sigmas) <= eps_b
    derived = privhp_sigma_deepest()
    assert derived - 1e-9 <= float(sigmas[-1]) <= derived

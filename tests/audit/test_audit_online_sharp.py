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

import pytest

from .online_setups import Setup, epochs_setup, paper_setup

# (setup, runs per side, seed). Runs: the epochs synthesizer costs ≈ 0.3 ms a run, the
# paper's ≈ 2–3 ms (its level parameters are exact rationals). The tails of D each setup
# counts were chosen on runs with other seeds (benches/diag_audit_tails.py).
CASES = {"epochs": (epochs_setup, 60_000, 2801), "paper": (paper_setup, 12_000, 2802)}


@pytest.mark.parametrize("method", list(CASES))
def test_sharp_audit_of_the_released_counts(audited, method: str) -> None:
    make, runs, seed = CASES[method]
    setup: Setup = make()
    label = f"{setup.name}, loss {float(setup.loss):.3f} (ε = {setup.epsilon})"
    result = setup.audit(audited, label, runs, seed)
    assert result.passed, result  # no event beats the pair's analytical loss
    assert result.lower_bound >= 0.5 * float(setup.loss), result  # sharp: half of it at least

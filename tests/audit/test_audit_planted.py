"""Planted bugs in the online synthesizers and PrivHP, flagged by the sharp audits (issue 28).

The bug: every ε the synthesizer hands to its noise is doubled (each block's ``ε/(k+1)``
for the default method, each cell counter's ``ε_{j,r}`` for ``method="paper"``, each
PrivHP level's ``σ_l`` for ``OnlineSynthesizer.for_memory``): half the noise, a split
that sums to 2ε. It is injected through the test-only hook
``dpstream._core._planted_set_epsilon_factor``, which exists only in an extension built
with the Cargo feature ``planted-bugs`` (``rust/core/src/planted.rs``). The release
build never has it (checked below); ``make test-planted`` builds a second extension with
the feature into ``build/planted`` and runs this module there with
``DPSTREAM_PLANTED_BUILD=1``, under which a missing hook is an error, not a skip.

The audits are those of ``test_audit_online_sharp.py``: the claim is the pair's
analytical loss, and with the bug the pair's loss is twice that, so the lower bound
passes the claim.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from dpstream import _core

from .online_setups import Setup, epochs_setup, merged_repeated_setup, paper_setup, privhp_setup
from .test_audit_synthesis import SHARP_EPSILON, privhp_sharp_audit

PLANTED_BUILD = os.environ.get("DPSTREAM_PLANTED_BUILD") == "1"
HOOK = getattr(_core, "_planted_set_epsilon_factor", None)
BLOCK_HOOK = getattr(_core, "_planted_set_epochs_bug", None)


def test_the_release_build_has_no_planted_hook() -> None:
    if PLANTED_BUILD:
        pytest.skip("this is the planted-bugs build (make test-planted): the hook is expected")
    assert HOOK is None, f"{_core.__file__} exposes the planted-bug hook: it must not ship"
    assert BLOCK_HOOK is None, f"{_core.__file__} exposes the planted block hook"


@pytest.fixture
def doubled_epsilon() -> Iterator[None]:
    """Plant the bug (ε × 2) for one test, and remove it afterwards whatever happens."""
    if HOOK is None:
        if PLANTED_BUILD:
            pytest.fail(
                f"DPSTREAM_PLANTED_BUILD=1 but {_core.__file__} has no planted-bug hook: "
                "the planted-bugs extension is not the one imported"
            )
        pytest.skip("needs the planted-bugs extension: run `make test-planted`")
    HOOK(2)
    try:
        yield
    finally:
        HOOK(1)


CASES = {
    "epochs": (epochs_setup, 30_000, 2811),
    "paper": (paper_setup, 6_000, 2812),
    "privhp": (privhp_setup, 15_000, 2813),
}


@pytest.mark.parametrize("method", list(CASES))
def test_planted_double_epsilon_is_flagged(audited, doubled_epsilon, method: str) -> None:
    make, runs, seed = CASES[method]
    setup: Setup = make()
    label = f"PLANTED 2ε: {setup.name}, claim {float(setup.loss):.3f}"
    result = setup.audit(audited, label, runs, seed)
    assert not result.passed, result  # the pair loses about twice its claimed loss


def test_planted_double_epsilon_is_flagged_in_privhp(audited, doubled_epsilon) -> None:
    """PrivHP itself (``test_audit_synthesis.py``'s sharp audit of the released tree): with
    every ``σ_l`` doubled the added point costs ``2ε``. The claim is the documented
    guarantee ε (the library's ``Σ σ_l`` is ε up to its 2^-40 grid; read from the library
    it would be doubled by the bug too)."""
    label = f"PLANTED 2ε: PrivHP released tree, claim {SHARP_EPSILON}"
    result = privhp_sharp_audit(audited, label, float(SHARP_EPSILON), runs=20_000, seed=2814)
    assert not result.passed, result


# ---------------------------------------------------------------------------------------
# Issue 41: bugs in how the default method composes its blocks, with the right split
# ---------------------------------------------------------------------------------------

# Runs per side. The claim is the honest pair's loss 2/3 (the point in one merged block,
# read by 8 releases: the same measurement); with noise redrawn at each release the pair
# loses 8 · 2/3. Tails D >= 40 and D <= -22 chosen on 2 000 runs with other seeds. The
# first seed runs in `make test-planted`; the other two carry the marker `long`. The
# other planted block bug (a point in k + 2 blocks: the merged block measured twice, a
# loss of 4/3) is caught by the Rust count of the measurements the releases read
# (`planted_block_bugs_are_caught_by_the_count`), not by this audit: at 30 000 runs per
# side its bound reached 0.57-0.61 < 2/3 on 3 seeds (research/audits.md).
BLOCK_BUGS = {"redraw": 6_000}
BLOCK_SEEDS = [
    pytest.param(4111, id="seed1"),
    pytest.param(4112, id="seed2", marks=pytest.mark.long),
    pytest.param(4113, id="seed3", marks=pytest.mark.long),
]


@pytest.fixture
def block_bug(request: pytest.FixtureRequest) -> Iterator[str]:
    """Plant a block bug (on this thread) for one test, and remove it afterwards."""
    if BLOCK_HOOK is None:
        if PLANTED_BUILD:
            pytest.fail(
                f"DPSTREAM_PLANTED_BUILD=1 but {_core.__file__} has no planted block hook: "
                "the planted-bugs extension is not the one imported"
            )
        pytest.skip("needs the planted-bugs extension: run `make test-planted`")
    bug: str = request.param
    BLOCK_HOOK(bug)
    try:
        yield bug
    finally:
        BLOCK_HOOK("none")


@pytest.mark.parametrize("seed", BLOCK_SEEDS)
@pytest.mark.parametrize("block_bug", list(BLOCK_BUGS), indirect=True)
def test_planted_block_bugs_are_flagged(audited, block_bug: str, seed: int) -> None:
    setup = merged_repeated_setup(8, (40, -22))
    label = f"PLANTED {block_bug}: {setup.name}, claim {float(setup.loss):.3f}"
    result = setup.audit(audited, label, BLOCK_BUGS[block_bug], seed)
    assert not result.passed, result

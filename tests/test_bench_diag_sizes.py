"""benches/diag_tabular_sizes.py: the default's options three ways, on the same seeds."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
bt = pytest.importorskip("bench_tabular")
diag = pytest.importorskip("diag_tabular_sizes")


def test_the_variants_are_the_default_with_its_sizes() -> None:
    base = bt.method_options(diag.METHOD)
    assert diag.METHOD == bt.DEFAULT and base["public_sizes"] and base[bt.LEGACY_SIZES]
    noisy, public = diag.options("add/remove"), diag.options("public sizes")
    assert bt.LEGACY_SIZES not in noisy and not noisy["public_sizes"] and public["public_sizes"]
    rest = {k: v for k, v in base.items() if k not in ("public_sizes", bt.LEGACY_SIZES)}
    for o in (noisy, public):
        assert {k: v for k, v in o.items() if k != "public_sizes"} == rest


def test_the_legacy_sizes_are_public_sizes_at_twice_epsilon() -> None:
    domain, _ = bt.load_adult()
    legacy = bt.bench_stream(domain, 1.0, 1, public_sizes=True, **{bt.LEGACY_SIZES: True})
    assert legacy.epsilon == 2 and legacy.public_sizes
    with pytest.raises(ValueError, match="needs public_sizes"):
        bt.bench_stream(domain, 1.0, 1, **{bt.LEGACY_SIZES: True})


def test_render_has_both_variants_and_the_size_error() -> None:
    job = bt.Job("randomized", diag.BATCH, 1.0, diag.METHOD, "simple", 0, None)
    free = (0.01,) * len(bt.METRICS)
    out = diag.Outcome(job, free, (0.011,) * 6, (0.012,) * 6, 0.02, 0.05, True)
    text = diag.render([out], 60.0, "cmd", 2)
    assert text.startswith(diag.SECTION_TITLE)
    assert "| add/remove | 2.00% / 5.00% |" in text and "| public sizes | exact |" in text
    assert "0.0100 → 0.0110 (1.10×)" in text and "0.0100 → 0.0120 (1.20×)" in text

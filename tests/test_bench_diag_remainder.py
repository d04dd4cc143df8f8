"""benches/diag_tabular_remainder.py: raking and the oracle measurements it substitutes."""

from __future__ import annotations

import sys
from pathlib import Path

import dpstream
import numpy as np
import pytest
from dpstream.tabular import Adaptive, Domain, TabularStream
from hypothesis import given, settings
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
diag = pytest.importorskip("diag_tabular_remainder")

DOMAIN = Domain({"a": 3, "b": 2, "c": 4})


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.1, 10.0), min_size=12, max_size=12),
    st.lists(st.floats(0.1, 10.0), min_size=3, max_size=3),
    st.lists(st.floats(0.1, 10.0), min_size=4, max_size=4),
)
def test_rake_fits_the_margins_and_keeps_odds_ratios(
    prior: list[float], rows: list[float], cols: list[float]
) -> None:
    p = np.array(prior).reshape(3, 4)
    r = np.array(rows)
    c = np.array(cols) * (r.sum() / sum(cols))
    x = diag.rake(p, [r, c], iters=500)
    np.testing.assert_allclose(x.sum(axis=1), r, rtol=1e-6)
    np.testing.assert_allclose(x.sum(axis=0), c, rtol=1e-6)
    # Raking multiplies rows and columns only: every 2x2 odds ratio is the prior's.
    odds = lambda m: m[0, 0] * m[1, 1] / (m[0, 1] * m[1, 0])  # noqa: E731
    assert odds(x[:2, :2]) == pytest.approx(odds(p[:2, :2]), rel=1e-9)


def _batches(seed: int, steps: int) -> list[np.ndarray]:
    g = np.random.default_rng(seed)
    return [np.stack([g.integers(0, n, 30) for n in DOMAIN.sizes], axis=1) for _ in range(steps)]


def test_algorithm_3_variant_is_the_library() -> None:
    lib = TabularStream(
        DOMAIN, 1, rng=dpstream.Rng(seed=3), policy=Adaptive(k=2, remainder="model"), iters=20
    )
    ora = diag.OracleStream(
        DOMAIN, 1, rng=dpstream.Rng(seed=3), variant="algorithm 3", policy=lib.policy, iters=20
    )
    for b in _batches(1, 5):
        np.testing.assert_array_equal(lib.step(b).to_numpy(), ora.step(b).to_numpy())


def test_oracle_remainder_is_the_truth_of_the_unselected_rows() -> None:
    s = diag.OracleStream(
        DOMAIN, 1, policy=Adaptive(k=1, remainder="model"), iters=20, rng=dpstream.Rng(seed=4),
        variant="oracle remainder",
    )  # fmt: skip
    seen: list[tuple[int, np.ndarray, np.ndarray]] = []
    inner = s._measurement

    def spy(j: int, released: np.ndarray, stddev: float, size: int) -> tuple[np.ndarray, float]:
        out = inner(j, released, stddev, size)
        seen.append((j, released, out[0]))
        return out

    s._measurement = spy  # type: ignore[method-assign]
    batches = _batches(2, 6)
    for b in batches:
        s.step(b)
    picked = [j for j, _, _ in seen]
    for t, (j, released, out) in enumerate(seen):
        # Rows of the steps before t at which j was not selected, counted exactly.
        unselected = [batches[u] for u in range(t) if picked[u] != j]
        codes = np.concatenate(unselected) if unselected else np.zeros((0, 3), dtype=np.int64)
        truth = dpstream.tabular.marginal(codes, DOMAIN, s.workloads[j])
        np.testing.assert_allclose(out - released, truth)


def test_unknown_variant() -> None:
    with pytest.raises(ValueError, match="variant must be one of"):
        diag.OracleStream(DOMAIN, 1, variant="nope")

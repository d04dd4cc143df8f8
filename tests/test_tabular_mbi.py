"""The optional ``mbi`` estimator (Private-PGM by its authors) against the built-in one.

Skipped unless mbi is installed (``pip install mbi``, which pulls in jax; keep it out
of the project's .venv). The same measurements are fitted by
:func:`~dpstream.tabular.model.estimate_pgm` and :func:`_mbi_oracle.estimate_mbi`
to convergence: the loss is strictly convex in the measured marginals, so both must
find the same ones (and, from equivalent warm starts, the same model).
"""

from __future__ import annotations

import itertools
import math
import warnings
from typing import Any

import numpy as np
import pytest

with warnings.catch_warnings():  # mbi warns about jax's float32 default at import
    warnings.simplefilter("ignore")
    pytest.importorskip("mbi")

import dpstream
import jax
from _mbi_oracle import MbiModel, estimate_mbi
from conftest import ALPHA, assert_chi_square, merge_small_categories
from dpstream.tabular import (
    Domain,
    GraphicalModel,
    Measurement,
    ModelOptions,
    Paper,
    TabularStream,
    estimate_pgm,
    l2_loss,
    marginal_counts,
    workload_errors,
)
from dpstream.tabular.estimation import MarginalModel

#: A model with cycles (its junction tree needs fill-in edges) and a 3-way clique.
SIZES = (3, 4, 2, 5, 3, 2)
CLIQUES = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4, 5), (1, 4)]
TOTAL = 5000.0
#: Enough for both estimators to converge on a boundary optimum (mbi's plain mirror
#: descent needs many more steps than the built-in accelerated one; mbi steps are fast).
PGM_ITERS = 3000
MBI_ITERS = 60_000


def noisy_measurements(
    cliques: list[tuple[int, ...]], seed: int, sigma: float = 3.0, strength: float = 1.5
) -> list[Measurement]:
    """Marginals of a table drawn from a random model, plus Gaussian noise.

    With ``strength`` 1.5 some cells are rare and some noisy counts negative: the
    optimum is on the boundary of the marginal polytope, where mirror descent is slow.
    """
    rng = np.random.default_rng(seed)
    pots = {c: strength * rng.normal(size=math.prod(SIZES[j] for j in c)) for c in CLIQUES}
    rows = GraphicalModel(SIZES, pots, TOTAL).sample(int(TOTAL), rng)
    return [
        Measurement(c, marginal_counts(rows, SIZES, c) + rng.normal(0, sigma, n), sigma)
        for c in cliques
        for n in [math.prod(SIZES[j] for j in c)]
    ]


def pairs() -> list[tuple[int, ...]]:
    return list(itertools.combinations(range(len(SIZES)), 2))


def max_gap(a: MarginalModel, b: MarginalModel, cliques: list[tuple[int, ...]]) -> float:
    """The largest difference of two models' counts over the marginals of ``cliques``."""
    return max(float(np.abs(a.marginal(c) - b.marginal(c)).max()) for c in cliques)


def test_converged_fits_agree_with_the_builtin_estimator() -> None:
    ms = noisy_measurements(CLIQUES, seed=1)
    assert min(float(m.values.min()) for m in ms) < 0  # the optimum is on the boundary
    pgm = estimate_pgm(SIZES, ms, TOTAL, iters=PGM_ITERS)
    mbi = estimate_mbi(SIZES, ms, TOTAL, iters=MBI_ITERS)
    assert isinstance(mbi, MbiModel) and mbi.cliques == pgm.cliques
    # Measured marginals (counts out of 5000) and the loss.
    assert max_gap(pgm, mbi, CLIQUES) < 0.01
    loss_pgm, loss_mbi = l2_loss(pgm, ms), l2_loss(mbi, ms)
    assert abs(loss_pgm - loss_mbi) <= 1e-7 * loss_pgm, (loss_pgm, loss_mbi)
    # The whole model: every 2-way marginal (most in no measured clique) and a 4-way one.
    assert max_gap(pgm, mbi, [*pairs(), (0, 2, 4, 5)]) < 0.01


def test_warm_started_chains_agree() -> None:
    # The stream's pattern: each fit sees only new measurements and keeps the old cliques.
    batches = [CLIQUES[:2], CLIQUES[2:4], CLIQUES[4:], CLIQUES[:1]]
    pgm: GraphicalModel | None = None
    mbi: MbiModel | None = None
    for k, cliques in enumerate(batches):
        ms = noisy_measurements(cliques, seed=10 + k, strength=0.5)  # interior optima
        pgm = estimate_pgm(SIZES, ms, TOTAL, iters=1000, warm_start=pgm)
        mbi = estimate_mbi(SIZES, ms, TOTAL, iters=2000, warm_start=mbi)
        assert mbi.cliques == pgm.cliques
        assert max_gap(pgm, mbi, [*cliques, *pairs()]) < 1e-3, k
    # A built-in model (e.g. restored from a checkpoint) warm-starts mbi the same way.
    assert pgm is not None and mbi is not None
    ms = noisy_measurements([(2, 5)], seed=20, strength=0.5)
    from_pgm = estimate_mbi(SIZES, ms, TOTAL, iters=2000, warm_start=pgm)
    from_mbi = estimate_mbi(SIZES, ms, TOTAL, iters=2000, warm_start=mbi)
    assert from_pgm.cliques == from_mbi.cliques == tuple(sorted({*pgm.cliques, (2, 5)}))
    assert max_gap(from_pgm, from_mbi, [(2, 5), *pairs()]) < 1e-3


def test_marginals_match_mbis_own_queries_and_the_potentials() -> None:
    ms = noisy_measurements(CLIQUES, seed=2)
    model = estimate_mbi(SIZES, ms, TOTAL, iters=200)
    assert model.iterations == 200
    same = GraphicalModel(SIZES, model.potentials, TOTAL)  # the built-in BP on mbi's θ
    for c in [(), (4,), *CLIQUES, *pairs(), (0, 2, 4), (0, 1, 2, 3, 4, 5)]:
        got = model.marginal(c)
        assert got.dtype == np.float64 and got.shape == (math.prod(SIZES[j] for j in c),)
        assert got.sum() == pytest.approx(TOTAL, rel=1e-12)
        np.testing.assert_allclose(got, same.marginal(c), rtol=1e-9, atol=1e-9)
        if c:
            with jax.enable_x64(True):  # as the adapter calls mbi
                own = np.asarray(model.mrf.project(c).datavector(), dtype=np.float64)
            np.testing.assert_allclose(got, own, rtol=1e-9, atol=1e-9)


def test_columns_without_measurements_are_uniform() -> None:
    ms = [Measurement((0, 1), np.array([5.0, 1.0, 2.0, 2.0]), 1.0)]
    model = estimate_mbi((2, 2, 3), ms, 10.0, iters=400)
    assert model.cliques == ((0, 1),)
    np.testing.assert_allclose(model.marginal((2,)), [10 / 3] * 3, rtol=1e-9)
    np.testing.assert_allclose(model.marginal((0, 1)), [5, 1, 2, 2], atol=1e-3)
    # No measurements: the uniform model, no steps.
    empty = estimate_mbi((2, 3), [], 6.0)
    assert empty.iterations == 0
    np.testing.assert_allclose(empty.marginal((0, 1)), np.ones(6), rtol=1e-12)


def test_samples_follow_the_model() -> None:
    model = estimate_mbi(SIZES, noisy_measurements(CLIQUES, seed=3), TOTAL, iters=200)
    rows = model.sample(100_000, np.random.default_rng(2024))
    assert rows.shape == (100_000, 6) and rows.dtype == np.int64
    checked = [*CLIQUES, (0, 2), (0, 5), (0, 1, 2, 3, 4, 5)]
    for c in checked:
        probs = model.marginal(c) / model.total
        obs, p = merge_small_categories(marginal_counts(rows, SIZES, c), probs, rows.shape[0])
        assert_chi_square(obs, p, f"marginal {c}", alpha=ALPHA / len(checked))
    again = model.sample(50, np.random.default_rng(1))
    assert np.array_equal(again, model.sample(50, np.random.default_rng(1)))
    assert model.sample(0, np.random.default_rng(1)).shape == (0, 6)


def test_bad_arguments_are_refused() -> None:
    ms = [Measurement((0, 1), np.ones(4), 1.0)]
    with pytest.raises(ValueError, match="iters"):
        estimate_mbi((2, 2), ms, 4.0, iters=-1)
    with pytest.raises(ValueError, match="4 cells"):
        estimate_mbi((2, 2), [Measurement((0, 1), np.ones(3), 1.0)], 4.0)
    with pytest.raises(ValueError, match="warm_start must be"):
        estimate_mbi((2, 2), ms, 4.0, warm_start="model")  # type: ignore[arg-type]
    other = estimate_mbi((2, 3), [], 4.0)
    with pytest.raises(ValueError, match="sizes"):
        estimate_mbi((2, 2), ms, 4.0, warm_start=other)
    with pytest.raises(ValueError, match="total"):
        estimate_mbi((2, 2), ms, 0.0)
    with pytest.raises(ValueError, match="n must be"):
        other.sample(-1, np.random.default_rng(0))


def table(domain: Domain, n: int, seed: int) -> np.ndarray:
    """Correlated rows: b copies a mod 2 most of the time, d copies b."""
    g = np.random.default_rng(seed)
    cols = [g.integers(0, s, n) for s in domain.sizes]
    cols[1] = np.where(g.random(n) < 0.9, cols[0] % 2, cols[1])
    cols[3] = np.where(g.random(n) < 0.9, cols[1], cols[3])
    return np.stack(cols, axis=1).astype(np.int64)


def with_mbi(s: TabularStream, iters: int = 100) -> TabularStream:
    """``s`` fitting with the oracle instead of the built-in estimator (same call)."""
    sizes = s.domain.sizes

    def fit(ms: list[Measurement], total: float, warm: Any) -> MarginalModel:
        return estimate_mbi(sizes, ms, total, iters=iters, warm_start=warm)

    s._fit = fit
    return s


def test_a_stream_with_mbi_matches_the_builtin_estimator() -> None:
    d = Domain({"a": 3, "b": 2, "c": 4, "d": 2})
    rows = table(d, 2000, 1)
    errors = {}
    for estimator in ("pgm", "mbi"):
        s = TabularStream(
            d,
            2,
            policy=Paper(k=2),
            model=ModelOptions(iters=100),
            public_sizes=True,
            rng=dpstream.Rng(seed=1),
        )
        if estimator == "mbi":
            s = with_mbi(s)
        for t in range(8):
            synth = s.step(rows[250 * t : 250 * (t + 1)])
        assert len(synth) == s.size == 2000
        errors[estimator] = workload_errors(rows, synth, d)
    g = np.random.default_rng(0)
    indep = workload_errors(rows, np.stack([g.permutation(c) for c in rows.T], axis=1), d)
    pgm, mbi = errors["pgm"], errors["mbi"]
    # The streams part ways (a slightly different fit flips a later selection), so
    # the errors agree up to the noise and the sampling of 2000 rows.
    assert mbi.avg_we < 0.2 * indep.avg_we, (mbi, indep)
    assert abs(mbi.avg_we - pgm.avg_we) < 0.005, (pgm, mbi)
    assert abs(mbi.max_we - pgm.max_we) < 0.01, (pgm, mbi)


def test_a_stream_with_mbi_survives_a_checkpoint() -> None:
    d = Domain({"a": 3, "b": 2, "c": 4, "d": 2})
    rows = table(d, 600, 2)
    s = with_mbi(TabularStream(d, 2, policy=Paper(k=2), rng=dpstream.Rng(seed=2)))
    for t in range(2):
        s.step(rows[200 * t : 200 * (t + 1)])
    restored = with_mbi(TabularStream.from_bytes(s.to_bytes(), allow_seeded=True))
    out = restored.step(rows[400:])
    assert len(out) == restored.size and abs(restored.size - 600) < 60  # a noisy size

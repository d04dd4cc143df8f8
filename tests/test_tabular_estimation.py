"""The fit step of the tabular stream: Private-PGM and multiplicative weights.

Estimators are checked against brute force on domains small enough to enumerate:
exact belief propagation on the junction tree, the maximum-entropy fit of exact
marginals (iterative proportional fitting), the exact minimum of the L2 loss over
the whole simplex (non-negative least squares), and the MWEM update written out.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from _helpers import assert_running_intersection
from conftest import ALPHA, assert_chi_square, merge_small_categories
from dpstream.tabular import (
    DenseModel,
    GraphicalModel,
    Measurement,
    build_junction_tree,
    estimate_mw,
    estimate_pgm,
    junction_tree_size,
    l2_loss,
    marginal_counts,
)
from dpstream.tabular.model import factors as kernels
from dpstream.tabular.model import inference, junction_tree
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import optimize

# ---------------------------------------------------------------------------------------
# Brute-force references
# ---------------------------------------------------------------------------------------


def dense_joint(sizes: tuple[int, ...], potentials: dict, total: float) -> np.ndarray:
    """``total · exp(Σ θ_C) / Z`` on the full domain."""
    d = len(sizes)
    logp = np.zeros(sizes)
    for c, t in potentials.items():
        logp = logp + np.asarray(t).reshape([sizes[j] if j in c else 1 for j in range(d)])
    p = np.exp(logp - logp.max())
    return total * p / p.sum()


def dense_marginal(joint: np.ndarray, clique: tuple[int, ...]) -> np.ndarray:
    other = tuple(j for j in range(joint.ndim) if j not in clique)
    return joint.sum(axis=other).reshape(-1)


def ipf(sizes: tuple[int, ...], targets: dict, total: float, rounds: int = 3000) -> np.ndarray:
    """Maximum-entropy table with the given (consistent, positive) marginals."""
    d = len(sizes)
    h = np.full(sizes, total / math.prod(sizes))
    for _ in range(rounds):
        for c, y in targets.items():
            shape = [sizes[j] if j in c else 1 for j in range(d)]
            h = h * (y / dense_marginal(h, c)).reshape(shape)
        if max(np.abs(dense_marginal(h, c) - y).max() for c, y in targets.items()) < 1e-10:
            break
    return h


def dense_l2_minimum(sizes: tuple[int, ...], measurements: list, total: float) -> np.ndarray:
    """The exact minimiser of the loss over all tables ``h ≥ 0`` with ``Σ h = total``."""
    cells = math.prod(sizes)
    grid = np.indices(sizes).reshape(len(sizes), -1)
    rows, targets = [], []
    for m in measurements:
        idx = (
            np.ravel_multi_index(tuple(grid[j] for j in m.clique), [sizes[j] for j in m.clique])
            if m.clique
            else np.zeros(cells, dtype=np.int64)
        )
        a = np.zeros((m.values.size, cells))
        a[idx, np.arange(cells)] = 1.0 / m.stddev
        rows.append(a)
        targets.append(m.values / m.stddev)
    weight = 1e4 * max(1.0 / m.stddev for m in measurements)  # Σ h = total, nearly exactly
    rows.append(np.full((1, cells), weight))
    targets.append(np.array([weight * total]))
    h, _ = optimize.nnls(np.vstack(rows), np.concatenate(targets), maxiter=50 * cells)
    return h.reshape(sizes) * (total / h.sum())


class Dense:
    """A dense table with the model interface, for :func:`l2_loss`."""

    def __init__(self, h: np.ndarray) -> None:
        self.h = h
        self.sizes = h.shape
        self.total = float(h.sum())

    def marginal(self, clique):
        return dense_marginal(self.h, tuple(clique))

    def sample(self, n, rng):  # pragma: no cover - not used
        raise NotImplementedError


def random_table(rng: np.random.Generator, sizes: tuple[int, ...], n: int) -> np.ndarray:
    """``n`` rows from a random correlated law (Dirichlet, mixed with uniform)."""
    cells = math.prod(sizes)
    p = 0.7 * rng.dirichlet(np.full(cells, 0.5)) + 0.3 / cells
    flat = rng.choice(cells, size=n, p=p)
    return np.stack(np.unravel_index(flat, sizes), axis=1).astype(np.int64)


def _noisy(rng, data, sizes, cliques, sigma):
    return [
        Measurement(
            c,
            marginal_counts(data, sizes, c) + rng.normal(0, sigma, math.prod(sizes[j] for j in c)),
            sigma,
        )
        for c in cliques
    ]


def pairs(d: int) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(d), 2))


small_sizes = st.lists(st.integers(2, 4), min_size=3, max_size=5).map(tuple)
seeds = st.integers(0, 2**32 - 1)


# ---------------------------------------------------------------------------------------
# (1) exact marginals: PGM recovers them and is the maximum-entropy table
# ---------------------------------------------------------------------------------------


@settings(max_examples=12)
@given(sizes=small_sizes, seed=seeds)
def test_exact_two_way_marginals_recovered_and_max_entropy(sizes, seed):
    rng = np.random.default_rng(seed)
    data = random_table(rng, sizes, 3000)
    targets = {c: marginal_counts(data, sizes, c) for c in pairs(len(sizes))}
    assume(all(v.min() > 0 for v in targets.values()))
    meas = [Measurement(c, y, 1.0) for c, y in targets.items()]
    model = estimate_pgm(sizes, meas, 3000.0, iters=1000, tol=1e-14)
    for c, y in targets.items():
        np.testing.assert_allclose(model.marginal(c), y, atol=1e-4, err_msg=f"clique {c}")
    joint = dense_joint(sizes, model.potentials, 3000.0)
    np.testing.assert_allclose(joint, ipf(sizes, targets, 3000.0), atol=2e-3)
    assert model.losses[-1] < 1e-8


# ---------------------------------------------------------------------------------------
# (2) noisy marginals: the loss reaches the minimum over the whole simplex
# ---------------------------------------------------------------------------------------


@settings(max_examples=12)
@given(sizes=small_sizes, seed=seeds, sigma=st.sampled_from([0.5, 3.0, 20.0]))
def test_noisy_fit_reaches_dense_optimum(sizes, seed, sigma):
    rng = np.random.default_rng(seed)
    data = random_table(rng, sizes, 500)
    cliques = [c for c in pairs(len(sizes)) if rng.random() < 0.7] or [(0, 1)]
    cliques.append((0, 1, 2))  # one 3-way marginal too
    meas = _noisy(rng, data, sizes, cliques, sigma)
    model = estimate_pgm(sizes, meas, 500.0, iters=2000, tol=1e-12)
    best = l2_loss(Dense(dense_l2_minimum(sizes, meas, 500.0)), meas)
    got = l2_loss(model, meas)
    assert got == pytest.approx(model.losses[-1], rel=1e-9)
    assert got <= best + 1e-3 * max(best, 1.0), (got, best)


def test_mirror_descent_and_accelerated_agree():
    sizes = (3, 4, 2, 3)
    rng = np.random.default_rng(5)
    data = random_table(rng, sizes, 400)
    meas = _noisy(rng, data, sizes, [(0, 1), (1, 2), (2, 3), (0, 3)], 2.0)
    acc = estimate_pgm(sizes, meas, 400.0, iters=2000)
    md = estimate_pgm(sizes, meas, 400.0, iters=4000, method="mirror-descent")
    assert md.losses[-1] == pytest.approx(acc.losses[-1], rel=1e-4)
    for c in [(0, 1), (1, 2), (0, 2)]:
        np.testing.assert_allclose(md.marginal(c), acc.marginal(c), atol=1e-2)
    # the loss never rises along the iterates
    assert all(b <= a for a, b in itertools.pairwise(acc.losses))
    assert all(b <= a for a, b in itertools.pairwise(md.losses))


# ---------------------------------------------------------------------------------------
# (3) multiplicative weights
# ---------------------------------------------------------------------------------------


def test_mw_update_is_the_mwem_rule():
    sizes = (2, 3, 2)
    rng = np.random.default_rng(1)
    start = rng.random(sizes) + 0.1
    start *= 50.0 / start.sum()
    m1 = Measurement((0, 1), rng.normal(8, 3, 6), 1.0)
    m2 = Measurement((2,), np.array([30.0, 20.0]), 1.0)
    model = estimate_mw(sizes, [m1, m2], 50.0, iters=1, warm_start=start)
    h = start.copy()
    for m in (m1, m2):
        q = dense_marginal(h, m.clique)
        for x in itertools.product(*map(range, sizes)):
            cell = np.ravel_multi_index([x[j] for j in m.clique], [sizes[j] for j in m.clique])
            h[x] *= math.exp((m.values[cell] - q[cell]) / (2 * 50.0))
        h *= 50.0 / h.sum()
    np.testing.assert_allclose(model.counts, h, rtol=1e-12)
    assert model.total == pytest.approx(50.0)


@settings(max_examples=10)
@given(sizes=small_sizes, seed=seeds)
def test_mw_reduces_measured_error(sizes, seed):
    rng = np.random.default_rng(seed)
    data = random_table(rng, sizes, 1000)
    cliques = pairs(len(sizes))[:4]
    truth = {c: marginal_counts(data, sizes, c) for c in cliques}
    meas = [Measurement(c, y + rng.normal(0, 2.0, y.size), 2.0) for c, y in truth.items()]
    model = estimate_mw(sizes, meas, 1000.0, iters=200)
    uniform = DenseModel(sizes, np.ones(sizes))
    assert model.losses[-1] < 0.2 * model.losses[0]
    assert l2_loss(model, meas) == pytest.approx(model.losses[-1])

    def error(m):
        return sum(np.abs(m.marginal(c) * 1000.0 / m.total - y).sum() for c, y in truth.items())

    assert error(model) < 0.5 * error(uniform)


def test_mw_refuses_a_large_domain():
    with pytest.raises(ValueError, match=r"cells > 10000000.*estimate_pgm"):
        estimate_mw((100, 100, 100, 11), [], 10.0)


# ---------------------------------------------------------------------------------------
# (4) sampling
# ---------------------------------------------------------------------------------------


def _assert_samples_match(model, rows: np.ndarray, cliques: list[tuple[int, ...]]) -> None:
    n = rows.shape[0]
    alpha = ALPHA / len(cliques)
    for c in cliques:
        probs = model.marginal(c) / model.total
        observed = marginal_counts(rows, model.sizes, c)
        obs, p = merge_small_categories(observed, probs, n)
        assert_chi_square(obs, p, f"marginal {c}", alpha=alpha)


def test_pgm_samples_follow_the_model():
    sizes = (3, 4, 2, 5, 3, 2)
    rng = np.random.default_rng(11)
    cliques = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4, 5), (1, 4)]
    pots = {c: 1.5 * rng.normal(size=math.prod(sizes[j] for j in c)) for c in cliques}
    model = GraphicalModel(sizes, pots, 1000.0)
    rows = model.sample(100_000, np.random.default_rng(2024))
    assert rows.shape == (100_000, 6) and rows.dtype == np.int64
    checked = [*cliques, (0, 2), (0, 5), (0, 1, 2, 3, 4, 5)]
    _assert_samples_match(model, rows, checked)


def test_dense_samples_follow_the_model():
    sizes = (3, 2, 4)
    counts = np.random.default_rng(3).random(sizes) ** 3
    model = DenseModel(sizes, counts)
    rows = model.sample(100_000, np.random.default_rng(7))
    _assert_samples_match(model, rows, [(0, 1, 2), (0,), (1, 2)])


def test_sampling_is_reproducible_and_handles_zero():
    model = GraphicalModel((3, 3), {(0, 1): np.arange(9.0)}, 10.0)
    a = model.sample(50, np.random.default_rng(1))
    assert np.array_equal(a, model.sample(50, np.random.default_rng(1)))
    assert model.sample(0, np.random.default_rng(1)).shape == (0, 2)


def test_zero_probability_cells_are_never_sampled():
    # θ = -800 makes exp underflow to exactly 0 in the node tables.
    theta = np.zeros((3, 4))
    theta[1, :] = -800.0
    theta[:, 2] = -800.0
    model = GraphicalModel((3, 4, 2), {(0, 1): theta, (1, 2): np.ones(8)}, 5.0)
    rows = model.sample(20_000, np.random.default_rng(0))
    assert not np.any(rows[:, 0] == 1) and not np.any(rows[:, 1] == 2)


# ---------------------------------------------------------------------------------------
# (5) junction tree and belief propagation against brute force
# ---------------------------------------------------------------------------------------


STRUCTURES = {
    "chain": [(0, 1), (1, 2), (2, 3), (3, 4)],
    "cycle": [(0, 1), (1, 2), (2, 3), (3, 4), (0, 4)],
    "star": [(0, 1), (0, 2), (0, 3), (0, 4)],
    "triangles": [(0, 1, 2), (2, 3), (1, 3), (3, 4), (0, 4)],
    "forest": [(0, 1), (2, 3)],  # column 4 in no clique
}


def _check_running_intersection(tree, cliques, d: int) -> None:
    assert_running_intersection(tree, cliques, d)
    for i in tree.order[1:]:
        assert tree.separators[i] == tuple(
            sorted(set(tree.nodes[i]) & set(tree.nodes[tree.parent[i]]))
        )


@pytest.mark.parametrize("name", sorted(STRUCTURES))
@settings(max_examples=8)
@given(sizes=st.lists(st.integers(2, 4), min_size=5, max_size=5).map(tuple), seed=seeds)
def test_belief_propagation_matches_brute_force(name, sizes, seed):
    rng = np.random.default_rng(seed)
    cliques = STRUCTURES[name]
    pots = {c: 2.0 * rng.normal(size=math.prod(sizes[j] for j in c)) for c in cliques}
    model = GraphicalModel(sizes, pots, 123.0)
    _check_running_intersection(model.junction_tree, cliques, 5)
    joint = dense_joint(sizes, pots, 123.0)
    for k in (0, 1, 2, 3, 5):
        for c in itertools.combinations(range(5), k):
            np.testing.assert_allclose(
                model.marginal(c), dense_marginal(joint, c), rtol=1e-9, atol=1e-9, err_msg=str(c)
            )


def test_belief_propagation_is_stable_for_extreme_potentials():
    sizes = (4, 4, 4)
    pots = {(0, 1): np.linspace(-900, 900, 16), (1, 2): np.linspace(700, -700, 16)}
    model = GraphicalModel(sizes, pots, 1.0)
    joint = dense_joint(sizes, pots, 1.0)
    for c in [(0,), (1, 2), (0, 2), (0, 1, 2)]:
        got = model.marginal(c)
        assert np.all(np.isfinite(got))
        np.testing.assert_allclose(got, dense_marginal(joint, c), atol=1e-12)


@pytest.mark.parametrize(
    ("spread", "low", "path"),
    [
        (3.0, 0.0, "factors"),  # every node exponentiated clique by clique
        (3.0, -700.0, "node"),  # a node spanning more than _SPAN
        (2000.0, 0.0, "log"),  # separator sums underflow: the log-space fallback
    ],
)
@settings(max_examples=6)
@given(seed=seeds)
def test_scaled_propagation_matches_log_space(spread, low, path, seed):
    sizes = (3, 4, 2, 5, 3)
    rng = np.random.default_rng(seed)
    theta = {
        c: spread * rng.normal(size=[sizes[j] for j in c]) for c in STRUCTURES["cycle"] + [(1, 3)]
    }
    jt = build_junction_tree(sizes, theta, 10**6)
    assign = {c: junction_tree.node_of(jt, sizes, c) for c in theta}
    # one very unlikely cell in a clique that lies in none of its node's separators, so
    # that every separator sum keeps likely cells
    inner = [
        c
        for c, i in assign.items()
        if all(
            not set(c) <= set(jt.separators[j])
            for j in [i, *(k for k, p in enumerate(jt.parent) if p == i)]
        )
    ]
    theta[inner[0]].flat[0] += low
    spans = [
        sum(float(np.ptp(t)) for c, t in theta.items() if assign[c] == i)
        for i in range(len(jt.nodes))
    ]
    scaled = inference._calibrate(jt, sizes, *inference._node_factors(jt, sizes, theta, assign))
    if path == "factors":
        assert max(spans) <= inference._SPAN and scaled is not None
    elif path == "node":
        assert max(spans) > inference._SPAN and scaled is not None
    else:
        assert scaled is None
    psi = inference._node_potentials(jt, sizes, theta, assign)
    want, log_z = inference._calibrate_log(jt, sizes, psi)
    got, got_z = inference.propagate(jt, sizes, theta, assign)
    assert got_z == pytest.approx(log_z, rel=1e-12, abs=1e-9)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-15)
        assert g.sum() == pytest.approx(1.0, rel=1e-12)


@settings(max_examples=60)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=5),
    data=st.data(),
)
def test_sum_out_matches_numpy(shape, data):
    axes = tuple(sorted(data.draw(st.sets(st.integers(0, len(shape) - 1)))))
    table = np.random.default_rng(len(shape)).random(shape)
    got = kernels._sum_out(table, axes)
    np.testing.assert_allclose(got, table.sum(axis=axes), rtol=1e-13)
    assert got.shape == tuple(n for i, n in enumerate(shape) if i not in axes)


def test_junction_tree_of_a_grid_is_valid_and_bounded():
    # a 3x3 grid needs fill-in; the largest node has 4 columns at most with min-fill
    edges = [(0, 1), (1, 2), (3, 4), (4, 5), (6, 7), (7, 8)]
    edges += [(0, 3), (3, 6), (1, 4), (4, 7), (2, 5), (5, 8)]
    tree = build_junction_tree((2,) * 9, edges)
    _check_running_intersection(tree, edges, 9)
    assert max(len(n) for n in tree.nodes) <= 4
    assert junction_tree_size((2,) * 9, edges) == sum(2 ** len(n) for n in tree.nodes)
    assert junction_tree_size((3, 5, 7), [(0, 1), (1, 2)]) == 15 + 35
    assert junction_tree_size((3, 5, 7), [(0, 1), (1, 2), (0, 2)]) == 105


# ---------------------------------------------------------------------------------------
# (6) warm start
# ---------------------------------------------------------------------------------------


def test_warm_start_converges_in_far_fewer_iterations():
    sizes = (4, 3, 4, 2, 3)
    rng = np.random.default_rng(8)
    data = random_table(rng, sizes, 2000)
    meas = _noisy(rng, data, sizes, [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4)], 5.0)
    cold = estimate_pgm(sizes, meas, 2000.0, iters=3000, tol=1e-9)
    assert cold.iterations < 3000, "the cold fit should converge"
    warm = estimate_pgm(sizes, meas, 2000.0, iters=3000, tol=1e-9, warm_start=cold)
    assert warm.iterations <= cold.iterations / 5, (warm.iterations, cold.iterations)
    assert warm.losses[-1] <= cold.losses[-1] * (1 + 1e-8)
    assert warm.losses[0] == pytest.approx(cold.losses[-1], rel=1e-10)


def test_warm_start_keeps_old_cliques_and_their_potentials():
    sizes = (3, 3, 3, 3)
    rng = np.random.default_rng(4)
    data = random_table(rng, sizes, 800)
    first = estimate_pgm(sizes, _noisy(rng, data, sizes, [(0, 1), (1, 2, 3)], 2.0), 800.0)
    # no measurements, no steps: the warm start is returned unchanged (on a new tree)
    same = estimate_pgm(sizes, [], 800.0, warm_start=first, extra_cliques=[(0, 3)])
    assert set(same.cliques) == {(0, 1), (1, 2, 3), (0, 3)}
    for c in [(0, 1), (0, 2), (1, 2, 3), (0, 1, 2, 3)]:
        np.testing.assert_allclose(same.marginal(c), first.marginal(c), rtol=1e-10)
    # new measurements on other cliques: the structure is the union
    second = estimate_pgm(
        sizes, _noisy(rng, data, sizes, [(0, 2)], 2.0), 900.0, warm_start=first, iters=50
    )
    assert set(second.cliques) == {(0, 1), (1, 2, 3), (0, 2)}
    assert second.marginal(()).item() == pytest.approx(900.0)


def test_warm_start_must_match_the_domain():
    model = GraphicalModel((2, 2), {(0, 1): np.zeros(4)}, 1.0)
    with pytest.raises(ValueError, match="warm_start has sizes"):
        estimate_pgm((2, 3), [], 1.0, warm_start=model)
    with pytest.raises(ValueError, match="warm_start must be a GraphicalModel"):
        estimate_pgm((2, 2), [], 1.0, warm_start=np.zeros(4))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------
# (7) bad input
# ---------------------------------------------------------------------------------------


def test_measurement_validation():
    with pytest.raises(ValueError, match="increasing order"):
        Measurement((2, 1), np.zeros(4), 1.0)
    with pytest.raises(ValueError, match="repeats a column"):
        Measurement((1, 1), np.zeros(4), 1.0)
    with pytest.raises(ValueError, match="negative column"):
        Measurement((-1, 2), np.zeros(4), 1.0)
    with pytest.raises(ValueError, match="integer column indices"):
        Measurement((0.0, 1), np.zeros(4), 1.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stddev must be positive"):
        Measurement((0, 1), np.zeros(4), -1.0)
    with pytest.raises(ValueError, match="stddev must be positive"):
        Measurement((0, 1), np.zeros(4), 0.0)
    with pytest.raises(ValueError, match="finite"):
        Measurement((0, 1), np.array([0.0, np.nan]), 1.0)
    m = Measurement([0, 1], [1, 2, 3, 4], 2)  # type: ignore[arg-type]
    assert m.clique == (0, 1) and m.values.dtype == np.float64 and m.stddev == 2.0
    assert "4 counts" in repr(m)


@pytest.mark.parametrize("fit", [estimate_pgm, estimate_mw])
def test_estimators_reject_bad_input(fit):
    sizes = (2, 3, 4)
    with pytest.raises(ValueError, match=r"has 5 values, but the marginal has 6 cells"):
        fit(sizes, [Measurement((0, 1), np.zeros(5), 1.0)], 10.0)
    with pytest.raises(ValueError, match=r"names column 3, but the domain has 3 columns"):
        fit(sizes, [Measurement((0, 3), np.zeros(8), 1.0)], 10.0)
    with pytest.raises(ValueError, match="total must be a positive"):
        fit(sizes, [], 0.0)
    with pytest.raises(ValueError, match="sizes"):
        fit((2, 0), [], 1.0)
    with pytest.raises(ValueError, match="must be a Measurement"):
        fit(sizes, [((0, 1), np.zeros(6), 1.0)], 10.0)
    with pytest.raises(ValueError, match="iters"):
        fit(sizes, [], 10.0, iters=-1)


def test_pgm_refuses_a_huge_junction_tree():
    sizes = (100, 100, 100, 100)
    cycle = [(0, 1), (1, 2), (2, 3), (0, 3)]
    meas = [Measurement(c, np.zeros(10_000), 1.0) for c in cycle]
    with pytest.raises(ValueError, match=r"sizes \(100, 100, 100\), 1000000 cells > max_clique"):
        estimate_pgm(sizes, meas, 1.0, max_clique_cells=100_000)
    with pytest.raises(ValueError, match="extra_cliques"):
        estimate_pgm(sizes, [], 1.0, extra_cliques=[(1, 0)])
    with pytest.raises(ValueError, match="method"):
        estimate_pgm(sizes, [], 1.0, method="newton")  # type: ignore[arg-type]


def test_marginal_refuses_too_large_elimination():
    sizes = (50, 50, 50, 50)
    model = GraphicalModel(
        sizes,
        {(0, 1): np.zeros(2500), (1, 2): np.zeros(2500), (2, 3): np.zeros(2500)},
        1.0,
        max_clique_cells=10_000,
    )
    assert model.marginal((0, 2)).sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="max_clique_cells=10000"):
        model.marginal((0, 1, 3))
    with pytest.raises(ValueError, match="repeats"):
        model.marginal((1, 1))
    with pytest.raises(ValueError, match="names column 7"):
        model.marginal((0, 7))


def test_model_construction_validation():
    with pytest.raises(ValueError, match="has 3 values, but the clique has 4 cells"):
        GraphicalModel((2, 2), {(0, 1): np.zeros(3)}, 1.0)
    with pytest.raises(ValueError, match="finite"):
        GraphicalModel((2, 2), {(0, 1): np.array([0, 0, 0, np.inf])}, 1.0)
    with pytest.raises(ValueError, match="n must be"):
        GraphicalModel((2,), {}, 1.0).sample(-1, np.random.default_rng(0))
    with pytest.raises(ValueError, match="non-negative"):
        DenseModel((2,), [1.0, -1.0])


def test_marginal_counts():
    data = np.array([[0, 1, 2], [1, 1, 0], [0, 1, 2], [1, 0, 3]])
    sizes = (2, 2, 4)
    np.testing.assert_array_equal(marginal_counts(data, sizes, (0, 2)), [0, 0, 2, 0, 1, 0, 0, 1])
    np.testing.assert_array_equal(marginal_counts(data, sizes, (1,)), [1, 3])
    np.testing.assert_array_equal(marginal_counts(data, sizes, ()), [4])
    assert marginal_counts(data[:0], sizes, (0, 1)).tolist() == [0, 0, 0, 0]
    with pytest.raises(ValueError, match=r"column 2 has codes outside 0\.\.3"):
        marginal_counts(data + 1, sizes, (2,))
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        marginal_counts(data[:, :2], sizes, (0,))
    with pytest.raises(ValueError, match="integer codes"):
        marginal_counts(data.astype(float), sizes, (0,))


# ---------------------------------------------------------------------------------------
# (8) cross-check against Private-PGM (mbi), when it is installed
# ---------------------------------------------------------------------------------------


def test_matches_private_pgm():
    jax = pytest.importorskip("jax")
    jax.config.update("jax_enable_x64", True)
    mbi = pytest.importorskip("mbi")
    sizes = (3, 4, 2, 3)
    rng = np.random.default_rng(9)
    data = random_table(rng, sizes, 600)
    meas = _noisy(rng, data, sizes, [(0, 1), (1, 2), (2, 3), (0, 3), (1, 3)], 3.0)
    ours = estimate_pgm(sizes, meas, 600.0, iters=3000)
    names = tuple(f"c{j}" for j in range(len(sizes)))
    domain = mbi.Domain(names, sizes)
    theirs = mbi.estimation.MirrorDescent().estimate(
        domain,
        [
            mbi.LinearMeasurement(m.values, tuple(names[j] for j in m.clique), m.stddev)
            for m in meas
        ],
        known_total=600.0,
        iters=3000,
    )
    for m in meas:
        other = np.asarray(
            theirs.project(tuple(names[j] for j in m.clique)).datavector(flatten=True)
        )
        np.testing.assert_allclose(ours.marginal(m.clique), other, atol=1e-4, err_msg=m.clique)


def test_marginal_of_distant_columns_is_eliminated_leaf_first():
    """Far-apart columns of a chain: messages keep only separator × target cells, so a
    cap of one separator times the target suffices, and the result is exact."""
    sizes = (6, 6, 6, 6, 6, 6)
    g = np.random.default_rng(5)
    chain = {(i, i + 1): g.normal(size=36) for i in range(5)}
    model = GraphicalModel(sizes, chain, 1.0, max_clique_cells=6 * 36)
    logp = np.zeros(sizes)
    for (a, b), th in chain.items():
        shape = [1] * 6
        shape[a], shape[b] = 6, 6
        logp = logp + th.reshape(6, 6).reshape(shape)
    joint = np.exp(logp - logp.max())
    joint /= joint.sum()
    for target in [(0, 5), (1, 4), (2, 3)]:
        rest = tuple(c for c in range(6) if c not in target)
        want = joint.sum(axis=rest).reshape(-1)
        np.testing.assert_allclose(model.marginal(target), want, rtol=1e-9, atol=1e-15)


@pytest.mark.skipif(kernels._bmm_einsum is None, reason="numpy < 2.4 plans each einsum")
def test_contractions_replay_numpys_einsum_bit_for_bit():
    """``_contract`` runs numpy.einsum's own kernels on its cached contraction list: the
    same bits as ``np.einsum`` with the same path, on factors of two to four operands."""
    g = np.random.default_rng(8)
    sizes = (2, 3, 4, 5, 6, 3, 2)
    for _ in range(40):
        factors = []
        for _ in range(int(g.integers(1, 5))):
            cols = tuple(sorted(g.choice(7, size=int(g.integers(1, 4)), replace=False).tolist()))
            factors.append((cols, g.random([sizes[c] for c in cols])))
        seen = sorted({c for f, _ in factors for c in f})
        target = tuple(sorted(g.choice(seen, size=min(2, len(seen)), replace=False).tolist()))
        got = kernels.contract(factors, target, sizes, 10**6)
        labels, out, path, steps = kernels._contraction_plan(
            tuple(f for f, _ in factors), target, sizes, 10**6
        )
        assert steps is not None
        args = []
        for (_, t), lab in zip(factors, labels, strict=True):
            args += [t, list(lab)]
        want = np.einsum(*args, list(out), optimize=path)
        assert got.shape == want.shape and np.array_equal(got, want)

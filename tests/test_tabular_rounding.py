"""The ``method="round"`` sampler of the tabular models: unbiased controlled rounding.

``sample(n, rng, method="round")`` gives each cell of the first block of columns the
floor or the ceiling of its expected count ``n·p`` (exactly ``n`` rows, each cell
rounded up with probability its fractional part), then, for each later block, the
rows of each value of the conditioning columns (``c`` of them) the floor or ceiling
of ``c·p(new | conditioning)``. These properties are checked exactly (they are
deterministic), and unbiasedness by exact binomial and Hoeffding bounds at the suite's
false-alarm rate :data:`~conftest.ALPHA` with fixed seeds.
"""

from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
from _mbi_oracle import MbiModel
from conftest import ALPHA, assert_chi_square, binomial_pvalue, merge_small_categories
from dpstream.tabular import DenseModel, GraphicalModel, estimate_pgm, marginal_counts
from dpstream.tabular.estimation import (
    SAMPLE_METHODS,
    _repair_rounding,
    controlled_round,
    round_rows,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from test_tabular_estimation import _noisy, random_table

seeds = st.integers(0, 2**32 - 1)

#: A model with cycles (its junction tree needs fill-in edges) and a 3-way clique.
SIZES = (3, 4, 2, 5, 3, 2)
CLIQUES = [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4, 5), (1, 4)]


def reference_expected(weights: np.ndarray, totals: np.ndarray) -> np.ndarray:
    """``totals[g] · weights[g] / Σ weights[g]`` (uniform for a row without mass)."""
    w = np.maximum(np.asarray(weights, dtype=np.float64), 0.0)
    mass = w.sum(axis=1, keepdims=True)
    q = np.where(mass > 0, w / np.where(mass > 0, mass, 1.0), 1.0 / w.shape[1])
    return np.asarray(totals, dtype=np.int64)[:, None] * q


def assert_floor_or_ceil(counts: np.ndarray, expected: np.ndarray, totals: np.ndarray) -> None:
    assert counts.dtype == np.int64 and counts.shape == expected.shape
    ok = (counts == np.floor(expected)) | (counts == np.ceil(expected))
    assert ok.all(), (counts[~ok], expected[~ok])
    assert np.array_equal(counts.sum(axis=1), np.asarray(totals))


def pgm_model(seed: int = 11, strength: float = 1.5) -> GraphicalModel:
    rng = np.random.default_rng(seed)
    pots = {c: strength * rng.normal(size=math.prod(SIZES[j] for j in c)) for c in CLIQUES}
    return GraphicalModel(SIZES, pots, 1000.0)


def fitted_pgm() -> GraphicalModel:
    """A model fitted by :func:`estimate_pgm` to noisy marginals of a random table."""
    rng = np.random.default_rng(5)
    data = random_table(rng, SIZES, 2000)
    return estimate_pgm(SIZES, _noisy(rng, data, SIZES, CLIQUES, 3.0), 2000.0, iters=300)


def sampling_blocks(model: GraphicalModel) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``(node, separator)`` of each junction-tree node that adds columns, root first."""
    jt = model.junction_tree
    out = []
    for i in jt.order:
        node, sep = jt.nodes[i], jt.separators[i]
        if any(c not in sep for c in node):
            out.append((node, sep))
    return out


def assert_rounded_blockwise(
    sizes: tuple[int, ...],
    total: float,
    marginal,  # clique -> counts (the model's)
    blocks: list[tuple[tuple[int, ...], tuple[int, ...]]],
    rows: np.ndarray,
) -> None:
    """Each block's cells hold ``c_sep · p(new | sep)`` rows up to rounding (< 1 off).

    ``c_sep`` is the number of generated rows with that separator value (``n`` for a
    block without separator); ``p`` is the model's, uniform where the separator value
    has no mass.
    """
    n = rows.shape[0]
    for node, sep in blocks:
        shape = tuple(sizes[c] for c in node)
        table = marginal(node).reshape(shape) / total
        observed = marginal_counts(rows, sizes, node).reshape(shape)
        new_axes = tuple(k for k, c in enumerate(node) if c not in sep)
        if sep:
            p_sep = table.sum(axis=new_axes, keepdims=True)
            n_new = math.prod(shape[k] for k in new_axes)
            cond = np.where(p_sep > 0, table / np.where(p_sep > 0, p_sep, 1.0), 1.0 / n_new)
            expected = observed.sum(axis=new_axes, keepdims=True) * cond
        else:
            expected = n * table
        worst = float(np.abs(observed - expected).max())
        assert worst < 1 + 1e-9, f"block {node} given {sep}: a cell is {worst} rows off"


def l1_bounds(model: GraphicalModel) -> dict[tuple[int, ...], float]:
    """A sure bound on the L1 error of each model clique's marginal in "round" rows.

    A node's cells are each < 1 row from ``c_sep·p(new|sep)``, so its L1 error is at
    most its cells plus the L1 error of its separator, which is at most its parent's.
    """
    jt, sizes = model.junction_tree, model.sizes
    bound: dict[int, float] = {}
    for i in jt.order:
        cells = math.prod(sizes[c] for c in jt.nodes[i])
        bound[i] = cells + (bound[jt.parent[i]] if jt.separators[i] else 0.0)
    return {
        c: min(bound[i] for i, nd in enumerate(jt.nodes) if set(c) <= set(nd))
        for c in model.cliques
    }


def mbi_like(model: GraphicalModel) -> MbiModel:
    """An :class:`MbiModel` over ``model``'s junction tree, built without mbi.

    Its sampling and marginals read only the numpy node tables, the tree's edges and
    the column order, so this exercises ``MbiModel.sample`` where mbi is absent.
    """
    jt = model.junction_tree
    fake = MbiModel.__new__(MbiModel)
    fake._sizes = model.sizes
    fake._total = model.total
    fake._cliques = model.cliques
    fake._nodes = list(jt.nodes)
    fake._tables = [model.marginal(nd).reshape([model.sizes[c] for c in nd]) for nd in jt.nodes]
    fake._edges = tuple((i, jt.parent[i]) for i in jt.order[1:] if jt.separators[i])
    order: list[int] = []  # columns as they first appear along the tree: a perfect order
    for i in jt.order:
        order += [c for c in jt.nodes[i] if c not in order]
    fake._order = tuple(order)
    return fake


def mbi_blocks(model: MbiModel) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """``(parents + column, parents)`` of each column in the wrapper's order."""
    done: set[int] = set()
    out = []
    for col in model._order:
        parents = tuple(sorted({c for nd in model._nodes if col in nd for c in nd} & done))
        out.append((tuple(sorted((*parents, col))), parents))
        done.add(col)
    return out


# ---------------------------------------------------------------------------------------
# The rounding: floor or ceiling, exact totals, unbiased
# ---------------------------------------------------------------------------------------

weight_lists = st.lists(
    st.one_of(st.just(0.0), st.floats(1e-12, 1e6), st.floats(1e-300, 1e300)),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300)
@given(weights=weight_lists, n=st.integers(0, 3000), seed=seeds)
def test_first_block_counts_are_floor_or_ceil_and_sum_to_n(weights, n, seed):
    w = np.array(weights)
    rows = round_rows(w, None, n, np.random.default_rng(seed))
    assert rows.shape == (n,)
    counts = np.bincount(rows, minlength=w.size).reshape(1, -1).astype(np.int64)
    assert counts.shape == (1, w.size)  # never a value outside 0 .. k-1
    expected = reference_expected(w.reshape(1, -1), np.array([n]))
    assert_floor_or_ceil(counts, expected, np.array([n]))
    if w.sum() > 0:
        assert not counts[0, w == 0].any(), "a zero-probability cell got rows"


@settings(max_examples=300)
@given(
    weights=st.lists(weight_lists, min_size=1, max_size=6).map(
        lambda rows: [r + [0.0] * (40 - len(r)) for r in rows]
    ),
    totals=st.lists(st.one_of(st.integers(0, 50), st.integers(0, 10**12)), min_size=6, max_size=6),
    seed=seeds,
)
def test_controlled_round_per_row_even_for_huge_totals(weights, totals, seed):
    w = np.array(weights)
    tot = np.array(totals[: w.shape[0]], dtype=np.int64)
    counts = controlled_round(w, tot, np.random.default_rng(seed))
    assert_floor_or_ceil(counts, reference_expected(w, tot), tot)
    assert (counts >= 0).all()


@settings(max_examples=100)
@given(
    n_groups=st.integers(1, 6),
    k=st.integers(1, 7),
    n=st.integers(0, 400),
    seed=seeds,
)
def test_conditional_block_rounds_within_each_group(n_groups, k, n, seed):
    rng = np.random.default_rng(seed)
    cond = rng.random((n_groups, k)) * (rng.random((n_groups, k)) < 0.7)
    cond[0] = 0.0  # a conditioning value without mass: uniform, as the iid draws
    groups = rng.integers(0, n_groups, size=n).astype(np.intp)
    values = round_rows(cond, groups, n, rng)
    assert values.shape == (n,) and (values >= 0).all() and (values < k).all()
    sizes = np.bincount(groups, minlength=n_groups)
    counts = np.zeros((n_groups, k), dtype=np.int64)
    np.add.at(counts, (groups, values), 1)
    assert_floor_or_ceil(counts, reference_expected(cond, sizes), sizes)


def test_rounding_is_unbiased():
    """Each cell's count − floor is Bernoulli(fractional part): exact binomial tests."""
    p = np.array([0.31, 0.0, 0.07, 0.2, 0.005, 0.215, 0.1, 0.1])
    n, reps = 13, 20_000
    counts = controlled_round(
        np.tile(p, (reps, 1)), np.full(reps, n), np.random.default_rng(20240601)
    )
    expected = n * p / p.sum()
    up = counts - np.floor(expected)
    assert np.isin(up, (0, 1)).all() and (counts.sum(axis=1) == n).all()
    assert not up[:, p == 0].any()
    frac = expected - np.floor(expected)
    tested = np.flatnonzero(frac > 0)
    pvalues = [binomial_pvalue(int(up[:, j].sum()), reps, float(frac[j])) for j in tested]
    assert min(pvalues) > ALPHA / len(tested), (pvalues, up.mean(axis=0), frac)


def test_repair_keeps_floor_ceil_and_total():
    """The round-off guard: broken rows are moved back to floor/ceil and the total."""
    expected = np.array([0.5, 1.5, 0.0, 2.0, 1.0])  # sums to 5
    for broken in ([2, 1, 1, 2, 1], [0, 0, 0, 0, 0], [0, 3, 0, 2, 1], [9, 9, 9, 9, 9]):
        out = _repair_rounding(np.array(broken, dtype=np.int64), expected, 5)
        assert out.sum() == 5 and (out >= 0).all()
        assert ((out == np.floor(expected)) | (out == np.ceil(expected))).all(), out
    # a total the ceilings cannot reach (only round-off far beyond float64's could ask)
    out = _repair_rounding(np.zeros(3, dtype=np.int64), np.array([0.0, 1.0, 0.5]), 4)
    assert out.sum() == 4 and (out >= 0).all() and out[0] == 0


# ---------------------------------------------------------------------------------------
# GraphicalModel.sample(method="round")
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("make", [pgm_model, fitted_pgm], ids=["random", "fitted"])
def test_pgm_round_rows_are_rounded_along_the_tree(make):
    model = make()
    n = 20_000
    rows = model.sample(n, np.random.default_rng(3), method="round")
    assert rows.shape == (n, len(SIZES)) and rows.dtype == np.int64
    for j, s in enumerate(SIZES):
        assert rows[:, j].min() >= 0 and rows[:, j].max() < s
    assert_rounded_blockwise(model.sizes, model.total, model.marginal, sampling_blocks(model), rows)
    root = sampling_blocks(model)[0][0]
    expected = n * model.marginal(root) / model.total
    assert np.abs(marginal_counts(rows, SIZES, root) - expected).max() < 1


@pytest.mark.parametrize("make", [pgm_model, fitted_pgm], ids=["random", "fitted"])
def test_pgm_round_marginals_are_much_closer_than_iid(make):
    model = make()
    n = 20_000
    bounds = l1_bounds(model)
    iid = model.sample(n, np.random.default_rng(4), method="iid")
    rnd = model.sample(n, np.random.default_rng(4), method="round")

    def l1(rows: np.ndarray, c: tuple[int, ...]) -> float:
        target = n * model.marginal(c) / model.total
        return float(np.abs(marginal_counts(rows, SIZES, c) - target).sum())

    for c, b in bounds.items():
        assert l1(rnd, c) <= b + 1e-6, (c, l1(rnd, c), b)  # sure: implied by the rounding
    total_iid = sum(l1(iid, c) for c in bounds)
    total_rnd = sum(l1(rnd, c) for c in bounds)
    assert total_rnd * 5 < total_iid, (total_rnd, total_iid)


def test_pgm_round_is_unbiased_and_exchangeable():
    """A chain 0 — 1 — 2: root cells exact binomial, child cells Hoeffding, row 0 χ²."""
    sizes = (3, 3, 2)
    rng = np.random.default_rng(77)
    pots = {(0, 1): rng.normal(size=9), (1, 2): rng.normal(size=6)}
    model = GraphicalModel(sizes, pots, 1.0)
    assert [(n, s) for n, s in sampling_blocks(model)] == [((0, 1), ()), ((1, 2), (1,))]
    n, reps = 10, 3000
    p_root = model.marginal((0, 1))
    e_root = n * p_root
    p12 = model.marginal((1, 2)).reshape(3, 2)
    cond = p12 / p12.sum(axis=1, keepdims=True)
    up_root = np.zeros(9)
    drift = np.zeros((3, 2))  # Σ_reps (count − floor − frac) of the child cells
    first = np.zeros(18)
    sample_rng = np.random.default_rng(9)
    for _ in range(reps):
        rows = model.sample(n, sample_rng, method="round")
        root = marginal_counts(rows, sizes, (0, 1))
        assert np.isin(root - np.floor(e_root), (0, 1)).all()
        up_root += root - np.floor(e_root)
        c1 = marginal_counts(rows, sizes, (1,))
        e_child = c1[:, None] * cond
        child = marginal_counts(rows, sizes, (1, 2)).reshape(3, 2)
        assert np.isin(child - np.floor(e_child), (0, 1)).all()
        drift += child - e_child
        first[np.ravel_multi_index(tuple(rows[0]), sizes)] += 1
    alpha = ALPHA / 3
    frac = e_root - np.floor(e_root)
    pvalues = [binomial_pvalue(int(up_root[j]), reps, float(frac[j])) for j in range(9)]
    assert min(pvalues) > alpha / 9, ("root", pvalues)
    # Given c1, child − floor is Bernoulli(frac): Σ (X − frac) over the reps is a sum of
    # independent centred terms in [−1, 1] — Hoeffding: P(|Σ| ≥ t) ≤ 2 exp(−t² / (2 reps)).
    t = math.sqrt(2 * reps * math.log(2 * 6 / alpha))
    assert np.abs(drift).max() < t, ("child", drift, t)
    # Row 0 of an exchangeable table of unbiased counts follows the model exactly.
    probs = model.marginal((0, 1, 2))
    obs, pr = merge_small_categories(first, probs, reps)
    assert_chi_square(obs, pr, "first row", alpha=alpha)


def test_pgm_round_zero_probability_cells_and_empty_sample():
    theta = np.zeros((3, 4))
    theta[1, :] = -800.0  # exp underflows to exactly 0 in the node tables
    theta[:, 2] = -800.0
    model = GraphicalModel((3, 4, 2), {(0, 1): theta, (1, 2): np.ones(8)}, 5.0)
    rows = model.sample(20_000, np.random.default_rng(0), method="round")
    assert not np.any(rows[:, 0] == 1) and not np.any(rows[:, 1] == 2)
    assert model.sample(0, np.random.default_rng(1), method="round").shape == (0, 3)
    # a forest (column 4 in no clique, two components): every block is rounded
    forest = GraphicalModel((3, 4, 2, 3, 2), {(0, 1): np.arange(12.0) / 5, (2, 3): np.ones(6)}, 1.0)
    rows = forest.sample(1001, np.random.default_rng(2), method="round")
    blocks = sampling_blocks(forest)
    assert_rounded_blockwise(forest.sizes, 1.0, forest.marginal, blocks, rows)


def test_round_rows_are_shuffled_and_reproducible():
    model = pgm_model()
    a = model.sample(2000, np.random.default_rng(5), method="round")
    assert np.array_equal(a, model.sample(2000, np.random.default_rng(5), method="round"))
    # not grouped by value: the first column changes value often along the table
    changes = int(np.count_nonzero(np.diff(a[:, 0])))
    assert changes > 1000, changes


# ---------------------------------------------------------------------------------------
# "iid" is unchanged
# ---------------------------------------------------------------------------------------

#: SHA-256 of ``sample(1000, default_rng(123))`` computed before ``method`` existed.
IID_DIGESTS = {
    "pgm": "880b9e1c650a0758a372b37e1e0cecceba71f4a1ccaf8bc4a48b86abf639e183",
    "pgm_forest": "3a546e1f98dbeee937f6c41ec3101d0a14a0706e38bc0958cda44c4e602c1188",
    "dense": "5955ef6710c9464fdf7ef7e395945f30142342f233fc83a3dc6895926d916611",
}


def iid_models() -> dict[str, GraphicalModel | DenseModel]:
    return {
        "pgm": pgm_model(),
        "pgm_forest": GraphicalModel(
            (3, 4, 2, 3, 2), {(0, 1): np.arange(12.0) / 5, (2, 3): np.ones(6)}, 50.0
        ),
        "dense": DenseModel((3, 2, 4), np.arange(24.0) % 7),
    }


@pytest.mark.parametrize("name", sorted(IID_DIGESTS))
def test_iid_is_unchanged(name):
    model = iid_models()[name]
    default = model.sample(1000, np.random.default_rng(123))
    explicit = model.sample(1000, np.random.default_rng(123), method="iid")
    assert np.array_equal(default, explicit)
    assert hashlib.sha256(default.tobytes()).hexdigest() == IID_DIGESTS[name]


# ---------------------------------------------------------------------------------------
# DenseModel and the mbi wrapper
# ---------------------------------------------------------------------------------------


def test_dense_round_counts_are_floor_or_ceil():
    sizes = (3, 2, 4)
    counts = np.random.default_rng(3).random(sizes) ** 3
    counts[1, 0, 2] = 0.0
    model = DenseModel(sizes, counts)
    for n in (0, 1, 7, 1000, 48_842):
        rows = model.sample(n, np.random.default_rng(n), method="round")
        assert rows.shape == (n, 3) and rows.dtype == np.int64
        got = marginal_counts(rows, sizes, (0, 1, 2)).astype(np.int64).reshape(1, -1)
        expected = reference_expected(counts.reshape(1, -1), np.array([n]))
        assert_floor_or_ceil(got, expected, np.array([n]))
    rows = model.sample(1000, np.random.default_rng(1), method="round")
    assert int(np.count_nonzero(np.diff(rows[:, 0]))) > 300  # rows in a random order


@pytest.mark.parametrize("make", [pgm_model, fitted_pgm], ids=["random", "fitted"])
def test_mbi_wrapper_round_without_mbi(make):
    model = mbi_like(make())
    n = 5000
    rows = model.sample(n, np.random.default_rng(8), method="round")
    assert rows.shape == (n, len(SIZES)) and rows.dtype == np.int64
    assert_rounded_blockwise(model.sizes, model.total, model.marginal, mbi_blocks(model), rows)
    assert model.sample(0, np.random.default_rng(8), method="round").shape == (0, len(SIZES))
    iid = model.sample(n, np.random.default_rng(8), method="iid")
    assert np.array_equal(iid, model.sample(n, np.random.default_rng(8)))


def test_mbi_round_when_installed():
    pytest.importorskip("mbi")
    from _mbi_oracle import estimate_mbi

    rng = np.random.default_rng(5)
    data = random_table(rng, SIZES, 2000)
    model = estimate_mbi(SIZES, _noisy(rng, data, SIZES, CLIQUES, 3.0), 2000.0, iters=100)
    rows = model.sample(3000, np.random.default_rng(1), method="round")
    assert rows.shape == (3000, len(SIZES))
    assert_rounded_blockwise(model.sizes, model.total, model.marginal, mbi_blocks(model), rows)


# ---------------------------------------------------------------------------------------
# Bad method
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["IID", "rounded", "", None, 1])
@pytest.mark.parametrize("kind", ["pgm", "dense", "mbi"])
def test_bad_method_is_refused(kind, method):
    models = {"pgm": pgm_model(), "dense": iid_models()["dense"], "mbi": mbi_like(pgm_model())}
    with pytest.raises(ValueError, match="'iid', 'round'"):
        models[kind].sample(5, np.random.default_rng(0), method=method)
    with pytest.raises(ValueError, match="'iid', 'round'"):
        models[kind].sample(0, np.random.default_rng(0), method=method)
    assert SAMPLE_METHODS == ("iid", "round")


def test_groups_are_counted_as_numpy_unique_finds_them() -> None:
    """round_rows groups rows by counting rather than sorting: the same cells, inverse
    and counts (values and dtypes) as ``np.unique``."""
    from dpstream.tabular.estimation import _groups_of

    g = np.random.default_rng(1)
    for n in (1, 7, 1000):
        for high in (1, 3, 70_000):
            x = g.integers(0, high, n)
            got = _groups_of(x)
            want = np.unique(x, return_inverse=True, return_counts=True)
            for a, b in zip(got, want, strict=True):
                assert a.dtype == b.dtype and np.array_equal(a, b)

"""TabularStream: the streaming select–measure–fit of Kumar, Strohmer and Vershynin."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import dpstream
import numpy as np
import pandas as pd
import pytest
from dpstream.tabular import (
    Adaptive,
    Baseline,
    Domain,
    ModelOptions,
    Paper,
    TabularStream,
    all_workloads,
    marginal,
    workload_errors,
)
from dpstream.tabular.policy import RemovedPolicy
from dpstream.tabular.selection import (
    L2_GRID_BITS,
    NOISE_PENALTY,
    SCORE_BITS,
    SIZE_SHARE,
    excess_l2_scores,
    selection_scores,
)
from hypothesis import given
from hypothesis import strategies as st
from test_tabular_sizes import as_format_1

# The copy of the Adult data the package ships (../shared/data/adult is not in a clean clone).
ADULT = Path(__file__).resolve().parents[1] / "python" / "dpstream" / "data"


def small() -> Domain:
    return Domain({"a": 3, "b": 2, "c": 4, "d": 2})


def table(domain: Domain, n: int, seed: int, skew: bool = True) -> np.ndarray:
    """Correlated rows: b copies a mod 2 most of the time, d copies b."""
    g = np.random.default_rng(seed)
    cols = [g.integers(0, s, n) for s in domain.sizes]
    if skew:
        cols[1] = np.where(g.random(n) < 0.9, cols[0] % 2, cols[1])
        cols[3] = np.where(g.random(n) < 0.9, cols[1], cols[3])
    return np.stack(cols, axis=1).astype(np.int64)


def test_budget_is_split_exactly() -> None:
    d = small()
    eps = Fraction(3, 2)
    for score in ("l2", "l2-cell", "paper"):
        # Default (add/remove): ε/20 to the size counter, the rest ε' to 4 selections and
        # 4 measurements of ε'/8, every mechanism calibrated to an ℓ1 change of 1.
        b = TabularStream.budget(eps, 4, all_workloads(d, 2), d, score=score)  # type: ignore[arg-type]
        assert b.size == eps * SIZE_SHARE == Fraction(3, 40) and b.l1 == 1
        assert b.selection == b.measurement == b.counter_epsilon == (eps - b.size) / 8
        assert 4 * b.selection + 4 * b.measurement + b.size == eps
        assert b.laplace_scale == 1 / b.measurement
        # public_sizes=True (one record's values replaced): no size counter, ε/8 each, and
        # every mechanism calibrated to an ℓ1 change of 2.
        p = TabularStream.budget(eps, 4, all_workloads(d, 2), d, score=score, public_sizes=True)  # type: ignore[arg-type]
        assert p.size == 0 and p.l1 == 2
        assert p.selection == p.measurement == Fraction(3, 16)
        assert 4 * p.selection + 4 * p.measurement + p.size == eps
        assert p.counter_epsilon == Fraction(3, 32) and p.laplace_scale == Fraction(32, 3)
        assert p.score_sensitivity == 2 * b.score_sensitivity
    # The "l2" score moves by at most one per record.
    assert TabularStream.budget(1, 4, all_workloads(d, 2), d).score_sensitivity == 1
    # The paper's score: the smallest 2-way workload here is b × d with 4 cells.
    b = TabularStream.budget(1, 4, all_workloads(d, 2), d, score="paper")
    assert b.score_sensitivity == Fraction(1, 4) + Fraction(1, 2**18)
    with pytest.raises(TypeError, match="public_sizes"):
        TabularStream.budget(1, 4, all_workloads(d, 2), d, public_sizes=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="score must be"):
        TabularStream.budget(1, 4, all_workloads(d, 2), d, score="l1")  # type: ignore[arg-type]


def l2_reference(
    batch: list[int],
    shift: list[float],
    model: list[float],
    rows: int,
    table: int,
    sigma: float,
    per_cell: bool = False,
) -> Fraction:
    """The "l2" (or "l2-cell") score from its definition, in exact rationals (slow)."""
    unit = 2**L2_GRID_BITS
    v = [unit * x - round(Fraction(c) * unit) for x, c in zip(batch, shift, strict=True)]
    norm = Fraction(math.isqrt(sum(e * e for e in v)), unit)
    # The public bias term in the same float operations as the library (it needs no exactness).
    total = float(np.sum(model))
    p2 = float(np.sum((np.array(model) / total) ** 2)) if total > 0 else 1 / len(model)
    bias = math.sqrt(rows * max(0.0, 1 - p2)) + NOISE_PENALTY * sigma * math.sqrt(
        len(batch) * rows / (2 * max(table, 1))
    )
    grid = 2**SCORE_BITS
    if not per_cell:
        return Fraction(math.floor(norm * grid) - math.floor(Fraction(bias) * grid), grid)
    # ⌊grid·norm/√c⌋ is the largest k ≥ 0 with k² ≤ (grid·norm)²/c.
    bound = (norm * grid) ** 2 / len(batch)
    k = math.isqrt(math.floor(bound))
    assert k * k <= bound < (k + 1) ** 2
    return Fraction(k - math.floor(Fraction(bias / math.sqrt(len(batch))) * grid), grid)


cells_st = st.integers(1, 12)


@given(
    cells_st.flatmap(
        lambda n: st.tuples(
            st.lists(st.integers(-300, 300), min_size=n, max_size=n),
            st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=n, max_size=n),
            st.lists(st.floats(0, 1e6, allow_nan=False), min_size=n, max_size=n),
        )
    ),
    st.integers(0, 500),
    st.integers(0, 10**7),
    st.floats(0, 100),
    st.integers(0, 11),
    st.sampled_from([1, -1]),
    st.booleans(),
)
def test_the_l2_score_is_exact_and_one_record_moves_it_by_at_most_one(
    arrays: tuple[list[int], list[float], list[float]],
    rows: int,
    table: int,
    sigma: float,
    cell: int,
    sign: int,
    per_cell: bool,
) -> None:
    batch, shift, model = arrays
    cell %= len(batch)

    def score(x: list[int]) -> float:
        return float(
            excess_l2_scores(
                [np.array(x, dtype=np.float64)],
                [np.array(shift)],
                [np.array(model)],
                rows=rows,
                table_rows=table,
                noise_stddev=sigma,
                per_cell=per_cell,
            )[0]
        )

    a = score(batch)
    assert Fraction(a) == l2_reference(batch, shift, model, rows, table, sigma, per_cell)
    assert a * 2**SCORE_BITS == np.floor(a * 2**SCORE_BITS)
    neighbour = list(batch)
    neighbour[cell] += sign
    # Within the sensitivity given to permute-and-flip: 1, or 1/√|q| rounded up + 2^-18.
    one = [(i,) for i in range(len(batch))]  # a workload list whose smallest has len(batch) cells
    sizes = Domain({f"c{i}": len(batch) for i in range(len(batch))})
    bound = TabularStream.budget(1, 1, one, sizes, score="l2-cell" if per_cell else "l2")
    assert Fraction(abs(score(neighbour) - a)) <= bound.score_sensitivity
    assert per_cell or bound.score_sensitivity == 1


def test_the_l2_score_prefers_the_workload_the_model_gets_wrong() -> None:
    g = np.random.default_rng(3)
    p_good = np.array([0.7, 0.2, 0.1])
    batch = g.multinomial(200, p_good).astype(np.float64)
    # The same batch against a right and a wrong model (both scaled to the batch).
    right, wrong = 200 * p_good, np.full(3, 200 / 3)
    s = excess_l2_scores(
        [batch, batch], [right, wrong], [right, wrong], rows=200, table_rows=200, noise_stddev=0
    )
    assert s[1] > s[0] + 50
    # A right model scores about zero: the sampling floor is subtracted.
    assert abs(s[0]) < 15


@pytest.mark.parametrize("per_cell", [False, True])
def test_the_l2_scores_of_many_workloads_are_those_of_each_alone(per_cell: bool) -> None:
    """Workloads are scored in groups of one size: the same bits as one at a time, in the
    caller's order, whatever the mix of sizes and dtypes."""
    g = np.random.default_rng(7)
    batches, shifts, models = [], [], []
    for n in range(60):
        cells = int(g.choice([1, 4, 36, 216]))
        x = g.poisson(g.uniform(0, 80), cells)
        batches.append(x if n % 3 else x.astype(np.float64))
        m = g.exponential(g.uniform(0.1, 50), cells) * (n % 7 != 0)  # some all zero
        models.append(m)
        shifts.append(m - g.exponential(5, cells))
    kw = {"rows": 900, "table_rows": 4000, "noise_stddev": 17.3, "per_cell": per_cell}
    together = excess_l2_scores(batches, shifts, models, **kw)  # type: ignore[arg-type]
    alone = [excess_l2_scores([x], [c], [m], **kw)[0]  # type: ignore[arg-type]
             for x, c, m in zip(batches, shifts, models, strict=True)]  # fmt: skip
    assert together.tolist() == alone


def test_the_l2_scores_report_the_first_workloads_problem() -> None:
    kw = {"rows": 1, "table_rows": 1, "noise_stddev": 1.0}
    big, half, nan = np.array([2.0**28]), np.array([0.5, 1.0]), np.array([np.nan])
    with pytest.raises(ValueError, match="out of range"):
        excess_l2_scores([big, half], [np.zeros(1), np.zeros(2)], [np.ones(1), np.ones(2)], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="integer counts"):
        excess_l2_scores([half, big], [np.zeros(2), np.zeros(1)], [np.ones(2), np.ones(1)], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not finite"):
        excess_l2_scores([np.zeros(1), big], [nan, np.zeros(1)], [np.ones(1)] * 2, **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="differ"):
        excess_l2_scores([np.zeros(2)], [np.zeros(1)], [np.ones(2)], **kw)  # type: ignore[arg-type]


def test_the_l2_score_refuses_what_it_cannot_compute_exactly() -> None:
    kw = {"rows": 1, "table_rows": 1, "noise_stddev": 1.0}
    with pytest.raises(ValueError, match="integer counts"):
        excess_l2_scores([np.array([0.5])], [np.zeros(1)], [np.ones(1)], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="out of range"):
        excess_l2_scores([np.array([2.0**28])], [np.zeros(1)], [np.ones(1)], **kw)  # type: ignore[arg-type]
    # Non-finite public vectors come from a fault upstream (the fit), and say so.
    with pytest.raises(ValueError, match="not finite"):
        excess_l2_scores([np.zeros(1)], [np.array([np.nan])], [np.ones(1)], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not finite"):
        excess_l2_scores([np.zeros(1)], [np.zeros(1)], [np.array([np.inf])], **kw)  # type: ignore[arg-type]


@given(
    st.lists(st.integers(0, 40), min_size=4, max_size=4),
    st.lists(st.floats(0, 1e4, allow_nan=False), min_size=4, max_size=4),
    st.integers(0, 3),
    st.sampled_from([1, -1]),
)
def test_one_record_moves_a_rounded_score_by_at_most_the_sensitivity(
    counts: list[int], model: list[float], cell: int, sign: int
) -> None:
    target = np.array(counts, dtype=np.float64)
    neighbour = target.copy()
    neighbour[cell] += sign
    m = np.array(model)
    a = selection_scores([target], [m])[0]
    b = selection_scores([neighbour], [m])[0]
    assert abs(a - b) <= 1 / 4 + 2.0**-18
    assert a * 2**SCORE_BITS == np.floor(a * 2**SCORE_BITS)


def test_steps_return_tables_of_the_current_size_and_track_deletions() -> None:
    d = small()
    rows = table(d, 600, 1)
    s = TabularStream(
        d,
        1,
        policy=Paper(k=2),
        model=ModelOptions(iters=20),
        public_sizes=True,
        rng=dpstream.Rng(seed=3),
    )
    assert "NOT PRIVATE" in repr(s)
    out = s.step(pd.DataFrame(rows[:200], columns=list(d.names)))
    assert isinstance(out, pd.DataFrame) and list(out.columns) == list(d.names)
    assert len(out) == 200 == s.size and s.t == 1
    out = s.step(rows[200:400], deletions=rows[:50])
    assert len(out) == 350 == s.size
    out = s.step(None)  # an empty step
    assert len(out) == 350 and s.t == 3
    for j, size in enumerate(d.sizes):
        assert out.iloc[:, j].between(0, size - 1).all()


@pytest.mark.parametrize("policy", [Adaptive(), Paper(k=2)])
def test_rejected_batches_change_nothing(policy: Adaptive | Paper) -> None:
    d = small()
    rows = table(d, 400, 2)

    def make() -> TabularStream:
        return TabularStream(
            d, 1, policy=policy, model=ModelOptions(iters=10), rng=dpstream.Rng(seed=5)
        )

    a, b = make(), make()
    a.step(rows[:100])
    b.step(rows[:100])
    bad = rows[100:110].copy()
    bad[3, 2] = 4  # column c has 4 categories
    with pytest.raises(ValueError, match="column 'c' has code 4"):
        a.step(bad)
    # Paper: a deletion with a bad code; the default takes insertions only.
    with pytest.raises(ValueError, match=r"column 'c' has code 4|insertions only"):
        a.step(rows[100:110], deletions=bad)
    with pytest.raises(ValueError, match="missing"):
        a.step(pd.DataFrame({"a": [0]}))
    assert a.to_bytes() == b.to_bytes() and (a.t, a.size) == (1, b.size)
    assert a.step(rows[100:200]).equals(b.step(rows[100:200]))


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"epsilon": 0}, ValueError),
        ({"policy": "adaptive"}, TypeError),
        ({"policy": Adaptive}, TypeError),
        # Options of a policy now (Paper(counter=...)), or none at all (estimator).
        ({"counter": "simple"}, TypeError),
        ({"horizon": 10}, TypeError),
        ({"estimator": "pgm"}, TypeError),
        ({"workloads": [(1, 0)]}, ValueError),
        ({"workloads": "all"}, TypeError),
        # Fields of ModelOptions now (model=ModelOptions(iters=...)).
        ({"iters": 30}, TypeError),
        ({"sampling": "iid"}, TypeError),
        ({"model": {"iters": 30}}, TypeError),
    ],
)
@pytest.mark.parametrize("policy", [Adaptive(), Paper()])
def test_bad_parameters_are_refused(
    kwargs: dict[str, object], error: type, policy: Adaptive | Paper
) -> None:
    args: dict[str, object] = {"epsilon": 1, "policy": policy, **kwargs}
    eps = args.pop("epsilon")
    with pytest.raises(error):
        TabularStream(small(), eps, **args)  # type: ignore[arg-type]


def test_baseline_takes_insertions_only_and_grows_by_batches() -> None:
    d = small()
    rows = table(d, 300, 3)
    s = TabularStream(
        d,
        1,
        policy=Baseline(k=2, estimator="mw"),
        model=ModelOptions(iters=10),
        public_sizes=True,
        rng=dpstream.Rng(seed=1),
    )
    assert len(s.step(rows[:100])) == 100
    assert len(s.step(rows[100:250])) == 250
    with pytest.raises(ValueError, match="insertions only"):
        s.step(rows[:10], deletions=rows[:5])


def test_every_counter_kind_runs() -> None:
    d = small()
    rows = table(d, 300, 4)
    for counter, horizon in [
        ("block", 10),
        ("binary-tree", 10),
        ("hybrid", None),
        ("unbounded-block", None),
    ]:
        policy = Paper(k=2, counter=counter, horizon=horizon)  # type: ignore[arg-type]
        s = TabularStream(
            d, 2, policy=policy, model=ModelOptions(iters=10), rng=dpstream.Rng(seed=2)
        )
        sizes = [len(s.step(rows[100 * t : 100 * (t + 1)])) for t in range(3)]
        # The size counter is of the same kind: released sizes, monotone (insert-only).
        assert sizes == sorted(sizes) and sizes[-1] == s.size > 0
    with pytest.raises(ValueError, match="horizon"):
        TabularStream(d, 1, policy=Paper(counter="hybrid", horizon=10))
    with pytest.raises(ValueError, match="horizon"):
        TabularStream(d, 1, policy=Baseline(counter="block"))  # needs a horizon
    with pytest.raises(ValueError, match=r"Paper\.counter must be one of"):
        Paper(counter="tree")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"Baseline\.horizon must be at least 1"):
        Baseline(horizon=0)
    with pytest.raises(ValueError, match=r"Baseline\.estimator must be one of"):
        Baseline(estimator="mbi")  # type: ignore[arg-type]


@pytest.mark.parametrize("policy", [Adaptive(), Paper()])
def test_the_stream_learns_the_correlations_and_beats_independent_columns(
    policy: Adaptive | Paper,
) -> None:
    d = small()
    rows = table(d, 4000, 6)
    s = TabularStream(d, 2, policy=policy, model=ModelOptions(iters=60), rng=dpstream.Rng(seed=11))
    for t in range(20):
        synth = s.step(rows[200 * t : 200 * (t + 1)])
    e = workload_errors(rows, synth, d)
    # A table with the right one-way marginals but independent columns:
    g = np.random.default_rng(0)
    indep = np.stack([g.permutation(rows[:, j]) for j in range(4)], axis=1)
    base = workload_errors(rows, indep, d)
    assert e.avg_we < 0.6 * base.avg_we, (e, base)
    # The b–d dependence (90 % copies) is reproduced.
    m = marginal(d.encode(synth), d, (1, 3)).reshape(2, 2)
    assert np.trace(m) / m.sum() > 0.8


def test_adult_small_run_the_default_beats_baseline() -> None:
    d = Domain.from_json(ADULT / "adult-domain.json")
    data = d.encode(pd.read_csv(ADULT / "adult.csv", nrows=6000))
    data = data[np.random.default_rng(0).permutation(len(data))]
    results = {}
    for method, policy in (("default", Adaptive()), ("baseline", Baseline())):
        s = TabularStream(
            d, 1, policy=policy, model=ModelOptions(iters=40), rng=dpstream.Rng(seed=21)
        )
        for t in range(30):
            synth = s.step(data[200 * t : 200 * (t + 1)])
        results[method] = workload_errors(data, synth, d)
    assert results["default"].avg_we < results["baseline"].avg_we, results
    assert results["default"].avg_tv < results["baseline"].avg_tv, results


@pytest.mark.parametrize(
    ("policy", "sampling", "order"),
    [
        (Adaptive(), "round", "shuffled"),
        (Adaptive(), "iid", "sorted"),
        (Adaptive(growth=1.5), "round", "sorted"),
        (Baseline(k=2), "round", "shuffled"),
        (Baseline(k=2, score="l2-cell"), "iid", "sorted"),
        (Paper(k=2), "round", "shuffled"),
        (Paper(k=2), "iid", "sorted"),
    ],
)
def test_a_checkpoint_resumes_exactly(policy: object, sampling: str, order: str) -> None:
    d = small()
    rows = table(d, 1600, 9)
    if order == "sorted":  # the batches drift
        rows = rows[np.argsort(rows[:, 0], kind="stable")]

    def make() -> TabularStream:
        return TabularStream(
            d, 1, policy=policy, model=ModelOptions(iters=20, sampling=sampling),  # type: ignore[arg-type]
            rng=dpstream.Rng(seed=4),
        )  # fmt: skip

    a, b = make(), make()
    for t in range(4):
        a.step(rows[200 * t : 200 * (t + 1)])
        b.step(rows[200 * t : 200 * (t + 1)])
    data = b.to_bytes()
    b = TabularStream.from_bytes(data, allow_seeded=True)
    assert (b.t, b.size) == (4, a.size) and b.seeded and b.policy == a.policy
    assert b.last_selected == a.last_selected and b.selection_counts == a.selection_counts
    for t in range(4, 8):
        assert a.step(rows[200 * t : 200 * (t + 1)]).equals(b.step(rows[200 * t : 200 * (t + 1)]))
    assert b.selection_counts == a.selection_counts
    with pytest.raises(ValueError):
        TabularStream.from_bytes(data[:-10])
    with pytest.raises(ValueError):
        TabularStream.from_bytes(b"not a stream")


def test_the_l2_score_learns_a_large_column_that_the_paper_score_leaves_uniform() -> None:
    d = Domain({"a": 2, "b": 2, "big": 40})
    g = np.random.default_rng(4)
    n = 4000
    big = np.minimum(g.geometric(0.3, n) - 1, 39)  # most rows in the first few categories
    rows = np.stack([g.integers(0, 2, n), g.integers(0, 2, n), big], axis=1).astype(np.int64)
    errors = {}
    for score in ("l2", "paper"):
        s = TabularStream(
            d,
            4,
            policy=Baseline(k=1, score=score),  # type: ignore[arg-type]
            model=ModelOptions(iters=40),
            rng=dpstream.Rng(seed=5),  # type: ignore[arg-type]
        )
        for t in range(20):
            synth = s.step(rows[200 * t : 200 * (t + 1)])
        errors[score] = workload_errors(rows, synth, d)
    # The paper's score picks a × b (4 cells) every time: big stays uniform (RelL2 near 1).
    assert errors["paper"].max_rel_l2 > 0.8, errors
    assert errors["l2"].max_rel_l2 < 0.5 * errors["paper"].max_rel_l2, errors


def state_without_option(s: TabularStream, option: str | None = None) -> TabularStream:
    """``s`` saved and loaded as the library wrote it before policies (format 1), and before
    ``option`` existed if given (not in its config)."""
    import io as _io
    import json as _json

    raw = s.to_bytes()
    magic = b"DPSTREAM-TABULAR"
    npz = np.load(_io.BytesIO(raw[len(magic) :]))
    arrays = {k: npz[k] for k in npz.files}
    header = _json.loads(arrays["header"].tobytes())
    as_format_1(header)
    if option is not None:
        del header["config"][option]
    arrays["header"] = np.frombuffer(_json.dumps(header).encode(), dtype=np.uint8)
    buf = _io.BytesIO()
    np.savez(buf, **arrays)
    return TabularStream.from_bytes(magic + buf.getvalue(), allow_seeded=True)


@pytest.mark.parametrize(
    ("policy", "option", "migrated"),
    [
        # Written before an option existed: it ran with the value the option then had.
        (Baseline(k=2, score="paper"), "score", Baseline(k=2, score="paper")),
        (Baseline(k=2, score="l2-cell"), None, Baseline(k=2, score="l2-cell")),
        (Baseline(k=3), "marginals_per_step", Baseline(k=3)),
    ],
)
def test_a_state_from_before_policies_resumes_exactly_as_the_policy_it_ran_as(
    policy: Baseline, option: str | None, migrated: object
) -> None:
    d = small()
    s = TabularStream(d, 1, policy=policy, model=ModelOptions(iters=20), rng=dpstream.Rng(seed=3))
    for t in range(3):
        s.step(table(d, 100, t))
    old = state_without_option(s, option)
    assert old.policy == migrated
    for t in range(3, 6):
        batch = table(d, 100, t)
        assert np.array_equal(old.step(batch).to_numpy(), s.step(batch).to_numpy())


def test_a_state_from_before_policies_that_ran_algorithm_3_re_releases_and_stops() -> None:
    """``method="proposed"`` ran as the earlier default policy, whose options were removed:
    the state loads, re-releases its last table and refuses to step, naming them."""
    d = small()
    s = TabularStream(
        d, 1, policy=Paper(k=2), model=ModelOptions(iters=20), rng=dpstream.Rng(seed=3)
    )
    for t in range(3):
        s.step(table(d, 100, t))
    old = state_without_option(s)
    assert isinstance(old.policy, RemovedPolicy) and old.policy.owner == "TabularStream"
    assert (old.t, old.size) == (3, s.size)
    assert old.synthetic_codes().shape == (s.size, 4)
    with pytest.raises(ValueError, match=r"TabularStream\(method='proposed', .*score='paper'"):
        old.step(table(d, 100, 3))


def test_an_old_state_with_options_policies_cannot_express_is_refused() -> None:
    d = small()
    s = TabularStream(d, 1, policy=Baseline(k=2), rng=dpstream.Rng(seed=3))
    s.step(table(d, 100, 1))
    for option, value, needle in (
        ("method", "mwem", "method must be 'proposed' or 'baseline', got 'mwem'"),
        ("score", "l1", "Baseline.score must be one of"),
        ("marginals_per_step", 0, "Baseline.k must be at least 1"),
    ):
        import io as _io
        import json as _json

        raw = s.to_bytes()
        npz = np.load(_io.BytesIO(raw[16:]))
        arrays = {k: npz[k] for k in npz.files}
        header = _json.loads(arrays["header"].tobytes())
        as_format_1(header)
        header["config"][option] = value
        arrays["header"] = np.frombuffer(_json.dumps(header).encode(), dtype=np.uint8)
        buf = _io.BytesIO()
        np.savez(buf, **arrays)
        with pytest.raises(ValueError, match="an old TabularStream option cannot be migrated: "):
            TabularStream.from_bytes(raw[:16] + buf.getvalue(), allow_seeded=True)
        with pytest.raises(ValueError, match=needle):
            TabularStream.from_bytes(raw[:16] + buf.getvalue(), allow_seeded=True)


def test_step_returns_the_domains_labels() -> None:
    d = Domain({"colour": ["red", "green", "blue"], "n": 2})
    s = TabularStream(d, 1, public_sizes=True, rng=dpstream.Rng(seed=3))
    batch = pd.DataFrame({"colour": ["red", "blue", "blue", "green"] * 5, "n": [0, 1] * 10})
    out = s.step(batch)
    assert list(out.columns) == ["colour", "n"]
    assert len(out) == 20
    assert set(out["colour"]) <= {"red", "green", "blue"}
    assert out["n"].dtype.kind == "i"
    # The labelled table goes back in as it came out, and scores like the codes.
    codes = d.encode(out)
    assert np.array_equal(d.decode(codes)["colour"], out["colour"])
    assert np.array_equal(s.synthetic_codes().shape, codes.shape)
    assert workload_errors(batch, out, d, workloads=1) == workload_errors(
        d.encode(batch), codes, d, workloads=1
    )


def test_the_per_cell_score_divides_by_the_root_of_the_cells() -> None:
    # The same excess error in a 4-cell and a 100-cell workload: "l2" ranks them equal,
    # "l2-cell" prefers the small one by √(100/4) = 5.
    small_batch = np.array([60.0, 40.0, 0.0, 0.0])
    big_batch = np.zeros(100)
    big_batch[:2] = [60.0, 40.0]
    small_model = np.array([40.0, 60.0, 0.0, 0.0])
    big_model = np.zeros(100)
    big_model[:2] = [40.0, 60.0]
    kw = {"rows": 100, "table_rows": 100, "noise_stddev": 0.0}
    shifts = [np.zeros(4), np.zeros(100)]
    l2 = excess_l2_scores([small_batch, big_batch], shifts, [small_model, big_model], **kw)  # type: ignore[arg-type]
    cell = excess_l2_scores(
        [small_batch, big_batch],
        shifts,
        [small_model, big_model],
        per_cell=True,
        **kw,  # type: ignore[arg-type]
    )
    assert l2[0] == l2[1] > 0
    assert cell[0] == pytest.approx(l2[0] / 2, abs=2**-19)
    assert cell[1] == pytest.approx(l2[1] / 10, abs=2**-19)


def test_the_per_cell_score_budget() -> None:
    d = small()  # the smallest 2-way workload, b × d, has 4 cells
    b = TabularStream.budget(1, 2, all_workloads(d, 2), d, score="l2-cell")
    assert b.score_sensitivity == Fraction(1, 2) + Fraction(1, 2**18)
    assert b.selection == b.measurement == (1 - SIZE_SHARE) / 4
    s = TabularStream(
        d, 1, policy=Baseline(k=2, score="l2-cell"), public_sizes=True, rng=dpstream.Rng(seed=1)
    )
    for t in range(4):
        assert len(s.step(table(d, 50, t))) == 50 * (t + 1)
    with pytest.raises(ValueError, match=r"Baseline\.score must be one of"):
        Baseline(score="l2cell")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["proposed", "baseline"])
def test_the_selections_are_reported(method: str) -> None:
    d = small()
    policy = Paper(k=2) if method == "proposed" else Baseline(k=2)
    s = TabularStream(d, 1, policy=policy, rng=dpstream.Rng(seed=8))
    assert s.last_selected == [] and sum(s.selection_counts.values()) == 0
    seen: dict[tuple[int, ...], int] = dict.fromkeys(all_workloads(d, 2), 0)
    for t in range(5):
        s.step(table(d, 60, t))
        picked = s.last_selected
        assert len(picked) == len(set(picked)) == 2 and set(picked) <= set(seen)
        for w in picked:
            seen[w] += 1
    assert s.selection_counts == seen
    before = s.size
    s.step(None)  # an empty batch: the proposed method still selects (and measures zeros)
    # The baseline selects when its released size grew (the size counter's noise).
    assert len(s.last_selected) == (2 if method == "proposed" or s.size > before else 0)
    if method == "proposed":  # a workload's counter steps exactly when it is selected
        for i, w in enumerate(s.workloads):
            c = s._counters[i]
            assert s.selection_counts[w] == (0 if c is None else c.time)


def spy_fits(s: TabularStream) -> list[list[tuple[int, ...]]]:
    """Record the cliques of the measurements each of ``s``'s fits is given."""
    fits: list[list[tuple[int, ...]]] = []
    inner = s._fit

    def spy(ms: list, total: float, warm: object) -> object:
        fits.append([m.clique for m in ms])
        return inner(ms, total, warm)

    s._fit = spy  # type: ignore[method-assign]
    return fits


def test_k_is_capped_at_the_number_of_workloads() -> None:
    d = small()
    s = TabularStream(d, 1, workloads=[(0, 1)], policy=Paper(), rng=dpstream.Rng(seed=1))
    assert sorted(s.budgets) == [1]
    s.step(table(d, 100, 1))
    assert s.last_selected == [(0, 1)]
    s = TabularStream(d, 1, workloads=[(0, 1), (2, 3)], policy=Paper(k=9))
    assert sorted(s.budgets) == [2]
    base = TabularStream(d, 1, policy=Baseline(), rng=dpstream.Rng(seed=1))
    assert sorted(base.budgets) == [3]
    base.step(table(d, 100, 1))
    assert len(base.last_selected) == 3


def test_a_seeded_checkpoint_needs_the_opt_in(tmp_path: Path) -> None:
    """Issue 28: ``from_bytes`` of a seeded stream resumed the seeded generator silently;
    now it is refused unless ``allow_seeded=True``. A private stream needs no opt-in."""
    d = small()
    rows = table(d, 200, 1)
    s = TabularStream(d, 1, rng=dpstream.Rng(seed=4))
    s.step(rows[:100])
    data = s.to_bytes()
    path = tmp_path / "t.dpst"
    dpstream.save(s, path)
    with pytest.raises(ValueError, match=r"seeded TabularStream .*NOT PRIVATE.*allow_seeded=True"):
        TabularStream.from_bytes(data)
    with pytest.raises(ValueError, match="allow_seeded=True"):
        dpstream.load(path)
    back = TabularStream.from_bytes(data, allow_seeded=True)
    assert back.seeded and "NOT PRIVATE" in repr(back)
    assert dpstream.load(path, allow_seeded=True).seeded
    p = TabularStream(d, 1, policy=Paper(k=1), model=ModelOptions(iters=10))
    p.step(rows[:100])
    private = TabularStream.from_bytes(p.to_bytes())
    assert not private.seeded
    private.step(rows[100:])
    assert private.t == 2

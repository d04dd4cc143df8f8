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
    AutoK,
    AutoScore,
    Baseline,
    Domain,
    Paper,
    Pooled,
    TabularStream,
    Taper,
    all_workloads,
    marginal,
    workload_errors,
)
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

POOLED_MARGIN = Pooled().margin
CALM_K, DRIFT_K, K_DRIFT_SHARE = AutoK().calm, AutoK().drifting, AutoK().drift_share
TAPER_K, TAPER_STEPS = Taper().k, Taper().steps_per_workload
TAPER_DRIFT_SHARE = Taper().max_drift_share

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
    for score in ("l2", "l2-cell", "paper", "auto"):
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
        if score == "auto":
            assert b.drift_score_sensitivity is not None
            assert p.drift_score_sensitivity == 2 * b.drift_score_sensitivity
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
        d, 1, policy=Adaptive(k=2), estimator="mw", iters=20, public_sizes=True,
        rng=dpstream.Rng(seed=3),
    )  # fmt: skip
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


def test_rejected_batches_change_nothing() -> None:
    d = small()
    rows = table(d, 400, 2)

    def make() -> TabularStream:
        return TabularStream(
            d, 1, policy=Adaptive(k=2), estimator="mw", iters=10, rng=dpstream.Rng(seed=5)
        )

    a, b = make(), make()
    a.step(rows[:100])
    b.step(rows[:100])
    bad = rows[100:110].copy()
    bad[3, 2] = 4  # column c has 4 categories
    with pytest.raises(ValueError, match="column 'c' has code 4"):
        a.step(bad)
    with pytest.raises(ValueError, match="deleting"):
        a.step(rows[100:110], deletions=rows[:200])
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
        ({"counter": "tree"}, ValueError),
        ({"counter": "block"}, ValueError),  # needs a horizon
        ({"estimator": "gan"}, ValueError),
        ({"workloads": [(1, 0)]}, ValueError),
        ({"workloads": "all"}, TypeError),
        ({"iters": 0}, ValueError),
        ({"sampling": "systematic"}, ValueError),
    ],
)
def test_bad_parameters_are_refused(kwargs: dict[str, object], error: type) -> None:
    args: dict[str, object] = {"epsilon": 1, **kwargs}
    eps = args.pop("epsilon")
    with pytest.raises(error):
        TabularStream(small(), eps, **args)  # type: ignore[arg-type]


def test_baseline_takes_insertions_only_and_grows_by_batches() -> None:
    d = small()
    rows = table(d, 300, 3)
    s = TabularStream(
        d,
        1,
        policy=Baseline(k=2),
        estimator="mw",
        iters=10,
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
        s = TabularStream(
            d,
            2,
            counter=counter,  # type: ignore[arg-type]
            horizon=horizon,
            policy=Adaptive(k=2),
            estimator="mw",
            iters=10,
            rng=dpstream.Rng(seed=2),
        )
        sizes = [len(s.step(rows[100 * t : 100 * (t + 1)])) for t in range(3)]
        # The size counter is of the same kind: released sizes, monotone (insert-only).
        assert sizes == sorted(sizes) and sizes[-1] == s.size > 0
    with pytest.raises(ValueError, match="horizon"):
        TabularStream(d, 1, counter="hybrid", horizon=10)


def test_proposed_learns_the_correlations_and_beats_independent_columns() -> None:
    d = small()
    rows = table(d, 4000, 6)
    s = TabularStream(
        d, 2, policy=Adaptive(k=3), estimator="pgm", iters=60, rng=dpstream.Rng(seed=11)
    )
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


def test_adult_small_run_proposed_beats_baseline() -> None:
    d = Domain.from_json(ADULT / "adult-domain.json")
    data = d.encode(pd.read_csv(ADULT / "adult.csv", nrows=6000))
    data = data[np.random.default_rng(0).permutation(len(data))]
    results = {}
    for method, policy in (("proposed", Adaptive()), ("baseline", Baseline())):
        s = TabularStream(d, 1, policy=policy, iters=40, rng=dpstream.Rng(seed=21))
        for t in range(30):
            synth = s.step(data[200 * t : 200 * (t + 1)])
        results[method] = workload_errors(data, synth, d)
    assert results["proposed"].avg_we < results["baseline"].avg_we, results


@pytest.mark.parametrize(
    ("policy", "sampling", "order"),
    [
        (Adaptive(k=2, score="l2", remainder="model", refit="selection"), "round", "shuffled"),
        (Baseline(k=2), "round", "shuffled"),
        (Adaptive(k=2, score="l2", remainder="model", refit="selection"), "iid", "shuffled"),
        (Adaptive(k=2, score="l2", refit="selection"), "round", "shuffled"),
        (Adaptive(k=2, score="l2", refit="step"), "round", "shuffled"),
        (Adaptive(k=2, score="l2"), "round", "shuffled"),
        (Adaptive(k=2), "round", "sorted"),
        (Paper(k=2), "round", "shuffled"),
        (Paper(k=2), "iid", "sorted"),
    ],
)
def test_a_checkpoint_resumes_exactly(policy: object, sampling: str, order: str) -> None:
    d = small()
    rows = table(d, 1600, 9)
    if order == "sorted":  # the batches drift: score="auto" switches to the per-cell score
        rows = rows[np.argsort(rows[:, 0], kind="stable")]

    def make() -> TabularStream:
        return TabularStream(
            d, 1, policy=policy, iters=20, sampling=sampling,  # type: ignore[arg-type]
            rng=dpstream.Rng(seed=4),
        )  # fmt: skip

    a, b = make(), make()
    for t in range(4):
        a.step(rows[200 * t : 200 * (t + 1)])
        b.step(rows[200 * t : 200 * (t + 1)])
    data = b.to_bytes()
    b = TabularStream.from_bytes(data, allow_seeded=True)
    assert (b.t, b.size) == (4, a.size) and b.seeded
    assert b._drift_rate == a._drift_rate
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
            policy=Adaptive(k=1, score=score),  # type: ignore[arg-type]
            iters=40,
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
        # Written before an option existed: it ran with the value the option then had
        # (max_scored: every workload scored).
        (
            Adaptive(k=2, score="paper"),
            "score",
            Adaptive(k=2, score="paper", max_scored=None, staleness=0.0),
        ),
        (
            Adaptive(k=2, remainder=Pooled(stddev="noise")),
            "pooled_stddev",
            Adaptive(k=2, remainder=Pooled(stddev="noise"), max_scored=None, staleness=0.0),
        ),
        (
            Adaptive(k=2, refit="selection"),
            "refit",
            Adaptive(k=2, refit="selection", max_scored=None, staleness=0.0),
        ),
        (
            Adaptive(k=AutoK(taper=None)),
            "k_schedule",
            Adaptive(k=AutoK(taper=None), max_scored=None, staleness=0.0),
        ),
        # Every option present: the policy it ran as.
        (Adaptive(), None, Adaptive(max_scored=None, staleness=0.0)),
        (Baseline(k=2, score="l2-cell"), None, Baseline(k=2, score="l2-cell")),
        (
            Adaptive(k=3, score="paper", remainder="model", refit="selection"),
            None,
            Adaptive(
                k=3,
                score="paper",
                remainder="model",
                refit="selection",
                max_scored=None,
                staleness=0.0,
            ),
        ),
    ],
)
def test_a_state_from_before_policies_resumes_exactly_as_the_policy_it_ran_as(
    policy: Adaptive | Baseline, option: str | None, migrated: object
) -> None:
    d = small()
    s = TabularStream(d, 1, policy=policy, iters=20, rng=dpstream.Rng(seed=3))
    for t in range(3):
        s.step(table(d, 100, t))
    old = state_without_option(s, option)
    assert old.policy == migrated
    for t in range(3, 6):
        batch = table(d, 100, t)
        assert np.array_equal(old.step(batch).to_numpy(), s.step(batch).to_numpy())


def test_an_old_state_with_options_policies_cannot_express_is_refused() -> None:
    d = small()
    s = TabularStream(d, 1, policy=Adaptive(k=2), rng=dpstream.Rng(seed=3))
    s.step(table(d, 100, 1))
    for option, value, needle in (
        ("method", "mwem", "method must be 'proposed' or 'baseline', got 'mwem'"),
        ("refit", "always", "Adaptive.refit must be one of"),
        ("k_schedule", "linear", "k_schedule must be 'fixed' or 'taper', got 'linear'"),
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


def test_the_shrinkage_stddev_resumes_from_a_checkpoint_and_reaches_the_fit() -> None:
    d = small()
    rows = table(d, 1600, 9)

    def make(stddev: str) -> TabularStream:
        return TabularStream(
            d, 1, policy=Adaptive(k=2, remainder=Pooled(stddev=stddev)),  # type: ignore[arg-type]
            iters=20, rng=dpstream.Rng(seed=4),
        )  # fmt: skip

    a, b, n = make("shrinkage"), make("shrinkage"), make("noise")
    for t in range(4):
        for s in (a, b, n):
            s.step(rows[200 * t : 200 * (t + 1)])
    b = TabularStream.from_bytes(b.to_bytes(), allow_seeded=True)
    assert b.policy == a.policy
    for t in range(4, 8):
        assert a.step(rows[200 * t : 200 * (t + 1)]).equals(b.step(rows[200 * t : 200 * (t + 1)]))
        n.step(rows[200 * t : 200 * (t + 1)])
    # The option is wired through: the same seed, the measurements weighed differently.
    assert not np.array_equal(a._synthetic_marginals[0], n._synthetic_marginals[0])


def test_step_returns_the_domains_labels() -> None:
    d = Domain({"colour": ["red", "green", "blue"], "n": 2})
    s = TabularStream(d, 1, policy=Adaptive(k=1), public_sizes=True, rng=dpstream.Rng(seed=3))
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
        d, 1, policy=Adaptive(k=2, score="l2-cell"), public_sizes=True, rng=dpstream.Rng(seed=1)
    )
    for t in range(4):
        assert len(s.step(table(d, 50, t))) == 50 * (t + 1)
    with pytest.raises(ValueError, match=r"Adaptive\.score must be AutoScore"):
        Adaptive(score="l2cell")  # type: ignore[arg-type]


@pytest.mark.parametrize("method", ["proposed", "baseline"])
def test_the_selections_are_reported(method: str) -> None:
    d = small()
    policy = Adaptive(k=2) if method == "proposed" else Baseline(k=2)
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
            steps = sum(cs[i].time for cs in s._counters.values() if cs[i] is not None)
            assert s.selection_counts[w] == steps


def pooled_reference(
    released: np.ndarray,
    remainder: np.ndarray,
    sd: float,
    counted: int,
    size: int,
    grown: int,
    stddev: str = "noise",
) -> tuple[np.ndarray, float]:
    """The "pooled" measurement from its definition, in exact rationals (but for the square
    roots of the margin and of the "shrinkage" standard deviation, floats in both)."""
    rest = size - counted
    if counted <= 0 or rest <= 0:
        return released + remainder, sd
    c = [Fraction(float(x)) for x in released]
    r = [Fraction(float(v)) for v in remainder]
    if grown and rest - grown > 0:  # the remainder stood for rest - grown rows
        r = [v * Fraction(rest, rest - grown) for v in r]
    power = sum(x * x for x in c)
    var = Fraction(sd) ** 2
    noise = len(c) * var + Fraction(POOLED_MARGIN) * var * Fraction(math.sqrt(5 * len(c)))
    w = (power - noise) / power if power > noise else Fraction(0)
    rho = Fraction(rest, counted)
    out = [x + w * rho * x + (1 - w) * v for x, v in zip(c, r, strict=True)]
    noise_sd = Fraction(sd) * (1 + w * rho)
    if stddev == "noise":
        return np.array([float(v) for v in out]), float(noise_sd)
    # The geometric mean of the scaled noise σ(1 + wρ) and the unshrunk σ(1 + ρ).
    return np.array([float(v) for v in out]), math.sqrt(noise_sd * Fraction(sd) * (1 + rho))


@given(
    st.lists(st.integers(-50, 400), min_size=4, max_size=4),
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=4, max_size=4),
    st.floats(0.5, 60),
    st.integers(-5, 300),
    st.integers(0, 900),
    st.integers(-50, 200),
    st.sampled_from(["noise", "shrinkage"]),
)
def test_the_pooled_measurement_matches_its_definition(
    released: list[int],
    remainder: list[float],
    sd: float,
    counted: int,
    size: int,
    grown: int,
    stddev: str,
) -> None:
    pairs = [(0, 1), (2, 3)]
    s = TabularStream(
        small(),
        1,
        workloads=pairs,
        policy=Adaptive(k=1, remainder=Pooled(stddev=stddev)),  # type: ignore[arg-type]
    )
    assert Adaptive().remainder == Pooled()  # the default
    s._remainder[1] = np.array(remainder)
    s._counted_rows[1] = counted
    got, got_sd = s._measurement(1, np.array(released, dtype=np.float64), sd, size, grown=grown)
    want, want_sd = pooled_reference(
        np.array(released, float), np.array(remainder), sd, counted, size, grown, stddev
    )
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * max(1.0, float(size)))
    assert got_sd == pytest.approx(want_sd, rel=1e-12)
    # The shrinkage's stated error is never below the noise's.
    _, noise_sd = pooled_reference(
        np.array(released, float), np.array(remainder), sd, counted, size, grown
    )
    assert got_sd >= noise_sd * (1 - 1e-12)
    # "model" is Algorithm 3's m(t,j) = C_j(t) + r(t-1,j) whatever the counts.
    m = TabularStream(small(), 1, workloads=pairs, policy=Adaptive(k=1, remainder="model"))
    m._remainder[1] = np.array(remainder)
    got_m, sd_m = m._measurement(1, np.array(released, dtype=np.float64), sd, size)
    np.testing.assert_array_equal(got_m, np.array(released, float) + np.array(remainder))
    assert sd_m == sd


@pytest.mark.parametrize("public_sizes", [False, True])
def test_the_counted_rows_are_the_rows_of_the_selected_steps(public_sizes: bool) -> None:
    """The rows a workload's counter counted, as the released sizes say: the changes of the
    released size at the steps that selected it (exact with public sizes)."""
    d = small()
    rows = table(d, 900, 12)
    s = TabularStream(d, 1, policy=Adaptive(k=2), iters=10,
                      public_sizes=public_sizes, rng=dpstream.Rng(seed=3))  # fmt: skip
    want = np.zeros(len(s.workloads), dtype=np.int64)
    sizes = [(150, 0), (200, 30), (0, 0), (120, 100), (90, 10)]
    start = 0
    for ins, dels in sizes:
        batch, start = rows[start : start + ins], start + ins
        before = s.size
        s.step(batch, deletions=rows[:dels])
        if public_sizes:
            assert s.size - before == ins - dels
        for w in s.last_selected:
            want[s.workloads.index(w)] += s.size - before
    np.testing.assert_array_equal(s._counted_rows, want)


def test_the_pooled_measurement_is_exact_when_the_counted_rows_are_representative() -> None:
    """Every batch the same rows, noise negligible (ε = 10^4): the counted rows are then
    exactly representative, and every "pooled" measurement is the table's marginal. (Whether
    they are representative in a real stream depends on the stream and on the selection,
    which picks the batches that differ most from the model: ``benches/RESULTS.md`` measures
    it on Adult.)"""
    d = small()
    batch = table(d, 120, 14)
    s = TabularStream(d, 10_000, policy=Adaptive(k=2), iters=30, rng=dpstream.Rng(seed=5))
    seen: list[tuple[int, np.ndarray, int]] = []
    inner = s._measurement

    def spy(
        j: int, released: np.ndarray, sd: float, size: int, grown: int = 0
    ) -> tuple[np.ndarray, float]:
        out = inner(j, released, sd, size, grown=grown)
        seen.append((j, out[0], size))
        return out

    s._measurement = spy  # type: ignore[method-assign]
    for _ in range(12):
        s.step(batch)
    late = [(j, m, size) for j, m, size in seen if size > 600]
    assert len({j for j, _, _ in late}) > 2  # the anchors too, not only the step's k
    for j, m, size in late:
        want = marginal(batch, d, s.workloads[j]) * (size / len(batch))
        np.testing.assert_allclose(m, want, atol=0.02 * size / m.size)


def spy_fits(s: TabularStream) -> list[list[tuple[int, ...]]]:
    """Record the cliques of the measurements each of ``s``'s fits is given."""
    fits: list[list[tuple[int, ...]]] = []
    inner = s._fit

    def spy(ms: list, total: float, warm: object) -> object:
        fits.append([m.clique for m in ms])
        return inner(ms, total, warm)

    s._fit = spy  # type: ignore[method-assign]
    return fits


@pytest.mark.parametrize("remainder", ["pooled", "model"])
def test_the_last_fit_of_a_step_sees_every_workload_measured_so_far(remainder: str) -> None:
    """ "pooled": each step's last fit gets the step's k measurements and an anchor for every
    workload measured at an earlier step; the earlier fits only the step's. "model": only the
    step's (Algorithm 3)."""
    d = small()
    rows = table(d, 600, 21)
    policy = Adaptive(k=2, remainder=Pooled() if remainder == "pooled" else "model",
                      refit="selection")  # fmt: skip
    s = TabularStream(d, 1, policy=policy, iters=5, rng=dpstream.Rng(seed=8))
    fits = spy_fits(s)
    measured: set[tuple[int, ...]] = set()
    for t in range(6):
        fits.clear()
        s.step(rows[t * 100 : (t + 1) * 100])
        now = s.last_selected
        assert [sorted(f) for f in fits[:-1]] == [sorted(now[: i + 1]) for i in range(len(now) - 1)]
        want = set(now) | (measured if remainder == "pooled" else set())
        assert sorted(fits[-1]) == sorted(want) and len(fits[-1]) == len(want)
        measured |= set(now)
    assert len(measured) > 2


def test_one_fit_per_step_sees_the_steps_measurements_and_every_earlier_workload() -> None:
    """``refit="step"``: no fit between a step's selections; one fit at its end with the
    step's k measurements and an anchor for every workload measured before."""
    d = small()
    rows = table(d, 600, 21)
    s = TabularStream(d, 1, policy=Adaptive(k=2, refit="step"), iters=5, rng=dpstream.Rng(seed=8))
    fits = spy_fits(s)
    measured: set[tuple[int, ...]] = set()
    for t in range(6):
        fits.clear()
        s.step(rows[t * 100 : (t + 1) * 100])
        want = set(s.last_selected) | measured
        assert len(fits) == 1 and sorted(fits[0]) == sorted(want)
        measured |= set(s.last_selected)


def test_one_fit_per_step_scores_later_selections_against_the_batchs_measured_margins() -> None:
    """After the first selection of a step, a candidate sharing a column with it is scored
    against an expected batch whose margin on that column is the batch's (nearly noiseless
    at this ε), while its other margin stays the model's expectation."""
    d = small()
    rows = table(d, 400, 5)
    s = TabularStream(
        d, 10_000, policy=Adaptive(k=2, refit="step"), iters=20, rng=dpstream.Rng(seed=2)
    )
    for t in range(4):
        s.step(rows[t * 100 : (t + 1) * 100])
    batch = rows[:100].copy()
    batch[:, 0] = 2  # every record in category 2 of column a: far from the model
    seen: list[dict[int, np.ndarray]] = []
    base = [m.copy() for m in s._synthetic_marginals]
    inner = s._select

    def spy(batch_h, base_h, model_marginals, taken, *rest):  # type: ignore[no-untyped-def]
        j = inner(batch_h, base_h, model_marginals, taken, *rest)
        seen.append({i: model_marginals(i) for i in range(len(s.workloads)) if i not in taken})
        return j

    s._select = spy  # type: ignore[method-assign]
    s.step(batch)
    first = set(s.last_selected[0])
    assert 0 in first  # the batch stands out on column a
    checked = {"shared": 0, "disjoint": 0}
    for i, shift in seen[1].items():
        w = s.workloads[i]
        shape = tuple(d.sizes[c] for c in w)
        expected = (shift - base[i]).reshape(shape)
        prior = (base[i] * (100 / 400)).reshape(shape)  # the model's batch of 100 rows
        for a, c in enumerate(w):
            other = tuple(b for b in range(len(shape)) if b != a)
            got = expected.sum(axis=other)
            if c in first:
                real = np.bincount(batch[:, c], minlength=d.sizes[c])
                np.testing.assert_allclose(got, real, atol=2.0)
                checked["shared"] += 1
            elif not set(w) & first:
                np.testing.assert_allclose(got, prior.sum(axis=other), rtol=1e-9)
                checked["disjoint"] += 1
    assert checked["shared"] >= 2 and checked["disjoint"] >= 1, checked


def fits_per_step(s: TabularStream, rows: np.ndarray, batch: int) -> list[int]:
    fits = spy_fits(s)
    counts: list[int] = []
    for t in range(rows.shape[0] // batch):
        fits.clear()
        s.step(rows[t * batch : (t + 1) * batch])
        counts.append(len(fits))
    return counts


def test_auto_refits_within_a_step_only_where_the_batch_drifts() -> None:
    """``refit="auto"``: one fit per step while the batches follow the model (a shuffled
    stream), ``k`` fits at the steps whose first measurement shows drift (the same rows
    sorted by their first column: each batch holds one category of it)."""
    d = small()
    rows = table(d, 3000, 17)
    shuffled = rows[np.random.default_rng(1).permutation(len(rows))]
    ordered = rows[np.argsort(rows[:, 0], kind="stable")]
    out = {}
    for name, data in (("shuffled", shuffled), ("sorted", ordered)):
        s = TabularStream(
            d, 4, policy=Adaptive(k=2, refit="auto"), iters=10, rng=dpstream.Rng(seed=5)
        )
        out[name] = fits_per_step(s, data, 200)
        assert set(out[name]) <= {1, 2}
    assert sum(c == 2 for c in out["shuffled"]) <= 3, out
    assert sum(c == 2 for c in out["sorted"]) >= 10, out


def test_the_drift_statistic_is_a_chi_square_test_against_the_expected_batch() -> None:
    from dpstream.tabular.policy import drifted

    z = Adaptive().drift_z

    def _drifted(increment: np.ndarray, expected: np.ndarray, variance: float) -> bool:
        return drifted(increment, expected, variance, z)

    e = np.full(16, 25.0)
    # At the threshold: statistic = c + z·√(2c) exactly is not drift; just above is.
    limit = 16 + z * math.sqrt(32)
    per_cell = limit / 16 * (4.0 + 25.0 + 1.0)  # squared deviation per cell at the limit
    below = e + math.sqrt(per_cell) * 0.999
    above = e + math.sqrt(per_cell) * 1.001
    assert not _drifted(below, e, 4.0) and _drifted(above, e, 4.0)
    # Negative expected counts (float error) count as zero.
    assert _drifted(np.array([50.0, 0.0]), np.array([-1e-12, 0.0]), 1.0)


def test_the_auto_score_budget() -> None:
    d = small()
    b = TabularStream.budget(1, 2, all_workloads(d, 2), d, score="auto")
    cell = TabularStream.budget(1, 2, all_workloads(d, 2), d, score="l2-cell")
    assert b.score_sensitivity == 1
    assert b.drift_score_sensitivity == cell.score_sensitivity
    assert cell.score_sensitivity == Fraction(1, 2) + Fraction(1, 2**18)
    assert b.selection == b.measurement == cell.selection
    for score in ("l2", "l2-cell", "paper"):
        other = TabularStream.budget(1, 2, all_workloads(d, 2), d, score=score)  # type: ignore[arg-type]
        assert other.drift_score_sensitivity is None


def test_the_auto_score_is_per_cell_only_while_the_stream_drifts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``score="auto"``: permute-and-flip gets the "l2-cell" scores and sensitivity once most
    recent steps drifted (the rows sorted by their first column), and the "l2" ones on a
    shuffled stream; the per-cell scores are the "l2" scores over √|q_i|."""
    from dpstream import noise as noise_module
    from dpstream.tabular import selection as stream_module

    d = small()
    rows = table(d, 3000, 17)
    shuffled = rows[np.random.default_rng(1).permutation(len(rows))]
    ordered = rows[np.argsort(rows[:, 0], kind="stable")]
    cell = TabularStream.budget(4, 2, all_workloads(d, 2), d, score="l2-cell").score_sensitivity
    calls: list[tuple[float, bool]] = []
    inner_pf = noise_module.permute_and_flip
    inner_scores = stream_module.excess_l2_scores

    def spy_pf(scores, epsilon, sensitivity, *, rng):  # type: ignore[no-untyped-def]
        calls.append((sensitivity, calls_cell[-1]))
        return inner_pf(scores, epsilon, sensitivity, rng=rng)

    calls_cell: list[bool] = []

    def spy_scores(*args, per_cell=False, **kw):  # type: ignore[no-untyped-def]
        calls_cell.append(per_cell)
        return inner_scores(*args, per_cell=per_cell, **kw)

    monkeypatch.setattr(noise_module, "permute_and_flip", spy_pf)
    monkeypatch.setattr(stream_module, "excess_l2_scores", spy_scores)
    out = {}
    for name, data in (("shuffled", shuffled), ("sorted", ordered)):
        calls.clear()
        policy = Adaptive(score=AutoScore(), k=2)
        s = TabularStream(d, 4, policy=policy, iters=10, rng=dpstream.Rng(seed=5))
        for t in range(15):
            s.step(data[t * 200 : (t + 1) * 200])
        # The per-cell score always goes with its sensitivity, the "l2" one with 1.
        assert all((sens == cell) == per for sens, per in calls), calls
        out[name] = [per for _, per in calls]
    assert not any(out["shuffled"]), out
    # The running drift share passes 1/2 after 7 drifted steps: then every selection.
    assert not any(out["sorted"][:12]) and all(out["sorted"][-10:]), out


@pytest.mark.parametrize("schedule", ["fixed", "taper"])
def test_auto_k_selects_calm_k_workloads_per_calm_step_and_drift_k_while_drifting(
    monkeypatch: pytest.MonkeyPatch, schedule: str
) -> None:
    """``marginals_per_step="auto"``: a step makes CALM_K selections while the running drift
    share is at most K_DRIFT_SHARE and DRIFT_K above it (with ``k_schedule="taper"``, TAPER_K
    at the calm steps from step TAPER_STEPS·W on while the drift share is at most
    TAPER_DRIFT_SHARE); every selection and every counter of a step
    with k selections gets ε/2k, so each step spends exactly ε."""
    from dpstream import noise as noise_module

    d = small()
    eps = Fraction(4)
    steps = 40
    rows = table(d, 200 * steps, 21)
    shuffled = rows[np.random.default_rng(2).permutation(len(rows))]
    ordered = rows[np.argsort(rows[:, 0], kind="stable")]
    picks: list[Fraction] = []
    inner_pf = noise_module.permute_and_flip

    def spy_pf(scores, epsilon, sensitivity, *, rng):  # type: ignore[no-untyped-def]
        picks.append(Fraction(epsilon))
        return inner_pf(scores, epsilon, sensitivity, rng=rng)

    monkeypatch.setattr(noise_module, "permute_and_flip", spy_pf)
    ks: dict[str, list[int]] = {}
    levels: tuple[int, ...] = (CALM_K, DRIFT_K)
    if schedule == "taper":
        levels = (TAPER_K, *levels)
    for name, data in (("shuffled", shuffled), ("sorted", ordered)):
        k = AutoK(taper=Taper() if schedule == "taper" else None)
        policy = Adaptive(score=AutoScore(), k=k)
        s = TabularStream(d, eps, policy=policy, iters=10, rng=dpstream.Rng(seed=7))
        assert s.budgets == {k: TabularStream.budget(eps, k, s.workloads, d) for k in levels}
        late = TAPER_STEPS * len(s.workloads)
        ks[name] = []
        for t in range(steps):
            drifting = s._drift_rate > K_DRIFT_SHARE
            quiet = s._drift_rate <= TAPER_DRIFT_SHARE
            calm = TAPER_K if schedule == "taper" and t >= late and quiet else CALM_K
            picks.clear()
            s.step(data[t * 200 : (t + 1) * 200])
            k = len(s.last_selected)
            assert k == (DRIFT_K if drifting else calm)
            # The selections: ε'/2 in all (ε' = ε less the size counter's share).
            assert picks == [eps * (1 - SIZE_SHARE) / (2 * k)] * k
            ks[name].append(k)
        for k, counters in s._counters.items():
            for c in counters:  # the counters of k-selection steps: ε'/2k each
                assert c is None or c.epsilon == eps * (1 - SIZE_SHARE) / (2 * k)
        steps_counted = sum(c.time for cs in s._counters.values() for c in cs if c is not None)
        assert steps_counted == sum(ks[name]) == sum(s.selection_counts.values())
    # Shuffled rows stay calm (CALM_K selections per step, and with the taper mostly TAPER_K
    # late); sorted ones drift after a few steps.
    assert set(ks["shuffled"][:late]) == {CALM_K}, ks
    if schedule == "fixed":
        assert set(ks["shuffled"][late:]) == {CALM_K}, ks
    else:
        assert ks["shuffled"][late:].count(TAPER_K) > (steps - late) / 2, ks
    assert ks["sorted"][0] == CALM_K and set(ks["sorted"][-5:]) == {DRIFT_K}, ks


def test_auto_k_resumes_from_a_checkpoint_with_both_kinds_of_counter() -> None:
    d = small()
    rows = table(d, 5200, 21)
    rows = rows[np.argsort(rows[:, 0], kind="stable")]

    def make() -> TabularStream:
        # The fixed schedule: its two kinds of step (the taper's third is tested below).
        return TabularStream(
            d, 4, policy=Adaptive(k=AutoK(taper=None)), iters=10, rng=dpstream.Rng(seed=6)
        )

    a, b = make(), make()
    for t in range(20):
        a.step(rows[200 * t : 200 * (t + 1)])
        b.step(rows[200 * t : 200 * (t + 1)])
    # Both kinds of step have happened, so some workloads have two counters.
    assert all(any(c is not None for c in cs) for cs in b._counters.values())
    data = b.to_bytes()
    b = TabularStream.from_bytes(data, allow_seeded=True)
    assert "taper=None" in repr(b) and b.budgets == a.budgets
    for t in range(20, 26):
        assert a.step(rows[200 * t : 200 * (t + 1)]).equals(b.step(rows[200 * t : 200 * (t + 1)]))
    assert b.selection_counts == a.selection_counts
    # A counter under the other k's name (the wrong ε) is refused as corrupt.
    import io as _io

    magic = b"DPSTREAM-TABULAR"
    npz = np.load(_io.BytesIO(data[len(magic) :]))
    arrays = {k: npz[k] for k in npz.files}
    calm = [f"counter_k{CALM_K}_{i}" for i in range(len(a.workloads))]
    i = next(i for i, name in enumerate(calm) if name in arrays)
    if f"counter_{i}" in arrays:
        arrays[f"counter_{i}"], arrays[calm[i]] = arrays[calm[i]], arrays[f"counter_{i}"]
    else:
        arrays[f"counter_{i}"] = arrays.pop(calm[i])
    buf = _io.BytesIO()
    np.savez(buf, **arrays)
    with pytest.raises(ValueError, match="corrupt TabularStream state: counter"):
        TabularStream.from_bytes(magic + buf.getvalue(), allow_seeded=True)


def test_the_taper_resumes_from_a_checkpoint_and_old_states_keep_a_fixed_schedule() -> None:
    d = small()
    rows = table(d, 200 * 24, 4)

    def make(schedule: str) -> TabularStream:
        k = AutoK(taper=Taper() if schedule == "taper" else None)
        policy = Adaptive(score=AutoScore(), k=k)
        return TabularStream(d, 4, policy=policy, iters=10, rng=dpstream.Rng(seed=8))

    a, b = make("taper"), make("taper")
    late = TAPER_STEPS * len(a.workloads)
    for t in range(late - 2):
        a.step(rows[200 * t : 200 * (t + 1)])
        b.step(rows[200 * t : 200 * (t + 1)])
    # Before the taper: its counters not yet made.
    b = TabularStream.from_bytes(b.to_bytes(), allow_seeded=True)
    assert b.policy == Adaptive(score=AutoScore(), k=AutoK()) and b.budgets == a.budgets
    for t in range(late - 2, late + 3):
        assert a.step(rows[200 * t : 200 * (t + 1)]).equals(b.step(rows[200 * t : 200 * (t + 1)]))
    assert len(b.last_selected) == TAPER_K
    assert any(c is not None for c in b._counters[TAPER_K])
    # After it: the TAPER_K counters are kept.
    c = TabularStream.from_bytes(b.to_bytes(), allow_seeded=True)
    for t in range(late + 3, 24):
        assert a.step(rows[200 * t : 200 * (t + 1)]).equals(c.step(rows[200 * t : 200 * (t + 1)]))
    # A state written before the option existed keeps CALM_K selections at calm steps.
    f = make("fixed")
    for t in range(late + 1):
        f.step(rows[200 * t : 200 * (t + 1)])
    old = state_without_option(f, "k_schedule")
    assert old.policy == Adaptive(
        score=AutoScore(), k=AutoK(taper=None), max_scored=None, staleness=0.0
    )
    assert old.budgets == f.budgets
    batch = rows[200 * (late + 1) : 200 * (late + 2)]
    assert np.array_equal(old.step(batch).to_numpy(), f.step(batch).to_numpy())


def test_k_is_capped_at_the_number_of_workloads() -> None:
    d = small()
    # AutoK with fewer workloads than its drifting k: at most all of them per step (and the
    # default taper's k at late calm steps).
    s = TabularStream(d, 1, workloads=[(0, 1), (2, 3)], policy=Adaptive(k=AutoK()))
    assert sorted(s.budgets) == [TAPER_K, 2]
    s = TabularStream(d, 1, workloads=[(0, 1), (2, 3)], policy=Adaptive(k=AutoK(taper=None)))
    assert sorted(s.budgets) == [2]
    s = TabularStream(d, 1, workloads=[(0, 1)], rng=dpstream.Rng(seed=1))
    assert sorted(s.budgets) == [1]
    s.step(table(d, 100, 1))
    assert s.last_selected == [(0, 1)]
    s = TabularStream(d, 1, workloads=[(0, 1), (2, 3)], policy=Paper(k=9))
    assert sorted(s.budgets) == [2]
    # The baseline has no drift test: its k selections at every step.
    base = TabularStream(d, 1, policy=Baseline(), rng=dpstream.Rng(seed=1))
    assert sorted(base.budgets) == [3]
    base.step(table(d, 100, 1))
    assert len(base.last_selected) == 3


def test_a_seeded_checkpoint_needs_the_opt_in(tmp_path: Path) -> None:
    """Issue 28: ``from_bytes`` of a seeded stream resumed the seeded generator silently;
    now it is refused unless ``allow_seeded=True``. A private stream needs no opt-in."""
    d = small()
    rows = table(d, 200, 1)
    s = TabularStream(d, 1, policy=Adaptive(k=1), estimator="mw", rng=dpstream.Rng(seed=4))
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
    p = TabularStream(d, 1, policy=Adaptive(k=1), estimator="mw")
    p.step(rows[:100])
    private = TabularStream.from_bytes(p.to_bytes())
    assert not private.seeded
    private.step(rows[100:])
    assert private.t == 2

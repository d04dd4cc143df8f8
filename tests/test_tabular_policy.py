"""Policies of the tabular stream: validation, serialised form, and Paper() as printed."""

from __future__ import annotations

import json
from typing import Any

import dpstream
import numpy as np
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
)
from dpstream.tabular.policy import from_dict, step_k, to_dict
from test_tabular_stream import spy_fits


def small() -> Domain:
    return Domain({"a": 3, "b": 2, "c": 4, "d": 2})


def rows(n: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    cols = [g.integers(0, s, n) for s in small().sizes]
    cols[1] = np.where(g.random(n) < 0.9, cols[0] % 2, cols[1])
    return np.stack(cols, axis=1).astype(np.int64)


@pytest.mark.parametrize(
    ("make", "error", "message"),
    [
        (lambda: Adaptive(score="l1"), ValueError, "Adaptive.score must be AutoScore(...) or"),
        (lambda: Adaptive(score=None), ValueError, "Adaptive.score must be AutoScore(...) or"),
        (lambda: Adaptive(k=0), ValueError, "Adaptive.k must be at least 1, got 0"),
        (lambda: Adaptive(k=2.0), TypeError, "Adaptive.k must be an AutoK or an int, got float"),
        (lambda: Adaptive(k="auto"), TypeError, "Adaptive.k must be an AutoK or an int, got str"),
        (lambda: Adaptive(k=True), TypeError, "Adaptive.k must be an AutoK or an int, got bool"),
        (lambda: Adaptive(remainder="pooled"), ValueError, "Adaptive.remainder must be Pooled"),
        (lambda: Adaptive(refit="always"), ValueError, "Adaptive.refit must be one of"),
        (lambda: Adaptive(drift_z=-1), ValueError, "Adaptive.drift_z must be in [0, inf)"),
        (lambda: Adaptive(drift_z="3"), TypeError, "Adaptive.drift_z must be a number, got str"),
        (lambda: Adaptive(drift_decay=1.0), ValueError, "Adaptive.drift_decay must be in [0, 1)"),
        (lambda: Adaptive(coverage=1), TypeError, "Adaptive.coverage must be a bool, got int"),
        (lambda: Adaptive(staleness=-1), ValueError, "Adaptive.staleness must be in [0, inf)"),
        (lambda: Adaptive(staleness="1"), TypeError, "Adaptive.staleness must be a number"),
        (lambda: Adaptive(staleness_gate=-1), ValueError, "Adaptive.staleness_gate must be in"),
        (lambda: Adaptive(staleness_share=1.5), ValueError, "Adaptive.staleness_share must be in"),
        (lambda: Adaptive(staleness_share=None), TypeError, "Adaptive.staleness_share must be a"),
        (lambda: Adaptive(max_scored=0), ValueError, "Adaptive.max_scored must be at least 1"),
        (lambda: Adaptive(max_scored=True), TypeError, "Adaptive.max_scored must be an int"),
        (lambda: Adaptive(max_scored="all"), TypeError, "Adaptive.max_scored must be an int"),
        (lambda: AutoScore(drift_share=1.5), ValueError, "AutoScore.drift_share must be in"),
        (lambda: AutoK(calm=0), ValueError, "AutoK.calm must be at least 1, got 0"),
        (lambda: AutoK(drifting=2.5), TypeError, "AutoK.drifting must be an int, got float"),
        (lambda: AutoK(drift_share=float("nan")), ValueError, "AutoK.drift_share must be in"),
        (lambda: AutoK(taper="taper"), TypeError, "AutoK.taper must be Taper or NoneType"),
        (lambda: Taper(k=0), ValueError, "Taper.k must be at least 1, got 0"),
        (lambda: Taper(steps_per_workload=-1), ValueError, "Taper.steps_per_workload must be"),
        (lambda: Taper(max_drift_share=-0.1), ValueError, "Taper.max_drift_share must be in"),
        (lambda: Pooled(stddev="risk"), ValueError, "Pooled.stddev must be one of"),
        (lambda: Pooled(margin=float("inf")), ValueError, "Pooled.margin must be in [0, inf)"),
        (lambda: Paper(k=0), ValueError, "Paper.k must be at least 1, got 0"),
        (lambda: Baseline(score="auto"), ValueError, "Baseline.score must be one of"),
        (lambda: Baseline(k="3"), TypeError, "Baseline.k must be an int, got str"),
        (lambda: TabularStream(small(), 1, policy="paper"), TypeError, "policy must be"),
        (lambda: TabularStream(small(), 1, policy=Pooled()), TypeError, "got Pooled"),
    ],
)
def test_bad_policy_fields_name_the_field(make: Any, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        make()
    assert message in str(info.value)


def test_policies_are_frozen_and_compare_by_value() -> None:
    p = Adaptive()
    with pytest.raises(AttributeError):
        p.refit = "step"  # type: ignore[misc]
    assert p == Adaptive(score="l2", k=2, remainder=Pooled())
    assert p != Adaptive(score=AutoScore()) and p != Adaptive(k=AutoK())
    assert p != Adaptive(remainder="model")
    assert hash(p) == hash(Adaptive())


@pytest.mark.parametrize(
    "policy",
    [
        Adaptive(),
        Adaptive(score="l2-cell", k=2, remainder="model", refit="step", drift_z=2),
        Adaptive(score=AutoScore(0.3), k=AutoK(calm=1, taper=None), remainder=Pooled("noise", 2)),
        Adaptive(coverage=True, staleness=2.5),
        Adaptive(staleness=4, staleness_gate=0, staleness_share=0.25),
        Paper(),
        Paper(k=5),
        Baseline(),
        Baseline(k=1, score="paper"),
    ],
)
def test_the_serialised_policy_round_trips_through_json(policy: Any) -> None:
    data = to_dict(policy)
    assert from_dict(json.loads(json.dumps(data))) == policy
    assert data["name"] == type(policy).__name__.lower()


def test_the_config_form_takes_words_for_defaults() -> None:
    assert from_dict("adaptive") == Adaptive()
    assert from_dict({"name": "adaptive", "k": 2, "remainder": "pooled"}) == Adaptive()
    assert from_dict({"name": "adaptive", "k": "auto"}) == Adaptive(k=AutoK())
    assert from_dict({"name": "adaptive", "score": "auto"}) == Adaptive(score=AutoScore())
    got = from_dict({"name": "adaptive", "k": {"calm": 1, "taper": False}})
    assert got == Adaptive(k=AutoK(calm=1, taper=None))
    assert from_dict({"name": "paper", "k": 4}) == Paper(k=4)
    for bad, error, message in (
        ({"name": "mwem"}, ValueError, "policy name must be one of"),
        ({"score": "l2"}, ValueError, "policy name must be one of"),
        ({"name": "paper", "score": "l2"}, ValueError, "Paper: unknown field 'score'"),
        ({"name": "adaptive", "k": {"cal": 1}}, ValueError, "Adaptive.k: unknown field 'cal'"),
        ({"name": "adaptive", "k": [2]}, TypeError, "Adaptive.k must be an AutoK or an int"),
        (3, TypeError, "a policy is a name or a table"),
    ):
        with pytest.raises(error, match=message):
            from_dict(bad)


def test_the_k_schedule() -> None:
    auto = Adaptive(k=AutoK())
    w = 10  # workloads
    assert step_k(Adaptive(), 0, w, 0.9) == step_k(Adaptive(), 99, w, 0.0) == 2  # the default
    assert step_k(auto, 0, w, 0.0) == 2  # calm
    assert step_k(auto, 0, w, 0.21) == 3  # drifting
    assert step_k(auto, 3 * w, w, 0.05) == 1  # late and quiet: the taper
    assert step_k(auto, 3 * w, w, 0.06) == 2  # late, a recent step drifted
    assert step_k(auto, 3 * w - 1, w, 0.0) == 2  # not yet late
    assert step_k(Adaptive(k=AutoK(taper=None)), 99, w, 0.0) == 2
    assert step_k(Adaptive(k=AutoK(drifting=5)), 0, 3, 0.9) == 3  # capped at the workloads
    assert step_k(Paper(), 0, w, 0.9) == step_k(Baseline(), 0, w, 0.0) == 3


# ---------------------------------------------------------------------------- Paper()


def test_paper_refits_after_each_selection_with_the_steps_measurements_only() -> None:
    s = TabularStream(small(), 1, policy=Paper(), iters=10, rng=dpstream.Rng(seed=3))
    fits = spy_fits(s)
    data = rows(600, 1)
    for t in range(5):
        fits.clear()
        s.step(data[100 * t : 100 * (t + 1)])
        now = s.last_selected
        assert len(now) == 3
        assert [sorted(f) for f in fits] == [sorted(now[: i + 1]) for i in range(3)]
    assert s._score == "paper" and s._pooled is None and s._refit == "selection"


def test_paper_releases_the_average_of_the_steps_models() -> None:
    """g_t = (h_{t,1} + h_{t,2} + h_{t,3}) / 3: its marginals are the average, and its rows
    are drawn from the mixture (⌊n/3⌋ or ⌈n/3⌉ rows from each model with "round")."""
    d = small()
    s = TabularStream(d, 1, policy=Paper(), iters=10, public_sizes=True, rng=dpstream.Rng(seed=5))
    data = rows(800, 2)
    for t in range(4):
        s.step(data[200 * t : 200 * (t + 1)])
    parts = [*s._mixture, s._model]
    assert len(parts) == 3 and len({id(p) for p in parts}) == 3
    for i, clique in enumerate(s.workloads):
        want = sum(p.marginal(clique) / p.total for p in parts) * (s.size / 3)  # type: ignore[union-attr]
        np.testing.assert_allclose(s._synthetic_marginals[i], want, rtol=1e-12)
    # The models differ (else the average says nothing).
    m0, m2 = (parts[0].marginal((0, 1)), parts[2].marginal((0, 1)))  # type: ignore[union-attr]
    assert not np.allclose(m0 / m0.sum(), m2 / m2.sum())
    drawn: list[int] = []
    for p in parts:
        inner = p.sample

        def spy(n: int, rng: Any, *, method: str, inner: Any = inner) -> Any:
            drawn.append(n)
            return inner(n, rng, method=method)

        p.sample = spy  # type: ignore[method-assign]
    codes = s.synthetic_codes()
    assert codes.shape == (800, 4) and sum(drawn) == 800
    assert sorted(drawn) == [266, 267, 267]


def test_paper_differs_from_the_adaptive_policy_that_writes_its_choices() -> None:
    """The same choices released as h_{t,k} (Adaptive, the old paper configuration): the
    same selections (the average enters the next step only through g_t), other rows."""
    d = small()
    data = rows(300, 4)
    paper = TabularStream(d, 1, policy=Paper(), iters=10, rng=dpstream.Rng(seed=9))
    last = Adaptive(k=3, score="paper", remainder="model", refit="selection")
    single = TabularStream(d, 1, policy=last, iters=10, rng=dpstream.Rng(seed=9))
    a, b = paper.step(data[:100]), single.step(data[:100])
    assert paper.last_selected == single.last_selected
    assert not a.equals(b)
    assert len(paper._mixture) == 2 and single._mixture == []

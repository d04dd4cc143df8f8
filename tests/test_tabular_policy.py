"""Policies of the tabular stream: validation, serialised form, and Paper() as printed."""

from __future__ import annotations

import json
from typing import Any

import dpstream
import numpy as np
import pytest
from dpstream.tabular import Adaptive, Baseline, Domain, ModelOptions, Paper, TabularStream
from dpstream.tabular.policy import REMOVED_FIELDS, from_dict, to_dict
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
        (lambda: Adaptive(growth=1), ValueError, "Adaptive.growth must be greater than 1"),
        (lambda: Adaptive(growth=0.5), ValueError, "Adaptive.growth must be in [1, inf)"),
        (lambda: Adaptive(growth="2"), TypeError, "Adaptive.growth must be a number, got str"),
        (lambda: Adaptive(score="l2"), TypeError, "unexpected keyword argument 'score'"),
        (lambda: Paper(k=0), ValueError, "Paper.k must be at least 1, got 0"),
        (lambda: Baseline(score="auto"), ValueError, "Baseline.score must be one of"),
        (lambda: Baseline(k="3"), TypeError, "Baseline.k must be an int, got str"),
        (lambda: TabularStream(small(), 1, policy="paper"), TypeError, "policy must be"),
        (lambda: TabularStream(small(), 1, policy=3), TypeError, "got int"),
        (lambda: ModelOptions(iters=0), ValueError, "iters must be at least 1, got 0"),
        (lambda: ModelOptions(max_model_cells=2.5), TypeError, "max_model_cells must be an int"),
        (lambda: ModelOptions(sampling="x"), ValueError, "sampling must be 'round' or 'iid'"),
        (lambda: TabularStream(small(), 1, model=30), TypeError, "model must be a ModelOptions"),
    ],
)
def test_bad_policy_fields_name_the_field(make: Any, error: type, message: str) -> None:
    with pytest.raises(error) as info:
        make()
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ({"iters": 30}, "model=ModelOptions(iters=30))"),
        ({"max_model_cells": 9}, "model=ModelOptions(max_model_cells=9))"),
        ({"sampling": "iid"}, "model=ModelOptions(sampling='iid'))"),
        ({"counter": "block"}, "policy=Paper(counter='block'))"),
        ({"estimator": "mw"}, "policy=Baseline(estimator='mw'))"),
    ],
)
def test_a_moved_keyword_names_its_new_form(old: dict[str, Any], new: str) -> None:
    with pytest.raises(TypeError) as info:
        TabularStream(small(), 1, **old)
    assert str(info.value).endswith("TabularStream(..., " + new)


def test_model_options_are_frozen_and_kept_by_a_checkpoint() -> None:
    m = ModelOptions(iters=np.int64(5), sampling="iid")
    assert m == ModelOptions(iters=5, sampling="iid") and type(m.iters) is int
    with pytest.raises(AttributeError):
        m.iters = 2  # type: ignore[misc]
    s = TabularStream(small(), 1, policy=Paper(k=1), model=m, rng=dpstream.Rng(seed=2))
    s.step(rows(100, 1))
    back = TabularStream.from_bytes(s.to_bytes(), allow_seeded=True)
    assert (back._iters, back._sampling) == (5, "iid")
    assert back.step(rows(100, 2)).equals(s.step(rows(100, 2)))


def test_policies_are_frozen_and_compare_by_value() -> None:
    p = Paper()
    with pytest.raises(AttributeError):
        p.k = 2  # type: ignore[misc]
    assert p == Paper(k=3) and p != Paper(k=2)
    assert Adaptive() == Adaptive(growth=2.0) != Adaptive(growth=3)
    assert hash(Baseline()) == hash(Baseline(k=3, score="l2"))


@pytest.mark.parametrize(
    "policy",
    [
        Adaptive(),
        Adaptive(growth=3.5),
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


def test_the_config_form() -> None:
    assert from_dict("adaptive") == Adaptive()
    assert from_dict({"name": "adaptive", "growth": 4}) == Adaptive(growth=4)
    # One serialised form per value (a run checkpoint's fingerprint): TOML's 2 is 2.0.
    assert to_dict(Adaptive(growth=2)) == to_dict(Adaptive()) == {"name": "adaptive", "growth": 2.0}
    assert from_dict({"name": "paper", "k": 4}) == Paper(k=4)
    for bad, error, message in (
        ({"name": "mwem"}, ValueError, "policy name must be one of"),
        ({"name": "heuristics"}, ValueError, "policy name must be one of"),
        ({"score": "l2"}, ValueError, "policy name must be one of"),
        ({"name": "paper", "score": "l2"}, ValueError, "Paper: unknown field 'score'"),
        ({"name": "adaptive", "grow": 2}, ValueError, "Adaptive: unknown field 'grow'"),
        (3, TypeError, "a policy is a name or a table"),
    ):
        with pytest.raises(error, match=message):
            from_dict(bad)


@pytest.mark.parametrize(
    "fields", [["score"], ["k", "remainder"], ["coverage", "staleness", "max_scored"]]
)
def test_the_removed_fields_of_the_default_are_named(fields: list[str]) -> None:
    """The fields the default policy had before dpstream 0.2 are refused as removed."""
    data = {"name": "adaptive", **{f: 1 for f in fields}, "growth": 2}
    with pytest.raises(ValueError) as info:
        from_dict(data)
    text = str(info.value)
    assert f"Adaptive({', '.join(fields)})" in text and "removed in dpstream 0.2" in text
    assert "only field is growth" in text
    assert set(fields) <= set(REMOVED_FIELDS)


# ---------------------------------------------------------------------------- Paper()


def test_paper_refits_after_each_selection_with_the_steps_measurements_only() -> None:
    s = TabularStream(
        small(), 1, policy=Paper(), model=ModelOptions(iters=10), rng=dpstream.Rng(seed=3)
    )
    fits = spy_fits(s)
    data = rows(600, 1)
    for t in range(5):
        fits.clear()
        s.step(data[100 * t : 100 * (t + 1)])
        now = s.last_selected
        assert len(now) == 3
        assert [sorted(f) for f in fits] == [sorted(now[: i + 1]) for i in range(3)]
    assert s._score == "paper"


def test_paper_releases_the_average_of_the_steps_models() -> None:
    """g_t = (h_{t,1} + h_{t,2} + h_{t,3}) / 3: its marginals are the average, and its rows
    are drawn from the mixture (⌊n/3⌋ or ⌈n/3⌉ rows from each model with "round")."""
    d = small()
    s = TabularStream(
        d,
        1,
        policy=Paper(),
        model=ModelOptions(iters=10),
        public_sizes=True,
        rng=dpstream.Rng(seed=5),
    )
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

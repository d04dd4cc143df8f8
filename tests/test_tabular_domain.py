"""Domain encoding and the workload error metrics (Kumar, Strohmer, Vershynin §7.2–7.3)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dpstream.tabular.domain import Domain
from dpstream.tabular.workloads import all_workloads, marginal, workload_errors
from hypothesis import given
from hypothesis import strategies as st

# The copy of the Adult data the package ships (../shared/data/adult is not in a clean clone).
ADULT = Path(__file__).resolve().parents[1] / "python" / "dpstream" / "data"


def small() -> Domain:
    return Domain({"a": 3, "b": 2, "c": 4})


def test_domain_from_json_matches_the_adult_file(tmp_path: Path) -> None:
    d = Domain.from_json(ADULT / "adult-domain.json")
    assert len(d) == 14 and d.size("age") == 85 and d.sizes[-1] == 2
    assert d.names[0] == "age"
    p = tmp_path / "d.json"
    p.write_text(json.dumps({"x": 2, "y": 3}))
    assert Domain.from_json(p) == Domain({"x": 2, "y": 3})
    p.write_text("[1, 2]")
    with pytest.raises(ValueError):
        Domain.from_json(p)


@pytest.mark.parametrize(
    ("columns", "error"),
    [
        ({}, ValueError),
        ({"a": 0}, ValueError),
        ({"a": 2.5}, TypeError),
        ({"a": True}, TypeError),
        ({1: 2}, TypeError),
    ],
)
def test_bad_domains_are_refused(columns: dict[object, object], error: type) -> None:
    with pytest.raises(error):
        Domain(columns)  # type: ignore[arg-type]


def test_encode_accepts_frames_in_any_column_order_and_arrays() -> None:
    d = small()
    df = pd.DataFrame({"c": [3, 0], "a": [2, 1], "b": [0, 1]})
    assert d.encode(df).tolist() == [[2, 0, 3], [1, 1, 0]]
    assert d.encode(np.array([[0, 1, 2]], dtype=np.uint8)).tolist() == [[0, 1, 2]]
    assert d.encode(None).shape == (0, 3)
    assert d.encode(np.zeros((0, 3))).shape == (0, 3)
    assert d.encode(np.array([[1.0, 0.0, 3.0]])).tolist() == [[1, 0, 3]]


@pytest.mark.parametrize(
    ("batch", "error", "needle"),
    [
        (pd.DataFrame({"a": [0], "b": [0]}), ValueError, "missing ['c']"),
        (pd.DataFrame({"a": [0], "b": [0], "c": [0], "z": [0]}), ValueError, "unexpected ['z']"),
        (pd.DataFrame({"a": [3], "b": [0], "c": [0]}), ValueError, "column 'a' has code 3"),
        (pd.DataFrame({"a": [0], "b": [-1], "c": [0]}), ValueError, "column 'b'"),
        (pd.DataFrame({"a": ["x"], "b": [0], "c": [0]}), TypeError, "column 'a'"),
        (np.array([[0, 1]]), ValueError, "shape (n, 3)"),
        (np.array([[0.5, 1, 0]]), ValueError, "non-integer"),
        (np.array([[True, False, True]]), TypeError, "bool"),
        ("abc", TypeError, "DataFrame"),
    ],
)
def test_encode_names_the_problem(batch: object, error: type, needle: str) -> None:
    with pytest.raises(error) as info:
        small().encode(batch)
    assert needle in str(info.value)


def test_workloads_are_all_sorted_k_subsets() -> None:
    d = small()
    assert all_workloads(d, 2) == [(0, 1), (0, 2), (1, 2)]
    assert all_workloads(d, 3) == [(0, 1, 2)]
    with pytest.raises(ValueError):
        all_workloads(d, 4)
    with pytest.raises(TypeError):
        all_workloads(d, 1.5)  # type: ignore[arg-type]


@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 1), st.integers(0, 3)), max_size=30))
def test_marginals_match_counting_by_hand(rows: list[tuple[int, int, int]]) -> None:
    d = small()
    codes = np.array(rows, dtype=np.int64).reshape(-1, 3)
    for clique in all_workloads(d, 2):
        m = marginal(codes, d, clique)
        shape = tuple(d.sizes[c] for c in clique)
        expect = np.zeros(shape)
        for r in rows:
            expect[tuple(r[c] for c in clique)] += 1
        assert np.array_equal(m, expect.ravel())


def test_workload_errors_by_hand() -> None:
    d = Domain({"a": 2, "b": 2})
    real = np.array([[0, 0], [0, 1], [1, 1], [1, 1]])
    synth = np.array([[0, 0], [1, 1]])
    e = workload_errors(real, synth, d, workloads=[(0, 1)])
    # Normalised cells: real (1/4, 1/4, 0, 1/2), synthetic (1/2, 0, 0, 1/2).
    assert e.avg_we == pytest.approx((1 / 4 + 1 / 4 + 0 + 0) / 4)
    assert e.max_we == e.avg_we
    # Relative error over the cells with real mass: (1 + 1 + 0) / 3.
    assert e.avg_rel_we == pytest.approx(2 / 3)
    # Relative ℓ2: ‖(1/4, 1/4, 0, 0)‖₂ / ‖(1/4, 1/4, 0, 1/2)‖₂ = sqrt(2/16) / sqrt(6/16).
    assert e.avg_rel_l2 == pytest.approx((1 / 3) ** 0.5)
    assert e.max_rel_l2 == e.avg_rel_l2
    same = workload_errors(real, real, d)
    assert same == (0.0,) * 8  # the six of the paper, then TV
    with pytest.raises(ValueError):
        workload_errors(real, np.zeros((0, 2), dtype=np.int64), d)


def test_workload_errors_of_one_workload_per_pair() -> None:
    d = small()
    rng = np.random.default_rng(0)
    real = np.stack([rng.integers(0, s, 200) for s in d.sizes], axis=1)
    synth = np.stack([rng.integers(0, s, 300) for s in d.sizes], axis=1)
    e = workload_errors(real, synth, d)
    per = [
        workload_errors(real, synth, d, workloads=[c]).avg_we
        for c in itertools.combinations(range(3), 2)
    ]
    assert e.avg_we == pytest.approx(np.mean(per)) and e.max_we == pytest.approx(max(per))


def test_polars_and_pyarrow_tables_are_accepted() -> None:
    import polars as pl
    import pyarrow as pa

    d = Domain({"a": 3, "b": ["x", "y"]})
    frame = {"b": ["y", "x"], "a": [2, 0]}
    expect = [[2, 1], [0, 0]]
    assert d.encode(pl.DataFrame(frame)).tolist() == expect
    assert d.encode(pa.table(frame)).tolist() == expect
    with pytest.raises(ValueError, match="unknown category 'z'"):
        d.encode(pl.DataFrame({"a": [0], "b": ["z"]}))


def test_a_labelled_column_matches_a_frames_values_by_their_text(tmp_path: Path) -> None:
    """A CSV column of hours 5..23 that pandas reads as integers, with a domain listing
    "5" … "23": matched by text (before, the integers were taken as codes and refused)."""
    hours = [str(h) for h in range(5, 24)]
    d = Domain({"hour": hours, "n": 2})
    (tmp_path / "h.csv").write_text("hour,n\n5,0\n19,1\n23,0\n")
    frame = pd.read_csv(tmp_path / "h.csv")
    assert frame["hour"].dtype.kind == "i"
    assert d.encode(frame).tolist() == [[0, 0], [14, 1], [18, 0]]
    # Missing values make pandas read floats: 19.0 is "19"; NaN is a missing value.
    assert d.encode(pd.DataFrame({"hour": [19.0, 5.0], "n": [0, 1]})).tolist() == [[14, 0], [0, 1]]
    with pytest.raises(
        ValueError, match=r"column 'hour' has a missing value in row 1; add \"missing\": true"
    ):
        d.encode(pd.DataFrame({"hour": [19.0, np.nan], "n": [0, 1]}))
    with pytest.raises(ValueError, match=r"column 'hour' has unknown category 24 in row 2"):
        d.encode(pd.DataFrame({"hour": [5, 6, 24, 4], "n": [0, 1, 0, 0]}))
    with pytest.raises(ValueError, match=r"unknown category 4 in row 0"):
        d.encode(pd.DataFrame({"hour": [4], "n": [0]}))  # a code would be in range: text
    # Strings, mixed objects and booleans by their text too.
    assert d.encode(pd.DataFrame({"hour": ["7", 8], "n": [0, 0]}))[:, 0].tolist() == [2, 3]
    flags = Domain({"f": ["False", "True"]})
    assert flags.encode(pd.DataFrame({"f": [True, False]})).tolist() == [[1], [0]]
    # Integer code arrays stay codes; codes in a frame are for columns given by size.
    assert d.encode(np.array([[0, 1], [18, 0]])).tolist() == [[0, 1], [18, 0]]
    with pytest.raises(ValueError, match="column 'hour' has code 19 in row 0"):
        d.encode(np.array([[19, 0]]))
    with pytest.raises(ValueError, match="column 'n' has code 2"):
        d.encode(pd.DataFrame({"hour": ["5"], "n": [2]}))
    # decode gives the labels back, and they go in again as they came out.
    out = d.decode(d.encode(frame))
    assert out["hour"].tolist() == ["5", "19", "23"]
    assert d.encode(out).tolist() == d.encode(frame).tolist()

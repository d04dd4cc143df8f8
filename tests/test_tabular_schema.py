"""The schema forms of a domain (issue 40): numbers in bins, missing values, decoding."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from dpstream.tabular.domain import Domain

ISSUE = {
    "age": {"numeric": [0, 100], "bins": 10, "integer": True},
    "fare": {"edges": [0, 5, 10, 20, 50, 1000]},
    "distance": {"numeric": [0, 50], "bins": 25, "missing": True},
    "payment": {"categories": ["card", "cash", "voucher"], "missing": True},
    "zone": {"size": 12, "missing": True},
    "weekend": {"categories": ["0", "1"]},
}


def test_the_issue_example_loads_and_round_trips(tmp_path: Path) -> None:
    d = Domain(ISSUE)
    assert d.sizes == (10, 5, 26, 4, 13, 2)
    assert d.column("fare").edges == (0, 5, 10, 20, 50, 1000)
    p = tmp_path / "schema.json"
    p.write_text(json.dumps(d.to_dict()))
    assert Domain.from_json(p) == d
    # The old forms stay as they were.
    assert Domain({"a": 3, "b": ["x", "y"]}).to_dict() == {"a": 3, "b": ["x", "y"]}
    assert Domain({"a": 3, "b": ["x", "y"]}).is_codes and not d.is_codes
    assert d.coded() == Domain(
        {n: s for n, s in zip(d.names, d.sizes, strict=True)} | {"weekend": ["0", "1"]}
    )


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"numeric": [0, 10], "bins": 20, "integer": True}, "narrower than 1"),
        ({"edges": [0, 1, 1.5], "integer": True}, "[1, 1.5) is narrower than 1"),
        ({"numeric": [0, 10]}, "needs 'bins'"),
        ({"numeric": [10, 0], "bins": 2}, "lo < hi"),
        ({"edges": [0, 2, 1]}, "increase strictly"),
        ({"edges": [0, 1], "bins": 3}, "unknown field(s) ['bins']"),
        ({"categories": ["a"], "integer": True}, "unknown field(s) ['integer']"),
        ({"size": 3, "categories": ["a"]}, "exactly one of"),
        ({"size": 3, "missing": "yes"}, "'missing' must be true or false"),
    ],
)
def test_bad_schemas_are_refused_when_they_load(spec: object, needle: str) -> None:
    with pytest.raises((ValueError, TypeError)) as info:
        Domain({"x": spec})
    assert needle in str(info.value) and "'x'" in str(info.value)


def test_numbers_fall_in_half_open_bins_the_last_closed_and_clip_with_a_count() -> None:
    d = Domain({"fare": {"edges": [0, 5, 10, 20]}})
    frame = pd.DataFrame({"fare": [0, 4.99, 5, 19.99, 20, -3, 25, 7]})
    counts: dict[str, int] = {}
    assert d.encode_columns(frame, clipped=counts)[0].tolist() == [0, 0, 1, 2, 2, 0, 2, 1]
    assert counts == {"fare": 2}
    with pytest.warns(UserWarning, match="2 in column 'fare'"):
        d.encode(frame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        d.encode(frame.iloc[:5])  # inside the bounds: no warning
    # An integer array holds codes, as before.
    assert d.encode(np.array([[2], [0]])).tolist() == [[2], [0]]


def test_missing_values_take_the_missing_code_or_are_refused_by_column_and_row() -> None:
    d = Domain(ISSUE)
    frame = pd.DataFrame(
        {
            "age": [30, 99],
            "fare": [1.0, 60.0],
            "distance": [np.nan, 3.0],
            "payment": ["", None],
            "zone": [np.nan, 11],
            "weekend": [0, 1],
        }
    )
    codes = d.encode(frame)
    assert codes.tolist() == [[3, 0, 25, 3, 12, 0], [9, 4, 1, 3, 11, 1]]
    bad = frame.assign(age=[30, np.nan])
    with pytest.raises(ValueError, match=r"column 'age' has a missing value in row 1") as info:
        d.encode(bad)
    assert type(info.value) is ValueError  # pickles across Dask workers
    fields = info.value.schema  # type: ignore[attr-defined]
    assert (fields["column"], fields["row"], fields["problem"]) == ("age", 1, "a missing value")
    with pytest.raises(ValueError, match=r"column 'payment' has unknown category 'gift' in row 0"):
        d.encode(frame.assign(payment=["gift", "card"]))
    with pytest.raises(ValueError, match=r"'fare' has a value that is not a number 'x' in row 1"):
        d.encode(frame.assign(fare=["1", "x"]))


def test_releases_decode_inside_their_bins_and_read_back_to_the_same_codes(
    tmp_path: Path,
) -> None:
    d = Domain(ISSUE)
    g = np.random.default_rng(0)
    codes = np.column_stack([g.integers(0, s, 2000) for s in d.sizes])
    frame = d.decode(codes, np.random.default_rng(1))
    age = frame["age"].to_numpy()
    assert age.dtype.kind == "i" and age.min() >= 0 and age.max() <= 100
    assert ((age // 10).clip(max=9) == codes[:, 0]).all()
    assert frame["payment"].isna().sum() == (codes[:, 3] == 3).sum()
    assert frame["distance"].isna().sum() == (codes[:, 2] == 25).sum()
    path = tmp_path / "release.csv"
    frame.to_csv(path, index=False)
    back = pd.read_csv(path)
    counts: dict[str, int] = {}
    assert (codes == d.encode_columns(back, clipped=counts).T).all()
    assert counts == {}
    # The same generator gives the same release.
    assert d.decode(codes, np.random.default_rng(1)).equals(frame)


def test_integer_bins_draw_every_integer_they_hold() -> None:
    d = Domain({"y": {"numeric": [0, 10], "bins": 4, "integer": True}})  # width 2.5
    x = d.decode(np.repeat(np.arange(4), 4000).reshape(-1, 1), np.random.default_rng(0))["y"]
    by_bin = [sorted(set(x[i * 4000 : (i + 1) * 4000])) for i in range(4)]
    assert by_bin == [[0, 1, 2], [3, 4], [5, 6, 7], [8, 9, 10]]


def test_a_stream_on_a_schema_takes_raw_values_and_keeps_its_schema_in_a_checkpoint() -> None:
    from dpstream import Rng
    from dpstream.tabular import TabularStream

    d = Domain({"age": {"numeric": [0, 100], "bins": 5, "integer": True}, "k": ["a", "b"]})
    s = TabularStream(d, 1, rng=Rng(seed=3))
    frame = pd.DataFrame({"age": np.arange(0, 100, 2), "k": ["a", "b"] * 25})
    out = s.step(frame)
    assert out["age"].dtype.kind == "i" and set(out["k"]) <= {"a", "b"}
    back = TabularStream.from_bytes(s.to_bytes(), allow_seeded=True)
    assert back._domain == d


def test_a_label_written_as_an_integral_float_matches() -> None:
    d = Domain({"h": ["5", "19"]})
    assert d.encode(pd.DataFrame({"h": ["19.0", "5"]})).tolist() == [[1], [0]]
    with pytest.raises(ValueError, match=r"unknown category '19\.5'"):
        d.encode(pd.DataFrame({"h": ["19.5"]}))

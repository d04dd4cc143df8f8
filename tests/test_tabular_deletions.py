"""Deletions under add/remove never read the exact (private) table size.

A refusal of "more deletions than the table holds" would be an observable that depends on
the private size, so under add/remove such a step is taken like any other: the counts of
the deleted cells go below what they were and the released size is clipped at 0. With
``public_sizes`` the sizes are public and the step is refused (tests/test_bad_input.py).
"""

from __future__ import annotations

import numpy as np
from dpstream import Rng
from dpstream.tabular import Domain, ModelOptions, Paper, TabularStream

DOMAIN = Domain({"a": 3, "b": 2})


def stream() -> TabularStream:
    s = TabularStream(
        DOMAIN,
        1,
        workloads=1,
        policy=Paper(k=1),
        model=ModelOptions(iters=3),
        rng=Rng(seed=4),
    )
    s.step(np.array([[0, 1], [2, 0]]))
    return s


def test_deleting_more_records_than_inserted_is_a_step_like_any_other() -> None:
    s = stream()
    table = s.step(deletions=np.array([[1, 1]] * 5))  # never inserted, more than the table
    assert s.t == 2 and s.size >= 0 and len(table) == s.size
    back = TabularStream.from_bytes(s.to_bytes(), allow_seeded=True)  # a valid state
    assert back.t == 2 and back.size == s.size
    back.step(np.array([[0, 0]]))


def test_the_step_does_not_depend_on_whether_the_table_could_hold_the_deletions() -> None:
    # Two tables that differ in their exact size: the same deletions are taken by both.
    small, large = stream(), stream()
    large.step(np.array([[0, 1]] * 10))
    small.step(None)
    for s in (small, large):
        s.step(deletions=np.array([[0, 1]] * 6))
        assert s.t == 3

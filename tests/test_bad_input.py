"""Hostile and broken input (issue 7): every bad input gets a clear error and changes nothing.

The table :data:`CASES` is the specification: each row names an object, a bad input,
the exception type, an excerpt of its message, and what the object is afterwards.
``docs/bad-input.md`` is generated from it (``tests/bad_input_page.py``).

For "unchanged", the test builds the object twice from the same seed (a "twin"),
makes the bad call on one of them, and then compares what the two do next: their
encoded state and their subsequent outputs with seeded noise must be identical.

The hypothesis tests at the end throw random bytes, and random mutations of valid
state, at every ``from_bytes`` and at :func:`dpstream.load`: the only acceptable
outcome is ``ValueError`` (or a successful decode); never another exception type,
never a crash of the process.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import struct
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

import dpstream
import numpy as np
import pytest
from dpstream import OnlineSynthesizer, PrivHP, Rng, TreeGenerator, counters, noise
from dpstream.budget import BudgetExceededError
from dpstream.cli.cluster import local_cluster
from dpstream.sketch import CountMinSketch, CountSketch
from dpstream.tabular import Adaptive, Baseline, Domain, ModelOptions, Paper, TabularStream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# ---------------------------------------------------------------------------- objects
#
# Each family: how to build a fresh seeded object, and what it does next (its
# encoded state plus outputs that draw seeded noise), for the twin comparison.

PTS = np.array([[0.1, 0.2], [0.7, 0.9], [0.5, 0.5], [0.0, 1.0]])


def make_privhp() -> PrivHP:
    p = PrivHP(1, 2, k=4, width=8, rows=2, depth=5, rng=Rng(seed=1))
    p.update(PTS)
    return p


def follow_privhp(p: PrivHP) -> object:
    state = p.to_bytes() if not p.released else b""
    if not p.released:
        p.update(PTS[::-1])
    g = p.release(rng=Rng(seed=2))
    return state, g.to_bytes(), g.sample(5, rng=Rng(seed=3)).tobytes()


def make_released_privhp() -> PrivHP:
    p = make_privhp()
    p.release(rng=Rng(seed=2))
    return p


def follow_released_privhp(p: PrivHP) -> object:
    # A second release returns the same generator (no new noise, no new ε).
    return p.released, p.epsilon_spent, p.release(rng=Rng(seed=9)).to_bytes()


def make_generator() -> TreeGenerator:
    return make_privhp().release(rng=Rng(seed=2))


def follow_generator(g: TreeGenerator) -> object:
    return g.to_bytes(), g.sample(5, rng=Rng(seed=3)).tobytes()


def make_cms() -> CountMinSketch:
    s = CountMinSketch(3, 16, budget=1, rng=Rng(seed=1))
    s.update([1, 2, 3], [5, 1, 7])
    return s


def make_cs() -> CountSketch:
    s = CountSketch(3, 16, rng=Rng(seed=1))
    s.update([1, 2, 3], [5, -1, 7])
    return s


def follow_sketch(s: Any) -> object:
    state = (s.to_bytes(), s.epsilon_spent, s.epsilon_remaining)
    if s.released:
        return state, s.query([1, 2, 3]).tobytes()
    s.update([4], [2])
    r = s.release(Fraction(1, 2), rng=Rng(seed=2))
    return state, r.to_bytes()


def make_counter() -> counters.Counter:
    c = counters.Counter("binary-tree", 1, 2, horizon=4, rng=Rng(seed=1))
    c.step([2**62, 1])
    return c


def follow_counter(c: counters.Counter) -> object:
    state = (c.to_bytes(), c.time, c.release.tobytes())
    return state, c.step([1, 1]).tobytes(), c.run([[0, 1]]).tobytes()


def make_sparse() -> counters.SparseCounter:
    c = counters.SparseCounter(1, 5, rng=Rng(seed=1))
    c.step(2**62)
    return c


def follow_scalar(c: Any) -> object:
    return (c.to_bytes(), c.time, c.release), c.step(0), c.run([0, 0]).tobytes()


def make_inhomogeneous() -> counters.InhomogeneousSparseCounter:
    c = counters.InhomogeneousSparseCounter(1, 1, [1, Fraction(1, 2)], rng=Rng(seed=1))
    c.run([1, 1])
    return c


def make_online() -> OnlineSynthesizer:
    s = OnlineSynthesizer(1, 2, rng=Rng(seed=1))
    s.update(PTS)
    return s


def follow_online(s: OnlineSynthesizer) -> object:
    state = (s.to_bytes(), s.t)
    s.update(PTS[::-1])
    return state, s.release().tobytes(), s.release(3).tobytes()


def make_online_paper() -> OnlineSynthesizer:
    s = OnlineSynthesizer(1, 2, method="paper", rng=Rng(seed=1))
    s.update(PTS)
    return s


def make_online_memory() -> OnlineSynthesizer:
    s = OnlineSynthesizer.for_memory(
        1, 2, memory_bytes=2**20, expected_n=1000, max_releases=4, rng=Rng(seed=1)
    )
    s.update(PTS)
    return s


DOMAIN = Domain({"color": ["red", "green", "blue"], "size": 2, "ok": ["yes", "no"]})


def make_table() -> TabularStream:
    t = TabularStream(
        DOMAIN, 1, workloads=1, policy=Paper(k=1), model=ModelOptions(iters=3), rng=Rng(seed=1)
    )
    t.step(np.array([[0, 1, 0], [2, 0, 1]]))
    return t


def make_public_table() -> TabularStream:
    """A Paper() stream with public batch sizes (so a deletion can be checked against them)."""
    t = TabularStream(
        DOMAIN,
        1,
        workloads=1,
        policy=Paper(k=1),
        public_sizes=True,
        model=ModelOptions(iters=3),
        rng=Rng(seed=1),
    )
    t.step(np.array([[0, 1, 0], [2, 0, 1]]))
    return t


def make_default_table() -> TabularStream:
    """A stream of the default policy, Adaptive() (insertions only)."""
    t = TabularStream(DOMAIN, 1, model=ModelOptions(iters=3), rng=Rng(seed=1))
    t.step(np.array([[0, 1, 0], [2, 0, 1]]))
    return t


def follow_table(t: TabularStream) -> object:
    state = (t.t, t.size)
    out = t.step(np.array([[1, 1, 1]]))
    return state, out.to_numpy().tolist(), t.synthetic_codes().tobytes()


def make_bounded_table() -> TabularStream:
    """A stream whose "block" counters (size counter included) have taken their horizon."""
    t = TabularStream(
        DOMAIN, 1, workloads=1, policy=Paper(k=1, counter="block", horizon=1),
        model=ModelOptions(iters=3), rng=Rng(seed=1),
    )  # fmt: skip
    t.step(np.array([[0, 1, 0], [2, 0, 1]]))
    return t


def follow_state(t: TabularStream) -> object:
    return t.to_bytes()


def make_rng() -> Rng:
    return Rng(seed=7)


def follow_rng(r: Rng) -> object:
    return r.integers(4).tobytes()


def nothing() -> None:
    return None


def follow_nothing(_: None) -> object:
    return None


FAMILIES: dict[str, tuple[Callable[[], Any], Callable[[Any], object]]] = {
    "PrivHP": (make_privhp, follow_privhp),
    "released PrivHP": (make_released_privhp, follow_released_privhp),
    "TreeGenerator": (make_generator, follow_generator),
    "CountMinSketch": (make_cms, follow_sketch),
    "CountSketch": (make_cs, follow_sketch),
    "Counter": (make_counter, follow_counter),
    "SparseCounter": (make_sparse, follow_scalar),
    "InhomogeneousSparseCounter": (make_inhomogeneous, follow_scalar),
    "OnlineSynthesizer": (make_online, follow_online),
    "OnlineSynthesizer (paper)": (make_online_paper, follow_online),
    "OnlineSynthesizer (for_memory)": (make_online_memory, follow_online),
    "TabularStream": (make_table, follow_table),
    "TabularStream (at its horizon)": (make_bounded_table, follow_state),
    "TabularStream (default policy)": (make_default_table, follow_table),
    "TabularStream (public sizes)": (make_public_table, follow_table),
    "noise (rng)": (make_rng, follow_rng),
    "constructor": (nothing, follow_nothing),
}

UNCHANGED = "unchanged"
NO_OBJECT = "no object"
RNG_UNCHANGED = "rng unchanged"
NOTHING_LOADED = "nothing loaded"


@dataclass(frozen=True)
class Case:
    """One row of the table: ``bad(obj)`` raises ``exc`` with ``message`` in its text."""

    family: str
    input: str
    exc: type[BaseException]
    message: str
    bad: Callable[[Any], object]
    after: str = UNCHANGED

    @property
    def id(self) -> str:
        return f"{self.family}: {self.input}"


HUGE = 2**40  # rows in a "huge" batch: 16 TiB of float64 at dim 2


def huge_points(dim: int) -> np.ndarray:
    """A declared (n, dim) batch far beyond memory (a broadcast view: no data)."""
    return np.broadcast_to(np.float64(0.5), (HUGE, dim))


def other_config() -> PrivHP:
    return PrivHP(1, 2, k=4, width=8, rows=2, depth=6, rng=Rng(seed=1))


def other_keys() -> PrivHP:
    return PrivHP(1, 2, k=4, width=8, rows=2, depth=5, rng=Rng(seed=99))


def released_privhp() -> PrivHP:
    p = PrivHP(1, 2, k=4, width=8, rows=2, depth=5, rng=Rng(seed=1))
    p.release(rng=Rng(seed=5))
    return p


# fmt: off
CASES: list[Case] = [
    # ---- PrivHP: points
    Case("PrivHP", "NaN coordinate", ValueError, "points[1, 0] is NaN",
         lambda p: p.update([[0.5, 0.5], [np.nan, 0.5]])),
    Case("PrivHP", "+inf coordinate", ValueError, "points[0, 1] = inf is outside [0, 1]",
         lambda p: p.update([[0.5, np.inf]])),
    Case("PrivHP", "coordinate 1.5 (out of range)", ValueError,
         "points[0, 0] = 1.5 is outside [0, 1]", lambda p: p.update([[1.5, 0.5]])),
    Case("PrivHP", "coordinate -1e-300 (out of range)", ValueError, "is outside [0, 1]",
         lambda p: p.update([[0.5, -1e-300]])),
    Case("PrivHP", "shape (n, 3) for dim 2", ValueError,
         "points must have shape (n, 2), got (2, 3)", lambda p: p.update(np.zeros((2, 3)))),
    Case("PrivHP", "1-D array for dim 2", ValueError, "points must have shape (n, 2), got (4,)",
         lambda p: p.update(np.zeros(4))),
    Case("PrivHP", "3-D array", ValueError, "points must have shape (n, 2)",
         lambda p: p.update(np.zeros((2, 2, 2)))),
    Case("PrivHP", "string dtype", TypeError, "points must be a numeric array, got dtype <U",
         lambda p: p.update(np.array([["a", "b"]]))),
    Case("PrivHP", "object dtype (None)", TypeError, "numeric array, got dtype object",
         lambda p: p.update([[None, 0.5]])),
    Case("PrivHP", "complex dtype", TypeError, "numeric array, got dtype complex128",
         lambda p: p.update(np.zeros((2, 2), dtype=complex))),
    Case("PrivHP", "bool dtype", TypeError, "numeric array, got dtype bool",
         lambda p: p.update(np.zeros((2, 2), dtype=bool))),
    Case("PrivHP", "integer 2 (out of range)", ValueError, "points[0, 0] = 2.0 is outside",
         lambda p: p.update(np.full((1, 2), 2))),
    Case("PrivHP", "huge batch (2^40 rows declared)", MemoryError, "Unable to allocate",
         lambda p: p.update(huge_points(2))),
    Case("released PrivHP", "update after release", ValueError,
         "this PrivHP has been released; counting more points would need a second release",
         lambda p: p.update(PTS)),
    Case("released PrivHP", "to_bytes after release", ValueError,
         "save the TreeGenerator that release() returned instead", lambda p: p.to_bytes()),
    Case("released PrivHP", "merge an unreleased summary into it", BudgetExceededError,
         "released summaries cannot be merged (their ε is spent)",
         lambda p: p.merge(make_privhp())),
    # ---- PrivHP: merges
    Case("PrivHP", "merge: different depth", ValueError,
         "cannot merge PrivHP summaries with different parameters",
         lambda p: p.merge(other_config())),
    Case("PrivHP", "merge: different hash keys", ValueError,
         "cannot merge sketches with different hash functions", lambda p: p.merge(other_keys())),
    Case("PrivHP", "merge: a released summary", BudgetExceededError,
         "released summaries cannot be merged (their ε is spent)",
         lambda p: p.merge(released_privhp())),
    Case("PrivHP", "merge: not a PrivHP", TypeError, "can only merge a PrivHP, got int",
         lambda p: p.merge(3)),
    # ---- PrivHP: parameters
    Case("constructor", "PrivHP epsilon = 0", ValueError, "epsilon must be positive, got 0",
         lambda _: PrivHP(0, 2, k=4, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP epsilon = -1", ValueError, "epsilon must be positive, got -1",
         lambda _: PrivHP(-1, 2, k=4, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP epsilon = NaN", ValueError, "epsilon must be finite, got nan",
         lambda _: PrivHP(float("nan"), 2, k=4, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP epsilon = inf", ValueError, "epsilon must be finite, got inf",
         lambda _: PrivHP(float("inf"), 2, k=4, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP epsilon = Decimal('NaN')", ValueError, "epsilon must be finite",
         lambda _: PrivHP(Decimal("NaN"), 2, k=4, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP epsilon = '1' (string)", TypeError,
         "epsilon must be an int, float, Fraction or Decimal, got str",
         lambda _: PrivHP("1", 2, k=4, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP epsilon = True", TypeError,
         "epsilon must be a real number, got bool",
         lambda _: PrivHP(True, 2, k=4, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP epsilon = 1e-300 (noise beyond int64)", ValueError,
         "epsilon is too small for depth 5", lambda _: PrivHP(1e-300, 2, k=4, width=8, depth=5),
         after=NO_OBJECT),
    Case("constructor", "PrivHP depth = 61", ValueError, "depth must be in 1..=60, got 61",
         lambda _: PrivHP(1, 2, k=4, width=8, depth=61), after=NO_OBJECT),
    Case("constructor", "PrivHP k = 0", ValueError, "k must be in 1..=2^24, got 0",
         lambda _: PrivHP(1, 2, k=0, width=8, depth=5), after=NO_OBJECT),
    Case("constructor", "PrivHP width 2^30 at depth 10 (72 GiB)", ValueError,
         "more than the 16 GiB limit", lambda _: PrivHP(1, 2, k=2, width=2**30, depth=10),
         after=NO_OBJECT),
    Case("constructor", "PrivHP.for_memory(memory_bytes=10)", ValueError,
         "memory_bytes = 10 is too small for any configuration",
         lambda _: PrivHP.for_memory(1, 2, 1000, 10), after=NO_OBJECT),
    Case("constructor", "PrivHP.for_memory(memory_bytes=-1)", ValueError,
         "memory_bytes must be non-negative, got -1", lambda _: PrivHP.for_memory(1, 2, 1000, -1),
         after=NO_OBJECT),
    # ---- TreeGenerator
    Case("TreeGenerator", "sample(-1)", ValueError, "m must be non-negative, got -1",
         lambda g: g.sample(-1)),
    Case("TreeGenerator", "sample(1.5)", TypeError, "m must be an int, got float",
         lambda g: g.sample(1.5)),
    Case("TreeGenerator", "sample(2^62) (beyond memory)", MemoryError,
         "cannot allocate an output array", lambda g: g.sample(2**62)),
    # ---- sketches
    Case("CountMinSketch", "negative key", ValueError, "keys must be non-negative",
         lambda s: s.update([-1])),
    Case("CountMinSketch", "key 2^64", ValueError, "keys must be below 2**64",
         lambda s: s.update([2**64])),
    Case("CountMinSketch", "float keys", TypeError, "keys must be integers, got dtype float64",
         lambda s: s.update([1.5])),
    Case("CountMinSketch", "2-D keys", ValueError, "keys must be 1-D, got shape (2, 2)",
         lambda s: s.update(np.zeros((2, 2), dtype=np.uint64))),
    Case("CountMinSketch", "counts of the wrong length", ValueError,
         "counts must be an int or 1-D with length 2, got (3,)",
         lambda s: s.update([1, 2], [1, 2, 3])),
    Case("CountMinSketch", "a cell past int64", OverflowError,
         "outside the int64 range; nothing was changed",
         lambda s: s.update([1, 1, 1], [2**62, 2**62, 2**62])),
    Case("CountMinSketch", "merge: different width", ValueError,
         "cannot merge sketches of different shapes: 3 × 16 and 3 × 8",
         lambda s: s.merge(CountMinSketch(3, 8, rng=Rng(seed=1)))),
    Case("CountMinSketch", "merge: different hash keys", ValueError,
         "cannot merge sketches with different hash functions",
         lambda s: s.merge(CountMinSketch(3, 16, rng=Rng(seed=2)))),
    Case("CountMinSketch", "merge: a CountSketch", TypeError,
         "cannot merge a CountSketch into a CountMinSketch",
         lambda s: s.merge(CountSketch(3, 16, rng=Rng(seed=1)))),
    Case("CountMinSketch", "merge: a released sketch", ValueError,
         "this sketch is a private release; it cannot be merged",
         lambda s: s.merge(CountMinSketch(3, 16, rng=Rng(seed=1)).release(1))),
    Case("CountMinSketch", "release(epsilon=0)", ValueError, "epsilon must be positive, got 0",
         lambda s: s.release(0)),
    Case("CountMinSketch", "release(epsilon=NaN)", ValueError, "epsilon must be finite, got nan",
         lambda s: s.release(float("nan"))),
    Case("CountMinSketch", "release past the budget", BudgetExceededError,
         "would spend ε = 2 but only 1 of the budget 1 remains", lambda s: s.release(2)),
    Case("CountSketch", "merge: a CountMinSketch", TypeError,
         "cannot merge a CountMinSketch into a CountSketch",
         lambda s: s.merge(CountMinSketch(3, 16, rng=Rng(seed=1)))),
    Case("CountSketch", "merge into itself", ValueError, "cannot merge a sketch into itself",
         lambda s: s.merge(s)),
    Case("CountSketch", "query of a string key", TypeError, "keys must be integers",
         lambda s: s.query(["a"])),
    Case("constructor", "sketch rows = 0", ValueError, "rows must be in 1..=64, got 0",
         lambda _: CountMinSketch(0, 16), after=NO_OBJECT),
    Case("constructor", "sketch width = 2^31", ValueError, "width must be in 1..=2^30",
         lambda _: CountSketch(1, 2**31), after=NO_OBJECT),
    Case("constructor", "sketch 64 × 2^30 (512 GiB)", ValueError,
         "more than the limit of 2^34 bytes (16 GiB)", lambda _: CountMinSketch(64, 2**30),
         after=NO_OBJECT),
    Case("constructor", "sketch budget = 0", ValueError, "budget must be positive, got 0",
         lambda _: CountMinSketch(1, 4, budget=0), after=NO_OBJECT),
    # ---- counters
    Case("Counter", "increment of the wrong length", ValueError,
         "increment must have shape (2,), got (3,)", lambda c: c.step([1, 2, 3])),
    Case("Counter", "float increment", TypeError, "increment must be integers",
         lambda c: c.step([1.5, 2])),
    Case("Counter", "NaN increment", TypeError, "increment must be integers",
         lambda c: c.step([np.nan, 1])),
    Case("Counter", "running sum past int64", OverflowError, "exceeds the int64 range",
         lambda c: c.step([2**62, 0])),
    Case("Counter", "run: one bad step among good ones", OverflowError, "int64 range",
         lambda c: c.run([[1, 1], [2**62, 0], [2**62, 0]])),
    Case("Counter", "run of the wrong shape", ValueError,
         "increments must have shape (T, 2), got (3,)", lambda c: c.run([1, 2, 3])),
    Case("Counter", "run past the horizon", ValueError, "horizon",
         lambda c: c.run(np.zeros((4, 2), dtype=np.int64))),
    Case("Counter", "huge run (2^40 steps declared)", MemoryError, "Unable to allocate",
         lambda c: c.run(np.broadcast_to(np.int64(0), (HUGE, 2)))),
    Case("constructor", "Counter kind 'nope'", ValueError, "kind must be 'simple'",
         lambda _: counters.Counter("nope", 1), after=NO_OBJECT),
    Case("constructor", "Counter binary-tree without horizon", ValueError,
         'counter "binary-tree" needs a horizon', lambda _: counters.Counter("binary-tree", 1),
         after=NO_OBJECT),
    Case("constructor", "Counter epsilon = 0", ValueError, "epsilon must be positive, got 0",
         lambda _: counters.Counter("simple", 0), after=NO_OBJECT),
    Case("constructor", "Counter epsilon = 2^-70 (noise beyond int64)", ValueError,
         "scale must be at most 2^56", lambda _: counters.Counter("simple", 2**-70),
         after=NO_OBJECT),
    Case("constructor", "Counter dim = 2^40 (8 TiB)", MemoryError, "cannot allocate",
         lambda _: counters.Counter("simple", 1, 2**40), after=NO_OBJECT),
    Case("SparseCounter", "negative value", ValueError, "value must be non-negative, got -1",
         lambda c: c.step(-1)),
    Case("SparseCounter", "float value", TypeError, "value must be an int, got float",
         lambda c: c.step(1.5)),
    Case("SparseCounter", "count past 2^62", OverflowError, "the running count exceeds 2^62",
         lambda c: c.step(1)),
    Case("SparseCounter", "run past the horizon", ValueError, "horizon",
         lambda c: c.run(np.zeros(5, dtype=np.int64))),
    Case("SparseCounter", "2-D run", ValueError, "values must have shape (T,), got (2, 2)",
         lambda c: c.run(np.ones((2, 2), dtype=np.int64))),
    Case("constructor", "SparseCounter horizon = 0", ValueError,
         "horizon must be at least 1, got 0", lambda _: counters.SparseCounter(1, 0),
         after=NO_OBJECT),
    Case("InhomogeneousSparseCounter", "a level past the table", ValueError, "level 3 has none",
         lambda c: c.run(np.ones(20, dtype=np.int64))),
    Case("InhomogeneousSparseCounter", "negative value", ValueError,
         "value must be non-negative, got -1", lambda c: c.step(-1)),
    Case("constructor", "InhomogeneousSparseCounter empty table", ValueError,
         "level_epsilons must not be empty",
         lambda _: counters.InhomogeneousSparseCounter(1, 1, []), after=NO_OBJECT),
    # ---- online synthesizer
    Case("OnlineSynthesizer", "NaN coordinate", ValueError, "points[0, 1] is NaN",
         lambda s: s.update([[0.5, np.nan]])),
    Case("OnlineSynthesizer", "-inf coordinate", ValueError, "= -inf is outside [0, 1]",
         lambda s: s.update([[-np.inf, 0.5]])),
    Case("OnlineSynthesizer", "bad row after good rows", ValueError,
         "points[2, 0] = 1.0000000000000002 is outside [0, 1]",
         lambda s: s.update([[0.5, 0.5], [0.1, 0.1], [1 + 2**-52, 0.5]])),
    Case("OnlineSynthesizer", "shape (n, 1) for dim 2", ValueError,
         "points must have shape (n, 2), got (3, 1)", lambda s: s.update(np.zeros((3, 1)))),
    Case("OnlineSynthesizer", "string dtype", TypeError, "numeric array",
         lambda s: s.update(np.array([["x", "y"]]))),
    Case("OnlineSynthesizer", "huge batch (2^40 rows declared)", MemoryError, "Unable to allocate",
         lambda s: s.update(huge_points(2))),
    Case("OnlineSynthesizer", "release(2^62) (beyond memory)", MemoryError,
         "cannot allocate 4611686018427387904 synthetic points", lambda s: s.release(2**62)),
    Case("OnlineSynthesizer", "release(-1)", ValueError, "size must be non-negative",
         lambda s: s.release(-1)),
    Case("constructor", "OnlineSynthesizer release before any point", ValueError,
         "no point has been seen yet", lambda _: OnlineSynthesizer(1, 2).release(3),
         after=NO_OBJECT),
    Case("constructor", "OnlineSynthesizer dim = 5000", ValueError,
         "dim must be in 1..=2^12, got 5000", lambda _: OnlineSynthesizer(1, 5000),
         after=NO_OBJECT),
    Case("constructor", "OnlineSynthesizer epsilon = NaN", ValueError,
         "epsilon must be finite, got nan", lambda _: OnlineSynthesizer(float("nan"), 2),
         after=NO_OBJECT),
    Case("constructor", "OnlineSynthesizer epsilon = 0", ValueError,
         "epsilon must be positive, got 0", lambda _: OnlineSynthesizer(0, 2), after=NO_OBJECT),
    Case("constructor", "OnlineSynthesizer unknown method", ValueError,
         "method must be one of 'epochs', 'paper', got 'fast'",
         lambda _: OnlineSynthesizer(1, 2, method="fast"), after=NO_OBJECT),
    Case("constructor", "OnlineSynthesizer.for_memory(max_releases=0)", ValueError,
         "max_releases must be in 1..=2^32, got 0",
         lambda _: OnlineSynthesizer.for_memory(
             1, 2, memory_bytes=2**20, expected_n=1000, max_releases=0),
         after=NO_OBJECT),
    Case("constructor", "OnlineSynthesizer.for_memory(memory_bytes=10)", ValueError,
         "memory_bytes = 10 is too small for 3 levels",
         lambda _: OnlineSynthesizer.for_memory(
             1, 2, memory_bytes=10, expected_n=1000, max_releases=4),
         after=NO_OBJECT),
    # ---- online synthesizer: Dask input (issue 30), counted on the workers
    Case("OnlineSynthesizer", "Dask array: a point outside [0, 1] (found on a worker)",
         ValueError, "partition 1: points[0, 1] = 1.5 is outside [0, 1]",
         lambda s: s.update(_dask_points([[0.1, 0.2], [0.5, 1.5]]))),
    Case("OnlineSynthesizer", "Dask array: NaN (found on a worker)", ValueError,
         "partition 0: points[0, 1] is NaN",
         lambda s: s.update(_dask_points([[0.1, np.nan], [0.5, 0.5]]))),
    Case("OnlineSynthesizer", "Dask array of strings", TypeError,
         "partition 0: points must be a numeric array, got dtype <U1",
         lambda s: s.update(_dask_points([["a", "b"]]))),
    Case("OnlineSynthesizer", "Dask array: 3 columns for dim 2", ValueError,
         "points must have 2 columns (the template's dim), got 3",
         lambda s: s.update(_dask_points(np.zeros((3, 3))))),
    Case("OnlineSynthesizer", "Dask DataFrame with 3 columns for dim 2", ValueError,
         "the dataframe must have 2 columns (the template's dim), got 3: select them first",
         lambda s: s.update(_ddf({"x": [0.1], "y": [0.2], "z": [0.3]}))),
    Case("OnlineSynthesizer (for_memory)", "Dask array: a point outside [0, 1] (found on a worker)",
         ValueError, "partition 1: points[0, 1] = 1.5 is outside [0, 1]",
         lambda s: s.update(_dask_points([[0.1, 0.2], [0.5, 1.5]]))),
    Case("OnlineSynthesizer (for_memory)", "merge_summary of another template's summary",
         ValueError, "the summary was not counted by a copy of this synthesizer's template",
         lambda s: s.merge_summary(PrivHP(1, 2, k=4, width=8, depth=5))),
    Case("OnlineSynthesizer (paper)", "Dask input", ValueError,
         "method='paper' tests every time step in order, so its counting cannot be split",
         lambda s: s.update(_dask_points([[0.1, 0.2]]))),
    # ---- tabular stream
    Case("TabularStream", "unknown category", ValueError,
         "column 'color' has unknown category 'purple' in row 0",
         lambda t: t.step(_frame({"color": ["purple"], "size": [0], "ok": ["yes"]}))),
    Case("TabularStream", "a number a labelled column does not list (matched by text)",
         ValueError, "column 'color' has unknown category 7 in row 0",
         lambda t: t.step(_frame({"color": [7], "size": [0], "ok": ["yes"]}))),
    Case("TabularStream", "missing column", ValueError,
         "batch columns do not match the domain: missing ['ok']",
         lambda t: t.step(_frame({"color": ["red"], "size": [0]}))),
    Case("TabularStream", "extra column", ValueError, "unexpected ['age']",
         lambda t: t.step(_frame({"color": ["red"], "size": [0], "ok": ["no"], "age": [3]}))),
    Case("TabularStream", "code out of range", ValueError,
         "column 'size' has code 2 in row 1; codes must be in 0..1",
         lambda t: t.step(np.array([[0, 0, 0], [0, 2, 0]]))),
    Case("TabularStream", "negative code", ValueError, "column 'color' has code -1",
         lambda t: t.step(np.array([[-1, 0, 0]]))),
    Case("TabularStream", "fractional code", ValueError, "holds non-integer values",
         lambda t: t.step(np.array([[0.5, 0, 0]]))),
    Case("TabularStream", "NaN code", ValueError, "holds non-integer values (NaN or fractions)",
         lambda t: t.step(np.array([[np.nan, 0, 0]]))),
    Case("TabularStream", "bool codes", TypeError, "must hold integer codes, got bool",
         lambda t: t.step(np.zeros((1, 3), dtype=bool))),
    Case("TabularStream", "wrong shape", ValueError,
         "a batch array must have shape (n, 3), got (1, 2)", lambda t: t.step(np.array([[0, 0]]))),
    Case("TabularStream", "a string batch", TypeError, "a batch must be a DataFrame",
         lambda t: t.step("red,0,yes")),
    Case("TabularStream (public sizes)", "deleting more rows than the table holds", ValueError,
         "deleting 3 records from a table of 2",
         lambda t: t.step(deletions=np.zeros((3, 3), dtype=np.int64))),
    # ---- tabular stream: Dask batches (issue 30); columns and dtypes checked on the client
    Case("TabularStream", "Dask batch: missing column", ValueError,
         "batch columns do not match the domain: missing ['ok']",
         lambda t: t.step(_ddf({"color": ["red", "blue"], "size": [0, 1]}))),
    Case("TabularStream", "Dask batch: bool codes", TypeError,
         "column 'size' must hold integer codes, got bool",
         lambda t: t.step(_ddf({"color": ["red"] * 2, "size": [True, False], "ok": ["no"] * 2}))),
    Case("TabularStream", "Dask batch: unknown category (found on a worker)", ValueError,
         "partition 1: column 'color' has unknown category 'purple' in row 0",
         lambda t: t.step(_ddf({"color": ["red", "purple"], "size": [0, 1], "ok": ["no"] * 2}))),
    Case("TabularStream", "Dask batch: code out of range (found on a worker)", ValueError,
         "partition 1: column 'size' has code 5 in row 0; codes must be in 0..1",
         lambda t: t.step(_ddf({"color": ["red"] * 2, "size": [0, 5], "ok": ["no"] * 2}))),
    Case("TabularStream", "Dask array of codes with the wrong shape", ValueError,
         "a batch array must have shape (n, 3), got (4, 2)",
         lambda t: t.step(_dask_points(np.zeros((4, 2), dtype=np.int64)))),
    Case("TabularStream", "a Dask bag", TypeError,
         "a Dask batch must be a dask DataFrame, a dask Array or a list of dask.delayed "
         "partitions, got Bag",
         lambda t: t.step(_dask_bag([1, 2]))),
    Case("TabularStream (public sizes)", "Dask deletions: more rows than the table holds",
         ValueError,
         "deleting 3 records from a table of 2",
         lambda t: t.step(
             deletions=_ddf({"color": ["red"] * 3, "size": [0] * 3, "ok": ["no"] * 3}))),
    Case("TabularStream", "BatchMarginals of another domain", ValueError,
         "these marginals were counted for other workloads or another domain than the stream's",
         lambda t: t.step(_marginals(Domain({"color": 3, "size": 3, "ok": 2}), t.workloads))),
    Case("TabularStream", "BatchMarginals and deletions", ValueError,
         "precomputed BatchMarginals hold the deletions too: pass deletions=None",
         lambda t: t.step(_marginals(DOMAIN, t.workloads), deletions=np.zeros((1, 3), int))),
    Case("TabularStream (default policy)", "deletions", ValueError,
         "the default policy Adaptive() takes insertions only; for a stream with deletions use "
         "policy=Paper()",
         lambda t: t.step(None, deletions=np.array([[0, 1, 0]]))),
    Case("TabularStream (default policy)", "unknown category", ValueError,
         "column 'color' has unknown category 'purple' in row 0",
         lambda t: t.step(_frame({"color": ["purple"], "size": [0], "ok": ["no"]}))),
    Case("TabularStream (default policy)", "BatchMarginals of another domain", ValueError,
         "these marginals were counted for other workloads or another domain than the stream's",
         lambda t: t.step(_marginals(Domain({"color": 3, "size": 3, "ok": 2}), t.workloads))),
    Case("TabularStream (at its horizon)", "a step past the counters' horizon", ValueError,
         "the stream has reached its horizon of 1 steps",
         lambda t: t.step(np.array([[1, 1, 1]]))),
    Case("constructor", "TabularStream epsilon = 0", ValueError, "epsilon must be positive, got 0",
         lambda _: TabularStream(DOMAIN, 0), after=NO_OBJECT),
    Case("constructor", "TabularStream epsilon = inf", ValueError,
         "epsilon must be finite, got inf", lambda _: TabularStream(DOMAIN, float("inf")),
         after=NO_OBJECT),
    Case("constructor", "TabularStream policy not a policy", TypeError,
         "policy must be dpstream.tabular.Adaptive(), Paper() or Baseline(), got str",
         lambda _: TabularStream(DOMAIN, 1, policy="paper"),  # type: ignore[arg-type]
         after=NO_OBJECT),
    Case("constructor", "Adaptive growth = 1", ValueError,
         "Adaptive.growth must be greater than 1, got 1",
         lambda _: Adaptive(growth=1), after=NO_OBJECT),
    Case("constructor", "Adaptive growth not a number", TypeError,
         "Adaptive.growth must be a number, got str",
         lambda _: Adaptive(growth="2"),  # type: ignore[arg-type]
         after=NO_OBJECT),
    Case("constructor", "Paper unknown counter", ValueError,
         "Paper.counter must be one of ('simple', 'block', 'unbounded-block', 'binary-tree', "
         "'hybrid'), got 'tree'",
         lambda _: Paper(counter="tree"),  # type: ignore[arg-type]
         after=NO_OBJECT),
    Case("constructor", "Paper k a float", TypeError, "Paper.k must be an int, got float",
         lambda _: Paper(k=3.0),  # type: ignore[arg-type]
         after=NO_OBJECT),
    Case("constructor", "Baseline unknown score", ValueError,
         "Baseline.score must be one of ('l2', 'l2-cell', 'paper'), got 'auto'",
         lambda _: Baseline(score="auto"),  # type: ignore[arg-type]
         after=NO_OBJECT),
    Case("constructor", "TabularStream workload larger than max_model_cells", ValueError,
         "workload (0, 1) alone needs a model of 8 cells (its marginal 6, the other columns 2), "
         "more than max_model_cells=7: raise max_model_cells to at least 8 or leave out the "
         "larger workloads",
         lambda _: TabularStream(DOMAIN, 1, policy=Paper(), model=ModelOptions(max_model_cells=7)),
         after=NO_OBJECT),
    Case("constructor", "TabularStream public_sizes not a bool", TypeError,
         "public_sizes must be a bool, got str",
         lambda _: TabularStream(DOMAIN, 1, public_sizes="yes"),  # type: ignore[arg-type]
         after=NO_OBJECT),
    Case("constructor", "Domain column with 0 categories", ValueError,
         "the size of column 'a' must be in [1, 2**31], got 0", lambda _: Domain({"a": 0}),
         after=NO_OBJECT),
    # ---- noise
    Case("noise (rng)", "discrete_laplace scale = 0", ValueError, "scale must be positive, got 0",
         lambda r: noise.discrete_laplace(0, 3, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "discrete_laplace scale = NaN", ValueError, "scale must be finite",
         lambda r: noise.discrete_laplace(float("nan"), 3, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "discrete_laplace scale = '1'", TypeError,
         "scale must be an int, float, Fraction or Decimal, got str",
         lambda r: noise.discrete_laplace("1", 3, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "discrete_laplace scale = 2^60", ValueError, "scale must be at most 2^56",
         lambda r: noise.discrete_laplace(2**60, 3, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "discrete_laplace size = -1", ValueError,
         "size must be non-negative, got -1", lambda r: noise.discrete_laplace(1, -1, rng=r),
         after=RNG_UNCHANGED),
    Case("noise (rng)", "discrete_laplace size = 2^62", MemoryError,
         "cannot allocate an output array of 4611686018427387904 elements",
         lambda r: noise.discrete_laplace(1, 2**62, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "discrete_gaussian sigma = -1", ValueError,
         "sigma must be positive, got -1", lambda r: noise.discrete_gaussian(-1, 3, rng=r),
         after=RNG_UNCHANGED),
    Case("noise (rng)", "discrete_gaussian size = (2^31, 2^31)", MemoryError,
         "cannot allocate an output array",
         lambda r: noise.discrete_gaussian(1, (2**31, 2**31), rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "permute_and_flip empty scores", ValueError, "scores must not be empty",
         lambda r: noise.permute_and_flip([], 1, 1, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "permute_and_flip NaN score", ValueError, "scores must be finite",
         lambda r: noise.permute_and_flip([0.0, np.nan], 1, 1, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "permute_and_flip epsilon = 0", ValueError,
         "epsilon must be positive, got 0",
         lambda r: noise.permute_and_flip([0.0, 1.0], 0, 1, rng=r), after=RNG_UNCHANGED),
    Case("noise (rng)", "permute_and_flip sensitivity = inf", ValueError,
         "sensitivity must be finite, got inf",
         lambda r: noise.permute_and_flip([0.0, 1.0], 1, float("inf"), rng=r),
         after=RNG_UNCHANGED),
    Case("noise (rng)", "Rng.integers(2^62)", MemoryError, "cannot allocate an output array",
         lambda r: r.integers(2**62), after=RNG_UNCHANGED),
    # ---- the LocalCluster of --dask local:N
    Case("constructor", "cli.cluster.local_cluster n_workers = 0", ValueError,
         "n_workers must be in 1..=", lambda _: local_cluster(0), after=NO_OBJECT),
    Case("constructor", "cli.cluster.local_cluster n_workers = 1.5", TypeError,
         "n_workers must be an int, got float", lambda _: local_cluster(1.5), after=NO_OBJECT),
]
# fmt: on
if np.dtype(np.longdouble).itemsize > 8:  # x86-64: float128
    CASES.append(
        Case(
            "PrivHP",
            "float128 dtype",
            TypeError,
            "cannot be converted to float64 exactly",
            lambda p: p.update(np.zeros((2, 2), dtype=np.longdouble)),
        )
    )


def _frame(columns: dict[str, list[Any]]) -> Any:
    pd = pytest.importorskip("pandas")
    return pd.DataFrame(columns)


def _ddf(columns: dict[str, list[Any]]) -> Any:
    """A Dask DataFrame of one row per partition (so the second row is partition 1)."""
    dd = pytest.importorskip("dask.dataframe")
    frame = _frame(columns)
    return dd.from_pandas(frame, npartitions=len(frame), sort=False)


def _dask_points(points: Any) -> Any:
    """A Dask array of one row per block (Dask's local scheduler: no cluster needed)."""
    da = pytest.importorskip("dask.array")
    return da.from_array(np.asarray(points), chunks=(1, -1))


def _dask_bag(items: list[Any]) -> Any:
    return pytest.importorskip("dask.bag").from_sequence(items)


def _marginals(domain: Domain, workloads: Any) -> Any:
    from dpstream.tabular.marginals import BatchMarginals

    return BatchMarginals.of(domain, workloads, np.zeros((1, 3), dtype=np.int64))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_is_refused_and_changes_nothing(case: Case) -> None:
    make, follow = FAMILIES[case.family]
    obj, twin = make(), make()
    with pytest.raises(case.exc, match=re.escape(case.message)) as info:
        case.bad(obj)
    # The exact type (a BudgetExceededError is not just a ValueError); numpy's MemoryError
    # is a private subclass.
    if case.exc is not MemoryError:
        assert type(info.value) is case.exc, f"{type(info.value).__name__} is not {case.exc}"
    if case.after == UNCHANGED:
        assert follow(obj) == follow(twin)
    elif case.after == RNG_UNCHANGED:
        assert follow_rng(obj) == follow_rng(twin)


def test_the_table_has_no_duplicate_rows() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


def test_online_depth_and_memory_limits() -> None:
    """A public ε so large that one point reaches a huge partition is refused up front."""
    # ε = 2^30: the first point would start level 30 (2^31 cell counters, over 200 GiB).
    s = OnlineSynthesizer(2**30, 2, method="paper", rng=Rng(seed=1))
    twin = OnlineSynthesizer(2**30, 2, method="paper", rng=Rng(seed=1))
    with pytest.raises(ValueError, match=r"would reach depth 30: .* more than the 16 GiB limit"):
        s.update([[0.5, 0.5]])
    assert s.to_bytes() == twin.to_bytes() and s.t == 0
    # ε = 2^45: the partition would pass the depth limit of 40.
    s = OnlineSynthesizer(2**45, 2, method="paper", rng=Rng(seed=1))
    with pytest.raises(ValueError, match="would pass depth 40"):
        s.update([[0.5, 0.5]])
    assert s.t == 0


def test_empty_batches_are_accepted_and_change_nothing() -> None:
    p, twin = make_privhp(), make_privhp()
    p.update(np.zeros((0, 2)))
    assert follow_privhp(p) == follow_privhp(twin)
    s, twin_s = make_online(), make_online()
    s.update(np.zeros((0, 2)))
    assert follow_online(s) == follow_online(twin_s)
    c, twin_c = make_counter(), make_counter()
    assert c.run(np.zeros((0, 2), dtype=np.int64)).shape == (0, 2)
    assert follow_counter(c) == follow_counter(twin_c)
    k, twin_k = make_cms(), make_cms()
    k.update([], [])
    assert follow_sketch(k) == follow_sketch(twin_k)
    assert noise.discrete_laplace(1, 0).shape == (0,)


# ---------------------------------------------------------------------------- state files


def _fix_crc(body: bytes) -> bytes:
    return body + zlib.crc32(body).to_bytes(4, "little")


def _sample_states() -> dict[str, bytes]:
    """One valid encoding of every kind that dpstream.load reads."""
    inh = counters.InhomogeneousSparseCounter.online(1, 2, 2, rng=Rng(seed=1))
    inh.run(np.ones(12, dtype=np.int64))
    sparse = counters.SparseCounter(1, 50, rng=Rng(seed=1))
    sparse.run(np.ones(12, dtype=np.int64))
    counter = counters.Counter("hybrid", 1, 2, rng=Rng(seed=1))
    counter.run(np.ones((9, 2), dtype=np.int64))
    return {
        "PrivHP": make_privhp().to_bytes(),
        "TreeGenerator": make_generator().to_bytes(),
        "CountMinSketch": make_cms().to_bytes(),
        "CountSketch": make_cs().release(1, rng=Rng(seed=1)).to_bytes(),
        "OnlineSynthesizer": make_online().to_bytes(),
        "Counter": counter.to_bytes(),
        "SparseCounter": sparse.to_bytes(),
        "InhomogeneousSparseCounter": inh.to_bytes(),
    }


STATES = _sample_states()
TABLE_STATE = make_table().to_bytes()

DECODERS: dict[str, Callable[[bytes], object]] = {
    "PrivHP": PrivHP.from_bytes,
    "TreeGenerator": TreeGenerator.from_bytes,
    "CountMinSketch": CountMinSketch.from_bytes,
    "CountSketch": CountSketch.from_bytes,
    "OnlineSynthesizer": OnlineSynthesizer.from_bytes,
    "Counter": counters.Counter.from_bytes,
    "SparseCounter": counters.SparseCounter.from_bytes,
    "InhomogeneousSparseCounter": counters.InhomogeneousSparseCounter.from_bytes,
    "TabularStream": TabularStream.from_bytes,
}


@dataclass(frozen=True)
class FileCase:
    input: str
    message: str
    corrupt: Callable[[bytes], bytes]


def _newer(data: bytes) -> bytes:
    body = bytearray(data[:-4])
    body[8:10] = (99).to_bytes(2, "little")
    return _fix_crc(bytes(body))


def _older(data: bytes) -> bytes:
    body = bytearray(data[:-4])
    body[8:10] = (0).to_bytes(2, "little")
    return _fix_crc(bytes(body))


def _flip(data: bytes) -> bytes:
    bad = bytearray(data)
    bad[len(bad) // 2] ^= 0x10
    return bytes(bad)


def _flip_member(data: bytes) -> bytes:
    """A TabularStream state (an .npz zip) with a byte flipped inside the first array member
    past its middle. Why not the middle byte itself: a zip's local headers repeat fields
    (sizes) that readers take from the central directory, so a flip there leaves the data
    intact and decodable; a member's content is checked (CRC-32)."""
    at = data.index(b"\x93NUMPY", len(data) // 2) + 20
    bad = bytearray(data)
    bad[at] ^= 0x10
    return bytes(bad)


def _length(data: bytes) -> bytes:
    body = bytearray(data[:-4])
    body[12:20] = struct.pack("<Q", 2**64 - 1)
    return _fix_crc(bytes(body))


def _unknown_kind(data: bytes) -> bytes:
    body = bytearray(data[:-4])
    body[10:12] = (99).to_bytes(2, "little")
    return _fix_crc(bytes(body))


FILE_CASES = [
    FileCase("empty file", "invalid dpstream state: truncated (0 bytes)", lambda d: b""),
    FileCase(
        "truncated (last byte missing)", "invalid dpstream state: length mismatch", lambda d: d[:-1]
    ),
    FileCase(
        "truncated to the header", "invalid dpstream state: length mismatch", lambda d: d[:24]
    ),
    FileCase("a trailing byte", "invalid dpstream state: length mismatch", lambda d: d + b"\0"),
    FileCase("one flipped bit", "invalid dpstream state: checksum mismatch", _flip),
    FileCase(
        "newer format version (CRC fixed)",
        "invalid dpstream state: written in a newer format (format version 99",
        _newer,
    ),
    FileCase(
        "format version 0 (CRC fixed)", "format version 0 is not supported by this build", _older
    ),
    FileCase(
        "unknown object kind (CRC fixed)",
        "invalid dpstream state: unknown object kind 99",
        _unknown_kind,
    ),
    FileCase(
        "payload length 2^64 - 1 (CRC fixed)", "invalid dpstream state: length mismatch", _length
    ),
    FileCase(
        "not a dpstream file",
        "not a dpstream file (bad magic bytes)",
        lambda d: b"PK\x03\x04" + d[4:],
    ),
]


@pytest.mark.parametrize("kind", sorted(STATES))
@pytest.mark.parametrize("case", FILE_CASES, ids=[c.input for c in FILE_CASES])
def test_broken_state_is_refused_by_from_bytes_and_load(
    kind: str, case: FileCase, tmp_path: Path
) -> None:
    bad = case.corrupt(STATES[kind])
    with pytest.raises(ValueError, match=re.escape(case.message)):
        DECODERS[kind](bad)
    path = tmp_path / "state.dpst"
    path.write_bytes(bad)
    with pytest.raises(ValueError, match=re.escape(case.message)):
        dpstream.load(path)


@pytest.mark.parametrize("kind", sorted(STATES))
def test_state_of_another_kind_is_refused(kind: str) -> None:
    for other, data in STATES.items():
        if other == kind or {kind, other} == {"CountMinSketch", "CountSketch"}:
            continue
        with pytest.raises(ValueError, match=r"expected a \w+, found a "):
            DECODERS[kind](data)
    # A count sketch is not a count-min sketch (same encoded kind, different estimator).
    if kind in ("CountMinSketch", "CountSketch"):
        other = "CountSketch" if kind == "CountMinSketch" else "CountMinSketch"
        with pytest.raises(ValueError, match="not a count"):
            DECODERS[kind](STATES[other])


def test_valid_states_load() -> None:
    # Several samples are seeded (for reproducible tests): loading them needs the opt-in.
    for kind, data in STATES.items():
        decode: Any = DECODERS[kind]
        seeded_ok = {"allow_seeded": True} if kind in SEEDED_KINDS else {}
        assert kind in {c.__name__ for c in type(decode(data, **seeded_ok)).__mro__}
    assert isinstance(TabularStream.from_bytes(TABLE_STATE, allow_seeded=True), TabularStream)


# ------------------------------------------------------- seeded checkpoints, the ε ledger

#: Classes whose bytes record seeded noise: loading those needs ``allow_seeded=True``.
SEEDED_KINDS = {
    "OnlineSynthesizer",
    "Counter",
    "SparseCounter",
    "InhomogeneousSparseCounter",
    "TreeGenerator",
    "CountSketch",
    "TabularStream",
}
SEEDED_MESSAGE = "NOT PRIVATE; pass allow_seeded=True to load it anyway"


def _spent_sketch() -> bytes:
    s = make_cms()  # budget 1
    s.release(1)
    return s.to_bytes()


def _legacy_sketch() -> bytes:
    """A sketch as dpstream wrote it before the ε ledger (format version 1): kind,
    released flag, rows, width, hashes, cells."""
    s = make_cms()
    cells = s.cells().ravel()
    payload = struct.pack("<BBQQ", 0, 0, s.rows, s.width)
    for h in s.hashes():
        payload += b"".join(v.to_bytes(16, "little") for v in h)
    payload += struct.pack("<Q", cells.size) + cells.astype("<i8").tobytes()
    return _fix_crc(b"DPSTREAM" + struct.pack("<HHQ", 1, 2, len(payload)) + payload)


@dataclass(frozen=True)
class LoadCase:
    """A refusal met when loading (``from_bytes`` and ``dpstream.load``) or when using
    the loaded object (``use``)."""

    family: str
    input: str
    exc: type[BaseException]
    message: str
    data: Callable[[], bytes]
    use: Callable[[Any], object] | None = None
    after: str = NOTHING_LOADED


LOAD_CASES = [
    LoadCase("Counter", "seeded checkpoint, no allow_seeded=True", ValueError,
             "these bytes hold a seeded Counter", lambda: STATES["Counter"]),
    LoadCase("SparseCounter", "seeded checkpoint, no allow_seeded=True", ValueError,
             "these bytes hold a seeded SparseCounter", lambda: STATES["SparseCounter"]),
    LoadCase("InhomogeneousSparseCounter", "seeded checkpoint, no allow_seeded=True",
             ValueError, "these bytes hold a seeded InhomogeneousSparseCounter",
             lambda: STATES["InhomogeneousSparseCounter"]),
    LoadCase("TreeGenerator", "release with seeded noise, no allow_seeded=True", ValueError,
             "these bytes hold a seeded TreeGenerator", lambda: STATES["TreeGenerator"]),
    LoadCase("OnlineSynthesizer", "seeded checkpoint, no allow_seeded=True", ValueError,
             "these bytes hold a seeded OnlineSynthesizer",
             lambda: STATES["OnlineSynthesizer"]),
    LoadCase("TabularStream", "seeded checkpoint, no allow_seeded=True", ValueError,
             "these bytes hold a seeded TabularStream", lambda: TABLE_STATE),
    LoadCase("CountSketch", "release with seeded noise, no allow_seeded=True", ValueError,
             "these bytes hold a seeded sketch release", lambda: STATES["CountSketch"]),
    LoadCase("CountMinSketch", "budget spent before the save: release(1)", BudgetExceededError,
             "this release would spend ε = 1 but only 0 of the budget 1 remains",
             _spent_sketch, lambda s: s.release(1), UNCHANGED),
    LoadCase("CountMinSketch", "saved before the ledger was recorded: release(1)",
             BudgetExceededError, "only 0 of the budget 0 remains", _legacy_sketch,
             lambda s: s.release(1), UNCHANGED),
]  # fmt: skip


@pytest.mark.parametrize("case", LOAD_CASES, ids=[f"{c.family}: {c.input}" for c in LOAD_CASES])
def test_seeded_and_spent_checkpoints_are_refused(case: LoadCase, tmp_path: Path) -> None:
    """Issue 28: a seeded checkpoint resumed silently, and a loaded sketch had a fresh ε
    ledger. Both refusals hold for ``from_bytes`` and for ``dpstream.load``."""
    data = case.data()
    path = tmp_path / "state"
    path.write_bytes(data)
    decode: Any = DECODERS[case.family]
    loaders: list[Callable[[], Any]] = [lambda: decode(data), lambda: dpstream.load(path)]
    if case.use is None:
        for load in loaders:
            with pytest.raises(case.exc, match=re.escape(case.message)) as refused:
                load()
            assert SEEDED_MESSAGE in str(refused.value)
        for loaded in (decode(data, allow_seeded=True), dpstream.load(path, allow_seeded=True)):
            assert case.family in {c.__name__ for c in type(loaded).__mro__}
            assert "NOT PRIVATE" in repr(loaded)
        return
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy sketch warns at load
        objects = [load() for load in loaders]
    for obj in objects:
        before = obj.to_bytes()
        with pytest.raises(case.exc, match=re.escape(case.message)) as info:
            case.use(obj)
        assert type(info.value) is case.exc
        assert obj.to_bytes() == before


def test_a_legacy_sketch_warns_that_its_ledger_is_exhausted() -> None:
    with pytest.warns(UserWarning, match="did not record its ε ledger"):
        s = CountMinSketch.from_bytes(_legacy_sketch())
    assert (s.epsilon_spent, s.epsilon_remaining) == (0, 0)
    assert s.cells().tolist() == make_cms().cells().tolist()


def test_non_bytes_are_a_type_error() -> None:
    for kind in ("PrivHP", "OnlineSynthesizer", "Counter", "SparseCounter", "TabularStream"):
        with pytest.raises(TypeError, match="data must be bytes, got str"):
            DECODERS[kind]("DPSTREAM")  # type: ignore[arg-type]


def _forged_table(header: object) -> bytes:
    """A well-formed container whose header was written by someone else."""
    from dpstream.tabular import checkpoint

    if isinstance(header, dict):
        header = {"format": checkpoint._FORMAT, **header}
    buf = io.BytesIO()
    np.savez(buf, header=np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
    return checkpoint._MAGIC + buf.getvalue()


def test_broken_tabular_state_is_refused(tmp_path: Path) -> None:
    cases = {
        "truncated": TABLE_STATE[: len(TABLE_STATE) // 2],
        "flipped": _flip_member(TABLE_STATE),
        "header only": TABLE_STATE[:16],
        "foreign": b"DPSTREAM-TABULAR" + b"\0" * 64,
        "forged header (a domain of the wrong type)": _forged_table({"domain": "color"}),
        "forged header (not an object)": _forged_table([1, 2]),
        "forged header (no config)": _forged_table({"domain": {"a": 2}}),
    }
    for name, bad in cases.items():
        with pytest.raises(ValueError, match="TabularStream state") as info:
            TabularStream.from_bytes(bad)
        assert type(info.value) is ValueError, name
        path = tmp_path / f"{name}.dpst"
        path.write_bytes(bad)
        with pytest.raises(ValueError, match="TabularStream state"):
            dpstream.load(path)


# ---------------------------------------------------------------------------- hypothesis

_ALL_DECODERS: list[Callable[[bytes], object]] = [
    *DECODERS.values(),
    lambda b: dpstream.sketch.CountMinSketch.from_bytes(b),
]


def _load_bytes(data: bytes, tmp: Path) -> object:
    tmp.write_bytes(data)
    return dpstream.load(tmp)


def _only_value_errors(data: bytes, tmp: Path) -> None:
    for decode in [*_ALL_DECODERS, lambda b: _load_bytes(b, tmp)]:
        try:
            obj = decode(data)
        except ValueError:
            continue
        # A decode that succeeds must give a usable object.
        _exercise(obj)


def _exercise(obj: object) -> None:
    """Use a decoded object a little: every error must be a ValueError too."""
    try:
        if isinstance(obj, TreeGenerator):
            if obj.dim <= 64:
                y = obj.sample(4, rng=Rng(seed=1))
                assert ((y >= 0) & (y <= 1)).all()
        elif isinstance(obj, PrivHP):
            if obj.dim <= 64:
                obj.update(np.full((2, obj.dim), 0.5))
        elif isinstance(obj, OnlineSynthesizer):
            if obj.dim <= 8 and obj.depth <= 12:
                obj.update(np.full((2, obj.dim), 0.5))
                obj.release(3)
        elif isinstance(obj, (counters.SparseCounter, counters.InhomogeneousSparseCounter)):
            obj.step(1)
        elif isinstance(obj, counters.Counter) and obj.dim <= 64:
            obj.step(np.ones(obj.dim, dtype=np.int64))
        obj.to_bytes()  # type: ignore[attr-defined]
    except (ValueError, OverflowError):
        pass  # a refused step (horizon reached, a count at its limit, released)


_MUTATIONS = st.lists(
    st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)),
    min_size=1,
    max_size=4,
)


def _mutate(data: bytes, edits: list[tuple[int, int]], fix_crc: bool) -> bytes:
    out = bytearray(data)
    for pos, value in edits:
        out[pos % len(out)] = value
    if fix_crc and len(out) >= 24:
        return _fix_crc(bytes(out[:-4]))
    return bytes(out)


SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(data=st.binary(max_size=256))
def test_random_bytes_give_value_errors(data: bytes, tmp_path: Path) -> None:
    _only_value_errors(data, tmp_path / "random.dpst")
    _only_value_errors(b"DPSTREAM\x01\x00" + data, tmp_path / "random.dpst")
    _only_value_errors(b"DPSTREAM-TABULAR" + data, tmp_path / "random.dpst")


@SETTINGS
@given(
    kind=st.sampled_from(sorted(STATES)),
    edits=_MUTATIONS,
    fix_crc=st.booleans(),
    cut=st.integers(min_value=0, max_value=64),
)
def test_mutated_states_give_value_errors(
    kind: str, edits: list[tuple[int, int]], fix_crc: bool, cut: int, tmp_path: Path
) -> None:
    """Mutations of valid state, with the checksum fixed up half of the time (so that
    the payload decoders see them), and truncations."""
    data = STATES[kind]
    _only_value_errors(_mutate(data, edits, fix_crc), tmp_path / "mutated.dpst")
    _only_value_errors(data[: max(0, len(data) - cut)], tmp_path / "cut.dpst")
    if fix_crc and cut:
        # A payload cut short but wrapped in a consistent header and checksum.
        body = bytearray(data[:-4][: max(24, len(data) - 4 - cut)])
        body[12:20] = struct.pack("<Q", len(body) - 20)
        _only_value_errors(_fix_crc(bytes(body)), tmp_path / "rewrapped.dpst")


@SETTINGS
@given(edits=_MUTATIONS, cut=st.integers(min_value=0, max_value=400))
def test_mutated_tabular_states_give_value_errors(
    edits: list[tuple[int, int]], cut: int, tmp_path: Path
) -> None:
    for bad in (_mutate(TABLE_STATE, edits, False), TABLE_STATE[: len(TABLE_STATE) - cut]):
        with contextlib.suppress(ValueError):
            TabularStream.from_bytes(bad)
        path = tmp_path / "table.dpst"
        path.write_bytes(bad)
        with contextlib.suppress(ValueError):
            dpstream.load(path)


@SETTINGS
@given(
    rows=st.integers(min_value=0, max_value=6),
    dim=st.integers(min_value=1, max_value=4),
    bits=st.lists(st.integers(min_value=0, max_value=2**64 - 1), max_size=24),
)
def test_arbitrary_float_bits_are_validated(rows: int, dim: int, bits: list[int]) -> None:
    """Batches of arbitrary f64 bit patterns and shapes: accepted exactly when every
    value is in [0, 1] and the shape is (n, dim); refused with ValueError otherwise, and
    the objects unchanged."""
    values = np.array(bits, dtype=np.uint64).view(np.float64)
    take = min(len(values), rows * dim)
    batch = values[:take]
    # A whole number of rows is shaped (n, dim); otherwise the batch stays 1-D (wrong shape).
    shaped = batch.reshape(-1, dim) if take % dim == 0 else batch
    valid = take % dim == 0 and bool(np.all((batch >= 0) & (batch <= 1)))
    p = PrivHP(1, dim, k=2, width=4, depth=4, rng=Rng(seed=1))
    s = OnlineSynthesizer(1, dim, rng=Rng(seed=1))
    for obj in (p, s):
        before = obj.to_bytes()
        try:
            obj.update(shaped)
        except ValueError as e:
            assert not valid, f"a valid batch was refused: {e}"
            assert obj.to_bytes() == before
        else:
            assert valid, f"a bad batch was accepted: {batch!r}"

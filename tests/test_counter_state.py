"""Checkpoints of the counters: to_bytes / from_bytes and dpstream.save / load.

* Round trip: a loaded counter has the same public state and release and re-encodes to
  the same bytes, for every kind, for scalar and vector counters, and for both sparse
  counters.
* Exact continuation: with the same seeded generator, save at step ``k``, load and run
  on gives the releases of an uninterrupted run.
* Refusal: every flipped byte, every truncation, a foreign kind and non-bytes input are
  refused with a clear error (``ValueError`` / ``TypeError``), never a crash.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import dpstream
import numpy as np
import pytest
from _helpers import assert_truncations_and_flips_refused
from conftest import seeded_checkpoint_loads
from dpstream import Rng
from dpstream.counters import KINDS, Counter, InhomogeneousSparseCounter, SparseCounter

BOUNDED = ("block", "binary-tree")
STEPS = 80


def make(kind: str, dim: int, rng: Rng | None = None) -> Counter:
    horizon = STEPS if kind in BOUNDED else None
    return Counter(kind, Fraction(1, 2), dim, horizon=horizon, rng=rng)  # type: ignore[arg-type]


def increments(dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(-3, 4, size=(STEPS, dim), dtype=np.int64)


def values(n: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).random(n) < 0.4).astype(np.int64)


def assert_continues_after_load(
    make_counter: Callable[[Rng], Any],
    load: Callable[..., Any],
    xs: np.ndarray,
    at: int,
    same: tuple[str, ...],
    check: Callable[[Any, Any], None] = lambda loaded, first: None,
) -> None:
    """A counter ``make_counter(rng)`` saved after ``xs[:at]`` and loaded (``load``) with
    the same seeded generator re-encodes to the saved bytes, has the attributes ``same``
    (and whatever ``check(loaded, first)`` asserts) of the saved one, ``time == at``, and
    then releases what an uninterrupted run over ``xs`` releases."""
    whole = make_counter(Rng(seed=at)).run(xs)
    rng = Rng(seed=at)
    first = make_counter(rng)
    head = first.run(xs[:at])
    data = first.to_bytes()
    loaded = load(data, rng=rng, allow_seeded=True)
    assert loaded.to_bytes() == data
    assert [getattr(loaded, name) for name in same] == [getattr(first, name) for name in same]
    assert getattr(loaded, "time", at) == at
    check(loaded, first)
    np.testing.assert_array_equal(np.concatenate([head, loaded.run(xs[at:])]), whole)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dim", [1, 3])
@pytest.mark.parametrize("at", [0, 1, 7, 16, 33, 64])
def test_counter_continues_exactly_after_load(kind: str, dim: int, at: int) -> None:
    def check(loaded: Counter, first: Counter) -> None:
        np.testing.assert_array_equal(loaded.release, first.release)
        assert loaded.seeded
        assert "NOT PRIVATE" in repr(loaded)

    assert_continues_after_load(
        lambda rng: make(kind, dim, rng=rng),
        Counter.from_bytes,
        increments(dim, seed=at),
        at,
        ("kind", "epsilon", "dim", "horizon"),
        check,
    )


def test_bounded_counter_keeps_its_horizon() -> None:
    c = make("binary-tree", 2, rng=Rng(seed=1))
    c.run(increments(2))
    loaded = Counter.from_bytes(c.to_bytes(), allow_seeded=True)
    assert loaded.time == loaded.horizon == STEPS
    with pytest.raises(ValueError, match="horizon"):
        loaded.step([0, 0])


@pytest.mark.parametrize("at", [0, 1, 50, 199, 300])
def test_sparse_counter_continues_exactly_after_load(at: int) -> None:
    assert_continues_after_load(
        lambda rng: SparseCounter(1, 300, rng=rng),
        SparseCounter.from_bytes,
        values(300, seed=at),
        at,
        ("epsilon", "horizon", "threshold", "release", "segments"),
    )


def inhomogeneous(schedule: str, rng: Rng) -> InhomogeneousSparseCounter:
    if schedule == "table":
        return InhomogeneousSparseCounter(
            Fraction(1, 2), 1, [1, Fraction(1, 2), Fraction(2, 3), 1, 1, 1, 1], rng=rng
        )
    return InhomogeneousSparseCounter.online(1, 2, 1, rng=rng)


@pytest.mark.parametrize("schedule", ["table", "online"])
@pytest.mark.parametrize("at", [0, 1, 3, 4, 31, 32, 100])
def test_inhomogeneous_counter_continues_exactly_after_load(schedule: str, at: int) -> None:
    def check(loaded: InhomogeneousSparseCounter, first: InhomogeneousSparseCounter) -> None:
        assert loaded.level_epsilon(3) == first.level_epsilon(3)

    assert_continues_after_load(
        lambda rng: inhomogeneous(schedule, rng),
        InhomogeneousSparseCounter.from_bytes,
        values(200, seed=at),
        at,
        ("time_epsilon", "start_level", "first_time", "level", "release"),
        check,
    )


def all_counters() -> list[Counter | SparseCounter | InhomogeneousSparseCounter]:
    out: list[Counter | SparseCounter | InhomogeneousSparseCounter] = []
    for kind in KINDS:
        c = make(kind, 2, rng=Rng(seed=5))
        c.run(increments(2)[:21])
        out.append(c)
    s = SparseCounter(Fraction(1, 3), 100, rng=Rng(seed=5))
    s.run(values(60))
    out.append(s)
    h = inhomogeneous("table", Rng(seed=5))
    h.run(values(40))
    out.append(h)
    return out


@pytest.mark.parametrize("index", range(len(KINDS) + 2))
def test_save_and_load_files(tmp_path: Path, index: int) -> None:
    c = all_counters()[index]
    path = tmp_path / "counter.dps"
    dpstream.save(c, path)
    # Every counter's bytes record its seeded noise: loading needs the opt-in.
    with pytest.raises(ValueError, match=f"seeded {type(c).__name__} "):
        dpstream.load(path)
    loaded = dpstream.load(path, allow_seeded=True)
    assert type(loaded) is type(c)
    assert loaded.to_bytes() == c.to_bytes()
    assert loaded.time == c.time
    np.testing.assert_array_equal(loaded.release, c.release)
    # No generator was stored: the loaded counter draws from a fresh OS key, and
    # stays marked seeded (its noise so far is reproducible).
    assert loaded.seeded
    assert "NOT PRIVATE" in repr(loaded)
    before = loaded.time
    if isinstance(loaded, Counter):
        loaded.step([1, -1])
    else:
        loaded.step(1)
    assert loaded.time == before + 1


@pytest.mark.parametrize("index", range(len(KINDS) + 2))
def test_corrupted_truncated_and_foreign_bytes_are_refused(index: int) -> None:
    c = all_counters()[index]
    cls = type(c)
    data = c.to_bytes()
    opt_in = {"allow_seeded": True}  # every sample is seeded
    assert_truncations_and_flips_refused(cls.from_bytes, data, 0x20)
    for other in (Counter, SparseCounter, InhomogeneousSparseCounter):
        if other is not cls:
            with pytest.raises(ValueError, match=f"expected a {other.__name__}"):
                other.from_bytes(data)
    # bytearray and memoryview are fine; other types are not.
    assert cls.from_bytes(bytearray(data), **opt_in).to_bytes() == data
    assert cls.from_bytes(memoryview(data), **opt_in).to_bytes() == data
    with pytest.raises(TypeError, match="bytes"):
        cls.from_bytes("not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="rng"):
        cls.from_bytes(data, rng=7)  # type: ignore[arg-type]


def test_load_refuses_a_corrupted_file(tmp_path: Path) -> None:
    path = tmp_path / "counter.dps"
    dpstream.save(all_counters()[0], path)
    raw = bytearray(path.read_bytes())
    raw[30] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match="checksum"):
        dpstream.load(path)


def test_loaded_counter_without_rng_is_private_and_tied_to_its_checkpoint() -> None:
    """Issue 41: the noise of every step is keyed by the checkpoint's master key, the
    time and a digest of the increments so far. 200 loads, each with its own fresh OS
    generator, fed the same increments give one release (nothing to average); other
    increments give other noise (not the same noise plus the data's difference)."""
    c = make("hybrid", 1)
    c.run(increments(1)[:10])
    data = c.to_bytes()
    zeros = np.zeros((6, 1), dtype=np.int64)
    runs = set()
    for _ in range(200):
        loaded = Counter.from_bytes(data)
        assert not loaded.seeded
        runs.add(loaded.run(zeros).tobytes())
    assert len(runs) == 1
    ones = np.ones((6, 1), dtype=np.int64)
    other = Counter.from_bytes(data).run(ones)
    same = np.frombuffer(runs.pop(), dtype=np.int64).reshape(6, 1)
    # Steps 11-16 each close a value of scale ≥ 2/ε = 4 keyed by other data: the
    # differences are not all the exact 1, 2, ..., 6.
    assert not np.array_equal(other - same, np.cumsum(ones, axis=0))


_SPARSE, _INHOMOGENEOUS = 6, 7


def _without_sparse_keys(payload: bytes, kind: int) -> bytes:
    """A version-3 sparse counter's payload (after its flags byte) without its master key
    and its state's run start and digest: the layout of versions 1 and 2."""

    def rational(at: int) -> int:
        for _ in range(2):
            (n,) = struct.unpack("<Q", payload[at : at + 8])
            at += 8 + n
        return at

    at = rational(0)
    if kind == _SPARSE:
        at += 16  # horizon, total
    else:
        at += 4  # r_0
        tag, at = payload[at], at + 1
        if tag == 0:
            (n,) = struct.unpack("<Q", payload[at : at + 8])
            at += 8
            for _ in range(n):
                at = rational(at)
        else:
            at = rational(at) + 8
        at += 16  # time, total
    key = 33 if payload[at] == 1 else 1
    rest = payload[at + key :]
    if kind == _SPARSE:
        return payload[:at] + rest[24:]
    if rest[0] == 0:
        return payload[:at] + rest
    return payload[:at] + rest[: 1 + 4 + 16] + rest[1 + 4 + 16 + 24 :]


def _as_version_1(data: bytes) -> bytes:
    """A version-2 encoding of a sparse counter (or a TreeGenerator), or a version-3
    encoding of a counter, rewritten as version 1 (no flags byte, and no master key),
    as dpstream wrote it before the seeded flag."""
    version, kind = struct.unpack("<HH", data[8:12])
    payload = data[21:-4]  # header (20 bytes), then the flags byte
    if kind == 5 and version == 3:  # a Counter: drop the master key (flag, key, digest)
        payload = payload[: -(1 + 32 + 16) if payload[-49] == 1 else -1]
    if kind in (_SPARSE, _INHOMOGENEOUS) and version == 3:
        payload = _without_sparse_keys(payload, kind)
    body = data[:8] + struct.pack("<HHQ", 1, kind, len(payload)) + payload
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize("kind", KINDS)
def test_a_seeded_counter_stays_seeded_after_a_save(kind: str, tmp_path: Path) -> None:
    """Issue 28: ``Counter.from_bytes`` dropped the seeded bit (a loaded seeded counter
    said nothing of NOT PRIVATE); now the bit is in the bytes and loading needs the
    opt-in."""
    c = make(kind, 2, rng=Rng(seed=11))
    c.run(increments(2)[:9])
    data = c.to_bytes()
    loaded = seeded_checkpoint_loads(c, Counter.from_bytes, "Counter", tmp_path / "c.dps")
    loaded.append(Counter.from_bytes(data, rng=Rng(), allow_seeded=True))
    for x in loaded:  # with a fresh OS generator, or another one: still marked
        assert x.seeded
        assert "NOT PRIVATE" in repr(x)
        assert x.to_bytes() == data  # saved again, still marked
    # A private counter needs no opt-in and stays private.
    p = make(kind, 2)
    p.run(increments(2)[:9])
    back = Counter.from_bytes(p.to_bytes())
    assert not back.seeded and "NOT PRIVATE" not in repr(back)
    # Continued with a seeded generator, it is seeded, and so are its bytes.
    mixed = Counter.from_bytes(p.to_bytes(), rng=Rng(seed=1))
    assert mixed.seeded
    with pytest.raises(ValueError, match="seeded Counter"):
        Counter.from_bytes(mixed.to_bytes())


def test_a_counter_saved_before_the_seeded_flag_loads() -> None:
    c = make("hybrid", 2, rng=Rng(seed=12))
    c.run(increments(2)[:9])
    old = _as_version_1(c.to_bytes())
    loaded = Counter.from_bytes(old)  # the flag did not exist: not refused
    assert not loaded.seeded
    assert loaded.time == 9
    np.testing.assert_array_equal(loaded.release, c.release)


def _sparse(cls_name: str, rng: Rng | None) -> SparseCounter | InhomogeneousSparseCounter:
    if cls_name == "SparseCounter":
        return SparseCounter(Fraction(1, 3), 100, rng=rng)
    return inhomogeneous("table", rng if rng is not None else Rng())


@pytest.mark.parametrize("cls_name", ["SparseCounter", "InhomogeneousSparseCounter"])
def test_a_seeded_sparse_counter_stays_seeded_after_a_save(cls_name: str, tmp_path: Path) -> None:
    """Issue 28: the sparse counters' bytes did not record the seeded bit (a loaded
    seeded counter said nothing of NOT PRIVATE). Now they do, loading one needs the
    opt-in, and bytes saved before the flag (version 1) load as not seeded and
    continue."""
    c = _sparse(cls_name, Rng(seed=12))
    xs = values(80, seed=3)
    c.run(xs[:50])
    cls = type(c)
    for loaded in seeded_checkpoint_loads(c, cls.from_bytes, cls_name, tmp_path / "c.dps"):
        assert loaded.seeded
    # A private counter needs no opt-in and stays private.
    p = _sparse(cls_name, None)
    p.run(xs[:50])
    back = cls.from_bytes(p.to_bytes())
    assert not back.seeded and "NOT PRIVATE" not in repr(back)
    # Version 1 (before the flag and the master key): loads without the opt-in, as not
    # seeded, with the same releases; it continues, drawing a master key.
    rng = Rng(seed=4)
    d = _sparse(cls_name, rng)
    d.run(xs[:50])
    v1 = _as_version_1(d.to_bytes())
    assert not cls.from_bytes(v1).seeded
    old = cls.from_bytes(v1, rng=Rng(seed=5))
    assert old.seeded  # it draws from a seeded generator from now on
    assert (old.time, old.release) == (d.time, d.release)
    assert len(old.run(xs[50:])) == 30


@pytest.mark.parametrize("cls_name", ["SparseCounter", "InhomogeneousSparseCounter"])
def test_sparse_counter_loads_fed_the_same_values_release_the_same(cls_name: str) -> None:
    """A private sparse counter's checkpoint holds its master key: 200 loads fed the same
    values give the same releases (the independence of other values' noise is tested in
    ``counters::sparse``)."""
    c = SparseCounter(8, 2000) if cls_name == "SparseCounter" else _sparse(cls_name, None)
    xs = values(250, seed=5)  # the table schedule's levels end at step 256
    c.run(xs[:100])
    saved = c.to_bytes()
    cls = type(c)
    first = cls.from_bytes(saved).run(xs[100:])
    assert len(set(first.tolist())) > 1  # noise drawn after the load
    for _ in range(199):
        assert np.array_equal(cls.from_bytes(saved).run(xs[100:]), first)

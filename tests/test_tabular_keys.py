"""The tabular stream's key ring: one continuation per checkpoint (:mod:`dpstream.tabular.keys`).

A checkpoint holds the stream's secret master key; every step's noise comes from a
generator derived from it, the step's index and a keyed digest of every batch so far. So
a checkpoint loaded any number of times and fed the same batches releases the same
values, byte for byte (its noisy values cannot be averaged), and fed another batch gives
independent noise (the difference of two continuations is not exact).
"""

from __future__ import annotations

import io

import numpy as np
import pytest
from dpstream import Rng
from dpstream._rng import KeyRing
from dpstream.tabular import Domain, ModelOptions, Paper, TabularStream

DOMAIN = Domain({"a": 3, "b": 2, "c": 3})
LOADS = 200


def rows(n: int, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    a = g.integers(0, 3, n)
    b = (a + (g.random(n) < 0.2)) % 2
    c = np.where(g.random(n) < 0.7, a, g.integers(0, 3, n))
    return np.stack([a, b, c], axis=1)


def arrays(s: TabularStream) -> dict[str, bytes]:
    """Every array of a stream's state (its noisy sums, exact counts, models and
    generators; the container's timestamps left out), as bytes."""
    npz = np.load(io.BytesIO(s.to_bytes()[len(b"DPSTREAM-TABULAR") :]), allow_pickle=False)
    return {k: npz[k].tobytes() for k in npz.files}


def continuation(raw: bytes, batches: list[np.ndarray]) -> tuple[bytes, dict[str, bytes]]:
    s = TabularStream.from_bytes(raw)
    for b in batches:
        s.step(b)
    return s.synthetic_codes().tobytes(), arrays(s)


def test_the_key_ring_gives_the_same_generators_for_the_same_contents() -> None:
    ring = KeyRing(Rng())
    ring.absorb([1, 2, 3])
    raw = ring.to_bytes()
    gen = ring.generator([4])
    assert repr(gen) == "Rng()" and not gen.seeded and repr(ring) == "KeyRing()"
    first = gen.integers(4)
    for _ in range(3):
        again = KeyRing.from_bytes(raw)
        assert np.array_equal(again.generator([4]).integers(4), first)
        assert np.array_equal(again.copy().generator([4]).integers(4), first)
    other = KeyRing.from_bytes(raw)
    other.absorb([5])
    assert not np.array_equal(other.generator([4]).integers(4), first)
    assert not np.array_equal(KeyRing.from_bytes(raw).generator([5]).integers(4), first)
    assert not np.array_equal(KeyRing(Rng()).generator([4]).integers(4), first)
    assert KeyRing(Rng(seed=1)).generator([0]).seeded
    with pytest.raises(ValueError, match="key ring"):
        KeyRing.from_bytes(raw[:-1])


def open_epoch_checkpoint() -> tuple[bytes, list[np.ndarray]]:
    """A default-policy stream (OS-seeded: private) checkpointed with an epoch open, and
    the batch that closes it (the epoch's measurements then cover rows from before the
    checkpoint)."""
    s = TabularStream(DOMAIN, 1, model=ModelOptions(iters=5))
    s.step(rows(200, 1))  # the first epoch: one batch
    s.step(rows(40, 2))  # the open epoch
    mech = s._epochs
    assert mech is not None and len(mech.epochs) == 1 and mech.t > mech.first
    later = [rows(600, 3)]  # closes the epoch whatever the noise (size ~840 > 2 x ~200)
    return s.to_bytes(), later


def test_default_policy_loads_fed_the_same_batches_release_the_same_bytes() -> None:
    raw, later = open_epoch_checkpoint()
    codes, state = continuation(raw, later)
    closed = TabularStream.from_bytes(raw)
    for b in later:
        closed.step(b)
    assert closed._epochs is not None and len(closed._epochs.epochs) == 2  # closed
    assert closed._epochs.epochs[1].tree and closed._epochs.epochs[1].first == 1
    for _ in range(LOADS - 1):
        assert continuation(raw, later) == (codes, state)


def test_default_policy_other_batches_give_independent_noise() -> None:
    raw, later = open_epoch_checkpoint()
    one = TabularStream.from_bytes(raw)
    two = TabularStream.from_bytes(raw)
    other = later[0].copy()
    other[0, 0] = (other[0, 0] + 1) % 3  # one record's value changed
    one.step(later[0])
    two.step(other)
    m1, m2 = one._epochs, two._epochs
    assert m1 is not None and m2 is not None
    # The closed epoch's noisy 1-way sums (they cover rows from before the checkpoint)
    # differ by more than the one record can (ℓ1 2): other noise.
    e1, e2 = m1.epochs[1], m2.epochs[1]
    gap = sum(float(np.abs(x - y).sum()) for x, y in zip(e1.ones, e2.ones, strict=True))
    assert gap > 4


def paper_checkpoint() -> tuple[bytes, list[np.ndarray]]:
    s = TabularStream(DOMAIN, 1, policy=Paper(k=2), model=ModelOptions(iters=5))
    s.step(rows(60, 11))
    s.step(rows(60, 12))
    return s.to_bytes(), [rows(60, 13 + k) for k in range(2)]


def test_paper_loads_fed_the_same_batches_release_the_same_bytes() -> None:
    raw, later = paper_checkpoint()
    first = continuation(raw, later)
    for _ in range(LOADS - 1):
        assert continuation(raw, later) == first


def test_paper_other_batches_give_independent_noise() -> None:
    raw, later = paper_checkpoint()
    other = later[0].copy()
    other[0, 1] = 1 - other[0, 1]
    _, one = continuation(raw, later[:1])
    _, two = continuation(raw, [other])
    # The size counter's release differs by more than one record can explain, or the
    # workload counters' releases do.
    s1 = TabularStream.from_bytes(raw)
    s2 = TabularStream.from_bytes(raw)
    s1.step(later[0])
    s2.step(other)
    gaps = [
        np.abs(c1.release - c2.release).sum()
        for c1, c2 in zip(s1._counters, s2._counters, strict=True)
        if c1 is not None and c2 is not None
    ]
    assert one != two and max(gaps) > 2


def test_a_seeded_stream_continues_as_it_runs() -> None:
    batches = [rows(80, 21 + k) for k in range(4)]
    for policy in (None, Paper(k=2)):
        options = {} if policy is None else {"policy": policy}
        run = TabularStream(DOMAIN, 1, model=ModelOptions(iters=5), rng=Rng(seed=5), **options)  # type: ignore[arg-type]
        cut = TabularStream(DOMAIN, 1, model=ModelOptions(iters=5), rng=Rng(seed=5), **options)  # type: ignore[arg-type]
        for b in batches[:2]:
            run.step(b)
            cut.step(b)
        cut = TabularStream.from_bytes(cut.to_bytes(), allow_seeded=True)
        for b in batches[2:]:
            run.step(b)
            cut.step(b)
        assert arrays(run) == arrays(cut)

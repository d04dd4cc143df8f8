"""Small helpers shared by test modules: resident memory, the refusals of the online
synthesizers, the shape of a junction tree."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dpstream
import numpy as np
import pytest

#: Skips a test that reads the resident set size where ``/proc/self/statm`` is missing.
needs_statm = pytest.mark.skipif(
    not os.path.exists("/proc/self/statm"), reason="needs /proc/self/statm"
)


def rss_bytes() -> int:
    """This process's resident set size, in bytes (``/proc/self/statm``)."""
    with open("/proc/self/statm") as f:
        resident_pages = int(f.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def rss_growth(
    first: Callable[[np.ndarray], Any], each: Callable[[int, np.ndarray], Any], batches: int = 100
) -> int:
    """How much the resident set grew (bytes) while ``each(i, batch)`` took batches
    ``1..batches-1`` of 10^5 seeded uniform points in [0, 1]^2, after ``first(batch)``
    took batch 0 (the batch array is reused)."""
    gen = np.random.default_rng(2024)
    batch = np.empty((100_000, 2))
    gen.random(out=batch)
    first(batch)
    baseline = rss_bytes()
    for i in range(batches - 1):
        gen.random(out=batch)
        each(i, batch)
    return rss_bytes() - baseline


def assert_bad_batches_change_nothing(synth: Any) -> None:
    """An online synthesizer refuses points outside [0, 1], NaN and a wrong dimension,
    and a release too large to allocate, with its state unchanged (no epoch closed)."""
    before = synth.to_bytes()
    for bad in ([[0.5, 1.5]], [[np.nan, 0.5]], np.zeros((3, 3))):
        with pytest.raises(ValueError):
            synth.update(bad)
    with pytest.raises(MemoryError):
        synth.release(2**62)
    assert synth.to_bytes() == before and synth.epochs == 0


def assert_running_intersection(tree: Any, cliques: Any, d: int) -> None:
    """A junction tree of ``d`` columns: every clique inside a node, every column in a
    node, and the nodes holding a column connected (exactly one of them has its parent
    outside them)."""
    for c in cliques:
        assert any(set(c) <= set(n) for n in tree.nodes), c
    for v in range(d):
        holding = {i for i, n in enumerate(tree.nodes) if v in n}
        assert holding, f"column {v} in no node"
        tops = [i for i in holding if tree.parent[i] not in holding]
        assert len(tops) == 1, (v, tree)


def assert_truncations_and_flips_refused(
    load: Callable[[bytes], Any], data: bytes, bit: int
) -> None:
    """``load`` refuses every strict prefix of ``data``, and ``data`` with ``bit`` flipped
    in any one byte, with the ``ValueError`` of an invalid state."""
    for i in range(len(data)):
        with pytest.raises(ValueError, match="invalid dpstream state"):
            load(data[:i])
        flipped = bytearray(data)
        flipped[i] ^= bit
        with pytest.raises(ValueError, match="invalid dpstream state"):
            load(bytes(flipped))


def assert_corrupt_checkpoints_refused(
    load: Callable[[bytes], Any], data: bytes, path: Path
) -> None:
    """As :func:`assert_truncations_and_flips_refused` (bit ``0x01``), and
    :func:`dpstream.load` refuses ``path`` holding ``data`` cut or extended by a byte, an
    empty file, the bare magic or zeros."""
    assert_truncations_and_flips_refused(load, data, 0x01)
    for bad in (data[:-1], data + b"\x00", b"", b"DPSTREAM", bytes(100)):
        path.write_bytes(bad)
        with pytest.raises(ValueError, match="invalid dpstream state"):
            dpstream.load(path)

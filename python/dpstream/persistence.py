"""Saving and loading dpstream objects: versioned, checksummed, atomic."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from dpstream import _core
from dpstream._files import atomic_write

__all__ = ["load", "save"]


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` (anything with ``to_bytes()``) to ``path`` atomically.

    The bytes go to a temporary file in the same directory, are flushed and
    fsynced, and the file is renamed over ``path``: a crash leaves either the
    old file or the new one, never half of one. State of an object in
    mid-stream (a summary, a counter, a synthesizer) holds exact counts:
    protect such a file like the raw data.
    """
    to_bytes = getattr(obj, "to_bytes", None)
    if to_bytes is None:
        raise TypeError(f"{type(obj).__name__} cannot be saved (it has no to_bytes method)")
    atomic_write(path, bytes(to_bytes()))


def load(path: str | os.PathLike[str]) -> Any:
    """Read an object written by :func:`save` (or by the Rust core).

    Raises:
        ValueError: the file is truncated, corrupted, of an unknown kind or of
            a newer format version.
    """
    data = Path(path).read_bytes()
    if data.startswith(b"DPSTREAM-TABULAR"):
        from dpstream.tabular import TabularStream

        return TabularStream.from_bytes(data)
    kind = _core.state_kind(data)
    if kind == "TreeGenerator":
        from dpstream.privhp import TreeGenerator

        return TreeGenerator.from_bytes(data)
    if kind == "Sketch":
        from dpstream.sketch import CountMinSketch, CountSketch

        inner = _core.LinearSketch.from_bytes(data)
        cls = CountMinSketch if inner.kind == "count-min" else CountSketch
        return cls._wrap(inner)
    if kind == "PrivHP":
        from dpstream.privhp import PrivHP

        return PrivHP.from_bytes(data)
    if kind == "OnlineSynthesizer":
        from dpstream.online import OnlineSynthesizer

        return OnlineSynthesizer.from_bytes(data)
    if kind in ("Counter", "SparseCounter", "InhomogeneousSparseCounter"):
        from dpstream import counters

        # A loaded counter draws from a fresh OS-seeded generator; use
        # ``<class>.from_bytes(data, rng=...)`` to give it one.
        cls = getattr(counters, kind)
        return cls.from_bytes(data)
    raise ValueError(f"cannot load objects of kind {kind}")

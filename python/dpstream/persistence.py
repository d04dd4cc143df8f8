"""Saving and loading dpstream objects: versioned, checksummed, atomic."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from dpstream import _core

__all__ = ["load", "save"]


def save(obj: Any, path: str | os.PathLike[str]) -> None:
    """Write ``obj`` (anything with ``to_bytes()``) to ``path`` atomically.

    The bytes go to a temporary file in the same directory, are flushed and
    fsynced, and the file is renamed over ``path``: a crash leaves either the
    old file or the new one, never half of one.
    """
    to_bytes = getattr(obj, "to_bytes", None)
    if to_bytes is None:
        raise TypeError(f"{type(obj).__name__} cannot be saved (it has no to_bytes method)")
    data = bytes(to_bytes())
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(target.parent or ".", os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def load(path: str | os.PathLike[str]) -> Any:
    """Read an object written by :func:`save` (or by the Rust core).

    Raises:
        ValueError: the file is truncated, corrupted, of an unknown kind or of
            a newer format version.
    """
    data = Path(path).read_bytes()
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

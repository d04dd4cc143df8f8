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


def load(path: str | os.PathLike[str], *, allow_seeded: bool = False) -> Any:
    """Read an object written by :func:`save` (or by the Rust core).

    A checkpoint of a seeded object (made with a seeded :class:`dpstream.Rng`:
    reproducible, **not private**) is refused unless ``allow_seeded=True``;
    loaded, the object stays marked seeded (its ``repr`` says NOT PRIVATE).
    This covers :class:`~dpstream.OnlineSynthesizer`,
    :class:`~dpstream.tabular.TabularStream`, every counter of
    :mod:`dpstream.counters`, and sketches and :class:`~dpstream.TreeGenerator`
    releases made with seeded noise.

    Raises:
        ValueError: the file is truncated, corrupted, of an unknown kind or of
            a newer format version; or it holds a seeded object and
            ``allow_seeded`` is false.
    """
    data = Path(path).read_bytes()
    if data.startswith(b"DPSTREAM-TABULAR"):
        from dpstream.tabular import TabularStream

        return TabularStream.from_bytes(data, allow_seeded=allow_seeded)
    kind = _core.state_kind(data)
    if kind == "TreeGenerator":
        from dpstream.privhp import TreeGenerator

        return TreeGenerator.from_bytes(data, allow_seeded=allow_seeded)
    if kind == "Sketch":
        from dpstream.sketch import _load_sketch

        return _load_sketch(data, allow_seeded=allow_seeded)
    if kind == "PrivHP":
        from dpstream.privhp import PrivHP

        # An unreleased summary: exact counts, no noise and no generator.
        return PrivHP.from_bytes(data)
    if kind in ("OnlineSynthesizer", "EpochSynthesizer", "ContinualPrivHP"):
        # method="paper", the default method="epochs" and method="privhp" (for_memory).
        from dpstream.online import OnlineSynthesizer

        return OnlineSynthesizer.from_bytes(data, allow_seeded=allow_seeded)
    if kind == "Counter":
        from dpstream.counters import Counter

        # A loaded counter draws from a fresh OS-seeded generator; use
        # ``Counter.from_bytes(data, rng=...)`` to give it one.
        return Counter.from_bytes(data, allow_seeded=allow_seeded)
    if kind in ("SparseCounter", "InhomogeneousSparseCounter"):
        from dpstream import counters

        # Likewise.
        cls = getattr(counters, kind)
        return cls.from_bytes(data, allow_seeded=allow_seeded)
    raise ValueError(f"cannot load objects of kind {kind}")


def _seeded_refusal(what: str) -> str:
    """The message refusing a seeded checkpoint loaded without ``allow_seeded=True``
    (the same words as the Rust bindings' refusal of a seeded counter)."""
    return (
        f"these bytes hold a seeded {what} (its noise came from a seeded generator): it is "
        "reproducible and NOT PRIVATE; pass allow_seeded=True to load it anyway (tests and "
        "experiments only)"
    )

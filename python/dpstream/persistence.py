"""Saving and loading dpstream objects: versioned, checksummed, atomic.

:func:`load` reads the kind of the bytes (the Rust core's state header, or a registered
prefix) and calls the loader its class registered with :func:`register`, in the class's
own module; ``import dpstream`` imports every such module.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Protocol

from dpstream import _core
from dpstream._files import atomic_write

__all__ = ["load", "register", "save"]


class Loader(Protocol):
    """Decodes the bytes of one kind; refuses a seeded state unless ``allow_seeded``."""

    def __call__(self, data: bytes, *, allow_seeded: bool) -> Any: ...


#: The loader of each kind of state.
_LOADERS: dict[str, Loader] = {}
#: The kinds recognised by the first bytes of their encoding (not a core state).
_PREFIXES: dict[bytes, str] = {}


def register(loader: Loader, *kinds: str, prefix: bytes | None = None) -> None:
    """Make :func:`load` decode states of ``kinds`` with ``loader``.

    ``kinds`` are the core's state kinds (``_core.state_kind``); with ``prefix``, the
    one kind whose encoding starts with those bytes instead."""
    if prefix is not None:
        if len(kinds) != 1:
            raise ValueError("a prefix names exactly one kind")
        _PREFIXES[prefix] = kinds[0]
    for kind in kinds:
        _LOADERS[kind] = loader


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
    kind = next((k for p, k in _PREFIXES.items() if data.startswith(p)), None)
    if kind is None:
        kind = _core.state_kind(data)
    loader = _LOADERS.get(kind)
    if loader is None:
        raise ValueError(
            f"cannot load objects of kind {kind}: no loader is registered for it "
            f"(known kinds: {', '.join(sorted(_LOADERS))})"
        )
    return loader(data, allow_seeded=allow_seeded)


def seeded_refusal(what: str) -> str:
    """The message refusing a seeded checkpoint loaded without ``allow_seeded=True``
    (the same words as the Rust bindings' refusal of a seeded counter)."""
    return (
        f"these bytes hold a seeded {what} (its noise came from a seeded generator): it is "
        "reproducible and NOT PRIVATE; pass allow_seeded=True to load it anyway (tests and "
        "experiments only)"
    )

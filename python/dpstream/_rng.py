"""The generator behind every noise draw, and what every object drawing from one shares:
no copies, the seeded flag and its warning."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import numpy as np

from dpstream import _core

_SEED_BYTES = 32

_T = TypeVar("_T")

#: What the ``repr`` of anything whose noise comes from a seeded generator ends with.
_SEEDED_NOTE = "  # seeded: reproducible, NOT PRIVATE"


def seeded_repr(text: str, seeded: bool) -> str:
    """``text``, a ``repr``, with the NOT PRIVATE warning when the noise is ``seeded``."""
    return text + _SEEDED_NOTE if seeded else text


class Seeded:
    """A wrapper of a Rust object ``_inner`` whose noise comes from its own generator."""

    __slots__ = ()
    _inner: Any

    @property
    def seeded(self) -> bool:
        """True if the noise comes from a seeded generator: reproducible, **not private**."""
        return bool(self._inner.seeded)


def refuse_copies(what: str, instead: str) -> Callable[[type[_T]], type[_T]]:
    """Class decorator: copying or pickling an instance raises ``TypeError`` naming
    ``dpstream.{what}`` and saying what to do ``instead``.

    A copy would replay the same noise: two outputs with identical noise can be
    compared or subtracted to cancel it.
    """

    def refuse(self: object, *_: object) -> NoReturn:
        raise TypeError(
            f"dpstream.{what} cannot be copied or pickled: a copy would repeat the same "
            f"noise; {instead}"
        )

    def decorate(cls: type[_T]) -> type[_T]:
        for name in ("__copy__", "__deepcopy__", "__reduce__", "__reduce_ex__"):
            setattr(cls, name, refuse)
        return cls

    return decorate


@refuse_copies("Rng", "create a new Rng() instead")
class Rng:
    """A ChaCha12 cryptographically secure generator for privacy noise.

    ``Rng()`` is keyed with 256 bits from the operating system: this is the
    only kind of generator that gives differential privacy.

    ``Rng(seed=...)`` (an int in ``[0, 2**256)`` or 32 bytes) gives a
    reproducible stream **for tests and experiments only**. Anyone who knows
    the seed can subtract the noise, so a seeded generator gives **no
    privacy**; its ``repr`` says so.

    Every function that takes ``rng=None`` uses a fresh OS-seeded generator.
    A generator may be shared between calls; it is not safe to use one
    generator from several threads at once (a concurrent call raises
    ``RuntimeError`` rather than corrupting the stream).
    """

    __slots__ = ("_inner", "_seed")

    def __init__(self, seed: int | bytes | None = None) -> None:
        if seed is None:
            self._seed: int | bytes | str | None = None
            self._inner = _core.Rng(None)
            return
        if isinstance(seed, (bytes, bytearray)):
            if len(seed) != _SEED_BYTES:
                raise ValueError(f"a bytes seed must be {_SEED_BYTES} bytes, got {len(seed)}")
            key = bytes(seed)
            self._seed = key
        elif isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
            raise TypeError(f"seed must be an int, 32 bytes or None, got {type(seed).__name__}")
        else:
            value = int(seed)
            if not 0 <= value < 2 ** (8 * _SEED_BYTES):
                raise ValueError(f"seed must be in [0, 2**256), got {value}")
            key = value.to_bytes(_SEED_BYTES, "little")
            self._seed = value
        self._inner = _core.Rng(key)

    @property
    def seeded(self) -> bool:
        """True if built from a seed: reproducible, and **not private**."""
        return bool(self._inner.seeded)

    def integers(self, size: int) -> np.ndarray:
        """``size`` uniform 64-bit unsigned integers (for keys and hashing, not for noise)."""
        if isinstance(size, bool) or not isinstance(size, numbers.Integral) or size < 0:
            raise ValueError(f"size must be a non-negative int, got {size!r}")
        return self._inner.integers(int(size))

    def _checkpoint_state(self) -> bytes | None:
        """The state of a seeded generator (for checkpoints), ``None`` if OS-seeded.

        An OS-seeded generator's key never leaves the Rust core: with it, every
        noise value could be recomputed and subtracted.
        """
        state = self._inner.seeded_state()
        return None if state is None else bytes(state)

    @classmethod
    def _from_checkpoint_state(cls, state: bytes | None) -> Rng:
        """A generator continuing a saved seeded one, or a fresh OS-seeded one for ``None``."""
        if state is None:
            return cls()
        rng = cls.__new__(cls)
        rng._seed = "restored"
        rng._inner = _core.Rng.from_seeded_state(bytes(state))
        return rng

    def __repr__(self) -> str:
        if self._seed is None:
            return "Rng()"
        return seeded_repr(f"Rng(seed={self._seed!r})", True)

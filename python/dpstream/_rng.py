"""The generator behind every noise draw, the key ring of a checkpointed stream, and what
every object drawing from a generator shares: no copies, the seeded flag and its warning."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any, NoReturn, TypeVar

import numpy as np
import numpy.typing as npt

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


class KeyRing:
    """A secret master key and a running keyed digest, held in the Rust core.

    The generator of each position (:meth:`generator`) is keyed by a pseudorandom
    function of the master key, the position and a keyed digest of every content
    :meth:`absorb` has taken. A stream that stores its ring in its checkpoint therefore
    draws, after any number of loads fed the same data, the same noise, byte for byte,
    and independent noise for other data: a checkpoint supports one continuation. The
    master key leaves the core only in :meth:`to_bytes` (a checkpoint's bytes, secret
    like the raw data). Drawn from ``rng``: a seeded ``rng`` makes every generator
    reproducible and **not private**.
    """

    __slots__ = ("_inner",)

    def __init__(self, rng: Rng) -> None:
        self._inner = _core.KeyRing(rng._inner)

    @property
    def seeded(self) -> bool:
        """True if the master key came from a seeded generator (**not private**)."""
        return bool(self._inner.seeded)

    def absorb(self, contents: npt.ArrayLike) -> None:
        """Append the integers ``contents`` (their count first) to the running digest."""
        flat = np.asarray(contents, dtype=np.int64).ravel()
        self._inner.absorb(np.require(flat, dtype=np.int64, requirements=["C", "A"]))

    def generator(self, position: Sequence[int]) -> Rng:
        """The generator of ``position`` (non-negative public ints) after the contents
        absorbed so far (seeded exactly when the ring is)."""
        rng = Rng.__new__(Rng)
        rng._inner = self._inner.generator([int(w) for w in position])
        rng._seed = "derived" if rng._inner.seeded else None
        return rng

    def copy(self) -> KeyRing:
        """The same master key and digest (for a step's undo point)."""
        ring = KeyRing.__new__(KeyRing)
        ring._inner = self._inner.copy()
        return ring

    def to_bytes(self) -> bytes:
        """The ring for a checkpoint. **Secret**: it holds the master key."""
        return bytes(self._inner.to_bytes())

    @classmethod
    def from_bytes(cls, data: bytes) -> KeyRing:
        """A ring from :meth:`to_bytes` output (``ValueError`` if invalid)."""
        ring = cls.__new__(cls)
        ring._inner = _core.KeyRing.from_bytes(bytes(data))
        return ring

    def __repr__(self) -> str:
        return "KeyRing(seeded: NOT PRIVATE)" if self.seeded else "KeyRing()"

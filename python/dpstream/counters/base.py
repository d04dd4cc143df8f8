"""What every counter wrapper shares: parameter checks, the scalar-stream interface, time,
ε spent, seeding, memory and checkpoints of the Rust objects.

No noise is drawn here: the Rust core draws it. Units: ε exact (a Fraction); time in
steps; memory in bytes.
"""

from __future__ import annotations

import numbers
from fractions import Fraction
from typing import Any, ClassVar, NamedTuple, Protocol, Self

import numpy as np
import numpy.typing as npt

from dpstream._params import core_rng
from dpstream._rng import Rng, Seeded, seeded_repr

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


class Share(NamedTuple):
    """The part of ε one family of noisy values spends.

    Each value of the family gets discrete Laplace noise of scale
    ``sensitivity / epsilon``: one increment enters at most ``sensitivity``
    values of the family. ``sensitivity`` is ``None`` for the hybrid counter's
    epoch trees, where it is the epoch ``k``: scale ``k / epsilon`` with this
    share's ``epsilon = ε/2``, i.e. ``2k/ε``.
    """

    family: str
    epsilon: Fraction
    sensitivity: int | None


def integer_array(value: object, name: str) -> npt.NDArray[np.int64]:
    """``value`` as a C-contiguous int64 array of integers, or a clear error."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be integers, got bool")
    arr = np.asarray(value)
    if arr.dtype.kind in "fcO" and not isinstance(value, np.ndarray):
        # Python ints beyond int64 turn a list into floats or objects: look at the items.
        arr = np.asarray(value, dtype=object)
    if arr.dtype == object:
        flat = arr.ravel().tolist()
        if any(isinstance(v, bool) or not isinstance(v, numbers.Integral) for v in flat):
            raise TypeError(f"{name} must be integers")
        if any(not I64_MIN <= int(v) <= I64_MAX for v in flat):
            raise ValueError(f"{name} exceed the int64 range")
        arr = np.asarray([int(v) for v in flat], dtype=np.int64).reshape(arr.shape)
    elif arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.integer):
        if arr.size or arr.dtype != np.float64:  # [] and np.empty((0, d)) are fine
            raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
    elif arr.dtype == np.uint64 and arr.size and int(arr.max()) > I64_MAX:
        raise ValueError(f"{name} exceed the int64 range")
    return np.ascontiguousarray(arr, dtype=np.int64)


class _CoreStream(Protocol):
    @property
    def time(self) -> int: ...
    def memory_bytes(self) -> int: ...
    def to_bytes(self) -> bytes: ...


class _CoreScalarStream(_CoreStream, Protocol):
    @property
    def release(self) -> int: ...
    def step(self, value: int) -> int: ...
    def run(self, values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]: ...


class NoisyStream(Seeded):
    """What every counter wrapper shares: the Rust object, time, seeding, memory, repr."""

    __slots__ = ("_inner",)
    #: The Rust class wrapped; ``_CORE.from_bytes(data, rng, allow_seeded)`` loads it.
    _CORE: ClassVar[Any]
    _inner: _CoreStream

    def _attach(self, inner: Any) -> None:
        """Wrap ``inner``, a new or loaded Rust counter."""
        self._inner = inner

    @classmethod
    def from_bytes(
        cls,
        data: bytes | bytearray | memoryview,
        *,
        rng: Rng | None = None,
        allow_seeded: bool = False,
    ) -> Self:
        """Load a counter saved by :meth:`to_bytes` (or :func:`dpstream.save`).

        The loaded counter keys its noise with the checkpoint's master key (see
        the module docs): fed the same increments, every load gives the same
        releases as the saved counter would have, whatever ``rng`` is. ``rng``
        (``None``: a fresh OS-seeded generator) is used only by a counter saved
        before its first step or by an older dpstream, to draw its master key.

        The bytes record whether the saved counter's noise was seeded. Such a
        checkpoint is **not private** (its noise so far can be recomputed from
        the seed) and is refused unless ``allow_seeded=True``; loaded, the
        counter stays :attr:`seeded` (and its ``repr`` says NOT PRIVATE)
        whatever ``rng`` is. A counter saved by dpstream before the flag was
        recorded loads as not seeded.

        Raises:
            TypeError: ``data`` is not bytes, or ``rng`` is not a :class:`dpstream.Rng`.
            ValueError: the bytes are truncated, corrupted, of another kind
                or of a newer format version; or they hold a seeded counter
                and ``allow_seeded`` is false.
        """
        obj = cls.__new__(cls)
        obj._attach(cls._CORE.from_bytes(checked_bytes(data), core_rng(rng), bool(allow_seeded)))
        return obj

    @property
    def time(self) -> int:
        """Steps taken so far (public)."""
        return int(self._inner.time)

    def _stream_epsilon(self) -> Fraction:
        eps: Fraction = getattr(self, "epsilon")  # noqa: B009 - subclasses define it
        return eps

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent: the stream's ε from the first step on (every release of the stream
        is covered by it), 0 before."""
        return self._stream_epsilon() if self.time > 0 else Fraction(0)

    @property
    def epsilon_remaining(self) -> Fraction:
        """ε not yet spent: the stream's ε before the first step, 0 after (later
        releases are inside the continual-release guarantee, not extra spending)."""
        return self._stream_epsilon() - self.epsilon_spent

    def memory_bytes(self) -> int:
        """Bytes held by the counter (its growth is stated in the class docs)."""
        return int(self._inner.memory_bytes())

    def to_bytes(self) -> bytes:
        """The counter's state as versioned, checksummed bytes (for :func:`dpstream.save`).

        **Sensitive**: the bytes hold the exact running sums (and, for the
        sparse counters, the exact counts and noisy thresholds): protect them
        like the raw data. The generator is not part of them; the bytes
        record whether the noise was seeded (see :meth:`Counter.from_bytes`).
        """
        return bytes(self._inner.to_bytes())

    def _describe(self) -> str:
        raise NotImplementedError

    def __repr__(self) -> str:
        return seeded_repr(self._describe(), self.seeded)


class ScalarStream(NoisyStream):
    """Counters of non-negative scalar values (the sparse counters)."""

    __slots__ = ()
    _inner: _CoreScalarStream

    @property
    def release(self) -> int:
        """The private count after the last step (0 before the first output)."""
        return int(self._inner.release)

    def step(self, value: int) -> int:
        """Feed the next step's non-negative value; return the release after it.

        Refused with ``ValueError`` (negative value, horizon reached) or
        ``OverflowError`` (a count beyond ``2**62``); the counter and its
        generator are then unchanged.
        """
        return int(self._inner.step(check_value(value)))

    def run(self, values: object) -> npt.NDArray[np.int64]:
        """Feed ``T`` values at once (shape ``(T,)``); return the ``T`` releases.

        Runs in Rust with the GIL released and equals ``T`` calls of
        :meth:`step`. All-or-nothing.
        """
        return self._inner.run(check_values(values))


def checked_bytes(data: object) -> bytes:
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise TypeError(f"data must be bytes, got {type(data).__name__}")
    return bytes(data)


def check_value(value: object, name: str = "value") -> int:
    """A non-negative int64 value, or a clear error."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    v = int(value)
    if v < 0:
        raise ValueError(f"{name} must be non-negative, got {v}")
    if v > I64_MAX:
        raise ValueError(f"{name} exceeds the int64 range")
    return v


def check_values(values: object) -> npt.NDArray[np.int64]:
    arr = integer_array(values, "values")
    if arr.ndim != 1:
        raise ValueError(f"values must have shape (T,), got {arr.shape}")
    if arr.size and int(arr.min()) < 0:
        raise ValueError(f"values must be non-negative, got {int(arr.min())}")
    return arr

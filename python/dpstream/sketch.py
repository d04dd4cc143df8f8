"""Linear count-min and count sketches, and their private release.

A sketch is a ``rows x width`` table of integer counters with one
pairwise-independent hash per row (keyed from the CSPRNG). Sketches are
linear: sketches with the same hashes can be merged by adding cells, so
exact summaries built on several machines combine into one.

Privacy: an exact sketch is **not** private. :meth:`release` returns a copy
with exact discrete Laplace noise of scale ``rows / epsilon`` on every cell,
which is ε-DP for adding or removing one key occurrence of count 1 (one
occurrence changes one cell per row, so the sketch's ℓ1-sensitivity is
``rows``). The shape and the hash functions are public. A released sketch
can be queried and saved, but not updated, merged or released again.

Ledger: with ``budget=`` a sketch refuses a release that would pass it. The
ledger (budget and ε spent) and whether a release's noise was seeded are part
of the saved bytes, so a loaded sketch continues with the same ledger; a
release with seeded noise (**not private**) loads only with
``allow_seeded=True``. Sketches saved before the ledger was recorded load
with it exhausted (see :meth:`CountMinSketch.from_bytes`).
"""

from __future__ import annotations

import warnings
from fractions import Fraction
from typing import Literal

import numpy as np
import numpy.typing as npt

from dpstream import _core
from dpstream._arrays import int64_array, uint64_array
from dpstream._params import RealLike, core_rng, exact_fraction, int_param
from dpstream._rng import Rng
from dpstream.budget import BudgetExceededError, Ledger
from dpstream.persistence import register, seeded_refusal

__all__ = ["CountMinSketch", "CountSketch"]


class _Sketch:
    _kind: Literal["count-min", "count"]

    def __init__(
        self,
        rows: int,
        width: int,
        *,
        budget: RealLike | None = None,
        rng: Rng | None = None,
    ) -> None:
        r = int_param(rows, "rows", low=1, high=64)
        w = int_param(width, "width", low=1, high=2**30)
        total = None if budget is None else exact_fraction(budget, "budget")
        # The construction generator only keys the hash functions, which are
        # public: seeding it costs no privacy. Only the release's noise matters.
        self._inner = _core.LinearSketch(self._kind, r, w, core_rng(rng))
        self._noise_seeded = False
        self._ledger = Ledger(total)

    @classmethod
    def _wrap(
        cls, inner: _core.LinearSketch, noise_seeded: bool = False, ledger: Ledger | None = None
    ) -> _Sketch:
        obj = cls.__new__(cls)
        obj._inner = inner
        obj._noise_seeded = noise_seeded
        obj._ledger = Ledger(None) if ledger is None else ledger
        return obj

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent by the releases made from this sketch (a released copy: its own ε).

        Saved and loaded with the sketch (:meth:`to_bytes`). A sketch saved by
        dpstream before the ledger was recorded loads as exhausted: budget 0,
        nothing recorded as spent.
        """
        return self._ledger.spent

    @property
    def epsilon_remaining(self) -> Fraction | None:
        """ε left of ``budget`` (``None`` when no budget was configured)."""
        return self._ledger.remaining

    @property
    def rows(self) -> int:
        """Number of rows (independent hash functions)."""
        return int(self._inner.rows)

    @property
    def width(self) -> int:
        """Number of columns per row."""
        return int(self._inner.width)

    @property
    def released(self) -> bool:
        """True for a private release (noisy, read-only)."""
        return bool(self._inner.released)

    def memory_bytes(self) -> int:
        """Bytes held; fixed at construction."""
        return int(self._inner.memory_bytes())

    def update(self, keys: object, counts: object = 1) -> None:
        """Add ``counts`` (an int or one int per key) to ``keys`` (non-negative ints < 2**64).

        All-or-nothing: on error the sketch is unchanged.
        """
        k = uint64_array(keys, "keys")
        self._inner.update(k, int64_array(counts, "counts", len(k)))

    def query(self, keys: object) -> npt.NDArray[np.float64]:
        """Estimated counts of ``keys`` (count-min: minimum over rows; count
        sketch: median of the signed cells)."""
        return self._inner.query(uint64_array(keys, "keys"))

    def merge(self, other: _Sketch) -> None:
        """Add ``other``'s cells into this sketch (same kind, shape and hashes).

        The ledgers combine per record: the merged sketch holds both inputs'
        records, so it has spent the larger of the two ``epsilon_spent`` and may
        spend only the smaller of the two ``epsilon_remaining`` (no cap only if
        neither has one). Merging an exhausted sketch (for instance one saved
        before the ledger was recorded) therefore exhausts this one.
        """
        if type(other) is not type(self):
            raise TypeError(f"cannot merge a {type(other).__name__} into a {type(self).__name__}")
        mine, theirs = self._ledger, other._ledger
        spent = max(mine.spent, theirs.spent)
        left = [r for r in (mine.remaining, theirs.remaining) if r is not None]
        budget = None if not left else spent + max(Fraction(0), min(left))
        self._inner.merge(other._inner)
        self._ledger = _ledger(budget, spent)

    def release(self, epsilon: RealLike, *, rng: Rng | None = None) -> _Sketch:
        """An ε-DP copy: discrete Laplace noise of scale ``rows / epsilon`` on every cell.

        Spends ε from this sketch's ledger; refused (:class:`dpstream.budget.BudgetExceededError`)
        if that passes the configured ``budget`` or if this sketch is itself a release.
        """
        eps = exact_fraction(epsilon, "epsilon")
        if self.released:
            raise BudgetExceededError(
                "this sketch is a private release: it cannot be released again"
            )
        self._ledger.check(eps, "this release")
        inner = self._inner.release(eps.numerator, eps.denominator, core_rng(rng))
        self._ledger.charge(eps, "this release")
        return self._wrap(inner, rng is not None and rng.seeded, _ledger(eps, eps))

    def hashes(self) -> list[tuple[int, int, int, int]]:
        """Public hash parameters ``(a, b, sa, sb)`` per row: the bucket of key
        ``x`` is ``((((a * x + b) mod 2**128) >> 64) * width) >> 64`` and its
        count-sketch sign is ``+1`` if bit 127 of ``(sa * x + sb) mod 2**128`` is 0, else ``-1``."""
        return [tuple(int(v) for v in h) for h in self._inner.hashes()]  # type: ignore[misc]

    def cells(self) -> npt.NDArray[np.int64]:
        """The ``rows x width`` counters."""
        return self._inner.cells().reshape(self.rows, self.width)

    def to_bytes(self) -> bytes:
        """Versioned, checksummed encoding: cells, hashes, the released flag, whether
        the release's noise was seeded, and the ε ledger (budget and spent), so a
        loaded sketch cannot be released past its budget."""
        total, spent = self._ledger.total, self._ledger.spent
        budget = None if total is None else (total.numerator, total.denominator)
        return bytes(
            self._inner.to_bytes(budget, (spent.numerator, spent.denominator), self._noise_seeded)
        )

    @classmethod
    def from_bytes(cls, data: bytes, *, allow_seeded: bool = False) -> _Sketch:
        """Decode :meth:`to_bytes` output, with its ε ledger; raises ``ValueError`` on
        corrupt data.

        A release made with seeded noise is **not private** and is refused unless
        ``allow_seeded=True``. A sketch saved by dpstream before the ledger was
        recorded loads with its ledger exhausted (budget 0: it cannot be released,
        and a :class:`UserWarning` says so), because what it had spent is unknown.
        """
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        return _load_sketch(bytes(data), allow_seeded=allow_seeded, cls=cls)

    def __repr__(self) -> str:
        state = "released" if self.released else "exact"
        seeded = "  # seeded noise: NOT PRIVATE" if self._noise_seeded else ""
        return f"{type(self).__name__}(rows={self.rows}, width={self.width}, {state}){seeded}"


class CountMinSketch(_Sketch):
    """Count-min sketch (Cormode and Muthukrishnan): never underestimates
    non-negative counts; expected overestimate at most ``(n - c) / width``."""

    _kind = "count-min"


class CountSketch(_Sketch):
    """Count sketch (Charikar, Chen, Farach-Colton): unbiased estimates from
    signed cells, combined by the median over rows."""

    _kind = "count"


def _load_sketch(data: bytes, *, allow_seeded: bool, cls: type[_Sketch] | None = None) -> _Sketch:
    """Decode sketch bytes into ``cls`` (refusing the other kind), or into the class of
    their kind when ``cls`` is ``None``."""
    inner, budget, spent, noise_seeded, legacy = _core.LinearSketch.from_bytes(data)
    if cls is not None and inner.kind != cls._kind:
        raise ValueError(f"these bytes hold a {inner.kind} sketch, not a {cls._kind} sketch")
    if noise_seeded and not allow_seeded:
        raise ValueError(seeded_refusal("sketch release"))
    if legacy:
        warnings.warn(
            "this sketch was saved by a dpstream that did not record its ε ledger: it loads "
            "with its ledger exhausted (budget 0), so it cannot be released",
            UserWarning,
            stacklevel=3,
        )
    if cls is None:
        cls = CountMinSketch if inner.kind == "count-min" else CountSketch
    total = None if budget is None else Fraction(*budget)
    return cls._wrap(inner, noise_seeded, _ledger(total, Fraction(*spent)))


register(_load_sketch, "Sketch")


def _ledger(budget: Fraction | None, spent: Fraction) -> Ledger:
    """A ledger that has spent ``spent`` of ``budget`` (``None``: no cap)."""
    ledger = Ledger(budget)
    ledger.charge(spent, "the recorded releases")
    return ledger

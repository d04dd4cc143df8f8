"""The privacy budget ledger: what each mechanism object has spent and may still spend.

Every object that releases something reports ``epsilon_spent`` and
``epsilon_remaining`` (exact :class:`~fractions.Fraction` values):

* one-shot summaries (:class:`dpstream.PrivHP`) spend their ε at ``release()``;
  a second ``release()`` returns the same generator (no new ε); merging a
  released summary, or updating one, is refused;
* private sketches spend ``ε`` at each ``release(ε)``; with ``budget=`` set, a
  release that would pass it is refused with :class:`BudgetExceededError`;
* continual-release objects (counters, :class:`dpstream.OnlineSynthesizer`,
  :class:`dpstream.tabular.TabularStream`) spend their ε with the first release
  and cover every later release of the same stream with it: ``remaining`` is
  then 0 and further releases are *inside* the guarantee, not extra spending.

The ledger counts the privacy of one object's releases; composing several
objects over the same people is the caller's sum.
"""

from __future__ import annotations

from fractions import Fraction

__all__ = ["BudgetExceededError", "Ledger"]


class BudgetExceededError(ValueError):
    """An operation would spend more ε than the object's configured budget."""


class Ledger:
    """Spent and remaining ε of one object; ``total=None`` records without a cap."""

    __slots__ = ("_spent", "_total")

    def __init__(self, total: Fraction | None) -> None:
        self._total = total
        self._spent = Fraction(0)

    @property
    def total(self) -> Fraction | None:
        """The configured budget (``None``: no cap)."""
        return self._total

    @property
    def spent(self) -> Fraction:
        """ε spent so far."""
        return self._spent

    @property
    def remaining(self) -> Fraction | None:
        """ε still available (``None`` without a cap)."""
        return None if self._total is None else self._total - self._spent

    def check(self, epsilon: Fraction, what: str) -> None:
        """Refuse (:class:`BudgetExceededError`) if spending ``epsilon`` would pass the budget."""
        if self._total is not None and self._spent + epsilon > self._total:
            raise BudgetExceededError(
                f"{what} would spend ε = {epsilon} but only {self._total - self._spent} of the "
                f"budget {self._total} remains"
            )

    def charge(self, epsilon: Fraction, what: str) -> None:
        """Record spending ``epsilon`` (after :meth:`check`)."""
        self.check(epsilon, what)
        self._spent += epsilon

"""What an audit reports: :class:`AuditResult` and one :class:`EventBound` per audited
(event, direction)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class EventBound:
    """One audited event in one direction: ``ln((P_num(E) − δ) / P_den(E))``.

    Attributes:
        event: description of the event, e.g. ``"x <= 3"``.
        direction: ``"a/b"`` (the ratio ``P_a / P_b``) or ``"b/a"``.
        count_a: runs on input ``a`` whose output was in the event.
        count_b: the same on input ``b``.
        runs: audited runs per side.
        numerator_lower: Clopper–Pearson lower bound on the numerator's probability.
        denominator_upper: Clopper–Pearson upper bound on the denominator's probability.
        lower_bound: ``ln((numerator_lower − δ) / denominator_upper)``, the
            high-confidence lower bound on the privacy loss (``-inf`` if
            ``numerator_lower <= δ``).
        estimate: the same ratio from the observed frequencies (not a bound).
    """

    event: str
    direction: Literal["a/b", "b/a"]
    count_a: int
    count_b: int
    runs: int
    numerator_lower: float
    denominator_upper: float
    lower_bound: float
    estimate: float


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`.

    Attributes:
        passed: ``lower_bound <= epsilon``: the audit failed to falsify the claim
            (which is not a proof of privacy; see :mod:`dpstream.audit`).
        lower_bound: the largest high-confidence lower bound on the privacy loss
            over the audited events and both directions (``-inf`` if no event
            gives one).
        event: the event attaining it, ``direction`` its ratio (``"a/b"``:
            ``(P_a(E) − δ) / P_b(E)``), ``counts`` its counts ``(count_a, count_b)``
            among ``runs`` audited runs per side.
        epsilon, delta, alpha: the claim audited and the false-alarm rate.
        seed: the seed every run's generator was derived from (pass it again to
            repeat the audit exactly).
        runs: runs per side that decided the result.
        selection_runs: further runs per side used only to choose the events.
        candidates: events considered by the automatic choice (0 if the events
            were given and not chosen).
        events: every audited (event, direction), largest lower bound first.
    """

    passed: bool
    lower_bound: float
    event: str | None
    direction: Literal["a/b", "b/a"] | None
    counts: tuple[int, int]
    epsilon: float
    delta: float
    alpha: float
    seed: int
    runs: int
    selection_runs: int
    candidates: int
    events: tuple[EventBound, ...]

    def __str__(self) -> str:
        verdict = "passed (not falsified)" if self.passed else "FAILED (claim falsified)"
        head = (
            f"privacy audit {verdict}: lower bound {self.lower_bound:.4f} vs ε = "
            f"{self.epsilon:g}"
            + (f", δ = {self.delta:g}" if self.delta else "")
            + f" at confidence 1 − {self.alpha:g}"
        )
        lines = [head]
        if self.event is not None:
            lines.append(
                f"  worst event: {self.event} ({self.direction}), counts a = {self.counts[0]}, "
                f"b = {self.counts[1]} of {self.runs} runs per side"
            )
        chosen = (
            f"{self.selection_runs} more per side chose them from {self.candidates} candidates"
            if self.selection_runs
            else "events given in advance"
        )
        lines.append(
            f"  {len(self.events)} event ratios audited on {self.runs} runs per side; "
            f"{chosen}; seed {self.seed}"
        )
        return "\n".join(lines)

"""Audits of an integer statistic by events fixed in advance: for every ``v`` in a range,
``{v}``, ``{<= v}`` and ``{>= v}``, with Clopper-Pearson bounds on their probabilities
under two neighbouring inputs."""

from __future__ import annotations

import numpy as np
from conftest import clopper_pearson_lower, clopper_pearson_upper


def event_counts(s: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Counts of the events ``{v}``, then ``{<= v}``, then ``{>= v}``, for v in [lo, hi]."""
    inside = s[(s >= lo) & (s <= hi)] - lo
    point = np.bincount(inside, minlength=hi - lo + 1)
    at_most = np.cumsum(point) + np.count_nonzero(s < lo)
    at_least = np.cumsum(point[::-1])[::-1] + np.count_nonzero(s > hi)
    return np.concatenate([point, at_most, at_least])


def event_names(statistic: str, lo: int, hi: int) -> list[str]:
    """The names of the events of :func:`event_counts`, in its order."""
    values = np.arange(lo, hi + 1)
    return (
        [f"{statistic} == {v}" for v in values]
        + [f"{statistic} <= {v}" for v in values]
        + [f"{statistic} >= {v}" for v in values]
    )


def count_ratio_bounds(
    kx: np.ndarray, nx: int, ky: np.ndarray, ny: int, a: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per event seen ``kx`` times in ``nx`` runs on one neighbour and ``ky`` times in
    ``ny`` on the other: lower bounds on ``log(P(E | x) / P(E | y))`` and on the reverse
    ratio, each from two one-sided Clopper-Pearson bounds at level ``a`` (``-inf`` where
    there is no evidence)."""
    with np.errstate(divide="ignore"):
        fwd = np.log(clopper_pearson_lower(kx, nx, a)) - np.log(clopper_pearson_upper(ky, ny, a))
        rev = np.log(clopper_pearson_lower(ky, ny, a)) - np.log(clopper_pearson_upper(kx, nx, a))
    return fwd, rev


def log_ratio_bounds(
    x: np.ndarray, y: np.ndarray, lo: int, hi: int, a: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`count_ratio_bounds` of the events of :func:`event_counts` on samples ``x``
    and ``y``."""
    return count_ratio_bounds(event_counts(x, lo, hi), x.size, event_counts(y, lo, hi), y.size, a)


def strongest(fwd: np.ndarray, rev: np.ndarray) -> tuple[float, int, bool]:
    """The largest of the bounds ``fwd`` and ``rev``: ``(bound, event, forward)``."""
    i, j = int(np.argmax(fwd)), int(np.argmax(rev))
    if fwd[i] >= rev[j]:
        return float(fwd[i]), i, True
    return float(rev[j]), j, False

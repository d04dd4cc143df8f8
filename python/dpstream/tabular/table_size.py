"""The table size that :class:`~dpstream.tabular.TabularStream` releases at every step.

Default (add/remove one record): a scalar continual counter of each batch's net rows (one
record changes it by 1), with ``ε·SIZE_SHARE`` (:func:`~dpstream.tabular.selection.split_budget`).
Its release is post-processed by :func:`released_size`. With ``public_sizes=True`` the exact
sizes are public and there is no size counter. Units: rows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from dpstream.counters import Counter

__all__ = ["next_size", "released_size"]


def released_size(
    previous: npt.NDArray[np.int64], raw: npt.NDArray[np.int64], *, monotone: bool
) -> npt.NDArray[np.int64]:
    """The released table size (post-processing of the size counter's release ``raw``):
    with ``monotone`` (an insert-only stream) the running maximum with the size released
    before, ``previous`` (which starts at 0), else ``raw`` clipped at 0. Elementwise, so an
    audit can run many streams at once."""
    out: npt.NDArray[np.int64] = np.maximum(previous, raw) if monotone else np.maximum(raw, 0)
    return out


def next_size(
    counter: Counter | None, size: int, net: int, rows: int, *, monotone: bool
) -> tuple[int, int]:
    """The size ``|f_t|`` a step releases after the released ``size`` and the batch's rows
    as the selection scores see them (both public). ``counter`` ``None`` (public sizes): the
    exact ones, ``size + net`` and ``rows``; else the counter stepped with the batch's
    ``net`` rows, its release post-processed (:func:`released_size`), and its change."""
    if counter is None:
        return size + net, rows
    raw = counter.step(net)
    new = int(released_size(np.array([size]), raw, monotone=monotone)[0])
    return new, abs(new - size)

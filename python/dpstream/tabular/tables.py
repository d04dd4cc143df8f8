"""Per-workload tables of the tabular stream, each computed when first read.

:class:`~dpstream.tabular.TabularStream` keeps, per workload ``i``, the synthetic table's
marginal ``q_i(g_t)`` and the remainder ``r(t,i)``. Both follow from the fitted model, the
released size and the counters' releases (public values), so instead of computing all
``W`` of them at the end of every step (``W`` = 4,950 at 100 columns, most never read
before the next step replaces them) a :class:`LazyTables` computes an entry the first
time it is read and keeps it until the stream resets it. The values are the same, bit
for bit, as computing them eagerly: the same expression on the same public inputs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import numpy.typing as npt

__all__ = ["LazyTables"]

Table = npt.NDArray[np.float64]


class LazyTables:
    """``W`` tables read by workload index; an entry not set is ``compute(i)``, kept once read.

    ``compute`` must read only the state the entry stands for (the stream resets the entries
    whenever that state changes: :meth:`reset`)."""

    def __init__(self, tables: Iterable[Table | None], compute: Callable[[int], Table]) -> None:
        self._values: list[Table | None] = list(tables)
        self._compute = compute

    def __len__(self) -> int:
        return len(self._values)

    def __getitem__(self, i: int) -> Table:
        value = self._values[i]
        if value is None:
            value = self._values[i] = self._compute(i)
        return value

    def __setitem__(self, i: int, value: Table) -> None:
        self._values[i] = value

    def hold(self, i: int) -> None:
        """Compute entry ``i`` now (if not held) from the state it stands for, and keep it."""
        self._values[i] = self[i]

    def reset(self, keep: Iterable[int] = ()) -> None:
        """Forget every entry but those of ``keep``: they are computed again when read."""
        kept = {i: self._values[i] for i in keep}
        self._values = [None] * len(self._values)
        for i, v in kept.items():
            self._values[i] = v

    def known(self) -> Iterator[Table]:
        """The entries held now (set or read since the last :meth:`reset`)."""
        return (v for v in self._values if v is not None)

    def copy(self) -> LazyTables:
        """A copy whose entries can be set without changing this one's."""
        return LazyTables(self._values, self._compute)

"""The public values of :class:`~dpstream.tabular.TabularStream` (read-only properties).

Everything here is public: the options and the policy, the split of ε, the time, the
released size, and the outputs of permute-and-flip (inside ε). Its state is the stream's.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import numpy.typing as npt

from dpstream._rng import Rng, seeded_repr
from dpstream.tabular.domain import Domain
from dpstream.tabular.policy import Policy, RemovedPolicy
from dpstream.tabular.selection import Budget, split_budget
from dpstream.tabular.workloads import Clique

__all__ = ["PublicValues"]


class PublicValues:
    """The read-only public values of :class:`~dpstream.tabular.TabularStream`."""

    _budgets: dict[int, Budget]
    _policy: Policy | RemovedPolicy
    _domain: Domain
    _epsilon: Fraction
    _workloads: list[Clique]
    _t: int
    _size: int
    _public_sizes: bool
    _rng: Rng
    _last_selected: list[int]
    _selections: npt.NDArray[np.int64]

    #: The split of ε for ``k`` selections per step (exact):
    #: :func:`~dpstream.tabular.selection.split_budget`.
    budget = staticmethod(split_budget)

    @property
    def budgets(self) -> dict[int, Budget]:
        """The split of ε of :class:`~dpstream.tabular.policy.Paper` and
        :class:`~dpstream.tabular.policy.Baseline` (one entry: their ``k``, capped at the
        number of workloads; empty for the default policy, whose split is
        :mod:`dpstream.tabular.epochs`'). Every step spends exactly ``ε``."""
        return dict(self._budgets)

    @property
    def policy(self) -> Policy | RemovedPolicy:
        """The policy (public; a :class:`~dpstream.tabular.policy.RemovedPolicy` for a
        stream loaded from a checkpoint whose options were removed)."""
        return self._policy

    @property
    def domain(self) -> Domain:
        """The public schema."""
        return self._domain

    @property
    def epsilon(self) -> Fraction:
        """ε of the whole stream."""
        return self._epsilon

    @property
    def workloads(self) -> list[Clique]:
        """The workloads (sorted column-index tuples), in selection order."""
        return list(self._workloads)

    @property
    def t(self) -> int:
        """Steps taken (public)."""
        return self._t

    @property
    def size(self) -> int:
        """The table's size ``|f_t|`` as released (rows of each release; inside ε), or the
        exact size with ``public_sizes=True``."""
        return self._size

    @property
    def public_sizes(self) -> bool:
        """Whether the batch sizes are public and exact (one record's values replaced)."""
        return self._public_sizes

    @property
    def seeded(self) -> bool:
        """True if the noise generator is seeded: reproducible, **not private**."""
        return self._rng.seeded

    @property
    def last_selected(self) -> list[Clique]:
        """The workloads selected and measured at the last step, in selection order
        (outputs of permute-and-flip, inside ε; empty before the first step)."""
        return [self._workloads[i] for i in self._last_selected]

    @property
    def selection_counts(self) -> dict[Clique, int]:
        """How many steps have selected each workload so far (public)."""
        return {w: int(n) for w, n in zip(self._workloads, self._selections, strict=True)}

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent: the stream's ε from the first step on, 0 before."""
        return self._epsilon if self._t > 0 else Fraction(0)

    @property
    def epsilon_remaining(self) -> Fraction:
        """ε not yet spent (ε before the first step, 0 after)."""
        return self._epsilon - self.epsilon_spent

    def __repr__(self) -> str:
        text = (
            f"TabularStream(columns={len(self._domain)}, epsilon={self._epsilon}, "
            f"workloads={len(self._workloads)}, policy={self._policy!r}, t={self._t})"
        )
        return seeded_repr(text, self.seeded)

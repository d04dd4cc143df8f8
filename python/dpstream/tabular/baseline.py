"""Algorithm 2 (StreamingMWEM, :class:`~dpstream.tabular.policy.Baseline`): each step an
independent select–measure–fit on the batch alone.

Privacy: each of the step's ``k`` selections is permute-and-flip with ``ε'/2k`` on the
batch's scores (:mod:`dpstream.tabular.selection`), each selected histogram gets discrete
Laplace noise of scale ``l1·2k/ε'`` (``ε'/2k``); a record is in one batch only. The fit and
the sampled rows are post-processing. The state is the stream's.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from dpstream import noise
from dpstream._rng import Rng
from dpstream.tabular.estimation import MarginalModel, Measurement
from dpstream.tabular.selection import Budget
from dpstream.tabular.workloads import Clique

__all__ = ["BaselineStep"]


class BaselineStep:
    """The Algorithm 2 step of :class:`~dpstream.tabular.TabularStream`."""

    _budget: Budget
    _cells: npt.NDArray[np.int64]
    _workloads: list[Clique]
    _k: int
    _noise_rng: Rng
    _fit: Any
    _sample_rng: np.random.Generator
    _sampling: Any
    _baseline_rows: list[npt.NDArray[np.int64]]
    _select: Any
    _record: Any

    def _step_baseline(self, diff: list[npt.NDArray[np.float64]], n: int) -> None:
        if n == 0:
            self._record([])
            return
        scale = self._budget.laplace_scale
        taken: set[int] = set()
        measurements: list[Measurement] = []
        model: MarginalModel | None = None
        stddev = math.sqrt(2) * float(scale)

        def model_marginals(i: int) -> npt.NDArray[np.float64]:
            if model is None:
                return np.full(int(self._cells[i]), n / float(self._cells[i]))
            return model.marginal(self._workloads[i])

        order: list[int] = []
        for _ in range(self._k):
            j = self._select(diff, None, model_marginals, taken, order, None, n, n)
            if j is None:  # no workload fits max_model_cells any more: the step ends here
                break
            taken.add(j)
            order.append(j)
            z = noise.discrete_laplace(scale, diff[j].shape, rng=self._noise_rng)
            measurements.append(Measurement(self._workloads[j], diff[j] + z, stddev))
            model = self._fit(measurements, float(n), None)
        assert model is not None
        self._baseline_rows.append(model.sample(n, self._sample_rng, method=self._sampling))
        self._record(order)

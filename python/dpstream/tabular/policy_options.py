"""The policies of :class:`~dpstream.tabular.TabularStream`: frozen option dataclasses.

A policy is passed as ``TabularStream(..., policy=...)`` and holds every option that only
its mechanism reads:

* :class:`Adaptive` (the default): every column measured on every batch, an MST release
  per epoch (:mod:`dpstream.tabular.epochs`), the built-in graphical model. Insertions
  only.
* :class:`Paper`: Algorithm 3 of Kumar, Strohmer and Vershynin as printed, with the
  built-in graphical model (the paper's PGM) and one continual counter per workload.
* :class:`Baseline`: Algorithm 2 (StreamingMWEM), with the graphical model (the
  paper's experiments) or multiplicative weights (Algorithm 2 as printed).

**Privacy.** No field changes the guarantee: each is public and every step spends
exactly ε (the split is stated in :mod:`dpstream.tabular.epochs` for the default and in
:mod:`dpstream.tabular.selection` for the other two). The serialised form and the
checks the stream makes are in :mod:`dpstream.tabular.policy`.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal, TypeAlias

import numpy as np

from dpstream._params import int_param
from dpstream.counters import KINDS, KindName

__all__ = ["ESTIMATORS", "POLICIES", "SCORES", "Adaptive", "Baseline", "Paper", "Policy"]

ScoreName = Literal["l2", "l2-cell", "paper"]
SCORES: tuple[ScoreName, ...] = ("l2", "l2-cell", "paper")
#: The fits of :class:`Baseline`: the built-in graphical model, or multiplicative weights
#: over the full domain (small domains only).
EstimatorName = Literal["pgm", "mw"]
ESTIMATORS: tuple[EstimatorName, ...] = ("pgm", "mw")


def _check_real(owner: object, name: str, low: float, high: float, *, open_high: bool) -> None:
    value = getattr(owner, name)
    where = f"{type(owner).__name__}.{name}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a number, got {type(value).__name__}")
    v = float(value)
    above = v >= high if open_high else v > high
    if not math.isfinite(v) or v < low or above:
        bracket = ")" if open_high else "]"
        raise ValueError(f"{where} must be in [{low:g}, {high:g}{bracket}, got {value!r}")


def _check_counter(owner: Paper | Baseline) -> None:
    """``counter`` one of the kinds, ``horizon`` ``None`` or a positive int (a counter
    that needs a horizon is refused by the stream, which builds one)."""
    where = type(owner).__name__
    if owner.counter not in KINDS:
        raise ValueError(f"{where}.counter must be one of {KINDS}, got {owner.counter!r}")
    if owner.horizon is not None:
        int_param(owner.horizon, f"{where}.horizon", low=1, high=None)


@dataclass(frozen=True)
class Adaptive:
    """The default policy: every column measured on every batch, an MST release per
    epoch (:mod:`dpstream.tabular.epochs`, where the mechanism, its ε split and its
    privacy argument are stated). Insertions only.

    Attributes:
        growth: an epoch closes after the step at which the released table reaches
            ``growth`` times its size when the epoch opened (a number > 1; default 2).
            A closed epoch is measured once over all its rows, so a larger factor means
            fewer, larger epochs: less noise per row when the stream is stationary, a
            larger share of the table held by the open epoch (measured batch by batch)
            when it drifts.
    """

    growth: float = 2.0

    def __post_init__(self) -> None:
        _check_real(self, "growth", 1.0, math.inf, open_high=True)
        if not self.growth > 1.0:
            raise ValueError(f"Adaptive.growth must be greater than 1, got {self.growth!r}")
        # One form per value (a fingerprint holds to_dict's): growth = 2 in TOML is 2.0.
        object.__setattr__(self, "growth", float(self.growth))


@dataclass(frozen=True)
class Paper:
    """Algorithm 3 as printed: the score (3) of Section 7.2 against ``h_{t,l−1}``
    (``h_{t,0} = g_{t−1}``), the remainder from the model (``m(t,j) = C_j(t) + r(t−1,j)``),
    a refit of the built-in graphical model after each selection, and the release
    ``g_t`` = the average of the ``h_{t,l}`` (``l = 1..k``), sampled as a mixture (each
    row from one ``h_{t,l}``).

    Attributes:
        k: selections per step (the paper does not state it; capped at the number of
            workloads).
        counter: the continual counter of each workload and of the table's size:
            ``"simple"`` (the paper's choice), ``"block"``, ``"unbounded-block"``,
            ``"binary-tree"`` or ``"hybrid"``.
        horizon: the number of steps, required by ``"block"`` and ``"binary-tree"``;
            the stream refuses a step beyond it.
    """

    k: int = 3
    counter: KindName = "simple"
    horizon: int | None = None

    def __post_init__(self) -> None:
        int_param(self.k, "Paper.k", low=1, high=None)
        _check_counter(self)


@dataclass(frozen=True)
class Baseline:
    """Algorithm 2 (StreamingMWEM): an independent select–measure–fit on each batch alone
    (discrete Laplace noise per selected histogram), its table appended to the previous
    one. Insertions only.

    Attributes:
        k: selections per batch (capped at the number of workloads).
        score: the selection score against the batch's model fitted so far
            (:mod:`dpstream.tabular.selection`): ``"l2"`` (excess ℓ2 distance: favours
            the large workloads' relative errors), ``"l2-cell"`` (the same per cell:
            favours the small workloads) or ``"paper"`` (the score printed in Section 7.2).
        estimator: the fit of each batch: ``"pgm"`` (the built-in graphical model, as in
            the paper's experiments) or ``"mw"`` (multiplicative weights over the full
            domain, Algorithm 2 as printed; small domains only).
        counter: the continual counter of the table's size (as :class:`Paper`'s).
        horizon: the number of steps, required by ``"block"`` and ``"binary-tree"``.
    """

    k: int = 3
    score: ScoreName = "l2"
    estimator: EstimatorName = "pgm"
    counter: KindName = "simple"
    horizon: int | None = None

    def __post_init__(self) -> None:
        int_param(self.k, "Baseline.k", low=1, high=None)
        if not isinstance(self.score, str) or self.score not in SCORES:
            raise ValueError(f"Baseline.score must be one of {SCORES}, got {self.score!r}")
        if self.estimator not in ESTIMATORS:
            raise ValueError(
                f"Baseline.estimator must be one of {ESTIMATORS}, got {self.estimator!r}"
            )
        _check_counter(self)


Policy: TypeAlias = Adaptive | Paper | Baseline
POLICIES: dict[str, type[Adaptive] | type[Paper] | type[Baseline]] = {
    "adaptive": Adaptive,
    "paper": Paper,
    "baseline": Baseline,
}

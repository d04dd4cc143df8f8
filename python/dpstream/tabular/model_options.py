"""How :class:`~dpstream.tabular.TabularStream` fits its model and draws its rows.

:class:`ModelOptions` is passed as ``TabularStream(..., model=ModelOptions(...))``. Every
field is public and post-processing or a public rule: none changes the guarantee or the
ε a step spends. A state keeps the fields in its options under the keys ``iters``,
``max_model_cells`` and ``sampling`` (:mod:`dpstream.tabular.checkpoint`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, ParamSpec, TypeVar

from dpstream._params import int_param

__all__ = ["ModelOptions", "SamplingName", "refuse_moved"]

SamplingName = Literal["round", "iid"]
SAMPLINGS: tuple[SamplingName, ...] = ("round", "iid")


@dataclass(frozen=True)
class ModelOptions:
    """The fit and the drawing of rows of :class:`~dpstream.tabular.TabularStream`.

    Attributes:
        iters: the most belief propagations of each fit, at least 1; a fit stops earlier
            once converged. ``None`` (default): the policy's own, 1,000 for ``Adaptive``
            (:data:`~dpstream.tabular.epochs.FIT_ITERS`), 100 for ``Paper`` and
            ``Baseline`` (:data:`~dpstream.tabular.fitting.FIT_ITERS`).
        max_model_cells: ``Paper``/``Baseline`` with ``"pgm"``: a workload is a selection
            candidate only if the model's junction tree with it stays within this many
            cells (a public rule, :class:`~dpstream.tabular.fitting.CellLimit`); every
            policy refuses a workload that no model within the bound can hold
            (ValueError). At least 1 (default 200,000).
        sampling: how the synthetic rows are drawn from the fitted model: ``"round"``
            (default, as Private-PGM's ``synthetic_data``: every cell of each sampled
            block gets the floor or ceiling of its expected count) or ``"iid"``.
    """

    iters: int | None = None
    max_model_cells: int = 200_000
    sampling: SamplingName = "round"

    def __post_init__(self) -> None:
        # One form per value (a state's options hold these): numpy integers become int.
        if self.iters is not None:
            iters = int_param(self.iters, "iters", low=1, high=None)
            object.__setattr__(self, "iters", iters)
        cells = int_param(self.max_model_cells, "max_model_cells", low=1, high=None)
        object.__setattr__(self, "max_model_cells", cells)
        if not isinstance(self.sampling, str) or self.sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be 'round' or 'iid', got {self.sampling!r}")


#: The constructor keywords that moved into an options object: the object and its field.
_MOVED = {
    "iters": ("model", "ModelOptions", "iters"),
    "max_model_cells": ("model", "ModelOptions", "max_model_cells"),
    "sampling": ("model", "ModelOptions", "sampling"),
    "counter": ("policy", "Paper", "counter"),
    "horizon": ("policy", "Paper", "horizon"),
    "estimator": ("policy", "Baseline", "estimator"),
}

P = ParamSpec("P")
R = TypeVar("R")


def refuse_moved(init: Callable[P, R]) -> Callable[P, R]:
    """``init`` (the stream's constructor, its signature kept), refusing a keyword that
    moved into an options object with a ``TypeError`` that names the new form."""

    @functools.wraps(init)
    def checked(*args: P.args, **kwargs: P.kwargs) -> R:
        for name, (arg, owner, field) in _MOVED.items():
            if name in kwargs:
                raise TypeError(
                    f"{name} is now {owner}({field}=...): TabularStream(..., "
                    f"{arg}={owner}({field}={kwargs[name]!r}))"
                )
        return init(*args, **kwargs)

    return checked

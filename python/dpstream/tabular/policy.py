"""Policies of :class:`~dpstream.tabular.TabularStream`: how a step measures and fits.

A policy is a frozen dataclass passed as ``TabularStream(..., policy=...)``:

* :class:`Adaptive` (the default): every column measured on every batch, an MST release
  per epoch (:mod:`dpstream.tabular.epochs`). Insertions only.
* :class:`Paper`: Algorithm 3 of Kumar, Strohmer and Vershynin as printed.
* :class:`Baseline`: Algorithm 2 (StreamingMWEM).

**Privacy.** No policy field changes the guarantee: each reads only public values, and
every step spends exactly ε (the split is stated in :mod:`dpstream.tabular.epochs` for
the default and in :mod:`dpstream.tabular.selection` for the other two).

Also here: the serialised form of a policy (:func:`to_dict`, :func:`from_dict`; the
checkpoint fingerprint of ``dpstream table``) and :class:`RemovedPolicy`, the policy of a
checkpoint written with options that dpstream 0.2 removed.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeAlias

import numpy as np

__all__ = [
    "REMOVED_FIELDS",
    "Adaptive",
    "Baseline",
    "Paper",
    "Policy",
    "RemovedPolicy",
    "from_dict",
    "to_dict",
]

ScoreName = Literal["l2", "l2-cell", "paper"]
SCORES: tuple[ScoreName, ...] = ("l2", "l2-cell", "paper")
#: The fields the default policy had before dpstream 0.2 (the select–measure–fit loop of
#: Algorithm 3 with heuristics), removed with their code: they lost their benchmark.
REMOVED_FIELDS = (
    *("score", "k", "remainder", "refit", "drift_z", "drift_decay", "coverage"),
    *("staleness", "staleness_gate", "staleness_share", "max_scored"),
)


def _check_int(owner: object, name: str, minimum: int) -> None:
    value = getattr(owner, name)
    where = f"{type(owner).__name__}.{name}"
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{where} must be an int, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{where} must be at least {minimum}, got {value}")


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
    a refit after each selection, and the release ``g_t`` = the average of the
    ``h_{t,l}`` (``l = 1..k``), sampled as a mixture (each row from one ``h_{t,l}``).

    Attributes:
        k: selections per step (the paper does not state it; capped at the number of
            workloads).
    """

    k: int = 3

    def __post_init__(self) -> None:
        _check_int(self, "k", 1)


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
    """

    k: int = 3
    score: ScoreName = "l2"

    def __post_init__(self) -> None:
        _check_int(self, "k", 1)
        if not isinstance(self.score, str) or self.score not in SCORES:
            raise ValueError(f"Baseline.score must be one of {SCORES}, got {self.score!r}")


Policy: TypeAlias = Adaptive | Paper | Baseline
POLICIES: dict[str, type[Adaptive] | type[Paper] | type[Baseline]] = {
    "adaptive": Adaptive,
    "paper": Paper,
    "baseline": Baseline,
}


def check_policy(policy: object) -> Policy:
    """``policy`` if it is one; ``TypeError`` naming ``policy`` otherwise."""
    if not isinstance(policy, (Adaptive, Paper, Baseline)):
        raise TypeError(
            "policy must be dpstream.tabular.Adaptive(), Paper() or Baseline(), got "
            f"{type(policy).__name__}"
        )
    return policy


# ----------------------------------------------------------------------------- removed


#: The removed parts a stored table (dict) in a field stood for, by the field's name.
_REMOVED_PARTS = {"score": "AutoScore", "k": "AutoK", "remainder": "Pooled", "taper": "Taper"}


def _show(name: str, value: Any) -> str:
    """A stored field's value as the policy's repr wrote it (a table: its part)."""
    if isinstance(value, dict):
        fields_ = ", ".join(f"{k}={_show(k, v)}" for k, v in value.items())
        return f"{_REMOVED_PARTS.get(name, '')}({fields_})"
    return repr(value)


@dataclass(frozen=True, eq=False)
class RemovedPolicy:
    """The policy of a checkpoint written with options that dpstream 0.2 removed (the
    earlier default's: :data:`REMOVED_FIELDS`, or the keyword options of a state from
    before policies that ran as it). A stream loaded with it re-releases its last table
    (:meth:`~dpstream.tabular.TabularStream.synthetic_codes`, from the stored model and
    size) and refuses :meth:`~dpstream.tabular.TabularStream.step` with :attr:`message`.

    Attributes:
        owner: what took the options: ``"Adaptive"`` (a policy) or ``"TabularStream"``
            (the keyword options of a format-1 state).
        options: the options as the checkpoint stored them.
    """

    owner: str
    options: dict[str, Any]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={_show(k, v)}" for k, v in self.options.items())
        return f"{self.owner}({shown})"

    @property
    def message(self) -> str:
        """Why the stream cannot continue, naming the removed options."""
        what = "policy" if self.owner == "Adaptive" else "stream"
        return (
            f"this checkpoint's {what} used {self!r}, options removed in dpstream 0.2; it "
            "can re-release its last table but not continue: start a new stream "
            "(Paper() is Algorithm 3 as printed)"
        )


# ----------------------------------------------------------------------------- serialised form


def to_dict(policy: Policy) -> dict[str, Any]:
    """The policy as JSON/TOML data: ``{"name": "adaptive", field: value, ...}``.
    :func:`from_dict` reads it back."""

    def plain(value: Any) -> Any:
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value)
        return value

    check_policy(policy)
    name = next(n for n, cls in POLICIES.items() if type(policy) is cls)
    return {"name": name, **{f.name: plain(getattr(policy, f.name)) for f in fields(policy)}}


def from_dict(data: Any) -> Policy:
    """A policy from :func:`to_dict`'s form (also a policy's name alone, for its defaults).

    ``ValueError``/``TypeError`` naming the field for anything else; the fields that
    ``Adaptive`` had before dpstream 0.2 (:data:`REMOVED_FIELDS`) are named as removed."""
    if isinstance(data, str):
        data = {"name": data}
    if not isinstance(data, dict):
        raise TypeError(f"a policy is a name or a table, got {type(data).__name__}")
    rest = dict(data)
    name = rest.pop("name", None)
    if name not in POLICIES:
        raise ValueError(f"policy name must be one of {tuple(POLICIES)}, got {name!r}")
    cls = POLICIES[name]
    names = {f.name for f in fields(cls)}
    if cls is Adaptive:
        removed = [key for key in rest if key in REMOVED_FIELDS]
        if removed:
            raise ValueError(
                f"Adaptive({', '.join(removed)}): options of the earlier default policy, "
                f"removed in dpstream 0.2; Adaptive's only field is growth (Paper() is "
                f"Algorithm 3 as printed)"
            )
    unknown = sorted(set(rest) - names)
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field {unknown[0]!r} (fields: {sorted(names)})")
    built: Policy = cls(**rest)
    return built


def removed_policy(stored: Any) -> RemovedPolicy | None:
    """The :class:`RemovedPolicy` of a format-2 checkpoint's stored policy, or ``None``.

    Format 2 was written before the default was :class:`Adaptive` of today: a stored
    ``"adaptive"`` policy is always the earlier default (whatever fields it kept)."""
    if isinstance(stored, dict) and stored.get("name") == "adaptive":
        return RemovedPolicy("Adaptive", {k: v for k, v in stored.items() if k != "name"})
    return None


def score_kind(policy: Paper | Baseline) -> ScoreName:
    """The score of a step's selections (:func:`~dpstream.tabular.selection.select`):
    ``"paper"`` for :class:`Paper`, the policy's for :class:`Baseline`."""
    return "paper" if isinstance(policy, Paper) else policy.score

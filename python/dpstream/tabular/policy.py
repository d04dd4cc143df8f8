"""What the stream does with a policy (:mod:`dpstream.tabular.policy_options` holds the
option dataclasses :class:`Adaptive`, :class:`Paper` and :class:`Baseline`, re-exported
here).

* :func:`check_policy` and :func:`score_kind`: what a step reads from its policy.
* The serialised form of a policy (:func:`to_dict`, :func:`from_dict`; the checkpoint
  fingerprint of ``dpstream table``).
* :class:`RemovedPolicy`: the policy of a checkpoint written with options that dpstream
  0.2 removed.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from dpstream.tabular.policy_options import (
    POLICIES,
    Adaptive,
    Baseline,
    Paper,
    Policy,
    ScoreName,
)

__all__ = [
    "REMOVED_FIELDS",
    "Adaptive",
    "Baseline",
    "Paper",
    "Policy",
    "RemovedPolicy",
    "check_policy",
    "from_dict",
    "to_dict",
]

#: The fields the default policy had before dpstream 0.2 (the select–measure–fit loop of
#: Algorithm 3 with heuristics), removed with their code: they lost their benchmark.
REMOVED_FIELDS = (
    *("score", "k", "remainder", "refit", "drift_z", "drift_decay", "coverage"),
    *("staleness", "staleness_gate", "staleness_share", "max_scored"),
)


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
    before policies that ran as it, or a fit that is no option any more:
    ``estimator="mbi"``, ``"mw"`` outside :class:`Baseline`). A stream loaded with it
    re-releases its last table (:meth:`~dpstream.tabular.TabularStream.synthetic_codes`,
    from the stored model or rows and size) and refuses
    :meth:`~dpstream.tabular.TabularStream.step` with :attr:`message`.

    Attributes:
        owner: what took the options: ``"Adaptive"`` (a policy) or ``"TabularStream"``
            (the keyword options of a format-1 or -2 state).
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

#: Fields that were stream options before they were a policy's: written only when set,
#: so that a fingerprint from before them still matches (and ``horizon=None`` has no
#: TOML form).
_LATER_FIELDS = frozenset({"counter", "horizon", "estimator"})


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
    return {
        "name": name,
        **{
            f.name: plain(getattr(policy, f.name))
            for f in fields(policy)
            if f.name not in _LATER_FIELDS or getattr(policy, f.name) != f.default
        },
    }


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

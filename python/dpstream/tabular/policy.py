"""Policies of :class:`~dpstream.tabular.TabularStream`: how a step selects, measures and fits.

A policy is a frozen dataclass passed as ``TabularStream(..., policy=...)``:

* :class:`Heuristics` (the default): the select–measure–fit loop of Algorithm 3 with the
  heuristics measured to help (the reasons and the evidence are in ``docs/tabular.md``).
* :class:`Paper`: Algorithm 3 of Kumar, Strohmer and Vershynin as printed.
* :class:`Baseline`: Algorithm 2 (StreamingMWEM).

**Privacy.** No policy field changes the guarantee. Every choice a policy makes reads
only public values (the time, the released sizes, the workloads' public cells) and earlier
releases (counter releases, selections): which score a selection uses (each score comes
with its own sensitivity, :mod:`dpstream.tabular.selection`), how many selections a step
makes (each step still spends exactly ε, split ``ε'/2k`` per selection and per
measurement), how a measurement accounts for the rows its counter did not count, and when
the model is refitted (post-processing). The drift test (:func:`drifted`) is a test of a
release against the model's expectation: post-processing too.

Also here: the k schedule (:func:`step_k`), the drift test, the pooled measurement
(:func:`pooled_measurement`) and the serialised form of a policy (:func:`to_dict`,
:func:`from_dict`; the checkpoint fingerprint of ``dpstream table``).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Literal, TypeAlias

import numpy as np
import numpy.typing as npt

from dpstream._rng import Rng
from dpstream.tabular.raking import batch_margin, one_way, rake

__all__ = [
    "Adaptive",
    "AutoK",
    "AutoScore",
    "Baseline",
    "Paper",
    "Policy",
    "Pooled",
    "Taper",
    "from_dict",
    "to_dict",
]

#: Per column: the one-way margins of a step's released batch histograms and their noise
#: variances per cell (``refit="step"``).
Margins: TypeAlias = dict[int, tuple[list[npt.NDArray[np.float64]], list[float]]]
ScoreName = Literal["l2", "l2-cell", "paper"]
SCORES: tuple[ScoreName, ...] = ("l2", "l2-cell", "paper")
RefitName = Literal["selection", "step", "auto"]
REFITS: tuple[RefitName, ...] = ("selection", "step", "auto")
StddevName = Literal["noise", "shrinkage"]
STDDEVS: tuple[StddevName, ...] = ("noise", "shrinkage")
#: :attr:`Heuristics.max_scored`'s default: at most this many workloads scored per step
#: (every 2-way workload of up to 32 columns; 1,225 at 50 columns, 4,950 at 100).
MAX_SCORED = 500
#: :attr:`Heuristics.staleness`'s default (the value the drift bench's tuning streams and
#: ``docs/tabular.md`` "Drifting streams" measured; 16 was no better).
STALENESS = 4.0
#: :attr:`Heuristics.staleness_gate`'s default: the staleness bonus acts only once a released
#: batch is less than 1/64 of the released table (with equal batches: from step 64, so
#: never at R ≤ 48 releases).
STALENESS_GATE = 64.0
#: :attr:`Heuristics.staleness_share`'s default: the staleness bonus acts only while at least
#: half of the recent steps drifted (chosen on the tuning streams of
#: ``benches/bench_tabular_drift.py``: about 1 in time order, below 0.15 shuffled).
STALENESS_SHARE = 0.5


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


def _check_choice(owner: object, name: str, choices: tuple[object, ...]) -> None:
    value = getattr(owner, name)
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{type(owner).__name__}.{name} must be one of {choices}, got {value!r}")


def _check_type(owner: object, name: str, *allowed: type) -> None:
    value = getattr(owner, name)
    if not isinstance(value, allowed):
        names = " or ".join(t.__name__ for t in allowed)
        raise TypeError(
            f"{type(owner).__name__}.{name} must be {names}, got {type(value).__name__}"
        )


@dataclass(frozen=True)
class AutoScore:
    """The ``"l2"`` score, and the ``"l2-cell"`` score while the stream drifts.

    Attributes:
        drift_share: the per-cell score is used while the running share of drifted steps
            exceeds this; lower switches sooner, trading the large workloads' relative
            errors for the small workloads' errors on drifting streams.
    """

    drift_share: float = 0.5

    def __post_init__(self) -> None:
        _check_real(self, "drift_share", 0.0, 1.0, open_high=False)


@dataclass(frozen=True)
class Taper:
    """Calm steps late in the stream make fewer selections.

    Attributes:
        k: selections at such a step; fewer means each measurement is more precise but
            fewer workloads are re-measured per step.
        steps_per_workload: the taper starts at step ``steps_per_workload·W`` (``W`` the
            number of workloads); earlier gives the large workloads fewer chances of a
            first measurement.
        max_drift_share: and only while the running share of drifted steps is at most
            this; higher tapers streams that still drift.
    """

    k: int = 1
    steps_per_workload: int = 3
    max_drift_share: float = 0.05

    def __post_init__(self) -> None:
        _check_int(self, "k", 1)
        _check_int(self, "steps_per_workload", 0)
        _check_real(self, "max_drift_share", 0.0, 1.0, open_high=False)


@dataclass(frozen=True)
class AutoK:
    """Selections per step that follow the stream's drift (capped at the number of workloads).

    Attributes:
        calm: selections while the running share of drifted steps is at most
            ``drift_share``; each selection and measurement gets ``ε'/2k``, so fewer are
            more precise but re-measure fewer workloads.
        drifting: selections above it; a drifting stream needs its workloads re-measured
            more often.
        drift_share: the threshold between the two.
        taper: fewer selections at calm steps late in the stream (:class:`Taper`), or
            ``None`` for ``calm`` at every calm step.
    """

    calm: int = 2
    drifting: int = 3
    drift_share: float = 0.2
    taper: Taper | None = Taper()

    def __post_init__(self) -> None:
        _check_int(self, "calm", 1)
        _check_int(self, "drifting", 1)
        _check_real(self, "drift_share", 0.0, 1.0, open_high=False)
        if self.taper is not None:
            _check_type(self, "taper", Taper, type(None))


@dataclass(frozen=True)
class Pooled:
    """The pooled remainder: a workload's counted rows stand for the whole table.

    Attributes:
        stddev: the standard deviation per cell the fit is told for a pooled measurement
            (its weight): ``"shrinkage"`` counts the error of the shrinkage towards the
            model's values too; ``"noise"`` only the scaled counter noise, which weighs
            counters that are mostly noise as if they were exact.
        margin: a counter's energy must exceed its noise's expected energy by this many
            standard deviations of that energy before its rows are scaled up; higher
            leaves more workloads at the model's values, lower scales up more noise.
    """

    stddev: StddevName = "shrinkage"
    margin: float = 3.0

    def __post_init__(self) -> None:
        _check_choice(self, "stddev", STDDEVS)
        _check_real(self, "margin", 0.0, math.inf, open_high=True)


@dataclass(frozen=True)
class Adaptive:
    """The default policy: every column measured on every batch, an MST release per
    epoch (:mod:`dpstream.tabular.epochs`, where the mechanism, its ε split and its
    privacy argument are stated).

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


@dataclass(frozen=True)
class Heuristics:
    """Algorithm 3 with the heuristics the earlier default carried (being removed).

    A heuristic is on by default only where it won issue 29's rule on both data sets of
    ``benches/bench_tabular_compare.py --ablate`` (Adult and NYC flights: lower AvgWE and
    MaxWE in at least 75% of the settings, never more than 10% worse); the others are
    opt-in values of their fields.

    Attributes:
        score: the selection score: ``"l2"`` (default; excess ℓ2 distance of the batch from
            the model: favours the large workloads' relative errors), ``"l2-cell"`` (the same
            per cell: favours the small workloads), :class:`AutoScore` (opt-in: ``"l2"``,
            and ``"l2-cell"`` while the stream drifts; it failed the rule on both data sets)
            or ``"paper"`` (the score printed in Section 7.2, for comparisons).
        k: selections per step: an int (default 2, capped at the number of workloads) or
            :class:`AutoK` (opt-in: more selections while the stream drifts, fewer late in
            a calm stream; it failed the rule on flights). More selections re-measure more
            workloads, each with more noise.
        remainder: how a measurement accounts for the rows its counter did not count:
            :class:`Pooled` (default; the counted rows scaled up, and every workload
            measured so far re-fitted at each step: more precise while the counted batches
            are representative, biased when the stream drifts) or ``"model"`` (Algorithm
            3's: the synthetic data's values for those rows, which keeps the model's own
            errors).
        refit: when the model is refitted within a step: ``"step"`` (default: once per
            step: fast, and follows a drifting batch less), ``"auto"`` (opt-in: once per
            step, after each selection at the steps whose first measurement drifts; with
            large, precise batches the drift test also fires on the model's own misfit, and
            it lost to ``"step"`` on both data sets of ``bench_tabular_compare.py --ablate``) or
            ``"selection"`` (after each selection, as Algorithm 3: follows drift, but the
            intermediate fits can pull the model away from earlier measurements).
        drift_z: a step's first measurement drifts when its chi-square statistic against
            the expected batch exceeds its mean by this many standard deviations; lower
            flags more steps as drifting (more false alarms on a stationary stream). Read
            by the opt-in :class:`AutoScore`, :class:`AutoK` and ``refit="auto"``.
        drift_decay: the running share of drifted steps is updated as
            ``share ← decay·share + (1 − decay)·drifted``; higher remembers longer.
        coverage: opt-in (``False`` by default): an always-on counter of every column's
            one-way margins at ``ε/10`` (:mod:`dpstream.tabular.coverage`) corrects the
            scores' expected batches and the uncounted rows where they drift; it trades a
            tenth of the selections' and measurements' ε (a little worse on stationary
            streams) for error that keeps falling on streams in time order.
        staleness: a public bonus added to each workload's selection score,
            ``staleness · drift share · √(batch rows) · (steps since it was last
            selected)`` (divided by ``√cells`` with the per-cell score): on a drifting
            stream it re-measures workloads whose counted rows grow stale instead of
            letting the workloads of a column on which every batch differs capture the
            selections. It acts only where its two gates below let it (many small batches
            of a drifting stream); elsewhere the scores are exactly those without it.
            Higher trades the batch's own largest errors for more even re-measurement;
            0 turns it off (default :data:`STALENESS`, 4).
        staleness_gate: the bonus acts only at steps whose released batch is less than
            ``1/staleness_gate`` of the released table (``rows · gate < table rows``; with
            equal batches: from step ``gate`` on), so with few large batches, where each
            step's best-scored workloads matter most, the stream is the one without the
            bonus; higher keeps it off longer, 0 lets it act at every step.
        staleness_share: and only while the running share of drifted steps is at least
            this, so a stationary stream (whose drift test fires on a few percent of steps)
            keeps its best-scored selections; lower lets the bonus act on calmer streams,
            0 at any drift share.
        max_scored: the most workloads a step scores (``None``: all). With more workloads
            than this, each step draws a uniformly random subset of this many from the
            stream's generator, and only they are checked against ``max_model_cells`` and
            scored (all workloads if none of them fits). The subset is public: it is drawn
            before the step reads any record and depends on nothing but the generator and
            the number of workloads, so it is the same for neighbouring streams, and the
            selection over it is permute-and-flip with the same ε and sensitivity. It
            trades the chance of selecting the worst-fitted workload of the step for a
            step whose time stops growing with the number of workloads; the default,
            ``MAX_SCORED``, scores every workload of tables up to 32 columns (all
            2-way workloads) and changes nothing there.
    """

    score: AutoScore | ScoreName = "l2"
    k: AutoK | int = 2
    remainder: Pooled | Literal["model"] = Pooled()
    refit: RefitName = "step"
    drift_z: float = 3.0
    drift_decay: float = 0.9
    coverage: bool = False
    staleness: float = STALENESS
    staleness_gate: float = STALENESS_GATE
    staleness_share: float = STALENESS_SHARE
    max_scored: int | None = MAX_SCORED

    def __post_init__(self) -> None:
        if not isinstance(self.score, AutoScore) and self.score not in SCORES:
            raise ValueError(
                f"Heuristics.score must be AutoScore(...) or one of {SCORES}, got {self.score!r}"
            )
        if not isinstance(self.k, AutoK):
            if not isinstance(self.k, numbers.Integral) or isinstance(self.k, bool):
                raise TypeError(
                    f"Heuristics.k must be an AutoK or an int, got {type(self.k).__name__}"
                )
            _check_int(self, "k", 1)
        if not isinstance(self.remainder, Pooled) and self.remainder != "model":
            raise ValueError(
                f"Heuristics.remainder must be Pooled(...) or 'model', got {self.remainder!r}"
            )
        _check_choice(self, "refit", REFITS)
        _check_real(self, "drift_z", 0.0, math.inf, open_high=True)
        _check_real(self, "drift_decay", 0.0, 1.0, open_high=True)
        if not isinstance(self.coverage, (bool, np.bool_)):
            raise TypeError(
                f"Heuristics.coverage must be a bool, got {type(self.coverage).__name__}"
            )
        _check_real(self, "staleness", 0.0, math.inf, open_high=True)
        _check_real(self, "staleness_gate", 0.0, math.inf, open_high=True)
        _check_real(self, "staleness_share", 0.0, 1.0, open_high=False)
        if self.max_scored is not None:
            _check_int(self, "max_scored", 1)


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
        score: the selection score (``"l2"``, ``"l2-cell"`` or ``"paper"``; see
            :class:`Heuristics`), against the batch's model fitted so far.
    """

    k: int = 3
    score: ScoreName = "l2"

    def __post_init__(self) -> None:
        _check_int(self, "k", 1)
        _check_choice(self, "score", SCORES)


Policy: TypeAlias = Adaptive | Heuristics | Paper | Baseline
POLICIES: dict[str, type[Adaptive] | type[Heuristics] | type[Paper] | type[Baseline]] = {
    "adaptive": Adaptive,
    "heuristics": Heuristics,
    "paper": Paper,
    "baseline": Baseline,
}


def check_policy(policy: object) -> Policy:
    """``policy`` if it is one; ``TypeError`` naming ``policy`` otherwise."""
    if not isinstance(policy, (Adaptive, Heuristics, Paper, Baseline)):
        raise TypeError(
            "policy must be dpstream.tabular.Heuristics(), Paper() or Baseline(), got "
            f"{type(policy).__name__}"
        )
    return policy


# ----------------------------------------------------------------------------- serialised form


def to_dict(policy: Policy) -> dict[str, Any]:
    """The policy as JSON/TOML data: ``{"name": "adaptive", field: value, ...}``, nested
    policy parts as tables (``None`` for no taper). :func:`from_dict` reads it back."""

    def plain(value: Any) -> Any:
        if is_dataclass(value) and not isinstance(value, type):
            return {f.name: plain(getattr(value, f.name)) for f in fields(value)}
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value)
        return value

    name = next(n for n, cls in POLICIES.items() if type(policy) is cls)
    return {"name": name, **plain(check_policy(policy))}


#: Nested parts: which class a table (dict) in a field stands for, and the word that
#: stands for its defaults (the TOML shorthand ``k = "auto"``).
_PARTS: dict[tuple[type, str], tuple[type, str | None]] = {
    (Heuristics, "score"): (AutoScore, "auto"),
    (Heuristics, "k"): (AutoK, "auto"),
    (Heuristics, "remainder"): (Pooled, "pooled"),
    (AutoK, "taper"): (Taper, None),
}


def _build(cls: type, data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise TypeError(f"{where} must be a table of fields, got {type(data).__name__}")
    names = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        raise ValueError(f"{where}: unknown field {unknown[0]!r} (fields: {sorted(names)})")
    kwargs: dict[str, Any] = {}
    for key, value in data.items():
        part = _PARTS.get((cls, key))
        if part is not None:
            sub, word = part
            if isinstance(value, dict):
                value = _build(sub, value, f"{cls.__name__}.{key}")
            elif word is not None and value == word:
                value = sub()
            elif sub is Taper and value in (None, False):
                value = None  # TOML has no null: taper = false
        kwargs[key] = value
    return cls(**kwargs)


def from_dict(data: Any) -> Policy:
    """A policy from :func:`to_dict`'s form (also a policy's name alone, for its defaults).

    Nested parts are tables (``k = {calm = 2}``) or, for their defaults, a word
    (``score = "auto"``, ``k = "auto"``, ``remainder = "pooled"``); ``taper = false`` is
    no taper. ``ValueError``/``TypeError`` naming the field for anything else."""
    if isinstance(data, str):
        data = {"name": data}
    if not isinstance(data, dict):
        raise TypeError(f"a policy is a name or a table, got {type(data).__name__}")
    rest = dict(data)
    name = rest.pop("name", None)
    if name not in POLICIES:
        raise ValueError(f"policy name must be one of {tuple(POLICIES)}, got {name!r}")
    cls = POLICIES[name]
    built: Policy = _build(cls, rest, cls.__name__)
    return built


def score_kind(policy: Policy) -> str:
    """The score of a step's selections (:func:`~dpstream.tabular.selection.select`):
    ``"paper"`` for :class:`Paper`, ``"auto"`` for :class:`AutoScore`, else the policy's."""
    if isinstance(policy, Paper):
        return "paper"
    return "auto" if isinstance(policy.score, AutoScore) else policy.score


def per_cell_score(policy: Policy, drift_share: float) -> bool:
    """:class:`AutoScore`: whether a step's selections use the per-cell score (the running
    share of drifted steps above its ``drift_share``)."""
    auto = policy.score if isinstance(policy, Heuristics) else None
    return isinstance(auto, AutoScore) and drift_share > auto.drift_share


# ----------------------------------------------------------------------------- the drift test


def drifted(
    increment: npt.NDArray[np.float64],
    expected: npt.NDArray[np.float64],
    variance: float,
    z: float,
) -> bool:
    """Whether a released batch histogram is further from the model's expected batch than
    noise and sampling explain. The statistic ``Σ (increment − e)² / (variance + e + 1)``
    (``e`` the expected counts, ``≥ 0``; the sampling variance of a cell is about its count)
    has mean about the number of cells ``c`` when the batch follows the model; drift is
    declared above ``c + z·√(2c)``. Post-processing of a release and of public values."""
    e = np.clip(expected, 0.0, None)
    stat = float(np.sum((increment - e) ** 2 / (variance + e + 1.0)))
    cells = increment.size
    return stat > cells + z * math.sqrt(2.0 * cells)


def drift_test(
    policy: Heuristics,
    share: float,
    increment: npt.NDArray[np.float64],
    expected: npt.NDArray[np.float64],
    base: npt.NDArray[np.float64],
    variance: float,
    size_variance: float | None,
) -> tuple[bool, float]:
    """The drift test of a step's first measurement (:func:`drifted` at ``policy.drift_z``)
    and the running share of drifted steps after it (decay ``policy.drift_decay``, from
    ``share``). ``expected``: the model's batch of the released size; with a private size
    (``size_variance`` not ``None``) rescaled first by :func:`expected_batch`. Post-processing
    of releases and public values."""
    if size_variance is not None:
        expected = expected_batch(expected, base, increment, variance, size_variance)
    moved = drifted(increment, expected, variance, policy.drift_z)
    decay = policy.drift_decay
    return moved, decay * share + (1.0 - decay) * moved


def uses_drift_test(policy: Policy) -> bool:
    """Whether a step runs the drift test on its first measurement."""
    if not isinstance(policy, Heuristics):
        return False
    return (
        policy.refit == "auto"
        or isinstance(policy.score, AutoScore)
        or isinstance(policy.k, AutoK)
        or policy.staleness > 0  # its bonus is scaled by the drift share
    )


# ----------------------------------------------------------------------------- the k schedule


def k_levels(policy: Policy, workloads: int) -> tuple[int, list[int]]:
    """The stream's ``k`` (the most selections a step makes, the name its counters had before
    ``k`` could vary) and every ``k`` a step may make, each capped at ``workloads``."""
    if isinstance(policy, Heuristics) and isinstance(policy.k, AutoK):
        auto = policy.k
        top = min(auto.drifting, workloads)
        calm = min(auto.calm, top)
        late = min(auto.taper.k, top) if auto.taper is not None else calm
        return top, sorted({late, calm, top})
    fixed = policy.k
    assert not isinstance(fixed, AutoK)
    k = min(int(fixed), workloads)
    return k, [k]


def step_k(policy: Policy, t: int, workloads: int, drift_share: float) -> int:
    """The number of selections of step ``t`` (0-based), from the running share of drifted
    steps before it (public: a test of earlier releases) and the time."""
    top, _ = k_levels(policy, workloads)
    if not isinstance(policy, Heuristics) or not isinstance(policy.k, AutoK):
        return top
    auto = policy.k
    calm = min(auto.calm, top)
    if drift_share > auto.drift_share:
        return top
    taper = auto.taper
    late = taper is not None and t >= taper.steps_per_workload * workloads
    if taper is not None and late and drift_share <= taper.max_drift_share:
        return min(taper.k, top)
    return calm


# ----------------------------------------------------------------------------- staleness


def staleness_bonus(
    policy: Policy,
    t: int,
    last_step: npt.NDArray[np.int64],
    cells: npt.NDArray[np.int64],
    rows: int,
    table_rows: int,
    drift_share: float,
    per_cell: bool,
) -> npt.NDArray[np.float64] | None:
    """``Heuristics(staleness=s, staleness_gate=τ)``: the public bonus of each candidate's
    selection score, ``s · drift_share · √rows · (t − last_step)`` (``last_step`` −1 for
    never selected; divided by ``√cells`` when ``per_cell``), or ``None`` (no bonus: the
    scores are exactly those without the field) with ``s = 0``, another policy, a step
    whose batch is not a small share of the table (``rows · τ ≥ table_rows``) or a calm
    stream (``drift_share`` below the policy's ``staleness_share``).

    Privacy: the bonus is added to the scores before permute-and-flip, so it must be the
    same for neighbouring streams. It reads public values only: the step ``t``, the earlier
    selections (``last_step``: outputs of earlier permute-and-flips), the workloads' cell
    counts, ``rows`` and ``table_rows`` (this step's released batch rows and released table
    size, both from the size counter's release, or exact when sizes are public) and the
    drift share (a test of earlier releases against the model). Nothing in it reads the
    current batch's records, so the scores' sensitivity is unchanged."""
    if not isinstance(policy, Heuristics) or policy.staleness == 0:
        return None
    if rows * float(policy.staleness_gate) >= table_rows:
        return None
    if drift_share < policy.staleness_share:
        return None
    gap = (t - last_step).astype(np.float64)
    out = float(policy.staleness) * drift_share * math.sqrt(max(rows, 0)) * gap
    if per_cell:
        out = out / np.sqrt(cells.astype(np.float64))
    return np.asarray(out, dtype=np.float64)


# ----------------------------------------------------------------------------- scored subset


def pool_key(policy: Policy, workloads: int, rng: Rng) -> list[int] | None:
    """The key of the subsets :func:`scored_pool` draws: 256 bits from ``rng``, drawn once
    when the stream is made, or ``None`` (no draw: every workload is scored, and such a
    stream's noise is unchanged) unless the policy is ``Heuristics(max_scored=m)`` with more
    than ``m`` workloads."""
    if _scored_cap(policy, workloads) is None:
        return None
    return [int(x) for x in rng.integers(4)]


def _scored_cap(policy: Policy, workloads: int) -> int | None:
    """``m`` of ``Heuristics(max_scored=m)`` when there are more than ``m`` workloads, else
    ``None`` (every workload is scored)."""
    cap = policy.max_scored if isinstance(policy, Heuristics) else None
    return None if cap is None or workloads <= cap else cap


def scored_pool(policy: Policy, workloads: int, key: list[int] | None, t: int) -> list[int] | None:
    """The indices (sorted) of the ``m`` workloads step ``t`` scores under
    ``Heuristics(max_scored=m)``, or ``None`` (every workload; ``key`` ``None``).

    A uniformly random ``m``-subset from a generator seeded with ``key`` and ``t`` alone:
    it depends on nothing the stream reads or releases, so it is the same for every
    stream of the same key, neighbouring or not (public), and the selection over it is
    permute-and-flip with the same ε and sensitivity."""
    if key is None:
        return None
    cap = _scored_cap(policy, workloads)
    assert cap is not None, "pool_key draws a key only for a bound"
    gen = np.random.Generator(np.random.PCG64([*key, int(t)]))
    return sorted(int(i) for i in gen.choice(workloads, cap, replace=False))


# ----------------------------------------------------------------------------- pooled remainder


def pooled_measurement(
    released: npt.NDArray[np.float64],
    remainder: npt.NDArray[np.float64],
    stddev: float,
    counted: int,
    rest: int,
    pooled: Pooled,
) -> tuple[npt.NDArray[np.float64], float]:
    """The pooled measurement ``C + w·ρ·C + (1 − w)·r`` and its standard deviation per cell.

    ``released`` is the counter's release ``C`` over ``counted`` rows, ``rest`` the rows it
    did not count, ``ρ = rest/counted``, ``r`` the model's values for those rows and ``w``
    the share of the release's energy that is not noise:
    ``w = max(0, ‖C‖² − |q|σ² − margin·σ²·√(5|q|))/‖C‖²`` (``σ`` = ``stddev`` per cell;
    ``σ²√(5|q|)`` bounds the standard deviation of the noise's energy, Laplace noise having
    fourth moment ``6σ⁴``). The standard deviation is ``σ(1 + wρ)`` (``stddev="noise"``) or
    ``σ·√((1 + wρ)(1 + ρ))`` (``"shrinkage"``). Post-processing of a release and public
    counts."""
    power = float(np.dot(released, released))
    var = stddev * stddev
    cells = released.size
    excess = power - cells * var - pooled.margin * var * math.sqrt(5.0 * cells)
    weight = excess / power if excess > 0.0 else 0.0
    ratio = rest / counted
    values = released + (weight * ratio) * released + (1.0 - weight) * remainder
    noise = stddev * (1.0 + weight * ratio)
    if pooled.stddev == "noise":
        return values, noise
    return values, math.sqrt(noise * stddev * (1.0 + ratio))


# ----------------------------------------------------------------------------- within a step


def expected_batch(
    expected: npt.NDArray[np.float64],
    base: npt.NDArray[np.float64],
    increment: npt.NDArray[np.float64],
    variance: float,
    size_variance: float,
) -> npt.NDArray[np.float64]:
    """For the drift test with noisy sizes: the model's batch ``expected`` (its shape times
    the change of the released size) rescaled to the batch size that combines, by inverse
    noise variance, the change of the released size (noise variance ``size_variance``) and
    the total of the released ``increment`` (``variance`` per cell; both noisy, independent).
    Why: at large ε the size counter's noise alone (its share is ε/20) would pass for drift.
    Post-processing of releases and public values."""
    total = float(expected.sum())
    if total > 0:
        shape = expected / total
    elif float(base.sum()) > 0:
        shape = base / float(base.sum())
    else:
        shape = np.full(expected.size, 1.0 / expected.size)
    size_var = max(size_variance, 1e-12)
    sum_var = max(variance * increment.size, 1e-12)
    rows = (total / size_var + float(increment.sum()) / sum_var) / (1 / size_var + 1 / sum_var)
    out: npt.NDArray[np.float64] = shape * max(rows, 0.0)
    return out


def note_margins(
    margins: Margins,
    clique: tuple[int, ...],
    shape: tuple[int, ...],
    increment: npt.NDArray[np.float64],
    variance: float,
) -> None:
    """Record in ``margins`` the one-way margins of a released increment of workload
    ``clique``'s counter (a noisy histogram of the batch, ``variance`` per cell) and their
    noise variance per cell."""
    for a, c in enumerate(clique):
        estimates, variances = margins.setdefault(c, ([], []))
        estimates.append(one_way(increment.reshape(shape), a))
        variances.append(variance * (increment.size // shape[a]))


def raked_prior(
    prior: npt.NDArray[np.float64],
    base: npt.NDArray[np.float64],
    clique: tuple[int, ...],
    shape: tuple[int, ...],
    margins: Margins,
) -> npt.NDArray[np.float64]:
    """``refit="step"``: ``prior`` (``h_{t,0}``) with the expected batch ``prior − base``
    (``base`` = ``q(g_{t−1})``) raked to the one-way margins measured at this step on the
    clique's columns (:mod:`dpstream.tabular.raking`). Public: the model, the sizes and the
    step's released counter increments."""
    if not any(c in margins for c in clique):
        return prior
    expected = np.clip(prior - base, 0.0, None).reshape(shape)
    wanted = {
        a: batch_margin(*margins[c], one_way(expected, a))
        for a, c in enumerate(clique)
        if c in margins
    }
    out: npt.NDArray[np.float64] = base + rake(expected, wanted).ravel()
    return out

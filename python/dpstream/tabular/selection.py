"""Workload selection and the split of ε: the privacy-critical part of the tabular stream.

Every selection is one permute-and-flip (exact, in the Rust core) over the workloads'
scores, with ``ε'/2k`` and the score's sensitivity; this module holds the scores, the
argument for each sensitivity next to its code, and the split of ε
(:func:`split_budget`, computed in one place).

**Neighbouring relation.** Default: one stream has one more record than the other, in the
insertions or the deletions of one step (add/remove; the batch sizes differ and the
table's size is released by a continual counter with ``ε·SIZE_SHARE``). With
``public_sizes``: the sizes are public and one record's values are replaced, an ℓ1 change
of 2 in a batch histogram; every sensitivity is then doubled (``Budget.l1``).

**What a score reads.** Only the batch's histogram ``∇f_t`` of each workload is private;
the model, the previous table ``g_{t−1}``, the released sizes and the time are public.
A record moves one cell of one batch histogram by 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpstream import noise
from dpstream._params import RealLike, exact_fraction, int_param
from dpstream._rng import Rng
from dpstream.tabular.domain import Domain
from dpstream.tabular.workloads import Clique

__all__ = [
    "SIZE_SHARE",
    "Budget",
    "ScoreKind",
    "excess_l2_scores",
    "select",
    "selection_scores",
    "split_budget",
]

#: The score a selection uses (:class:`~dpstream.tabular.policy.Paper`'s ``"paper"``, or
#: :class:`~dpstream.tabular.policy.Baseline`'s).
ScoreKind = str
SCORE_KINDS = ("l2", "l2-cell", "paper")

#: Selection scores are rounded down to multiples of 2^-SCORE_BITS.
SCORE_BITS = 20
_SCORE_LIMIT = 2.0**31
#: A batch's count in one cell of a workload must stay below this (the ``"l2"`` scores' exact
#: norm works on counts below ``2^28``, model included): checked before a step.
CELL_LIMIT = 2.0**27
#: Weight ``w`` of the measurement-noise penalty of the ``"l2"`` score.
NOISE_PENALTY = 1.0
#: ``"l2"`` scores: counts are rounded to the grid ``2^-L2_GRID_BITS`` before the exact norm.
L2_GRID_BITS = 4

#: ``Paper``/``Baseline`` (add/remove): the share of ε given to the continual counter of the
#: table's size. The rest, ``ε·(1 − SIZE_SHARE)``, is split between the selections and the
#: measurements (``ε'/2k`` each). Why 1/20: measured before issue 39 (git history of
#: ``docs/tabular.md``, "The size's share").
SIZE_SHARE = Fraction(1, 20)


@dataclass(frozen=True)
class Budget:
    """How ε is split (exact; computed in one place, :func:`split_budget`).

    With ``ε' = ε − size`` (``size = ε·SIZE_SHARE`` by default, 0 with public sizes), every
    step spends ``k·selection + k·measurement + size = ε`` on its own records (the size
    counter covers the whole stream, a record entering it at its own step only).

    Attributes:
        epsilon: the total ε of the whole stream.
        selection: ε of one selection (``ε'/2k``); ``k`` per step.
        measurement: ε of one workload counter (proposed) or of one selected
            histogram's discrete Laplace noise (baseline) (``ε'/2k``).
        laplace_scale: the discrete Laplace scale ``l1·2k/ε'`` of one measurement
            (baseline: of its noise; proposed: of a simple counter's step).
        score_sensitivity: the sensitivity given to permute-and-flip: ``l1`` times 1 for
            the ``"l2"`` score, about ``1/√min|q_i| + 2^-18`` for ``"l2-cell"`` and
            ``1/min|q_i| + 2^-18`` for the ``"paper"`` score.
        size: ε of the continual counter of the table's size (0 with ``public_sizes``).
        l1: the ℓ1 change of one neighbour in a batch histogram: 1 under add/remove (the
            default), 2 with ``public_sizes`` (one record's values replaced).
    """

    epsilon: Fraction
    selection: Fraction
    measurement: Fraction
    laplace_scale: Fraction
    score_sensitivity: Fraction
    size: Fraction = Fraction(0)
    l1: int = 1

    @property
    def counter_epsilon(self) -> Fraction:
        """ε given to a workload :class:`~dpstream.counters.Counter` (calibrated for an ℓ1
        change of 1): ``measurement / l1``, so that an ℓ1 change of ``l1`` costs
        ``measurement``."""
        return self.measurement / self.l1


def split_budget(
    epsilon: RealLike,
    k: int,
    workloads: list[Clique],
    domain: Domain,
    *,
    score: ScoreKind = "l2",
    public_sizes: bool = False,
) -> Budget:
    """The split of ε for ``k`` selections per step over ``workloads`` (exact).

    Default (add/remove one record): ``ε·SIZE_SHARE`` to the size counter and, of the
    rest ``ε'``, ``ε'/2k`` to each of the ``k`` selections of a step and ``ε'/2k`` to
    each workload counter (or each baseline measurement), all calibrated to an ℓ1
    change of 1. ``public_sizes=True`` (one record's values replaced, sizes exact and
    public): no size counter, ``ε/2k`` each, calibrated to an ℓ1 change of 2 (the
    counters' noise and the scores' sensitivities doubled). The score's sensitivity
    depends on ``score``: 1 for ``"l2"``, about ``1/√min|q_i|`` for ``"l2-cell"`` and
    ``1/min|q_i|`` for ``"paper"`` (the arguments are at the score functions).
    """
    eps = exact_fraction(epsilon, "epsilon")
    k = int_param(k, "k", low=1, high=None)
    if not isinstance(public_sizes, (bool, np.bool_)):
        raise TypeError(f"public_sizes must be a bool, got {type(public_sizes).__name__}")
    size = Fraction(0) if public_sizes else eps * SIZE_SHARE
    l1 = 2 if public_sizes else 1
    share = (eps - size) / (2 * int(k))
    if score not in SCORE_KINDS:
        raise ValueError(f"score must be one of {SCORE_KINDS}, got {score!r}")
    smallest = min(domain.cells(c) for c in workloads)
    if score == "paper":
        sensitivity = Fraction(1, smallest) + Fraction(1, 2**18)
    elif score == "l2-cell":
        sensitivity = _inverse_sqrt_bound(smallest) + Fraction(1, 2**18)
    else:
        sensitivity = Fraction(1)
    return Budget(eps, share, share, l1 / share, l1 * sensitivity, size, l1)


def select(
    score: ScoreKind,
    batches: list[npt.NDArray[np.float64]],
    bases: list[Any],
    models: list[npt.NDArray[np.float64]],
    *,
    rows: int,
    table_rows: int,
    budget: Budget,
    rng: Rng,
) -> int:
    """One permute-and-flip over candidate workloads: the index of the chosen one.

    ``batches[n]`` is candidate ``n``'s histogram of the batch (the only private input),
    ``bases[n]`` its public ``q(g_{t−1})`` (or 0) and ``models[n]`` the public model
    marginal it is compared with; ``rows`` and ``table_rows`` are public. Spends
    ``budget.selection`` with the score's sensitivity (``budget.score_sensitivity``).
    """
    if score == "paper":
        scores = selection_scores([x + b for x, b in zip(batches, bases, strict=True)], models)
    else:
        scores = excess_l2_scores(
            batches,
            [m - b for m, b in zip(models, bases, strict=True)],
            models,
            rows=rows,
            table_rows=table_rows,
            noise_stddev=math.sqrt(2) * float(budget.laplace_scale),
            per_cell=score == "l2-cell",
        )
    sensitivity = budget.score_sensitivity
    return int(noise.permute_and_flip(scores, budget.selection, sensitivity, rng=rng))


def selection_scores(
    targets: list[npt.NDArray[np.float64]], model: list[npt.NDArray[np.float64]]
) -> npt.NDArray[np.float64]:
    """The workload utilities of Section 7.2 (3), rounded down to the ``2^-20`` grid.

    ``e_i = ‖target_i − model_i‖₁ / |q_i| − |q_i|`` with ``|q_i|`` the number of cells.
    Only ``target`` depends on the current batch; one record moves one cell of it by
    one, so ``e_i`` moves by at most ``1/|q_i|`` and the rounded value by at most
    ``1/|q_i| + 2^-18`` (float error below ``2^-21`` for scores below ``2^31``, plus one
    grid step): the sensitivity :func:`split_budget` gives permute-and-flip.
    """
    scores = np.empty(len(targets))
    for n, (t, m) in enumerate(zip(targets, model, strict=True)):
        scores[n] = float(np.abs(t - m).sum()) / t.size - t.size
    if not np.all(np.isfinite(scores)) or np.any(np.abs(scores) >= _SCORE_LIMIT):
        raise ValueError("selection scores out of range (a workload error beyond 2^31)")
    rounded: npt.NDArray[np.float64] = np.floor(scores * 2.0**SCORE_BITS) / 2.0**SCORE_BITS
    return rounded


def excess_l2_scores(
    batches: list[npt.NDArray[Any]],
    shifts: list[npt.NDArray[np.float64]],
    models: list[npt.NDArray[np.float64]],
    *,
    rows: int,
    table_rows: int,
    noise_stddev: float,
    per_cell: bool = False,
) -> npt.NDArray[np.float64]:
    """The ``"l2"`` workload scores: ``‖batch_i − shift_i‖₂ − b_i`` (counts), sensitivity 1;
    with ``per_cell``, the ``"l2-cell"`` scores ``(‖batch_i − shift_i‖₂ − b_i) / √|q_i|``.

    Args:
        batches: each workload's histogram of the batch ``∇f_t`` (integer counts;
            insertions minus deletions). The only private input.
        shifts: public vectors ``q_i(h̃) − q_i(g_{t−1})``, so that
            ``batch_i − shift_i = q_i(∇f_t + g_{t−1}) − q_i(h̃)``.
        models: public model marginals ``q_i(h̃)`` (counts), for the sampling floor.
        rows: records in the batch (inserted plus deleted; public).
        table_rows: rows of the current table ``|f_t|`` (public).
        noise_stddev: standard deviation of one measurement's noise per cell.
        per_cell: divide each score by ``√|q_i|`` (``|q_i|`` the workload's cells).

    ``b_i = √(rows·(1 − ‖p_i‖²)) + w·σ·√(|q_i|·rows / (2·table_rows))`` with ``p_i`` the
    model's normalised marginal, ``w`` = :data:`NOISE_PENALTY` and ``σ`` =
    ``noise_stddev``, rounded down to the grid ``2^-20``. The norm is exact: the batch
    and the shift are put on the grid ``2^-4`` (the shift rounded to nearest) and the
    norm is ``⌊√Σv²⌋`` in integers, rounded down to the grid. One record moves one
    cell of a batch by 1 and, the sizes being public (see the module docstring),
    nothing else, so the exact norm moves by at most 1 and so does the rounded
    score: permute-and-flip gets sensitivity exactly 1. With ``per_cell`` the norm term
    is ``⌊2^20·‖·‖₂/√|q_i|⌋`` computed exactly in integers (``⌊√(N/D)⌋ = isqrt(N // D)``):
    it moves by at most ``1/√|q_i|`` plus one grid step, within the sensitivity
    :func:`split_budget` gives (``1/√min|q_i|``, rounded up, ``+ 2^-18``).
    """
    out = np.empty(len(batches))
    # Workloads of one size (and dtypes) are scored together: the same elementwise
    # operations and per-row sums as one workload at a time, so the same bits.
    groups: dict[tuple[int, Any, Any], list[int]] = {}
    xs = [_flat(x) for x in batches]
    ms = [_flat(m) for m in models]
    cs = [_flat(c, np.float64) for c in shifts]
    if not len(xs) == len(cs) == len(ms):
        raise ValueError("selection scores: one batch, shift and model per workload")
    for n, (x, c, m) in enumerate(zip(xs, cs, ms, strict=True)):
        if not x.size == c.size == m.size:
            raise ValueError(f"selection scores: workload {n}'s batch, shift and model differ")
        groups.setdefault((x.size, x.dtype, m.dtype), []).append(n)
    problems: list[tuple[int, str]] = []
    for (size, _, _), members in groups.items():
        shape = (len(members), size)
        scores, problem = _l2_group(
            np.concatenate([xs[n] for n in members]).reshape(shape),
            np.concatenate([cs[n] for n in members]).reshape(shape),
            np.concatenate([ms[n] for n in members]).reshape(shape),
            size,
            rows=rows,
            table_rows=table_rows,
            noise_stddev=noise_stddev,
            per_cell=per_cell,
        )
        out[members] = scores
        if problem is not None:
            problems.append((members[problem[0]], problem[1]))
    if problems:  # the first workload's first problem, as a loop over them would find it
        raise ValueError(min(problems)[1])
    return out


def _flat(a: Any, dtype: Any = None) -> npt.NDArray[Any]:
    """``a`` as a 1-D array (itself when it is one already)."""
    if isinstance(a, np.ndarray) and a.ndim == 1 and (dtype is None or a.dtype == dtype):
        return a
    return np.asarray(a, dtype=dtype).reshape(-1)


def _l2_group(
    x: npt.NDArray[Any],
    shift: npt.NDArray[np.float64],
    model: npt.NDArray[Any],
    size: int,
    *,
    rows: int,
    table_rows: int,
    noise_stddev: float,
    per_cell: bool,
) -> tuple[npt.NDArray[np.float64], tuple[int, str] | None]:
    """:func:`excess_l2_scores` of workloads of ``size`` cells, one per row of ``x``,
    ``shift`` and ``model``; and the first row's problem (row, message), if any."""
    unit = 1 << L2_GRID_BITS
    limit = 1 << 32
    grid = 2**SCORE_BITS
    n_rows = x.shape[0]
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        not_integer = ~np.all(x == np.round(x), axis=1)
        # Public vectors from the fit: a NaN or inf here is a bug upstream, not the data.
        not_finite = ~(np.all(np.isfinite(shift), axis=1) & np.all(np.isfinite(model), axis=1))
        v = x.astype(np.int64) * unit - np.round(shift * unit)
        too_large = np.abs(v).max(axis=1) >= limit if size else np.zeros(n_rows, dtype=bool)
        mag = np.abs(v.astype(np.int64)).astype(np.uint64)
        squares = mag * mag  # < 2^64
        sums: npt.NDArray[np.uint64] = np.stack(
            [
                np.sum(squares >> np.uint64(32), axis=1, dtype=np.uint64),
                np.sum(squares & np.uint64(0xFFFFFFFF), axis=1, dtype=np.uint64),
            ]
        )
        high, low = sums.tolist()
        total = np.sum(model, axis=1).astype(np.float64)
        safe = np.where(total > 0, total, 1.0)
        p2 = np.where(
            total > 0, np.sum((model / safe[:, None]) ** 2, axis=1), 1.0 / size if size else 0.0
        )
        noise_term = (
            NOISE_PENALTY * noise_stddev * math.sqrt(size * rows / (2.0 * max(table_rows, 1)))
        )
        bias = (np.sqrt(rows * np.maximum(1.0 - p2, 0.0)) + noise_term).tolist()
    out = np.empty(n_rows)
    for n in range(n_rows):
        if not_integer[n]:
            return out, (n, "batch histograms must hold integer counts")
        if not_finite[n]:
            return out, (n, "selection scores: the model's marginals are not finite")
        if too_large[n]:
            return out, (
                n,
                "selection scores out of range (a marginal count beyond 2^27 in one cell)",
            )
        root = math.isqrt((high[n] << 32) + low[n])  # ⌊unit·‖v/unit‖₂⌋
        b = bias[n]
        if not math.isfinite(b) or b >= _SCORE_LIMIT or root >= _SCORE_LIMIT * unit:
            return out, (n, "selection scores out of range (a workload error beyond 2^31)")
        if per_cell:
            norm_units = math.isqrt((root * grid) ** 2 // (unit * unit * size))
            bias_units = math.floor(b / math.sqrt(size) * grid)
        else:
            norm_units = root * grid // unit
            bias_units = math.floor(b * grid)
        # Both terms lie on the grid 2^-20 below 2^31: the difference is exact in float64.
        out[n] = float(norm_units - bias_units) / grid
    return out, None


def _inverse_sqrt_bound(cells: int) -> Fraction:
    """The smallest multiple of ``2^-20`` that is at least ``1/√cells`` (exact)."""
    grid = 2**SCORE_BITS
    # u ≥ grid/√cells  ⟺  u² ≥ grid²/cells  ⟺  u² ≥ ⌈grid²/cells⌉.
    need = -(-(grid * grid) // cells)
    u = math.isqrt(need - 1) + 1
    return Fraction(u, grid)

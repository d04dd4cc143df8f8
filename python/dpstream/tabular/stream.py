"""A private synthetic table that follows a stream of insertions and deletions.

Kumar, Strohmer and Vershynin, "Differentially private synthetic
high-dimensional tabular stream": at every time ``t`` the stream receives a
batch of inserted (and optionally deleted) records — the differential data
``∇f_t`` — and releases a synthetic table ``g_t`` of the current size whose
``k``-way marginals follow the real table ``f_t = Σ_{τ≤t} ∇f_τ``.

Two methods:

* ``method="proposed"`` (Algorithm 3, with the workload changes of Section
  7.2): at each step, ``marginals_per_step = k`` workloads are selected one
  by one by permute-and-flip (never worse than the paper's exponential
  mechanism) with ``ε/2k`` each, on a score that compares the selection
  target ``q_i(∇f_t + g_{t−1})`` with the current model ``q_i(h_{t,l−1})``
  (``score=``, below); the selected workload's histogram of ``∇f_t`` is fed to
  its own continual counter (one vector counter per workload, ``ε/2k``), and
  the counter's release, completed for the rows of the times ``j`` was not
  selected (``remainder=``, below; Algorithm 3's ``m(t,j) = C_j(t) + r(t−1,j)``
  with ``remainder="model"``), is a measurement for the fit.
* ``method="baseline"`` (Algorithm 2, StreamingMWEM with the same fit): each
  step runs an independent select–measure–fit on ``∇f_t`` alone (discrete
  Laplace of scale ``2k/ε`` per selected histogram) and appends the fitted
  table to the previous synthetic table. Insertions only.

Here ``ε/2k`` is the share with public sizes; by default each is ``ε'/2k``, where
``ε' = ε − ε/20`` leaves ``ε/20`` to the table's size (Privacy, below).

Privacy (Theorem 6.1, with the table's size released privately):

* **Neighbouring streams** (default): one stream has one more record than the
  other, in the insertions or the deletions of one time step (add/remove one
  record; the batch sizes and the table's size differ).
* **Guarantee**: the whole sequence of synthetic tables, their sizes (row counts)
  and :attr:`TabularStream.size` is ε-DP. **Public**: the domain, the options, the
  time index, and whether a step is given a ``deletions`` argument (not its
  records). The table's size is released by a continual counter (below) and
  everything that needs a size reads that release: the scale-up of the pooled
  measurements, the model's total, the scores' batch size and table size, and each
  release's row count. The released size is post-processing of the counter: a
  running maximum (monotone) while the stream is insert-only (the baseline method,
  or no step given a ``deletions`` argument so far), else clipped at 0. The exact
  size is kept only to refuse deleting more records than the table holds.
* **Split** (:meth:`TabularStream.budget`, one place; ``ε' = ε − ε·SIZE_SHARE``):
  ``ε·SIZE_SHARE`` (1/20) to the size counter (a scalar counter of each batch's net
  rows, of the workload counters' kind and horizon; one record changes one step's
  value by 1), ``ε'/2`` to selection (``k`` selections of ``ε'/2k`` per step; a
  selection at time ``t`` reads only ``∇f_t``, the size released at ``t`` and earlier
  releases) and ``ε'/2`` to measurement (a record enters only the ``k`` counters
  selected at its time, ``ε'/2k`` each; a workload histogram has ℓ1-sensitivity 1).
  With ``marginals_per_step="auto"`` the step's ``k`` is chosen before the step from
  earlier releases (below); each step still spends exactly ``ε`` on its own batch, and
  a workload has one counter per ``k``, fed only at the steps with that ``k``
  (``ε'/2k``): a record still enters the counters of its own step only. A step whose
  later selections find no workload within ``max_model_cells`` ends early (a public
  rule) and spends less.
* **Public sizes** (``public_sizes=True``, opt-in): the exact batch sizes, hence the
  table's size, are public and each release has exactly ``|f_t|`` rows. Neighbouring
  streams then have the same sizes and differ in **one record's values** (one record
  of one step replaced by another), which moves a batch histogram by an ℓ1 change of
  2. So there is no size counter, ``ε/2k`` to each selection and each counter, and
  every mechanism is calibrated to that change: the counters get ``ε/4k`` for an ℓ1
  change of 1 (twice the noise) and every score's sensitivity is doubled (the
  replacement is a removal and an addition with the public sizes held fixed, each
  moving a score by at most its add/remove sensitivity). States saved before this
  option existed load with it (see :meth:`TabularStream.from_bytes`).
* **Noise**: exact discrete Laplace and exact permute-and-flip in the Rust
  core from one ChaCha12 generator.
* **Selection scores** (``score=``; the sensitivity is what permute-and-flip is
  given, see :meth:`TabularStream.budget`):

  - ``"l2"``: ``e_i = ‖q_i(∇f_t + g_{t−1}) − q_i(h̃)‖₂ − b_i``, where
    ``h̃`` is the current model scaled to the current table size ``|f_t|``
    (at a step's first selection, ``g_{t−1}`` scaled up) and ``b_i`` is public:
    the ℓ2 norm a batch of ``B`` rows drawn from the model itself would
    typically show, ``√(B(1 − ‖p_i‖²))``, plus a measurement-noise penalty
    ``w·σ·√(|q_i|·B / 2|f_t|)`` (``σ = √2·2k/ε'`` the standard deviation of one
    measurement's noise per cell, ``w = 1``; ``B`` and ``|f_t|`` the released sizes:
    ``B`` the change of the released size, the batch's rows with ``public_sizes``). Why: a
    measurement at time ``t`` corrects the model's relative error on ``q_i`` by a fraction
    ``B/|f_t|`` and adds noise of squared norm ``σ²|q_i|``; to first order this pays off when the
    error seen in the batch, ``‖B·e_i‖₂``, exceeds ``σ·√(|q_i|·B / 2|f_t|)``. So
    large workloads are measured once the table is large enough for their
    noise to be small relative to it. The model and the released sizes are public, so
    the score is the distance of the batch's histogram from a public vector:
    one record changes it by at most 1. It is computed exactly (counts on the
    grid 1/16, an integer square root), so the sensitivity is exactly 1.
  - ``"l2-cell"``: the ``"l2"`` score divided by ``√|q_i|``, i.e. the batch's
    excess root-mean-square error per cell. Why: errors reported per cell (WE,
    the ℓ1 error over ``|q_i|`` cells, is at most the RMS error per cell) count
    the same misplaced records 2,500 times more in a 4-cell workload than in a
    10,000-cell one, while ``"l2"`` compares raw counts (a factor 1) and so
    favours the large workloads; ``"l2-cell"`` weighs them by ``1/√|q_i|``
    (a factor 50). On streams whose batches differ strongly from the table so
    far (Adult sorted by its first column) ``"l2"`` spends nearly every
    selection on the columns the order follows and leaves the small
    workloads uncorrected; ``"l2-cell"`` corrects them, at the price of the
    large workloads' relative errors (``benches/RESULTS.md``: it lowers MaxWE
    in some settings, never the relative ℓ2 errors). Sensitivity ``1/√min|q_i|``
    (rounded up to the grid ``2^-20``) ``+ 2^-18``; the norm term is exact in
    integers.
  - ``"auto"`` (default): ``"l2"``, or ``"l2-cell"`` with its sensitivity while the
    stream drifts: while the running share of steps whose first measurement drifted
    (the test of ``refit="auto"``, below; ``rate ← 0.9·rate + 0.1·drifted``,
    :data:`DRIFT_DECAY`) exceeds 1/2 (:data:`DRIFT_SHARE`). The choice is made before
    each selection from earlier releases and public values, so each selection is
    still one ``ε/2k`` permute-and-flip with the sensitivity of the score it uses
    (adaptive composition). Why: a shuffled stream (drift at 7% of the steps of
    Adult, bs-200, ε = 1; the share stays below 1/2) keeps ``"l2"``, best for the
    relative errors; on a sorted one (95%) ``"l2"`` chases the sorted columns and
    ``"l2-cell"`` measures the small workloads (``benches/RESULTS.md``, column
    "proposed, pooled, auto refit, auto score": on Adult sorted by
    its columns, MaxWE 1.7 to 3.4 times lower than with ``"l2"`` with batches of 200).
  - ``"paper"``: the printed score of Section 7.2 (3),
    ``e_i = ‖q_i(∇f_t + g_{t−1}) − q_i(h_{t,l−1})‖₁/|q_i| − |q_i|`` with
    ``h_{t,0} = g_{t−1}`` (the previous table, not rescaled). Its ``−|q_i|``
    term rules out every large workload, whose columns then stay uniform
    (``benches/RESULTS.md``). Floats rounded down to the grid ``2^-20``;
    sensitivity ``max_i 1/|q_i| + 2^-18``, which bounds the change of a
    rounded score for scores below ``2^31`` (larger scores are refused).
* **Selections per step** (``marginals_per_step=``): an int ``k``, or
  ``"auto"`` (default): :data:`CALM_K` ``= 2`` selections while the running share of drifted
  steps (the one ``score="auto"`` reads) is at most :data:`K_DRIFT_SHARE` ``= 0.2``,
  and :data:`DRIFT_K` ``= 3`` above it. Why: each selection and measurement gets
  ``ε/2k``, so on a stream whose batches look like the table so far (where the pooled
  remainder, below, scales a workload's counted rows up to the table) a workload
  selected at about ``Tk/W`` of ``T`` steps (``W`` workloads) has an estimate whose
  noise variance is about ``(Tk/W)·2(2k/ε)²·(W/Tk)²``, proportional to ``k``: fewer,
  more precise measurements per step win. A stream that drifts needs its workloads
  re-measured more often. One calm selection would be better still for the
  workloads it measures, but a workload on many cells is then rarely the single
  best pick and may never be measured (on Adult, age × … stayed at a relative
  error of 0.7). The choice reads only public values, so the guarantee is the same.
  A default together with ``pooled_stddev="shrinkage"`` (below), not alone: on Adult
  (``benches/RESULTS.md``, 16 settings of 3 runs), against ``k = 3``, it lowers
  AvgRelL2 in 7 settings alone (with batches of 50 on the shuffled stream; it is worse
  with batches of 200 and on the sorted streams, where the drift test, weak at small
  ε, leaves some steps calm) and in 13 with the shrinkage standard deviation. Why
  together: with two counters per workload (one per ``k``), each counts fewer rows,
  so its pooled measurement is scaled up by a larger ``ρ``, where the noise-only
  standard deviation overstates its precision most.

  ``k_schedule="taper"`` (the default; ``"fixed"`` keeps ``CALM_K``): calm steps make
  :data:`TAPER_K` ``= 1`` selection once the stream has taken :data:`TAPER_STEPS` ``= 3``
  steps per workload (``t ≥ 3W``), while none of the last 7 steps drifted (the running
  share at most :data:`TAPER_DRIFT_SHARE` ``= 0.05``); drifting steps still make
  ``DRIFT_K``. Why: the argument above says one calm selection is the most precise, and
  the reason against it (a large workload may never get its first measurement) weakens
  once every workload has had ``CALM_K·TAPER_STEPS = 6`` selections' worth of chances; a
  stream that drifted lately needs its workloads re-measured. The switch reads only the
  time ``t`` and earlier releases, so the guarantee is the same; the ``k = 1`` steps feed
  a third counter per workload (``ε/2``). On Adult (``benches/RESULTS.md``, columns
  "proposed, auto score, shrinkage stddev, auto k, fixed k schedule" and "…, taper k
  schedule: library default"; with batches of 200 the stream ends before step
  ``3W = 273``, so only the streams with batches of 50 differ) it lowers AvgRelL2 on the
  shuffled stream at ε = 1 and 2 (0.170 against 0.193 at ε = 2, where the paper has
  0.186). The section "where the taper acts" (``benches/diag_tabular_taper.py``) runs the
  two schedules with the same seeds, so that they share every draw up to step ``3W``: on
  the shuffled stream AvgRelL2 drops from 0.309 to 0.269 at ε = 1 (3 runs of 3) and is
  unchanged at ε = 0.5 and 4; on the sorted stream the drift gate keeps every step but one
  at ``k ≥ 2`` at ε ≥ 1, and tapers 15% of the late steps at ε = 0.5.
* **Remainder** (``remainder=``; post-processing, no privacy cost): a workload's
  counter only counts the batches of the steps it was selected at, so a
  measurement must account for the other rows.

  - ``"pooled"`` (default): the counted rows ``n_j`` stand for all ``|f_t|`` rows,
    ``m = C_j + w·ρ·C_j + (1 − w)·r`` with ``ρ = (|f_t| − n_j)/n_j`` and the
    shrinkage weight ``w = max(0, ‖C_j‖² − |q_j|σ² − 3σ²√(5|q_j|))/‖C_j‖²`` (``σ`` the
    release's noise per cell), which leaves a counter that is mostly noise to ``r``.
    And each step's last fit also gets this measurement, at the current size, for
    every workload measured at an earlier step: the counters are the model's memory.
    (Algorithm 3 fits only the step's ``k`` measurements, and the marginals measured
    before drift.) It is right when the counted batches are representative of the
    table; they are not always (the selection picks the batches that differ most
    from the model, and a sorted stream's batches differ from each other), but on
    Adult it beats ``"model"`` in every setting measured (``benches/RESULTS.md``).
  - ``"model"`` (Algorithm 3, for reproductions): ``m(t,j) = C_j(t) + r(t−1,j)``,
    the synthetic data's values for those rows. The measurement takes them as true,
    so what the model got wrong while ``j`` was not selected stays in it
    (``benches/diag_tabular_remainder.py``: with the true values of those rows
    instead, AvgWE on Adult-randomized-bs-200 at ε = 1 drops 8-fold).

  The fit weighs each measurement by ``1/σ_m²``, the standard deviation per cell it is
  told (``pooled_stddev=``, post-processing too):

  - ``"noise"``: ``σ_m = σ(1 + wρ)``, the noise of the release as the pooled
    measurement scales it (``σ`` the release's noise per cell). It treats the remainder
    part ``(1 − w)·r`` as exact, so a workload whose counter is mostly noise (``w``
    near 0) is held at the model's own values with the weight of a fresh measurement.
  - ``"shrinkage"`` (default): ``σ_m = σ·√((1 + wρ)(1 + ρ))``, the geometric mean of
    that noise and the noise ``σ(1 + ρ)`` of the counter scaled up without shrinkage.
    Why: for large ``ρ`` it is about ``σρ·√w``, the root of the risk ``w·(σρ)²`` per
    cell of a James–Stein shrinkage estimate with weight ``w`` (the noise alone,
    ``σρw``, understates it by ``√w``), and for ``w`` near 0 it no longer claims the
    remainder's precision: the counter could not tell that precision apart from noise.
    On Adult (``benches/RESULTS.md``, column "proposed, auto score, shrinkage stddev",
    16 settings of 3 runs, ``k = 3``) it lowers AvgWE against ``"noise"`` in 15
    settings, AvgRelL2 in 11 and MaxWE in 7; with ``marginals_per_step="auto"`` (the
    defaults) AvgWE in 14, AvgRelL2 in 13, MaxRelL2 in 15 and MaxWE in 8.
* **Refit** (``refit=``; post-processing, no privacy cost): when the model is
  refitted within a step.

  - ``"selection"`` (Algorithm 3): after each of the step's ``k`` measurements,
    and each later selection is scored against that refitted model.
  - ``"step"``: one fit per step, after its ``k`` selections. The selections are
    scored against the previous step's model; what the step's earlier measurements
    showed enters through the one-way margins of the batch they released (the
    difference of two consecutive releases of a selected workload's counter,
    summed over its other columns): each candidate's expected batch
    ``h_{t,0} − g_{t−1}`` is raked to them (:mod:`dpstream.tabular.raking`; the
    margins averaged by their noise variance and shrunk towards the model's
    expectation). The score's private input is still only the batch, against a
    public vector, so its sensitivity is unchanged. Why: the intermediate fits of
    ``"selection"`` see only the step's measurements and can pull the model far
    from the marginals measured before, which then steers the step's later
    selections. On Adult in random order it is several times faster (one fit in
    place of ``k``) and, at ε ≥ 1, more accurate on all four metrics; on Adult
    sorted by its columns it is mostly less accurate (``benches/RESULTS.md``,
    column "proposed, pooled, one fit per step"): there each batch differs from
    the table so far, and refitting between the selections follows it.
  - ``"auto"`` (default): per step, ``"step"`` unless the step's first
    measurement shows drift — its released batch histogram further from the
    expected batch than noise and sampling explain (a chi-square statistic beyond
    its mean plus ``DRIFT_Z = 3`` standard deviations) — then ``"selection"`` for
    that step. The test is post-processing of that release and public values.
    On Adult at ε = 1 it has a lower AvgWE and AvgRelL2 than ``"selection"`` on
    all four datasets, and takes a fraction of its time on the shuffled ones
    (``benches/RESULTS.md``, column "proposed, pooled, auto refit").
* The fit (Private-PGM style graphical model, or multiplicative weights) and
  the sampling of synthetic rows are post-processing.
"""

from __future__ import annotations

import io
import json
import math
import numbers
import warnings
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from dpstream import noise
from dpstream._params import RealLike, exact_fraction
from dpstream._rng import Rng
from dpstream.counters import KINDS, Counter, KindName
from dpstream.tabular.domain import Codes, Domain
from dpstream.tabular.estimation import MarginalModel, Measurement
from dpstream.tabular.marginals import BatchMarginals
from dpstream.tabular.raking import batch_margin, one_way, rake
from dpstream.tabular.workloads import Clique, all_workloads

if TYPE_CHECKING:
    from dpstream.tabular.pgm import ModelTree

__all__ = ["Budget", "TabularStream", "excess_l2_scores", "selection_scores"]

MethodName = Literal["proposed", "baseline"]
ScoreName = Literal["l2", "l2-cell", "paper", "auto"]
SCORES: tuple[ScoreName, ...] = ("l2", "l2-cell", "paper", "auto")
RemainderName = Literal["model", "pooled"]
REMAINDERS: tuple[RemainderName, ...] = ("model", "pooled")
RefitName = Literal["selection", "step", "auto"]
REFITS: tuple[RefitName, ...] = ("selection", "step", "auto")
PooledStddevName = Literal["noise", "shrinkage"]
POOLED_STDDEVS: tuple[PooledStddevName, ...] = ("noise", "shrinkage")
KScheduleName = Literal["fixed", "taper"]
K_SCHEDULES: tuple[KScheduleName, ...] = ("fixed", "taper")
SamplingName = Literal["round", "iid"]
EstimatorName = Literal["pgm", "mw", "mbi"]

_MAGIC = b"DPSTREAM-TABULAR"
_FORMAT = 1

#: The PGM fit stops once ten propagations lower its loss by less than this fraction.
FIT_TOL = 0.03
#: Up to this many columns, a candidate that the insertion bound of the model's junction
#: tree rejects is checked again by a greedy triangulation (one rebuild per candidate;
#: see ``TabularStream._fits``). Wider tables rely on the bound alone.
EXACT_CHECK_COLUMNS = 20
#: Selection scores are rounded down to multiples of 2^-SCORE_BITS.
SCORE_BITS = 20
_SCORE_LIMIT = 2.0**31
#: A batch's count in one cell of a workload must stay below this (the ``"l2"`` scores' exact
#: norm works on counts below ``2^28``, model included): checked before a step.
_CELL_LIMIT = 2.0**27
#: Weight ``w`` of the measurement-noise penalty of the ``"l2"`` score.
NOISE_PENALTY = 1.0
#: ``"l2"`` scores: counts are rounded to the grid ``2^-L2_GRID_BITS`` before the exact norm.
L2_GRID_BITS = 4
#: ``remainder="pooled"``: a counter's energy must exceed its noise's expected energy by this
#: many standard deviations of the noise energy before its rows are scaled up (see
#: ``TabularStream._measurement``).
POOLED_MARGIN = 3.0
#: ``refit="auto"``: a step refits after each selection when its first measurement's
#: chi-square statistic against the expected batch exceeds its mean by this many standard
#: deviations (see ``TabularStream._drifted``).
DRIFT_Z = 3.0
#: ``score="auto"``: the running share of drifted steps is updated at each step as
#: ``rate ← DRIFT_DECAY·rate + (1 − DRIFT_DECAY)·drifted``; the ``"l2-cell"`` score is used
#: while it exceeds ``DRIFT_SHARE``. On Adult at ε = 1 (bs-200) the first measurement
#: drifts at 95% of the steps of the sorted stream and 7% of the shuffled one.
DRIFT_DECAY = 0.9
DRIFT_SHARE = 0.5
#: ``marginals_per_step="auto"``: workloads selected per step while the running share of
#: drifted steps is at most ``K_DRIFT_SHARE`` (calm), and above it (drifting).
#: Why a threshold below ``DRIFT_SHARE``: the drift test has little power at small ε, and on
#: Adult sorted by its columns the share hovers around 0.1–0.5 at ε ≤ 1 while it stays near
#: 0–0.1 on the shuffled stream. Why 2 calm selections, not 1: with one, a workload on many
#: cells (age × …) is rarely the single best pick and may never be measured.
CALM_K = 2
DRIFT_K = 3
K_DRIFT_SHARE = 0.2
#: ``k_schedule="taper"``: calm steps make ``TAPER_K`` selections, not ``CALM_K``, once the
#: stream has taken ``TAPER_STEPS`` steps per workload (``t ≥ TAPER_STEPS·W``). Why then: by
#: that step the calm selections so far (``CALM_K·TAPER_STEPS`` per workload on average) have
#: given every workload its chances, so the more precise single selection no longer starves
#: the large workloads of a first measurement. And only while the running share of drifted
#: steps is at most ``TAPER_DRIFT_SHARE``: with ``DRIFT_DECAY = 0.9``, while none of the last 7
#: steps drifted. Why: on Adult sorted by its columns at ε = 0.5 the share hovers below
#: ``K_DRIFT_SHARE`` while the batches still differ from the table, and one selection per step
#: there nearly doubled MaxWE.
TAPER_STEPS = 3
TAPER_K = 1
TAPER_DRIFT_SHARE = 0.05


#: Default (add/remove): the share of ε given to the continual counter of the table's size.
#: The rest, ``ε·(1 − SIZE_SHARE)``, is split between the selections and the measurements
#: as before (``ε'/2k`` each). Why 1/20: the size enters only through ratios (the scale-up
#: ``|f_t|/n_j``, the model's total), whose relative error falls like ``1/t``, while every
#: measurement's noise grows by the factor ``1/(1 − SIZE_SHARE)``; ``benches/RESULTS.md``
#: (section "what the noisy size costs", ``benches/diag_tabular_sizes.py``) measures it.
SIZE_SHARE = Fraction(1, 20)


@dataclass(frozen=True)
class Budget:
    """How ε is split (exact; computed in one place, :meth:`TabularStream.budget`).

    With ``ε' = ε − size`` (``size = ε·SIZE_SHARE`` by default, 0 with public sizes),
    every step spends ``k·selection + k·measurement + size = ε`` on its own records (the
    size counter's ``size`` covers the whole stream of sizes, a record entering it at its
    own step only).

    Attributes:
        epsilon: the total ε of the whole stream.
        selection: ε of one selection (``ε'/2k``); ``k`` per step.
        measurement: ε of one workload counter (proposed) or of one selected
            histogram's discrete Laplace noise (baseline) (``ε'/2k``).
        laplace_scale: the discrete Laplace scale ``l1·2k/ε'`` of one measurement
            (baseline: of its noise; proposed: of a simple counter's step).
        score_sensitivity: the sensitivity given to permute-and-flip: ``l1`` times 1 for
            the ``"l2"`` and ``"auto"`` scores, about ``1/√min|q_i| + 2^-18`` for
            ``"l2-cell"`` and ``1/min|q_i| + 2^-18`` for the ``"paper"`` score.
        drift_score_sensitivity: ``score="auto"`` only (else ``None``): the sensitivity
            of the ``"l2-cell"`` score it uses while the stream drifts.
        size: ε of the continual counter of the table's size (0 with ``public_sizes``).
        l1: the ℓ1 change of one neighbour in a batch histogram: 1 under add/remove (the
            default), 2 with ``public_sizes`` (one record's values replaced).
    """

    epsilon: Fraction
    selection: Fraction
    measurement: Fraction
    laplace_scale: Fraction
    score_sensitivity: Fraction
    drift_score_sensitivity: Fraction | None = None
    size: Fraction = Fraction(0)
    l1: int = 1

    @property
    def counter_epsilon(self) -> Fraction:
        """ε given to a workload :class:`~dpstream.counters.Counter` (calibrated for an ℓ1
        change of 1): ``measurement / l1``, so that an ℓ1 change of ``l1`` costs
        ``measurement``."""
        return self.measurement / self.l1


@dataclass(frozen=True)
class _Undo:
    """The state before a step (see ``TabularStream._undo_point``)."""

    rng: bytes | None
    counters: dict[tuple[int, int], bytes | None]
    size_counter: bytes | None
    sample_rng: Mapping[str, Any]
    fields: dict[str, Any]


def _int(value: object, name: str, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if int(value) < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {value}")
    return int(value)


class TabularStream:
    """ε-DP synthetic tables for a stream of categorical records.

    Default guarantee: ε-DP for one record added to or removed from the stream, the
    table's size released by a continual counter with ``ε/20`` (``public_sizes=False``);
    with ``public_sizes=True``, ε-DP for one record's values replaced, the exact sizes
    public. The module docstring states what is public and how ε is split.

    Args:
        domain: the public schema.
        epsilon: ε of the whole stream (exact: see :mod:`dpstream._params`).
        workloads: ``k`` for all ``k``-way workloads (default 2), or a list of
            sorted column-index tuples.
        marginals_per_step: workloads selected and measured per step (the
            paper's ``k``, which it does not state), or ``"auto"`` (default: 2
            while the stream is calm, 3 while it drifts; see the module
            docstring). Each selection and each measurement of a step with ``k``
            selections gets ``ε/2k``: a larger ``k`` measures more workloads per
            step with more noise each. ``"auto"`` with the baseline method is 3.
        counter: the continual counter per workload (proposed method):
            ``"simple"`` (the paper's choice), ``"block"``,
            ``"unbounded-block"``, ``"binary-tree"``, ``"hybrid"``.
        horizon: number of steps, required by ``"block"`` and
            ``"binary-tree"`` counters.
        method: ``"proposed"`` (Algorithm 3) or ``"baseline"`` (Algorithm 2).
        estimator: ``"pgm"`` (built-in graphical model), ``"mw"``
            (multiplicative weights over the full domain; small domains),
            ``"mbi"`` (the optional Private-PGM package).
        iters: iterations (belief propagations) of each fit.
        max_model_cells: ``"pgm"`` only: a workload is a selection candidate
            only if the model's junction tree with it stays within this many
            cells (a public rule on public structure, as in MWEM+PGM), which
            bounds the fit's time and memory. The tree with the workload inserted
            answers without a rebuild per candidate
            (:class:`~dpstream.tabular.pgm.ModelTree`); on tables of at most
            ``EXACT_CHECK_COLUMNS`` columns a workload it refuses is checked again
            by a greedy triangulation. A workload that no model within the bound
            can hold is refused here (ValueError).
        score: the selection score (see the module docstring): ``"auto"``
            (default: ``"l2"``, and ``"l2-cell"`` while most recent steps'
            batches drift from the model), ``"l2"`` (excess ℓ2 distance of the
            batch from the model, sensitivity 1), ``"l2-cell"`` (the same per
            cell: favours small workloads and per-cell error metrics) or
            ``"paper"`` (the score printed in Section 7.2, which never selects
            large workloads; for reproductions). All have the same ε per
            selection. The baseline method has no drift test: ``"auto"`` is
            ``"l2"`` there.
        remainder: how a measurement accounts for the rows that came in while its
            workload was not selected (see the module docstring): ``"pooled"``
            (default; the counter's rows scaled up to the whole table, shrunk
            towards ``"model"`` when the counter is mostly noise, and every workload
            measured so far given to each step's last fit) or ``"model"``
            (Algorithm 3's remainder, the synthetic data's values at those times).
            Both are post-processing: the privacy guarantee is the same.
        pooled_stddev: ``remainder="pooled"`` only: the standard deviation per cell
            the fit is told for a pooled measurement (it sets the measurement's weight
            in the fit; see the module docstring). ``"shrinkage"`` (default):
            ``σ·√((1 + wρ)(1 + ρ))``, which also counts the error of the shrinkage
            towards the remainder. ``"noise"``: the noise of the counter's release as
            scaled, ``σ(1 + wρ)``, as if the remainder part were exact (the default
            before 2026-11). Post-processing: the same guarantee.
        k_schedule: ``marginals_per_step="auto"`` only: ``"taper"`` (default; 1 selection
            at the calm steps from step ``3W`` on, ``W`` the number of workloads, while no
            recent step drifted; see the module docstring) or ``"fixed"`` (2 selections at
            every calm step, the default before 2026-11-26). The switch reads public values
            only: the same guarantee.
        refit: when the model is refitted within a step (see the module
            docstring): ``"auto"`` (default: as ``"step"``, except at the steps
            whose first measurement shows the batch drifting from the model, which
            are as ``"selection"``), ``"selection"`` (after every measurement, as
            Algorithm 3) or ``"step"`` (once per step; the step's later selections
            are scored against the previous model with its expected batch raked to
            the margins the step's measurements released: faster, and on shuffled
            streams more accurate). Post-processing: the same guarantee.
        sampling: how the synthetic rows are drawn from the fitted model
            (post-processing, no privacy cost): ``"round"`` (default, as
            Private-PGM's ``synthetic_data``) gives every cell of each sampled
            block the floor or ceiling of its expected count, which removes most
            of the resampling error; ``"iid"`` draws the rows independently.
        public_sizes: ``False`` (default): ε-DP for one record added or removed; the
            table's size is released by a continual counter with ``ε/20`` and every
            release has that (noisy) number of rows. ``True``: the batch sizes are
            public and exact (each release has exactly ``|f_t|`` rows) and the
            guarantee is ε-DP for one record's values replaced, with every mechanism
            calibrated to that ℓ1 change of 2 (see the module docstring).
        rng: generator of the privacy noise (``None``: OS-seeded, private; a
            seeded :class:`dpstream.Rng` is reproducible and **not private**).
            Sampling of synthetic rows uses a numpy generator seeded from it.
    """

    def __init__(
        self,
        domain: Domain,
        epsilon: RealLike,
        *,
        workloads: int | list[Clique] = 2,
        marginals_per_step: int | Literal["auto"] = "auto",
        counter: KindName = "simple",
        horizon: int | None = None,
        method: MethodName = "proposed",
        estimator: EstimatorName = "pgm",
        iters: int = 100,
        max_model_cells: int = 200_000,
        score: ScoreName = "auto",
        remainder: RemainderName = "pooled",
        refit: RefitName = "auto",
        pooled_stddev: PooledStddevName = "shrinkage",
        k_schedule: KScheduleName = "taper",
        sampling: SamplingName = "round",
        public_sizes: bool = False,
        rng: Rng | None = None,
    ) -> None:
        if not isinstance(domain, Domain):
            raise TypeError(
                f"domain must be a dpstream.tabular.Domain, got {type(domain).__name__}"
            )
        self._domain = domain
        self._epsilon = exact_fraction(epsilon, "epsilon")
        self._config: dict[str, Any] = {
            "epsilon": str(self._epsilon),
            "workloads": workloads if isinstance(workloads, int) else [list(w) for w in workloads],
            "marginals_per_step": marginals_per_step,
            "counter": counter,
            "horizon": horizon,
            "method": method,
            "estimator": estimator,
            "iters": iters,
            "max_model_cells": max_model_cells,
            "score": score,
            "remainder": remainder,
            "refit": refit,
            "pooled_stddev": pooled_stddev,
            "k_schedule": k_schedule,
            "sampling": sampling,
            "public_sizes": public_sizes,
        }
        if isinstance(workloads, (int, np.integer)) and not isinstance(workloads, bool):
            cliques = all_workloads(domain, int(workloads))
        elif isinstance(workloads, list):
            cliques = [self._check_workload(w) for w in workloads]
            if not cliques or len(set(cliques)) != len(cliques):
                raise ValueError("workloads must be a non-empty list without repeats")
        else:
            raise TypeError("workloads must be an int k or a list of column-index tuples")
        self._workloads: list[Clique] = cliques
        # marginals_per_step="auto": CALM_K selections at calm steps, DRIFT_K while drifting
        # (fewer when there are fewer workloads); the baseline has no drift test: DRIFT_K.
        if isinstance(marginals_per_step, str) and marginals_per_step != "auto":
            raise ValueError(
                f"marginals_per_step must be an int or 'auto', got {marginals_per_step!r}"
            )
        self._k_auto = isinstance(marginals_per_step, str)
        if self._k_auto:
            self._k = min(DRIFT_K, len(cliques))
        else:
            self._k = _int(marginals_per_step, "marginals_per_step", 1)
        if self._k > len(cliques):
            raise ValueError(
                f"marginals_per_step = {self._k} exceeds the number of workloads {len(cliques)}"
            )
        if k_schedule not in K_SCHEDULES:
            raise ValueError(f"k_schedule must be one of {K_SCHEDULES}, got {k_schedule!r}")
        self._k_schedule: KScheduleName = k_schedule
        # The calm steps' k, before and after the taper (the same unless k_schedule="taper").
        self._calm_k = min(CALM_K, self._k) if self._k_auto else self._k
        taper = self._k_auto and k_schedule == "taper"
        self._late_k = min(TAPER_K, self._k) if taper else self._calm_k
        levels = (
            sorted({self._late_k, self._calm_k, self._k})
            if self._k_auto and method == "proposed"
            else [self._k]
        )
        if counter not in KINDS:
            raise ValueError(f"counter must be one of {KINDS}, got {counter!r}")
        if method not in ("proposed", "baseline"):
            raise ValueError(f"method must be 'proposed' or 'baseline', got {method!r}")
        if estimator not in ("pgm", "mw", "mbi"):
            raise ValueError(f"estimator must be 'pgm', 'mw' or 'mbi', got {estimator!r}")
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        self._score: ScoreName = score
        if remainder not in REMAINDERS:
            raise ValueError(f"remainder must be one of {REMAINDERS}, got {remainder!r}")
        self._remainder_kind: RemainderName = remainder
        if refit not in REFITS:
            raise ValueError(f"refit must be one of {REFITS}, got {refit!r}")
        self._refit: RefitName = refit
        if pooled_stddev not in POOLED_STDDEVS:
            raise ValueError(
                f"pooled_stddev must be one of {POOLED_STDDEVS}, got {pooled_stddev!r}"
            )
        self._pooled_stddev: PooledStddevName = pooled_stddev
        if sampling not in ("round", "iid"):
            raise ValueError(f"sampling must be 'round' or 'iid', got {sampling!r}")
        self._sampling: SamplingName = sampling
        self._method: MethodName = method
        self._estimator: EstimatorName = estimator
        self._iters = _int(iters, "iters", 1)
        self._fit = _make_fit(estimator, domain.sizes, self._iters)
        self._max_model_cells = _int(max_model_cells, "max_model_cells", 1)
        if estimator == "pgm":
            _check_model_cells(domain.sizes, cliques, self._max_model_cells)
        self._fits_cache: dict[tuple[frozenset[Clique], int], bool] = {}
        self._rng = rng if rng is not None else Rng()
        seed = [int(x) for x in self._rng.integers(4)]
        self._sample_rng = np.random.Generator(np.random.PCG64(seed))
        self._cells = np.array([domain.cells(c) for c in cliques], dtype=np.int64)
        if not isinstance(public_sizes, (bool, np.bool_)):
            raise TypeError(f"public_sizes must be a bool, got {type(public_sizes).__name__}")
        self._public_sizes = bool(public_sizes)
        self._budgets = {
            k: self.budget(
                self._epsilon, k, cliques, domain, score=score, public_sizes=self._public_sizes
            )
            for k in levels
        }
        self._budget = self._budgets[self._k]
        self._counter_kind: KindName = counter
        # Per number of selections k of a step: one counter per workload (ε/2k), fed at the
        # steps with that k that select the workload. A workload's counts are their sum.
        self._counters: dict[int, list[Counter | None]] = {k: [None] * len(cliques) for k in levels}
        self._horizon = horizon
        if method == "proposed":
            # One vector counter per workload, allocated when first selected;
            # build one now so that bad counter parameters fail here (no noise is drawn).
            Counter(counter, self._budget.counter_epsilon, 1, horizon=horizon, rng=self._rng)
        # Default (add/remove): the table's size is released by a scalar continual counter of
        # the net rows of each batch (insertions − deletions; one record changes it by 1), of
        # the same kind and horizon as the workload counters, with ε·SIZE_SHARE. Building it
        # draws no noise.
        self._size_counter: Counter | None = None
        if not self._public_sizes:
            self._size_counter = Counter(
                counter, self._budget.size, 1, horizon=horizon, rng=self._rng
            )
        self._t = 0
        # The released size |f_t| (public: the size counter's release, post-processed; the
        # exact size with public_sizes) and the exact size, kept only to refuse deleting more
        # records than the table holds (never released; sensitive like the counters).
        self._size = 0
        self._exact_size = 0
        # Public (the arguments' form, not their records): no step has been given a
        # `deletions` argument; while true, the released size is a running maximum.
        self._insert_only = True
        # Public state: the previous synthetic model and its workload marginals.
        self._model: MarginalModel | None = None
        self._synthetic_marginals: list[npt.NDArray[np.float64]] = [
            np.zeros(int(c)) for c in self._cells
        ]
        self._remainder: list[npt.NDArray[np.float64]] = [np.zeros(int(c)) for c in self._cells]
        # Public: net rows (insertions − deletions) of the steps at which each workload was
        # selected, i.e. the rows its counter has counted.
        self._counted_rows = np.zeros(len(cliques), dtype=np.int64)
        self._baseline_rows: list[Codes] = []
        # Public (outputs of permute-and-flip, inside ε): what each step selected.
        self._selections = np.zeros(len(cliques), dtype=np.int64)
        self._last_selected: list[int] = []
        # Public (tests of releases): the running share of steps whose first measurement
        # drifted (see DRIFT_DECAY).
        self._drift_rate = 0.0

    # ------------------------------------------------------------------ public values

    @staticmethod
    def budget(
        epsilon: RealLike,
        k: int,
        workloads: list[Clique],
        domain: Domain,
        *,
        score: ScoreName = "auto",
        public_sizes: bool = False,
    ) -> Budget:
        """The split of ε for ``k`` selections per step over ``workloads`` (exact).

        Default (add/remove one record): ``ε·SIZE_SHARE`` to the size counter and, of the
        rest ``ε'``, ``ε'/2k`` to each of the ``k`` selections of a step and ``ε'/2k`` to
        each workload counter (or each baseline measurement), all calibrated to an ℓ1
        change of 1. ``public_sizes=True`` (one record's values replaced, sizes exact and
        public): no size counter, ``ε/2k`` each, calibrated to an ℓ1 change of 2 (the
        counters' noise and the scores' sensitivities doubled). The score's sensitivity
        depends on ``score``.
        """
        eps = exact_fraction(epsilon, "epsilon")
        k = _int(k, "marginals_per_step", 1)
        if not isinstance(public_sizes, (bool, np.bool_)):
            raise TypeError(f"public_sizes must be a bool, got {type(public_sizes).__name__}")
        size = Fraction(0) if public_sizes else eps * SIZE_SHARE
        l1 = 2 if public_sizes else 1
        share = (eps - size) / (2 * k)
        if score not in SCORES:
            raise ValueError(f"score must be one of {SCORES}, got {score!r}")
        smallest = min(domain.cells(c) for c in workloads)
        cell = _inverse_sqrt_bound(smallest) + Fraction(1, 2**18)
        if score == "paper":
            sensitivity = Fraction(1, smallest) + Fraction(1, 2**18)
        else:
            sensitivity = cell if score == "l2-cell" else Fraction(1)
        drift = l1 * cell if score == "auto" else None
        return Budget(eps, share, share, l1 / share, l1 * sensitivity, drift, size, l1)

    @property
    def budgets(self) -> dict[int, Budget]:
        """The split of ε for each number of selections ``k`` a step may make (one entry
        unless ``marginals_per_step="auto"``); every step spends exactly ``ε``."""
        return dict(self._budgets)

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
        """The table's size ``|f_t|`` as released (rows of each release): the size
        counter's release, post-processed (non-negative; monotone while the stream is
        insert-only), inside ε. With ``public_sizes=True``, the exact size (public)."""
        return self._size

    @property
    def public_sizes(self) -> bool:
        """Whether the batch sizes are public and exact (the guarantee is then for one
        record's values replaced), not released by the size counter (add/remove)."""
        return self._public_sizes

    @property
    def seeded(self) -> bool:
        """True if the noise generator is seeded: reproducible, **not private**."""
        return self._rng.seeded

    @property
    def last_selected(self) -> list[Clique]:
        """The workloads selected and measured at the last step, in selection order.

        Public at no extra cost: they are the outputs of permute-and-flip, which ε
        already covers. Empty before the first step (and after a baseline step with no
        insertions, which measures nothing)."""
        return [self._workloads[i] for i in self._last_selected]

    @property
    def selection_counts(self) -> dict[Clique, int]:
        """How many steps have selected each workload so far (public, like
        :attr:`last_selected`); a workload selected at ``n`` steps has had ``n``
        measurements (proposed: ``n`` steps of its counter)."""
        return {w: int(n) for w, n in zip(self._workloads, self._selections, strict=True)}

    @property
    def epsilon_spent(self) -> Fraction:
        """ε spent: the stream's ε from the first step on (every step's table is
        covered by it), 0 before."""
        return self._epsilon if self._t > 0 else Fraction(0)

    @property
    def epsilon_remaining(self) -> Fraction:
        """ε not yet spent (ε before the first step, 0 after)."""
        return self._epsilon - self.epsilon_spent

    def __repr__(self) -> str:
        text = (
            f"TabularStream(columns={len(self._domain)}, epsilon={self._epsilon}, "
            f"workloads={len(self._workloads)}, k={'auto' if self._k_auto else self._k}, "
            f"method={self._method!r}, "
            f"estimator={self._estimator!r}, t={self._t})"
        )
        if self.seeded:
            text += "  # seeded: reproducible, NOT PRIVATE"
        return text

    # ------------------------------------------------------------------ the stream

    def step(self, batch: Any = None, *, deletions: Any = None) -> Any:
        """Take the next time step's insertions (and deletions); return the synthetic table.

        Args:
            batch: inserted records (a pandas/polars DataFrame with the domain's
                columns, an ``(n, d)`` integer array, or ``None`` for none); a Dask
                DataFrame or array, counted on the cluster
                (:func:`dpstream.distributed.batch_marginals`); or the step's exact
                :class:`~dpstream.tabular.marginals.BatchMarginals` (insertions and
                deletions, with ``deletions=None``). Every form gives the same step, bit
                for bit, on the same records.
            deletions: removed records, same forms (proposed method only). Whether a
                step is given a ``deletions`` argument (not its records) is public: the
                released size is kept monotone until the first step that is.

        Returns:
            A pandas DataFrame (if pandas is installed, else an ``(n, d)`` int64
            array of codes) of :attr:`size` synthetic records (the released, noisy size
            by default; the exact size with ``public_sizes=True``), with the domain's
            category labels in the columns that have them (:meth:`Domain.decode`).

        All or nothing. Refused before anything changes (``to_bytes()`` identical): a
        rejected batch (wrong columns, dtypes, unknown categories, deleting more records
        than the table holds, deletions with the baseline method, a marginal count
        beyond ``2^27`` in one cell), a stream at the counters' ``horizon``, and a model
        that no workload fits within ``max_model_cells`` (a public rule on the public
        model). A later selection that finds no workload fitting ends the step's
        selections early (public rule; the step spends less than ε). If the step still
        fails after that (a numerical failure of a fit: a bug), the counters, the
        generator (when seeded) and every other part of the state are rolled back before
        the error is raised; nothing was released, but the error itself follows from
        the step's noisy values, so a retry of the same batch counts as another step
        against ε.
        """
        counts = self._batch_marginals(batch, deletions)
        n_ins, n_dels = counts.rows_inserted, counts.rows_deleted
        if n_dels and self._method == "baseline":
            raise ValueError("the baseline method takes insertions only")
        exact = self._exact_size + n_ins - n_dels
        if exact < 0:
            raise ValueError(
                f"deleting {n_dels} records from a table of {self._exact_size + n_ins}"
            )
        self._check_step()
        diff = counts.differences()
        if any(d.size and float(np.abs(d).max()) >= _CELL_LIMIT for d in diff):
            raise ValueError(
                "a batch with a marginal count beyond 2^27 in one cell; split it into "
                "smaller batches"
            )
        undo = self._undo_point()
        try:
            size, rows = self._next_size(n_ins - n_dels, n_ins + n_dels, not counts.has_deletions)
            if self._method == "proposed":
                self._step_proposed(diff, size, rows)
            else:
                self._step_baseline(diff, size - self._size)
        except BaseException:
            self._roll_back(undo)
            raise
        self._size = size
        self._exact_size = exact
        self._insert_only = self._insert_only and not counts.has_deletions
        self._t += 1
        return self._table(self.synthetic_codes())

    def _batch_marginals(self, batch: Any, deletions: Any) -> BatchMarginals:
        """The exact workload marginals of a step's records: counted here, counted on a
        Dask cluster (a Dask collection), or given (a :class:`BatchMarginals`)."""
        if isinstance(batch, BatchMarginals):
            if deletions is not None:
                raise ValueError(
                    "precomputed BatchMarginals hold the deletions too: pass deletions=None"
                )
            batch.check(self._domain, self._workloads)
            return batch
        if any(hasattr(b, "__dask_graph__") for b in (batch, deletions)):
            from dpstream.distributed import batch_marginals

            return batch_marginals(batch, self._domain, self._workloads, deletions=deletions)
        return BatchMarginals.of(self._domain, self._workloads, batch, deletions)

    def _check_step(self) -> None:
        """Refuse, before anything changes, a step that could fail after the counters are
        stepped for reasons that do not depend on the batch (public values only)."""
        if self._horizon is not None and self._t >= self._horizon:
            raise ValueError(
                f"the stream has reached its horizon of {self._horizon} steps (the "
                f"{self._counter_kind!r} counters take no more)"
            )
        model = self._model if self._method == "proposed" else None
        structure = self._structure(model, [])
        if not any(self._fits(structure, i) for i in range(len(self._workloads))):
            raise ValueError(
                "no workload fits the model within max_model_cells; raise it or use fewer "
                "marginals_per_step"
            )
        if not all(np.all(np.isfinite(m)) for m in self._synthetic_marginals) or not all(
            np.all(np.isfinite(r)) for r in self._remainder
        ):
            raise ValueError("the model's marginals are not finite (corrupt state)")

    def _next_size(self, net: int, rows: int, no_deletions: bool) -> tuple[int, int]:
        """The size ``|f_t|`` this step releases and the batch's rows as the selection scores
        see them (both public).

        ``public_sizes``: the exact size and ``rows`` (insertions plus deletions). Default:
        the size counter's release after the batch's ``net`` rows, post-processed: a
        running maximum with the sizes released before (insert-only streams: the baseline,
        or while no step has been given a ``deletions`` argument), else at least 0; the
        batch's rows are the change of the released size (its absolute value)."""
        if self._size_counter is None:
            return self._size + net, rows
        raw = self._size_counter.step(net)
        monotone = self._method == "baseline" or (self._insert_only and no_deletions)
        size = int(released_size(np.array([self._size]), raw, monotone=monotone)[0])
        return size, abs(size - self._size)

    def _undo_point(self) -> _Undo:
        """What :meth:`_roll_back` needs to restore the state before a step."""
        counters = {
            (k, i): None if c is None else c.to_bytes()
            for k, cs in self._counters.items()
            for i, c in enumerate(cs)
        }
        return _Undo(
            rng=self._rng._checkpoint_state(),
            counters=counters,
            size_counter=None if self._size_counter is None else self._size_counter.to_bytes(),
            sample_rng=self._sample_rng.bit_generator.state,
            fields={
                "_model": self._model,
                "_synthetic_marginals": list(self._synthetic_marginals),
                "_remainder": list(self._remainder),
                "_counted_rows": self._counted_rows.copy(),
                "_selections": self._selections.copy(),
                "_last_selected": list(self._last_selected),
                "_drift_rate": self._drift_rate,
                "_baseline_rows": list(self._baseline_rows),
            },
        )

    def _roll_back(self, undo: _Undo) -> None:
        """Restore the state saved by :meth:`_undo_point` (after a failed step).

        A seeded generator is restored to its state before the step (the failed step
        released nothing, so its draws are drawn again: the run stays reproducible); an
        OS-seeded one goes on (fresh noise). Every counter is reloaded on the stream's
        generator."""
        from dpstream.counters import Counter

        if undo.rng is not None:
            self._rng = Rng._from_checkpoint_state(undo.rng)
        for (k, i), data in undo.counters.items():
            self._counters[k][i] = (
                None
                if data is None
                else Counter.from_bytes(data, rng=self._rng, allow_seeded=self.seeded)
            )
        if undo.size_counter is not None:
            self._size_counter = Counter.from_bytes(
                undo.size_counter, rng=self._rng, allow_seeded=self.seeded
            )
        self._sample_rng.bit_generator.state = undo.sample_rng
        for name, value in undo.fields.items():
            setattr(self, name, value)

    def synthetic_codes(self) -> Codes:
        """The current synthetic table as an ``(size, d)`` int64 array (post-processing)."""
        if self._method == "baseline":
            if not self._baseline_rows:
                return np.zeros((0, len(self._domain)), dtype=np.int64)
            return np.concatenate(self._baseline_rows)
        if self._model is None or self._size == 0:
            return np.zeros((0, len(self._domain)), dtype=np.int64)
        return self._model.sample(self._size, self._sample_rng, method=self._sampling)

    def _table(self, codes: Codes) -> Any:
        try:
            import pandas  # noqa: F401
        except ImportError:  # pragma: no cover - pandas is a test dependency
            return codes
        # The same labels the records came in with (the domain's categories, else codes).
        return self._domain.decode(codes)

    # ------------------------------------------------------------------ checkpoints

    def to_bytes(self) -> bytes:
        """The whole state, for a checkpoint (versioned; numpy ``.npz`` container).

        **Sensitive**: the counters (the size counter too) hold exact sums and the header
        the exact table size — protect the bytes like the raw data. An OS-seeded
        generator's key is not included (a loaded stream draws a fresh one); a seeded
        stream resumes exactly.
        """
        header = {
            "format": _FORMAT,
            "domain": {
                n: (list(self._domain.categories(n) or []) or self._domain.size(n))
                for n in self._domain.names
            },
            "config": self._config,
            "t": self._t,
            "size": self._size,
            "exact_size": self._exact_size,
            "insert_only": self._insert_only,
            "sample_rng": self._sample_rng.bit_generator.state,
            "model": _model_kind(self._model),
            "step_scale": getattr(self._model, "step_scale", 1.0),
            "model_total": None if self._model is None else float(self._model.total),
            "last_selected": self._last_selected,
            "drift_rate": self._drift_rate,
        }
        arrays: dict[str, npt.NDArray[Any]] = {
            "header": np.frombuffer(json.dumps(header).encode(), dtype=np.uint8),
            "selections": self._selections,
            "counted_rows": self._counted_rows,
        }
        rng_state = self._rng._checkpoint_state()
        if rng_state is not None:
            arrays["rng"] = np.frombuffer(rng_state, dtype=np.uint8)
        if self._size_counter is not None:
            arrays["size_counter"] = np.frombuffer(self._size_counter.to_bytes(), dtype=np.uint8)
        for i in range(len(self._workloads)):
            arrays[f"marginal_{i}"] = self._synthetic_marginals[i]
            arrays[f"remainder_{i}"] = self._remainder[i]
            for k, cs in self._counters.items():
                c = cs[i]
                if c is not None:
                    # The stream's k keeps the name it had before k could vary.
                    name = f"counter_{i}" if k == self._k else f"counter_k{k}_{i}"
                    arrays[name] = np.frombuffer(c.to_bytes(), dtype=np.uint8)
        if header["model"] == "pgm":
            for k, (clique, theta) in enumerate(self._model.potentials.items()):  # type: ignore[union-attr]
                arrays[f"clique_{k}"] = np.array(clique, dtype=np.int64)
                arrays[f"theta_{k}"] = theta
            # the tree too: the fit may keep one the greedy triangulation would not find
            # (an mbi model has none: it loads as the built-in model on the greedy tree)
            tree = getattr(self._model, "junction_tree", None)
            for k, node in enumerate(tree.nodes if tree is not None else ()):
                arrays[f"node_{k}"] = np.array(node, dtype=np.int64)
        elif header["model"] == "mw":
            arrays["dense"] = self._model.counts  # type: ignore[union-attr]
        for k, rows in enumerate(self._baseline_rows):
            arrays[f"rows_{k}"] = rows
        buf = io.BytesIO()
        np.savez(buf, **arrays)  # type: ignore[arg-type]
        return _MAGIC + buf.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, *, allow_seeded: bool = False) -> TabularStream:
        """Rebuild a stream from :meth:`to_bytes` output; ``ValueError`` if corrupt.

        A checkpoint of a seeded stream resumes its seeded generator, so everything
        it releases is reproducible and **not private**: it is refused
        (``ValueError``) unless ``allow_seeded=True``.

        A state written before ``public_sizes`` existed (its sizes were exact, its noise
        calibrated to one record added or removed with the sizes public, a relation that
        cannot hold) loads as ``public_sizes=True`` with a :class:`UserWarning`: under the
        relation that option satisfies (one record's values replaced, an ℓ1 change of 2),
        its counters' noise gives ``2ε``, so the loaded stream's :attr:`epsilon` is twice
        the saved one, and it continues with the same noise as before."""
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"data must be bytes, got {type(data).__name__}")
        try:
            return cls._decode(data, allow_seeded=bool(allow_seeded))
        except (KeyError, TypeError, AttributeError, IndexError, NotImplementedError) as e:
            # A damaged container (zip features, member names) or header fields of the
            # wrong type or shape: corrupt data, like any other.
            raise ValueError(f"corrupt TabularStream state: {type(e).__name__}: {e}") from None

    @classmethod
    def _decode(
        cls, data: bytes | bytearray | memoryview, *, allow_seeded: bool = False
    ) -> TabularStream:
        if not bytes(data[: len(_MAGIC)]) == _MAGIC:
            raise ValueError("not a dpstream TabularStream state")
        try:
            npz = np.load(io.BytesIO(bytes(data[len(_MAGIC) :])), allow_pickle=False)
            arrays = {k: npz[k] for k in npz.files}
            header = json.loads(arrays["header"].tobytes())
        except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile) as e:
            raise ValueError(f"corrupt TabularStream state: {e}") from None
        if header.get("format") != _FORMAT:
            raise ValueError(f"unsupported TabularStream state format {header.get('format')!r}")
        from dpstream.counters import Counter

        domain = Domain(header["domain"])
        cfg = dict(header["config"])
        cfg.setdefault("sampling", "iid")  # states written before the option existed
        cfg.setdefault("score", "paper")  # likewise
        cfg.setdefault("remainder", "model")  # likewise
        cfg.setdefault("refit", "selection")  # likewise
        cfg.setdefault("pooled_stddev", "noise")  # likewise
        cfg.setdefault("k_schedule", "fixed")  # likewise
        if "public_sizes" not in cfg:
            # Before the add/remove default: exact sizes, noise for an ℓ1 change of 1.
            old = Fraction(cfg["epsilon"])
            cfg["public_sizes"] = True
            cfg["epsilon"] = str(2 * old)
            warnings.warn(
                f"this TabularStream state was saved before dpstream released the table's "
                f"size privately: it loads with public_sizes=True (exact sizes; neighbouring "
                f"streams differ in one record's values) and, as its noise was calibrated "
                f"for epsilon = {old} with one record added or removed, it is "
                f"epsilon = {2 * old}-DP for that relation. Start a new stream for the "
                f"add/remove guarantee.",
                UserWarning,
                stacklevel=3,
            )
        if isinstance(cfg["workloads"], list):
            cfg["workloads"] = [tuple(w) for w in cfg["workloads"]]
        rng_state = arrays["rng"].tobytes() if "rng" in arrays else None
        if rng_state is not None and not allow_seeded:
            from dpstream.persistence import _seeded_refusal

            raise ValueError(_seeded_refusal("TabularStream"))
        s = cls(domain, Fraction(cfg.pop("epsilon")), rng=Rng(), **cfg)
        # The constructor drew the sampling seed: restore the generator after it.
        s._rng = Rng._from_checkpoint_state(rng_state)
        s._t, s._size = int(header["t"]), int(header["size"])
        s._exact_size = int(header.get("exact_size", s._size))  # old states: exact sizes
        s._insert_only = bool(header.get("insert_only", True))
        if s._size < 0 or s._exact_size < 0 or (s._public_sizes and s._size != s._exact_size):
            raise ValueError("corrupt TabularStream state: sizes")
        if s._size_counter is not None:
            if "size_counter" not in arrays:
                if s._t:
                    raise ValueError("corrupt TabularStream state: no size counter")
                s._size_counter = Counter(
                    s._counter_kind, s._budget.size, 1, horizon=s._horizon, rng=s._rng
                )
            else:
                c = Counter.from_bytes(
                    arrays["size_counter"].tobytes(), rng=s._rng, allow_seeded=allow_seeded
                )
                if c.kind != s._counter_kind or c.epsilon != s._budget.size or c.dim != 1:
                    raise ValueError("corrupt TabularStream state: size counter")
                s._size_counter = c
        s._sample_rng.bit_generator.state = header["sample_rng"]
        s._drift_rate = float(header.get("drift_rate", 0.0))  # not kept before score="auto"
        if not 0.0 <= s._drift_rate <= 1.0:
            raise ValueError("corrupt TabularStream state: drift rate")
        if "selections" in arrays:  # states written before selections were kept have zeros
            sel = np.asarray(arrays["selections"], dtype=np.int64)
            last = [int(i) for i in header.get("last_selected", [])]
            if sel.shape != s._selections.shape or np.any(sel < 0):
                raise ValueError("corrupt TabularStream state: selection counts")
            if any(not 0 <= i < sel.size for i in last):
                raise ValueError("corrupt TabularStream state: last selections")
            s._selections, s._last_selected = sel.copy(), last
        if "counted_rows" in arrays:  # states written before it was kept: zeros
            counted = np.asarray(arrays["counted_rows"])
            if counted.shape != s._counted_rows.shape or counted.dtype.kind not in "iu":
                raise ValueError("corrupt TabularStream state: counted rows")
            s._counted_rows = counted.astype(np.int64)
        n = len(s._workloads)
        for i in range(n):
            s._synthetic_marginals[i] = np.asarray(arrays[f"marginal_{i}"], dtype=np.float64)
            s._remainder[i] = np.asarray(arrays[f"remainder_{i}"], dtype=np.float64)
            for k, cs in s._counters.items():
                name = f"counter_{i}" if k == s._k else f"counter_k{k}_{i}"
                if name in arrays:
                    c = Counter.from_bytes(
                        arrays[name].tobytes(), rng=s._rng, allow_seeded=allow_seeded
                    )
                    if c.kind != s._counter_kind or c.epsilon != s._budgets[k].counter_epsilon:
                        raise ValueError(f"corrupt TabularStream state: {name}")
                    cs[i] = c
        if header["model"] == "pgm":
            from dpstream.tabular.pgm import GraphicalModel

            k = 0
            potentials: dict[Sequence[int], npt.ArrayLike] = {}
            while f"clique_{k}" in arrays:
                potentials[tuple(int(c) for c in arrays[f"clique_{k}"])] = arrays[f"theta_{k}"]
                k += 1
            nodes: list[tuple[int, ...]] = []
            while f"node_{len(nodes)}" in arrays:  # absent in states before 2026-11-26
                nodes.append(tuple(int(c) for c in arrays[f"node_{len(nodes)}"]))
            model = GraphicalModel(
                domain.sizes, potentials, header["model_total"], junction_tree=nodes or None
            )
            model.step_scale = float(header["step_scale"])
            s._model = model
        elif header["model"] == "mw":
            from dpstream.tabular.mw import DenseModel

            s._model = DenseModel(domain.sizes, arrays["dense"])
        k = 0
        while f"rows_{k}" in arrays:
            s._baseline_rows.append(np.asarray(arrays[f"rows_{k}"], dtype=np.int64))
            k += 1
        return s

    # ------------------------------------------------------------------ selection

    def _structure(self, model: MarginalModel | None, order: list[int]) -> Structure | None:
        """``"pgm"``: the cliques the next fit will have (``model``'s and this step's
        selections ``order``), and the junction tree it starts from: ``model``'s (one node
        per column before the first) with the selections inserted in order, as the fit
        will insert them (:class:`~dpstream.tabular.pgm.ModelTree`). Public structure."""
        if self._estimator != "pgm":
            return None
        from dpstream.tabular.pgm import GraphicalModel, model_tree

        base = model.junction_tree if isinstance(model, GraphicalModel) else None
        tree = model_tree(self._domain.sizes, base)
        for i in order:
            tree = tree.added(self._workloads[i])
        cliques = frozenset([*getattr(model, "cliques", ()), *(self._workloads[i] for i in order)])
        return Structure(tree, cliques)

    def _fits(self, structure: Structure | None, i: int) -> bool:
        """Whether workload ``i`` may join a model of ``structure`` (:meth:`_structure`):
        the fit's junction tree with it stays within ``max_model_cells``.

        The tree with the workload inserted answers first (no rebuild; exact for a
        workload inside a node). On tables of at most ``EXACT_CHECK_COLUMNS`` columns, a
        workload it rejects gets a second chance from the greedy triangulation of all
        the cliques (the only check before 2026-11; one rebuild per candidate). Either
        way the fit, which keeps the smaller of the two trees, stays within the bound."""
        if structure is None:
            return True
        tree, cliques = structure
        w = self._workloads[i]
        if tree.cells_with(w) <= self._max_model_cells:
            return True
        if len(self._domain) > EXACT_CHECK_COLUMNS:
            return False
        key = (cliques, i)
        if key not in self._fits_cache:
            from dpstream.tabular.pgm import junction_tree_size

            size = junction_tree_size(self._domain.sizes, [*cliques, w])
            self._fits_cache[key] = size <= self._max_model_cells
        return self._fits_cache[key]

    def _select(
        self,
        batch: list[npt.NDArray[np.float64]],
        base: list[npt.NDArray[np.float64]] | None,
        model_marginals: Callable[[int], npt.NDArray[np.float64]],
        taken: set[int],
        structure: Structure | None,
        rows: int,
        table_rows: int,
        drifting: bool = False,
        budget: Budget | None = None,
    ) -> int | None:
        """Permute-and-flip over the workloads not yet taken at this step that fit the model;
        ``None`` when none does (the step then ends its selections: a public rule on the
        public structure; :meth:`_check_step` makes sure the first selection has one).

        The selection target is ``batch[i] + base[i]`` (``q_i(∇f_t + g_{t−1})``;
        ``base`` is ``None`` for zeros); only ``batch`` depends on the current
        records. ``rows`` (records in the batch) and ``table_rows`` (``|f_t|``) are
        public; so is ``drifting`` (``score="auto"``: the ``"l2-cell"`` score when true).
        ``budget``: the split of the step's ``k`` (default: the stream's ``k``).
        """
        budget = self._budget if budget is None else budget
        # score="auto" while drifting: the "l2-cell" score, with its own sensitivity.
        switched = self._score == "auto" and drifting
        candidates = [
            i for i in range(len(self._workloads)) if i not in taken and self._fits(structure, i)
        ]
        if not candidates:
            return None
        models = [model_marginals(i) for i in candidates]
        bases = [base[i] if base is not None else 0.0 for i in candidates]
        if self._score == "paper":
            scores = selection_scores(
                [batch[i] + b for i, b in zip(candidates, bases, strict=True)], models
            )
        else:
            scores = excess_l2_scores(
                [batch[i] for i in candidates],
                [m - b for m, b in zip(models, bases, strict=True)],
                models,
                rows=rows,
                table_rows=table_rows,
                noise_stddev=math.sqrt(2) * float(budget.laplace_scale),
                per_cell=self._score == "l2-cell" or switched,
            )
        sensitivity = budget.score_sensitivity
        if switched:
            assert budget.drift_score_sensitivity is not None
            sensitivity = budget.drift_score_sensitivity
        pick = noise.permute_and_flip(scores, budget.selection, sensitivity, rng=self._rng)
        return candidates[pick]

    # ------------------------------------------------------------------ Algorithm 3

    def _counter(self, i: int, k: int) -> Counter:
        """Workload ``i``'s counter for the steps that select ``k`` workloads (``ε/2k``)."""
        c = self._counters[k][i]
        if c is None:
            c = Counter(
                self._counter_kind,
                self._budgets[k].counter_epsilon,
                int(self._cells[i]),
                horizon=self._horizon,
                rng=self._rng,
            )
            self._counters[k][i] = c
        return c

    def _release(self, i: int) -> tuple[npt.NDArray[np.float64], float]:
        """Workload ``i``'s released counts ``C_i(t)`` (the sum of its counters' releases,
        zeros if never selected) and their rough standard deviation per cell."""
        total = np.zeros(int(self._cells[i]))
        stddevs: list[float] = []
        for cs in self._counters.values():
            c = cs[i]
            if c is not None:
                total += c.release.astype(np.float64)
                stddevs.append(_stddev(c))
        # One counter: its own value, bit for bit (the independent noises' variances add).
        stddev = stddevs[0] if len(stddevs) == 1 else math.sqrt(sum(v * v for v in stddevs))
        return total, stddev

    def _measurement(
        self,
        j: int,
        released: npt.NDArray[np.float64],
        stddev: float,
        size: int,
        *,
        grown: int = 0,
    ) -> tuple[npt.NDArray[np.float64], float]:
        """The measurement ``m(t,j)`` of a workload and a rough standard deviation per cell
        (it weights the fit only), from the counter's release ``C_j(t)`` (the rows of the
        steps ``j`` was selected at) and ``size = |f_t|``.

        ``remainder="model"``: ``C_j(t) + r(t−1,j)``, the synthetic data's value for the
        rows of the other steps (Algorithm 3, lines 16–17). ``"pooled"``:
        ``C_j(t) + w·ρ·C_j(t) + (1 − w)·r``, where ``ρ = (|f_t| − n_j)/n_j`` scales the
        counted rows ``n_j`` up to the rows not counted and ``w`` is the share of the
        release's energy that is not noise:
        ``w = max(0, ‖C_j‖² − |q_j|σ² − POOLED_MARGIN·σ²·√(5|q_j|))/‖C_j‖²`` (``σ`` the
        release's standard deviation per cell; ``σ²√(5|q_j|)`` bounds the standard
        deviation of the noise's energy, Laplace noise having fourth moment ``6σ⁴``).
        Why the margin: ``ρ`` reaches hundreds, so a counter that is pure noise but
        passes the bare test by chance (half the time) would put hundreds of times its
        noise into the measurement. ``grown``: the rows the table gained since ``r`` was
        set that the counter did not count (an anchor, not selected at this step); ``r``
        is scaled to the rows it now stands for. Only post-processing of the release and
        of public values (sizes, selections, earlier releases).

        One place, so that ``benches/diag_tabular_remainder.py`` can replace the
        remainder with oracle values to measure what it costs."""
        remainder = self._remainder[j]
        counted = int(self._counted_rows[j])
        rest = size - counted
        if self._remainder_kind == "model" or counted <= 0 or rest <= 0:
            return released + remainder, stddev
        if grown and rest - grown > 0:
            remainder = remainder * (rest / (rest - grown))
        power = float(np.dot(released, released))
        var = stddev * stddev
        cells = released.size
        excess = power - cells * var - POOLED_MARGIN * var * math.sqrt(5.0 * cells)
        weight = excess / power if excess > 0.0 else 0.0
        ratio = rest / counted
        values = released + (weight * ratio) * released + (1.0 - weight) * remainder
        noise = stddev * (1.0 + weight * ratio)
        if self._pooled_stddev == "noise":
            return values, noise
        return values, math.sqrt(noise * stddev * (1.0 + ratio))

    def _anchors(self, taken: set[int], size: int) -> list[Measurement]:
        """``remainder="pooled"``: the pooled measurements, at the current size, of every
        workload measured at an earlier step and not selected now. The counters are the
        model's memory: a fit given only this step's ``k`` measurements lets the
        marginals measured before drift (the warm start is its only memory). Post-processing of
        earlier counter releases and public counts; none for ``"model"``, whose
        ``C_j + r`` of an unselected workload is the model's own value."""
        if self._remainder_kind != "pooled":
            return []
        grown = size - self._size
        out: list[Measurement] = []
        for i in range(len(self._workloads)):
            if i in taken or self._counted_rows[i] <= 0:  # counted rows: it has a counter
                continue
            released, stddev = self._release(i)
            values, stddev = self._measurement(i, released, stddev, size, grown=grown)
            out.append(Measurement(self._workloads[i], values, stddev))
        return out

    def _expected_batch(
        self,
        expected: npt.NDArray[np.float64],
        base: npt.NDArray[np.float64],
        increment: npt.NDArray[np.float64],
        variance: float,
    ) -> npt.NDArray[np.float64]:
        """Default (noisy sizes), for the drift test: the model's batch ``expected`` (the
        model's shape times the change of the released size) rescaled to the batch size
        that combines, by inverse noise variance, the change of the released size and the
        total of the released increment (both noisy, independent). Why: at large ε the size
        counter's noise alone (its share is ε/20) would pass for drift. Post-processing of
        releases and public values."""
        total = float(expected.sum())
        if total > 0:
            shape = expected / total
        elif float(base.sum()) > 0:
            shape = base / float(base.sum())
        else:
            shape = np.full(expected.size, 1.0 / expected.size)
        assert self._size_counter is not None
        size_var = max(_increment_variance(self._size_counter), 1e-12)
        sum_var = max(variance * increment.size, 1e-12)
        rows = (total / size_var + float(increment.sum()) / sum_var) / (1 / size_var + 1 / sum_var)
        out: npt.NDArray[np.float64] = shape * max(rows, 0.0)
        return out

    def _prior(self, i: int, size: int) -> npt.NDArray[np.float64]:
        """``h_{t,0}`` for the ``"l2"`` score: ``g_{t−1}``'s marginal scaled to ``size`` rows
        (uniform before there is a model: the paper's ``g_0``)."""
        if self._model is None or self._size <= 0:
            return np.full(int(self._cells[i]), size / float(self._cells[i]))
        return self._synthetic_marginals[i] * (size / self._size)

    def _raked_prior(
        self,
        i: int,
        size: int,
        base: npt.NDArray[np.float64],
        margins: dict[int, tuple[list[npt.NDArray[np.float64]], list[float]]],
    ) -> npt.NDArray[np.float64]:
        """``refit="step"``: ``h_{t,0}`` with the expected batch ``h_{t,0} − g_{t−1}`` raked to
        the batch's one-way margins measured at this step (:mod:`dpstream.tabular.raking`).
        Public: the model, the sizes and the step's released counter increments."""
        prior = self._prior(i, size)
        clique = self._workloads[i]
        if size <= self._size or not any(c in margins for c in clique):
            return prior
        shape = tuple(self._domain.sizes[c] for c in clique)
        expected = np.clip(prior - base, 0.0, None).reshape(shape)
        wanted = {
            a: batch_margin(*margins[c], one_way(expected, a))
            for a, c in enumerate(clique)
            if c in margins
        }
        out: npt.NDArray[np.float64] = base + rake(expected, wanted).ravel()
        return out

    def _note_margins(
        self,
        j: int,
        increment: npt.NDArray[np.float64],
        counter: Counter,
        margins: dict[int, tuple[list[npt.NDArray[np.float64]], list[float]]],
    ) -> None:
        """Record the one-way margins of a released increment of workload ``j``'s counter
        (a noisy histogram of the batch on ``j``) and their noise variance per cell."""
        clique = self._workloads[j]
        shape = tuple(self._domain.sizes[c] for c in clique)
        var = _increment_variance(counter)
        for a, c in enumerate(clique):
            estimates, variances = margins.setdefault(c, ([], []))
            estimates.append(one_way(increment.reshape(shape), a))
            variances.append(var * (increment.size // shape[a]))

    def _step_proposed(self, diff: list[npt.NDArray[np.float64]], size: int, rows: int) -> None:
        # Selection target: q_i(∇f_t + g_{t-1}); g_{t-1} is public.
        base = list(self._synthetic_marginals)
        model = self._model
        per_step = self._refit != "selection"  # "auto" starts like "step"
        # score="auto": the first selection follows the previous step's drift test.
        drift_rate = self._drift_rate
        test = self._refit == "auto" or self._score == "auto" or self._k_auto
        # marginals_per_step="auto": the step's k follows the earlier steps' drift and the
        # time (public).
        if not self._k_auto or drift_rate > K_DRIFT_SHARE:
            k = self._k
        elif self._t >= TAPER_STEPS * len(self._workloads) and drift_rate <= TAPER_DRIFT_SHARE:
            k = self._late_k
        else:
            k = self._calm_k
        budget = self._budgets[k]
        cache: dict[int, npt.NDArray[np.float64]] = {}
        margins: dict[int, tuple[list[npt.NDArray[np.float64]], list[float]]] = {}

        def model_marginals(i: int) -> npt.NDArray[np.float64]:
            if i not in cache:
                if model is not self._model:
                    cache[i] = model.marginal(self._workloads[i])  # type: ignore[union-attr]
                elif self._score == "paper":
                    cache[i] = base[i]  # h_{t,0} = g_{t-1}, as printed
                elif per_step:
                    cache[i] = self._raked_prior(i, size, base[i], margins)
                else:
                    cache[i] = self._prior(i, size)
            return cache[i]

        taken: set[int] = set()
        order: list[int] = []
        measurements: list[Measurement] = []
        for n_taken in range(k):
            structure = self._structure(model, order)
            drifting = drift_rate > DRIFT_SHARE
            j = self._select(
                diff, base, model_marginals, taken, structure, rows, size, drifting, budget
            )
            if j is None:  # no workload fits max_model_cells any more: the step ends here
                break
            taken.add(j)
            order.append(j)
            counter = self._counter(j, k)
            # The released increment (a noisy batch histogram) is read only when it is used.
            before = counter.release.astype(np.float64) if per_step or test else None
            after = counter.step(diff[j].astype(np.int64)).astype(np.float64)
            self._counted_rows[j] += size - self._size
            released, stddev = self._release(j)
            values, stddev = self._measurement(j, released, stddev, size)
            measurements.append(Measurement(self._workloads[j], values, stddev))
            cache = {}
            if before is not None:
                increment = after - before
                if test and n_taken == 0:
                    expected = self._prior(j, size) - base[j]  # the model's batch of this size
                    variance = _increment_variance(counter)
                    if self._size_counter is not None:
                        expected = self._expected_batch(expected, base[j], increment, variance)
                    drifted = _drifted(increment, expected, variance)
                    per_step = per_step and not (self._refit == "auto" and drifted)
                    drift_rate = DRIFT_DECAY * drift_rate + (1.0 - DRIFT_DECAY) * drifted
                if per_step:
                    self._note_margins(j, increment, counter, margins)
            if not per_step and n_taken < k - 1:
                model = self._fit(measurements, float(max(size, 1)), model)
        assert measurements, "_check_step: the first selection has a candidate"
        # The step's last fit also sees the workloads measured before ("pooled").
        model = self._fit(measurements + self._anchors(taken, size), float(max(size, 1)), model)
        self._model = model
        self._drift_rate = drift_rate
        self._record(order)
        assert model is not None
        for i, clique in enumerate(self._workloads):
            self._synthetic_marginals[i] = model.marginal(clique) * (
                size / max(model.total, 1e-300)
            )
            if i not in taken:
                self._remainder[i] = self._synthetic_marginals[i] - self._release(i)[0]

    # ------------------------------------------------------------------ Algorithm 2

    def _record(self, order: list[int]) -> None:
        self._last_selected = list(order)
        self._selections[order] += 1

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
            structure = self._structure(None, order)
            j = self._select(diff, None, model_marginals, taken, structure, n, n)
            if j is None:  # no workload fits max_model_cells any more: the step ends here
                break
            taken.add(j)
            order.append(j)
            z = noise.discrete_laplace(scale, diff[j].shape, rng=self._rng)
            measurements.append(Measurement(self._workloads[j], diff[j] + z, stddev))
            model = self._fit(measurements, float(n), None)
        assert model is not None
        self._baseline_rows.append(model.sample(n, self._sample_rng, method=self._sampling))
        self._record(order)

    def _check_workload(self, w: object) -> Clique:
        if not isinstance(w, tuple) or not w:
            raise TypeError(f"a workload is a non-empty tuple of column indices, got {w!r}")
        cols = tuple(int(c) for c in w)
        if list(cols) != sorted(set(cols)) or cols[0] < 0 or cols[-1] >= len(self._domain):
            raise ValueError(f"workload {w!r} must be strictly increasing column indices")
        return cols


def released_size(
    previous: npt.NDArray[np.int64], raw: npt.NDArray[np.int64], *, monotone: bool
) -> npt.NDArray[np.int64]:
    """The released table size (post-processing of the size counter's release ``raw``):
    with ``monotone`` (an insert-only stream) the running maximum with the size released
    before, ``previous`` (which starts at 0), else ``raw`` clipped at 0. Elementwise, so an
    audit can run many streams at once."""
    out: npt.NDArray[np.int64] = np.maximum(previous, raw) if monotone else np.maximum(raw, 0)
    return out


def selection_scores(
    targets: list[npt.NDArray[np.float64]], model: list[npt.NDArray[np.float64]]
) -> npt.NDArray[np.float64]:
    """The workload utilities of Section 7.2 (3), rounded down to the ``2^-20`` grid.

    ``e_i = ‖target_i − model_i‖₁ / |q_i| − |q_i|`` with ``|q_i|`` the number of cells.
    Only ``target`` depends on the current batch; one record moves one cell of it by
    one, so ``e_i`` moves by at most ``1/|q_i|`` and the rounded value by at most
    ``1/|q_i| + 2^-18`` (float error below ``2^-21`` for scores below ``2^31``, plus one
    grid step): the sensitivity :meth:`TabularStream.budget` gives permute-and-flip.
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
    :meth:`TabularStream.budget` gives (``1/√min|q_i|``, rounded up, ``+ 2^-18``).
    """
    unit = 1 << L2_GRID_BITS
    limit = 1 << 32
    out = np.empty(len(batches))
    for n, (x, c, m) in enumerate(zip(batches, shifts, models, strict=True)):
        xi = np.asarray(x)
        if not np.all(xi == np.round(xi)):
            raise ValueError("batch histograms must hold integer counts")
        shift = np.asarray(c, dtype=np.float64)
        if not np.all(np.isfinite(shift)) or not np.all(np.isfinite(np.asarray(m))):
            # Public vectors from the fit: a NaN or inf here is a bug upstream, not the data.
            raise ValueError("selection scores: the model's marginals are not finite")
        v = xi.astype(np.int64) * unit - np.round(shift * unit)
        if v.size and float(np.abs(v).max()) >= limit:
            raise ValueError(
                "selection scores out of range (a marginal count beyond 2^27 in one cell)"
            )
        mag = np.abs(v.astype(np.int64)).astype(np.uint64)
        squares = mag * mag  # < 2^64
        high = int(np.sum(squares >> np.uint64(32), dtype=np.uint64))
        low = int(np.sum(squares & np.uint64(0xFFFFFFFF), dtype=np.uint64))
        root = math.isqrt((high << 32) + low)  # ⌊unit·‖v/unit‖₂⌋
        total = float(np.sum(m))
        p2 = float(np.sum((np.asarray(m) / total) ** 2)) if total > 0 else 1.0 / xi.size
        bias = math.sqrt(rows * max(0.0, 1.0 - p2)) + NOISE_PENALTY * noise_stddev * math.sqrt(
            xi.size * rows / (2.0 * max(table_rows, 1))
        )
        grid = 2**SCORE_BITS
        if not math.isfinite(bias) or bias >= _SCORE_LIMIT or root >= _SCORE_LIMIT * unit:
            raise ValueError("selection scores out of range (a workload error beyond 2^31)")
        if per_cell:
            norm_units = math.isqrt((root * grid) ** 2 // (unit * unit * xi.size))
            bias_units = math.floor(bias / math.sqrt(xi.size) * grid)
        else:
            norm_units = root * grid // unit
            bias_units = math.floor(bias * grid)
        # Both terms lie on the grid 2^-20 below 2^31: the difference is exact in float64.
        out[n] = float(norm_units - bias_units) / grid
    return out


def _inverse_sqrt_bound(cells: int) -> Fraction:
    """The smallest multiple of ``2^-20`` that is at least ``1/√cells`` (exact)."""
    grid = 2**SCORE_BITS
    # u ≥ grid/√cells  ⟺  u² ≥ grid²/cells  ⟺  u² ≥ ⌈grid²/cells⌉.
    need = -(-(grid * grid) // cells)
    u = math.isqrt(need - 1) + 1
    return Fraction(u, grid)


def _check_model_cells(sizes: tuple[int, ...], workloads: list[Clique], limit: int) -> None:
    """Refuse workloads that no model within ``limit`` cells can hold: the smallest holds
    the workload's marginal and one cell per category of every other column."""
    total = sum(sizes)
    need = [math.prod(sizes[c] for c in w) + total - sum(sizes[c] for c in w) for w in workloads]
    if max(need) > limit:
        k = next(k for k, n in enumerate(need) if n > limit)
        w, cells = workloads[k], math.prod(sizes[c] for c in workloads[k])
        raise ValueError(
            f"workload {w} alone needs a model of {need[k]} cells (its marginal {cells}, the "
            f"other columns {need[k] - cells}), more than max_model_cells={limit}: raise "
            f"max_model_cells to at least {max(need)} or leave out the larger workloads"
        )


class Structure(NamedTuple):
    """What :meth:`TabularStream._fits` reads: the tree the next fit starts from, and the
    cliques it will have."""

    tree: ModelTree
    cliques: frozenset[Clique]


def _model_kind(model: MarginalModel | None) -> str | None:
    if model is None:
        return None
    return "pgm" if hasattr(model, "potentials") else "mw"


def _noise_scale(counter: Counter) -> float:
    """The largest Laplace scale (sensitivity / ε) among a counter's noisy values."""
    return max(float((s.sensitivity or 1) / s.epsilon) for s in counter.epsilon_split())


def _stddev(counter: Counter) -> float:
    """Rough standard deviation of a counter's release (weights the fit only)."""
    scale = _noise_scale(counter)
    t = max(counter.time, 1)
    terms = t if counter.kind == "simple" else max(1.0, math.log2(t + 1))
    return math.sqrt(2 * terms) * scale


def _drifted(
    increment: npt.NDArray[np.float64], expected: npt.NDArray[np.float64], variance: float
) -> bool:
    """``refit="auto"``: whether a released batch histogram is further from the model's
    expected batch than noise and sampling explain. The statistic
    ``Σ (increment − e)² / (variance + e + 1)`` (``e`` the expected counts, ``≥ 0``; the
    sampling variance of a cell is about its count) has mean about the number of cells
    ``c`` when the batch follows the model; drift is declared above ``c + DRIFT_Z·√(2c)``.
    Post-processing of a release and of public values."""
    e = np.clip(expected, 0.0, None)
    stat = float(np.sum((increment - e) ** 2 / (variance + e + 1.0)))
    cells = increment.size
    return stat > cells + DRIFT_Z * math.sqrt(2.0 * cells)


def _increment_variance(counter: Counter) -> float:
    """Rough noise variance per cell of the difference of two consecutive releases: one
    draw of a simple counter's noise; for the other counters, twice a release's."""
    if counter.kind == "simple":
        return 2.0 * _noise_scale(counter) ** 2
    return 2.0 * _stddev(counter) ** 2


def _make_fit(estimator: EstimatorName, sizes: tuple[int, ...], iters: int) -> Any:
    """The fit step ``(measurements, total, warm start) -> model`` (post-processing)."""
    if estimator == "pgm":
        from dpstream.tabular.pgm import estimate_pgm

        def fit_pgm(ms: list[Measurement], total: float, warm: Any) -> MarginalModel:
            return estimate_pgm(sizes, ms, total, iters=iters, warm_start=warm, tol=FIT_TOL)

        return fit_pgm
    if estimator == "mw":
        from dpstream.tabular.mw import estimate_mw

        def fit_mw(ms: list[Measurement], total: float, warm: Any) -> MarginalModel:
            return estimate_mw(sizes, ms, total, iters=iters, warm_start=warm)

        return fit_mw
    from dpstream.tabular.mbi_fit import estimate_mbi, load_mbi

    load_mbi()  # an ImportError saying how to install mbi, before any record is read

    def fit_mbi(ms: list[Measurement], total: float, warm: Any) -> MarginalModel:
        return estimate_mbi(sizes, ms, total, iters=iters, warm_start=warm)

    return fit_mbi

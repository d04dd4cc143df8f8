"""Statistical privacy audits: try to falsify a differential privacy claim.

:func:`audit` runs a mechanism many times on two neighbouring inputs ``a`` and
``b``, counts how often each event ``E`` of the outputs happens under each,
and turns the counts into a high-confidence **lower bound** on the privacy
loss

    ``max over E of  ln((P_a(E) − δ) / P_b(E))``  and  ``ln((P_b(E) − δ) / P_a(E))``

from one-sided Clopper–Pearson bounds on the two probabilities (Bonferroni
over every bound used). If the mechanism is (ε, δ)-DP for these neighbours,
every such ratio is at most ε, so a lower bound above ε **falsifies** the
claim with confidence ``1 − alpha``. This is the approach of Google's DP
stochastic tester and of DP-Auditorium, with exact binomial bounds in place
of asymptotics.

What a result means:

* ``passed=False`` (lower bound > ε): with confidence ``1 − alpha`` the
  mechanism is **not** (ε, δ)-DP for these neighbours — a bug, or a claim
  that is too strong. If the mechanism does satisfy the claim, this happens
  with probability at most ``alpha`` (the false-alarm rate; default 1e-6)
  over the choice of seed.
* ``passed=True``: the audit **failed to falsify** the claim. It is not a
  proof of privacy: only the given pair of neighbours and the events tried
  were examined, and a violation smaller than the sampling error of ``runs``
  runs (roughly ``5 / sqrt(runs · P(E))`` in the log ratio at the default
  ``alpha``) cannot be seen. Choose neighbours and events where a bug would
  show (worst-case inputs, the statistics the mechanism's analysis is tight
  for); :attr:`AuditResult.lower_bound` close to ε means the audit is sharp.

Events are either given (predicates on the outputs) or chosen automatically:
scalar and vector outputs are binned into half-lines ``{x <= t}``,
``{x >= t}``, single values ``{x == v}`` and histogram cells ``{s < x <= t}``
of each coordinate (and, for vectors, of their max, min and sum), other
outputs into the events ``{output == v}``. The automatic choice looks only at
a **separate** set of runs (``selection_runs``, with their own seeds), keeps
the ``max_events`` events that promise the largest bound, and the audit
counts them on the remaining runs; the choice therefore cannot overfit the
runs that decide the result, and the Bonferroni correction counts only the
chosen events.

Reproducibility: every run gets its own seeded :class:`dpstream.Rng` derived
from ``seed``, the side and the run number (SHA-256), so an audit repeats
exactly. Seeded noise gives **no privacy**: audit outputs are for testing and
must never be published. The mechanism must take all its randomness from the
``rng`` it is given (and must not modify its input).

Clopper–Pearson bounds are computed here (no SciPy needed) from the
regularized incomplete beta function, evaluated by its continued fraction in
log space and inverted on the log-odds scale inside a bracket (Newton steps,
which stay on the conservative side because the function is concave there,
safeguarded by bisection); every bound is the bracket's conservative end,
widened by a relative 1e-8, more than the evaluation error (below 1e-9;
checked against SciPy in the tests).
"""

from __future__ import annotations

import hashlib
import itertools
import math
import numbers
import secrets
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np
import numpy.typing as npt

from dpstream._params import int_param
from dpstream._rng import Rng

__all__ = ["AuditResult", "EventBound", "audit", "clopper_pearson"]

FloatArray = npt.NDArray[np.float64]

# ---------------------------------------------------------------------------------------
# Clopper–Pearson bounds (regularized incomplete beta by continued fraction, inverted in a bracket)
# ---------------------------------------------------------------------------------------

_TINY = 1e-300
_CF_TOL = 1e-15
_CF_MAX_ITER = 1_000_000
_LOGIT_TOL = 1e-11  # the root is located to this width (log-odds units)
_OUTWARD = 1e-8  # bounds are widened by this relative amount (the error is below 1e-9)


def _guard(v: FloatArray) -> FloatArray:
    return np.where(np.abs(v) < _TINY, _TINY, v)


def _betacf(x: FloatArray, a: FloatArray, b: FloatArray) -> FloatArray:
    """Continued fraction of ``I_x(a, b)`` (modified Lentz), vectorised.

    Converges fast for ``x < (a + 1) / (a + b + 2)`` (the callers make sure of
    it); elements leave the loop as soon as they have converged.
    """
    out = np.empty_like(x)
    idx = np.arange(x.size)
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c = np.ones_like(x)
    d = 1.0 / _guard(1.0 - qab * x / qap)
    h = d.copy()
    for m in range(1, _CF_MAX_ITER):
        m2 = 2.0 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 / _guard(1.0 + aa * d)
        c = _guard(1.0 + aa / c)
        h = h * (d * c)
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 / _guard(1.0 + aa * d)
        c = _guard(1.0 + aa / c)
        delta = d * c
        h = h * delta
        done = np.abs(delta - 1.0) < _CF_TOL
        if done.any():
            out[idx[done]] = h[done]
            keep = ~done
            if not keep.any():
                return out
            idx = idx[keep]
            x, a, b, c, d, h = x[keep], a[keep], b[keep], c[keep], d[keep], h[keep]
            qab, qap, qam = qab[keep], qap[keep], qam[keep]
    raise ArithmeticError("the incomplete beta continued fraction did not converge")


def _stirling_error(x: float) -> float:
    """``lgamma(x) − ((x − 1/2) ln x − x + ln(2π)/2)`` for ``x >= 10`` (Stirling series)."""
    r = 1.0 / (x * x)
    return (1.0 / 12 - r * (1.0 / 360 - r * (1.0 / 1260 - r * (1.0 / 1680 - r * (1.0 / 1188))))) / x


def _log_beta(a: float, b: float) -> float:
    """``ln B(a, b)`` without the cancellation of ``lgamma(a) + lgamma(b) − lgamma(a + b)``
    for large arguments (the arrangement of R's ``lbeta``)."""
    p, q = min(a, b), max(a, b)
    if p >= 10.0:
        corr = _stirling_error(p) + _stirling_error(q) - _stirling_error(p + q)
        return (
            -0.5 * math.log(q)
            + 0.5 * math.log(2.0 * math.pi)
            + corr
            + (p - 0.5) * math.log(p / (p + q))
            + q * math.log1p(-p / (p + q))
        )
    if q >= 10.0:
        corr = _stirling_error(q) - _stirling_error(p + q)
        return (
            math.lgamma(p) + corr + p - p * math.log(p + q) + (q - 0.5) * math.log1p(-p / (p + q))
        )
    return math.lgamma(p) + math.lgamma(q) - math.lgamma(p + q)


def _log1mexp(s: FloatArray) -> FloatArray:
    """``ln(1 − e^s)`` for ``s <= 0``, accurately (Mächler 2012)."""
    s = np.minimum(s, 0.0)
    with np.errstate(divide="ignore"):
        return np.where(s > -math.log(2.0), np.log(-np.expm1(s)), np.log1p(-np.exp(s)))


def _log_ibeta(
    v: FloatArray, a: FloatArray, b: FloatArray, lbeta: FloatArray
) -> tuple[FloatArray, FloatArray]:
    """``(ln I_x(a, b), ln dI/dv)`` at ``x = 1 / (1 + e^-v)``, accurate also when tiny.

    The log-odds ``v`` gives both ``ln x`` and ``ln(1 − x)`` without cancellation.
    The continued fraction is evaluated on whichever tail is the small one. The
    derivative with respect to ``v`` is ``x^a (1 − x)^b / B(a, b)``.
    """
    log_x = -np.logaddexp(0.0, -v)
    log_xc = -np.logaddexp(0.0, v)
    x, xc = np.exp(log_x), np.exp(log_xc)
    log_front = a * log_x + b * log_xc - lbeta
    direct = x * (a + b + 2.0) < a + 1.0
    small = np.empty_like(v)
    if direct.any():
        cf = _betacf(x[direct], a[direct], b[direct])
        small[direct] = log_front[direct] - np.log(a[direct]) + np.log(cf)
    rest = ~direct
    if rest.any():
        cf = _betacf(xc[rest], b[rest], a[rest])
        small[rest] = log_front[rest] - np.log(b[rest]) + np.log(cf)
    return np.where(direct, small, _log1mexp(small)), log_front


def _lower_logit(k: npt.NDArray[np.int64], n: npt.NDArray[np.int64], level: float) -> FloatArray:
    """Log-odds of the one-sided ``1 − level`` Clopper–Pearson lower bound, ``0 < k < n``.

    Solves ``g(v) = ln I_p(k, n − k + 1) − ln(level) = 0`` (``I_p(k, n − k + 1) =
    P(Bin(n, p) >= k)``) for ``v = logit(p)`` inside a bracket ``[lo, hi]`` with
    ``g(lo) < 0 < g(hi)``. ``g`` is concave in ``v`` (the log-odds of a Beta variable
    has a log-concave density, so its CDF is log-concave), so Newton steps from ``lo``
    stay below the root and rise to it; a step that would leave the bracket (or a
    point that numerically lands above the root) is replaced by bisection. The
    result is the highest point with ``g < 0``: never above the exact bound by more
    than the evaluation error.
    """
    a = k.astype(np.float64)
    b = (n - k + 1).astype(np.float64)
    lbeta = np.array([_log_beta(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)])
    log_level = math.log(level)
    # P(Bin(n, p) >= k) <= n p / k <= level / 2 at p = level / (2n) (Markov), and
    # >= 1/2 > level at p = k / n (k is then the median of Bin(n, k / n)).
    p_lo = level / (2.0 * n)
    lo: FloatArray = np.log(p_lo) - np.log1p(-p_lo)
    hi: FloatArray = np.log(a) - np.log((n - k).astype(np.float64))
    log_i, log_d = _log_ibeta(lo, a, b, lbeta)
    g = log_i - log_level
    if not np.all(g < 0):  # pragma: no cover - numerical guard
        raise ArithmeticError("Clopper-Pearson bracket failed")
    slope = np.exp(log_d - log_i)  # g'(lo) > 0
    misses = np.zeros(lo.size, dtype=np.int64)  # consecutive trials that landed at or above
    active = np.arange(lo.size)
    for _ in range(200):
        step = -g[active] / slope[active]
        gap = hi[active] - lo[active]
        go = (step > _LOGIT_TOL) & (gap > _LOGIT_TOL)
        active, step, gap = active[go], step[go], gap[go]
        if active.size == 0:
            break
        miss = misses[active]
        # Newton from lo; after a miss (a point within rounding of the root, or past
        # it), back off to just below the bracket's top; after two, bisect.
        trial = np.where(
            (miss == 0) & (step < gap),
            lo[active] + step,
            np.where(miss == 1, hi[active] - 0.5 * _LOGIT_TOL, lo[active] + 0.5 * gap),
        )
        t_log_i, t_log_d = _log_ibeta(trial, a[active], b[active], lbeta[active])
        t_g = t_log_i - log_level
        below = t_g < 0
        up, down = active[below], active[~below]
        lo[up], g[up], misses[up] = trial[below], t_g[below], 0
        slope[up] = np.exp(t_log_d[below] - t_log_i[below])
        hi[down] = trial[~below]
        misses[down] += 1
    return lo


def clopper_pearson(
    k: npt.ArrayLike, n: npt.ArrayLike, level: float
) -> tuple[FloatArray, FloatArray]:
    """One-sided Clopper–Pearson bounds on a binomial proportion (vectorised).

    Args:
        k: successes (integers ``0 <= k <= n``).
        n: trials (positive integers), broadcast against ``k``.
        level: the error probability of *each* bound, in ``(0, 1/2)``.

    Returns:
        ``(lower, upper)``: ``P(p < lower) <= level`` and ``P(p > upper) <= level``
        for every ``p``. ``lower`` is the ``level`` quantile of Beta(k, n − k + 1)
        (0 for ``k = 0``) and ``upper`` the ``1 − level`` quantile of
        Beta(k + 1, n − k) (1 for ``k = n``), each widened by a relative 1e-8 (more
        than the numerical error) so that it is never on the wrong side.
    """
    if not 0.0 < level < 0.5:
        raise ValueError(f"level must be in (0, 1/2), got {level!r}")
    k_arr, n_arr = np.broadcast_arrays(np.asarray(k), np.asarray(n))
    for arr, name in ((k_arr, "k"), (n_arr, "n")):
        if arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number):
            raise TypeError(f"{name} must be integers, got dtype {arr.dtype}")
        if not np.issubdtype(arr.dtype, np.integer) and not np.all(arr == np.floor(arr)):
            raise ValueError(f"{name} must be integers")
    kk = np.asarray(k_arr, dtype=np.int64).ravel()
    nn = np.asarray(n_arr, dtype=np.int64).ravel()
    if np.any(nn < 1) or np.any(kk < 0) or np.any(kk > nn):
        raise ValueError("need n >= 1 and 0 <= k <= n")
    lower = np.zeros(kk.size)
    upper = np.ones(kk.size)
    # The upper bound for k is one minus the lower bound for n − k (by symmetry).
    counts = np.concatenate([kk, nn - kk])
    trials = np.concatenate([nn, nn])
    logit = np.full(counts.size, -np.inf)
    inner = (counts > 0) & (counts < trials)
    if inner.any():
        logit[inner] = _lower_logit(counts[inner], trials[inner], level)
    full = counts == trials  # I_p(n, 1) = p^n: the bound is level^(1/n)
    t = math.log(level) / trials[full]
    logit[full] = t - np.log(-np.expm1(t))
    m = kk.size
    # Widened by a relative _OUTWARD, well beyond the evaluation error.
    lower = np.where(kk > 0, (1.0 - _OUTWARD) / (1.0 + np.exp(-logit[:m])), 0.0)
    upper = np.where(kk < nn, np.minimum(1.0, (1.0 + _OUTWARD) / (1.0 + np.exp(logit[m:]))), 1.0)
    shape = k_arr.shape
    return lower.reshape(shape), upper.reshape(shape)


# ---------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class EventBound:
    """One audited event in one direction: ``ln((P_num(E) − δ) / P_den(E))``.

    Attributes:
        event: description of the event, e.g. ``"x <= 3"``.
        direction: ``"a/b"`` (the ratio ``P_a / P_b``) or ``"b/a"``.
        count_a: runs on input ``a`` whose output was in the event.
        count_b: the same on input ``b``.
        runs: audited runs per side.
        numerator_lower: Clopper–Pearson lower bound on the numerator's probability.
        denominator_upper: Clopper–Pearson upper bound on the denominator's probability.
        lower_bound: ``ln((numerator_lower − δ) / denominator_upper)``, the
            high-confidence lower bound on the privacy loss (``-inf`` if
            ``numerator_lower <= δ``).
        estimate: the same ratio from the observed frequencies (not a bound).
    """

    event: str
    direction: Literal["a/b", "b/a"]
    count_a: int
    count_b: int
    runs: int
    numerator_lower: float
    denominator_upper: float
    lower_bound: float
    estimate: float


@dataclass(frozen=True)
class AuditResult:
    """The outcome of :func:`audit`.

    Attributes:
        passed: ``lower_bound <= epsilon``: the audit failed to falsify the claim
            (which is not a proof of privacy; see :mod:`dpstream.audit`).
        lower_bound: the largest high-confidence lower bound on the privacy loss
            over the audited events and both directions (``-inf`` if no event
            gives one).
        event: the event attaining it, ``direction`` its ratio (``"a/b"``:
            ``(P_a(E) − δ) / P_b(E)``), ``counts`` its counts ``(count_a, count_b)``
            among ``runs`` audited runs per side.
        epsilon, delta, alpha: the claim audited and the false-alarm rate.
        seed: the seed every run's generator was derived from (pass it again to
            repeat the audit exactly).
        runs: runs per side that decided the result.
        selection_runs: further runs per side used only to choose the events.
        candidates: events considered by the automatic choice (0 if the events
            were given and not chosen).
        events: every audited (event, direction), largest lower bound first.
    """

    passed: bool
    lower_bound: float
    event: str | None
    direction: Literal["a/b", "b/a"] | None
    counts: tuple[int, int]
    epsilon: float
    delta: float
    alpha: float
    seed: int
    runs: int
    selection_runs: int
    candidates: int
    events: tuple[EventBound, ...]

    def __str__(self) -> str:
        verdict = "passed (not falsified)" if self.passed else "FAILED (claim falsified)"
        head = (
            f"privacy audit {verdict}: lower bound {self.lower_bound:.4f} vs ε = "
            f"{self.epsilon:g}"
            + (f", δ = {self.delta:g}" if self.delta else "")
            + f" at confidence 1 − {self.alpha:g}"
        )
        lines = [head]
        if self.event is not None:
            lines.append(
                f"  worst event: {self.event} ({self.direction}), counts a = {self.counts[0]}, "
                f"b = {self.counts[1]} of {self.runs} runs per side"
            )
        chosen = (
            f"{self.selection_runs} more per side chose them from {self.candidates} candidates"
            if self.selection_runs
            else "events given in advance"
        )
        lines.append(
            f"  {len(self.events)} event ratios audited on {self.runs} runs per side; "
            f"{chosen}; seed {self.seed}"
        )
        return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------------------

Predicate = Callable[[Any], Any]
EventsArg = Literal["auto"] | Sequence[Predicate] | Mapping[str, Predicate]


@dataclass(frozen=True)
class _Event:
    """An automatic event on the feature matrix (or on categorical keys)."""

    kind: Literal["le", "ge", "eq", "cell", "is"]
    feature: int
    low: float
    high: float
    key: Hashable = None

    def name(self, features: list[str]) -> str:
        if self.kind == "is":
            return f"output == {self.key!r}"
        f = features[self.feature]
        lo, hi = _fmt(self.low), _fmt(self.high)
        if self.kind == "le":
            return f"{f} <= {hi}"
        if self.kind == "ge":
            return f"{f} >= {lo}"
        if self.kind == "eq":
            return f"{f} == {lo}"
        return f"{lo} < {f} <= {hi}"

    def count(self, x: Any) -> int:
        if self.kind == "is":
            return sum(1 for o in x if o == self.key)
        col = x[:, self.feature]
        if self.kind == "le":
            return int(np.count_nonzero(col <= self.high))
        if self.kind == "ge":
            return int(np.count_nonzero(col >= self.low))
        if self.kind == "eq":
            return int(np.count_nonzero(col == self.low))
        return int(np.count_nonzero((col > self.low) & (col <= self.high)))


def _fmt(v: float) -> str:
    """A threshold as written in an event's name: integers exactly, others to 8 digits."""
    if math.isfinite(v) and v == math.floor(v) and abs(v) < 2**53:
        return str(int(v))
    return f"{v:.8g}"


class _Outputs:
    """Turns raw outputs into what events are evaluated on.

    Numeric outputs of one shape become an ``(n, F)`` float matrix: the
    coordinates, plus their max, min and sum for vectors. Anything else becomes
    a list of hashable keys (the output itself, or its ``repr``).
    """

    def __init__(self) -> None:
        self.numeric: bool | None = None
        self.shape: tuple[int, ...] | None = None
        self.names: list[str] = []

    def convert(self, outputs: Any, n: int) -> Any:
        arr: np.ndarray[Any, Any] | None
        try:
            arr = np.asarray(outputs)
        except (ValueError, TypeError):
            arr = None
        numeric = (
            arr is not None
            and arr.ndim >= 1
            and arr.shape[0] == n
            and (arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number))
            and not np.issubdtype(arr.dtype, np.complexfloating)
        )
        if self.numeric is None:
            self.numeric = numeric
            if numeric:
                assert arr is not None
                self._set_names(arr.shape[1:])
        if self.numeric:
            if not numeric or arr is None or arr.shape[1:] != self.shape:
                raise ValueError(
                    "the mechanism's outputs changed type or shape between runs; automatic "
                    "events need outputs of one numeric shape (or give events=...)"
                )
            x = arr.reshape(n, -1).astype(np.float64)
            if x.shape[1] > 1:
                with np.errstate(invalid="ignore", over="ignore"):
                    x = np.column_stack([x, x.max(axis=1), x.min(axis=1), x.sum(axis=1)])
            return x
        return [_key(o) for o in _as_list(outputs, n)]

    def _set_names(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        if not shape:
            self.names = ["x"]
            return
        cells = [f"x[{', '.join(map(str, i))}]" for i in np.ndindex(*shape)]
        self.names = cells + (["max(x)", "min(x)", "sum(x)"] if len(cells) > 1 else [])


def _as_list(outputs: Any, n: int) -> list[Any]:
    out = list(outputs)
    if len(out) != n:
        raise ValueError(f"the mechanism returned {len(out)} outputs for {n} runs")
    return out


def _key(o: Any) -> Hashable:
    if isinstance(o, np.ndarray):
        return repr(o.tolist())
    try:
        hash(o)
    except TypeError:
        return repr(o)
    return o  # type: ignore[no-any-return]


def _candidates(x_a: Any, x_b: Any, names: list[str], bins: int) -> list[_Event]:
    """Automatic events from the selection runs of both sides (pooled)."""
    if isinstance(x_a, list):
        seen: dict[Hashable, int] = {}
        for o in [*x_a, *x_b]:
            seen[o] = seen.get(o, 0) + 1
        keys = sorted(seen, key=lambda o: -seen[o])[: 16 * bins]
        return [_Event("is", 0, 0.0, 0.0, k) for k in keys]
    events: list[_Event] = []
    pooled = np.concatenate([x_a, x_b])
    for f in range(pooled.shape[1]):
        col = pooled[:, f]
        col = col[~np.isnan(col)]
        if col.size == 0:
            continue
        values = np.unique(col)
        if values.size <= 2 * bins:
            events += [_Event("eq", f, float(v), float(v)) for v in values]
            cuts = values
        else:
            levels = np.linspace(0.0, 1.0, bins + 1)[1:-1]
            cuts = np.unique(np.quantile(col, levels, method="inverted_cdf"))
            edges = [-np.inf, *cuts.tolist(), np.inf]
            events += [
                _Event("cell", f, float(lo), float(hi)) for lo, hi in itertools.pairwise(edges)
            ]
        events += [_Event("le", f, -np.inf, float(t)) for t in cuts[:-1]]
        events += [_Event("ge", f, float(t), np.inf) for t in cuts[1:]]
    return events


def _counts(events: list[_Event], x: Any) -> npt.NDArray[np.int64]:
    """Counts of every automatic event, vectorised per feature."""
    if isinstance(x, list):
        return np.array([e.count(x) for e in events], dtype=np.int64)
    out = np.empty(len(events), dtype=np.int64)
    cache: dict[int, tuple[FloatArray, int]] = {}
    for i, e in enumerate(events):
        if e.feature not in cache:
            col = x[:, e.feature]
            col = np.sort(col[~np.isnan(col)])
            cache[e.feature] = (col, col.size)
        s, size = cache[e.feature]
        if e.kind == "le":
            out[i] = np.searchsorted(s, e.high, side="right")
        elif e.kind == "ge":
            out[i] = size - np.searchsorted(s, e.low, side="left")
        elif e.kind == "eq":
            out[i] = np.searchsorted(s, e.low, side="right") - np.searchsorted(
                s, e.low, side="left"
            )
        else:
            out[i] = np.searchsorted(s, e.high, side="right") - np.searchsorted(
                s, e.low, side="right"
            )
    return out


# ---------------------------------------------------------------------------------------
# Running the mechanism
# ---------------------------------------------------------------------------------------


def _rng(seed: int, side: str, phase: str, index: int) -> Rng:
    """The seeded generator of one run (or one batch): SHA-256 of its coordinates."""
    tag = f"dpstream.audit/v1/{seed}/{side}/{phase}/{index}".encode()
    return Rng(seed=hashlib.sha256(tag).digest())


def _run(
    mechanism: Callable[..., Any],
    value: Any,
    n: int,
    *,
    seed: int,
    side: str,
    phase: str,
    batch_size: int | None,
) -> list[tuple[Any, int]]:
    """Outputs of ``n`` runs, as ``(outputs, count)`` chunks."""
    chunks: list[tuple[Any, int]] = []
    if batch_size is None:
        if n:
            chunks.append(([mechanism(value, _rng(seed, side, phase, i)) for i in range(n)], n))
        return chunks
    done = 0
    for j in range(math.ceil(n / batch_size)):
        size = min(batch_size, n - done)
        chunks.append((mechanism(value, _rng(seed, side, f"{phase}-batch", j), size), size))
        done += size
    return chunks


def _predicate_count(pred: Predicate, outputs: Any, n: int, batched: bool) -> int:
    if batched:
        hits = np.asarray(pred(outputs))
        if hits.shape != (n,):
            raise ValueError(
                f"with batch_size, an event must return a boolean array of shape ({n},), "
                f"got shape {hits.shape}"
            )
        return int(np.count_nonzero(hits))
    return sum(1 for o in outputs if pred(o))


# ---------------------------------------------------------------------------------------
# The audit
# ---------------------------------------------------------------------------------------


def _real(value: object, name: str, low: float, high: float, *, closed_low: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Fraction)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    ok = (v >= low if closed_low else v > low) and v < high
    if not (math.isfinite(v) and ok):
        raise ValueError(f"{name} must be in {'[' if closed_low else '('}{low}, {high}), got {v}")
    return v


def _bounds(
    k_num: npt.NDArray[np.int64],
    k_den: npt.NDArray[np.int64],
    n_num: int,
    n_den: int,
    level: float,
    delta: float,
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """``(numerator lower, denominator upper, ln((lower − δ)/upper))`` per comparison."""
    lower, _ = clopper_pearson(k_num, n_num, level)
    _, upper = clopper_pearson(k_den, n_den, level)
    with np.errstate(divide="ignore", invalid="ignore"):
        loss = np.where(
            lower > delta, np.log(np.maximum(lower - delta, 0.0)) - np.log(upper), -np.inf
        )
    return lower, upper, loss


def audit(
    mechanism: Callable[..., Any],
    neighbours: tuple[Any, Any],
    *,
    epsilon: float | Fraction,
    runs: int,
    seed: int | None,
    delta: float = 0.0,
    events: EventsArg = "auto",
    alpha: float = 1e-6,
    selection_runs: int | None = None,
    max_events: int = 8,
    bins: int = 64,
    batch_size: int | None = None,
) -> AuditResult:
    """Try to falsify "``mechanism`` is (ε, δ)-DP" on one pair of neighbouring inputs.

    Args:
        mechanism: ``mechanism(input, rng) -> output``, taking all its randomness
            from ``rng`` (a seeded :class:`dpstream.Rng` given by the audit). With
            ``batch_size``: ``mechanism(input, rng, size) -> outputs``, ``size``
            independent runs at once (an array or sequence whose first axis is
            the run), which lets bulk APIs (``noise.discrete_laplace(scale,
            size)``, a counter of ``dim = size``) make many runs cheap. Any
            function of the output is post-processing, so a mechanism may return
            just the statistics worth auditing.
        neighbours: the two inputs ``(a, b)``, neighbours under the mechanism's
            neighbouring relation. The inputs should be a worst case: the audit
            sees only this pair.
        epsilon: the claimed ε.
        runs: runs per side, in total: ``selection_runs`` of them choose the
            events, the others decide the result.
        seed: the seed of every run's generator (``None`` draws one at random;
            it is recorded in the result, so any audit can be repeated).
        delta: the claimed δ; each ratio is then ``(P_a(E) − δ) / P_b(E)``.
        events: ``"auto"`` (default) to bin the outputs automatically (see the
            module docs), or predicates on one output (``event(output) -> bool``;
            with ``batch_size``: on a batch, returning a boolean array), as a
            sequence or a mapping ``{name: predicate}``. Given events are all
            audited, on all runs, unless ``selection_runs`` is set.
        alpha: the false-alarm rate: if the mechanism is (ε, δ)-DP, the audit
            fails with probability at most ``alpha``. Bonferroni over the two
            bounds of every audited (event, direction) pair.
        selection_runs: runs per side (out of ``runs``) that only choose the
            ``max_events`` most promising (event, direction) pairs. Default:
            ``runs // 5`` for automatic events, 0 for given events.
        max_events: how many (event, direction) pairs a selection keeps.
        bins: automatic events per coordinate: a coordinate with at most
            ``2 * bins`` distinct values gets every value as a threshold,
            otherwise ``bins - 1`` quantiles of the selection runs.
        batch_size: run the mechanism in batches of at most this many runs (see
            ``mechanism``); each batch gets its own derived generator, so the
            outputs depend on ``batch_size``.

    Returns:
        An :class:`AuditResult`; ``result.passed`` is ``lower_bound <= epsilon``.

    Raises:
        TypeError, ValueError: invalid arguments, or outputs that automatic events
            cannot bin consistently.
    """
    if not callable(mechanism):
        raise TypeError("mechanism must be callable")
    if not isinstance(neighbours, (tuple, list)) or len(neighbours) != 2:
        raise TypeError("neighbours must be a pair (input_a, input_b)")
    eps = _real(epsilon, "epsilon", 0.0, math.inf, closed_low=True)
    dlt = _real(delta, "delta", 0.0, 1.0, closed_low=True)
    alp = _real(alpha, "alpha", 0.0, 0.5, closed_low=False)
    total = int_param(runs, "runs", low=2, high=None)
    keep = int_param(max_events, "max_events", low=1, high=None)
    n_bins = int_param(bins, "bins", low=2, high=None)
    batch = None if batch_size is None else int_param(batch_size, "batch_size", low=1, high=None)
    if seed is None:
        seed = secrets.randbits(63)
    seed = int_param(seed, "seed", low=0, high=None)

    auto = isinstance(events, str)
    if auto and events != "auto":
        raise ValueError(f"events must be 'auto', a sequence or a mapping, got {events!r}")
    given: list[tuple[str, Predicate]] = []
    if not auto:
        if isinstance(events, Mapping):
            given = [(str(k), v) for k, v in events.items()]
        elif isinstance(events, Sequence):
            given = [(_predicate_name(p, i), p) for i, p in enumerate(cast(Sequence[Any], events))]
        else:
            raise TypeError("events must be 'auto', a sequence or a mapping of predicates")
        if not given or not all(callable(p) for _, p in given):
            raise ValueError("events must be a non-empty collection of callables")
    if selection_runs is None:
        n_sel = total // 5 if auto else 0
    else:
        n_sel = int_param(selection_runs, "selection_runs", low=0, high=None)
    if auto and n_sel < 1:
        raise ValueError("automatic events need selection_runs >= 1")
    n_audit = total - n_sel
    if n_audit < 1:
        raise ValueError(f"selection_runs = {n_sel} leaves no runs of {total} to audit")

    a_in, b_in = neighbours
    conv = _Outputs()

    def run(side: str, value: Any, n: int, phase: str) -> list[tuple[Any, int]]:
        return _run(mechanism, value, n, seed=seed, side=side, phase=phase, batch_size=batch)

    # 1. Choose the events on the selection runs (if any).
    candidates = 0
    level = alp / (2 * keep)
    if auto:
        sel_a = _stack([conv.convert(o, m) for o, m in run("a", a_in, n_sel, "select")])
        sel_b = _stack([conv.convert(o, m) for o, m in run("b", b_in, n_sel, "select")])
        pool = _candidates(sel_a, sel_b, conv.names, n_bins)
        candidates = len(pool)
        chosen = _choose(
            _counts(pool, sel_a), _counts(pool, sel_b), n_sel, n_audit, keep, level, dlt
        )
        names = [pool[i].name(conv.names) for i, _ in chosen]
    else:
        if n_sel:
            ka = _given_counts(given, run("a", a_in, n_sel, "select"), batch)
            kb = _given_counts(given, run("b", b_in, n_sel, "select"), batch)
            candidates = len(given)
            chosen = _choose(ka, kb, n_sel, n_audit, keep, level, dlt)
        else:
            chosen = [(i, d) for i in range(len(given)) for d in ("a/b", "b/a")]
        names = [given[i][0] for i, _ in chosen]

    # 2. Count the chosen events on the audit runs, chunk by chunk.
    used = sorted({i for i, _ in chosen})
    counts = {"a": np.zeros(len(used), dtype=np.int64), "b": np.zeros(len(used), dtype=np.int64)}
    for side, value in (("a", a_in), ("b", b_in)):
        for outputs, m in run(side, value, n_audit, "audit"):
            if auto:
                x = conv.convert(outputs, m)
                hits = [pool[i].count(x) for i in used]
            else:
                hits = [_predicate_count(given[i][1], outputs, m, batch is not None) for i in used]
            counts[side] += np.array(hits, dtype=np.int64)
    where = {i: j for j, i in enumerate(used)}
    ka = np.array([counts["a"][where[i]] for i, _ in chosen], dtype=np.int64)
    kb = np.array([counts["b"][where[i]] for i, _ in chosen], dtype=np.int64)

    # 3. Bonferroni over the two one-sided bounds of every audited pair.
    level = alp / (2 * len(chosen))
    fwd = np.array([d == "a/b" for _, d in chosen])
    k_num, k_den = np.where(fwd, ka, kb), np.where(fwd, kb, ka)
    lower, upper, loss = _bounds(k_num, k_den, n_audit, n_audit, level, dlt)
    with np.errstate(divide="ignore", invalid="ignore"):
        est = np.log(k_num / n_audit - dlt) - np.log(k_den / n_audit)
    est = np.where(np.isnan(est), -np.inf, est)
    results = sorted(
        (
            EventBound(
                event=names[i],
                direction="a/b" if fwd[i] else "b/a",
                count_a=int(ka[i]),
                count_b=int(kb[i]),
                runs=n_audit,
                numerator_lower=float(lower[i]),
                denominator_upper=float(upper[i]),
                lower_bound=float(loss[i]),
                estimate=float(est[i]),
            )
            for i in range(len(chosen))
        ),
        key=lambda r: (-r.lower_bound, r.event),
    )
    best = results[0]
    found = best.lower_bound > -math.inf
    return AuditResult(
        passed=best.lower_bound <= eps,
        lower_bound=best.lower_bound,
        event=best.event if found else None,
        direction=best.direction if found else None,
        counts=(best.count_a, best.count_b),
        epsilon=eps,
        delta=dlt,
        alpha=alp,
        seed=seed,
        runs=n_audit,
        selection_runs=n_sel,
        candidates=candidates,
        events=tuple(results),
    )


def _predicate_name(p: Predicate, i: int) -> str:
    name = getattr(p, "__name__", "")
    return name if name and name != "<lambda>" else f"event[{i}]"


def _stack(parts: list[Any]) -> Any:
    if not parts:
        return []
    if isinstance(parts[0], list):
        return [o for p in parts for o in p]
    return np.concatenate(parts)


def _given_counts(
    given: list[tuple[str, Predicate]], chunks: list[tuple[Any, int]], batch: int | None
) -> npt.NDArray[np.int64]:
    out = np.zeros(len(given), dtype=np.int64)
    for outputs, m in chunks:
        out += np.array(
            [_predicate_count(p, outputs, m, batch is not None) for _, p in given], dtype=np.int64
        )
    return out


def _choose(
    k_a: npt.NDArray[np.int64],
    k_b: npt.NDArray[np.int64],
    n_sel: int,
    n_audit: int,
    keep: int,
    level: float,
    delta: float,
) -> list[tuple[int, Literal["a/b", "b/a"]]]:
    """The ``keep`` (event, direction) pairs with the largest projected lower bound.

    Each event's selection frequencies are scaled to ``n_audit`` runs and turned
    into the bound the audit would report with those counts: this favours events
    whose ratio is large *and* whose probabilities are large enough to resolve.
    """
    scale = n_audit / n_sel
    pa = np.minimum(np.rint(k_a * scale), n_audit).astype(np.int64)
    pb = np.minimum(np.rint(k_b * scale), n_audit).astype(np.int64)
    _, _, fwd = _bounds(pa, pb, n_audit, n_audit, level, delta)
    _, _, rev = _bounds(pb, pa, n_audit, n_audit, level, delta)
    # Point estimates break ties between events that give no bound yet.
    with np.errstate(divide="ignore", invalid="ignore"):
        ea = np.log((k_a + 0.5) / (k_b + 0.5))
    score = np.concatenate([fwd, rev])
    tie = np.concatenate([ea, -ea])
    order = np.lexsort((-tie, -score))[:keep]
    m = len(k_a)
    return [(int(i % m), "a/b" if i < m else "b/a") for i in order]

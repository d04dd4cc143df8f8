"""The audit itself (:func:`audit`): seeded runs of the mechanism on both neighbours, the
choice of events on separate runs, and the bounds on the chosen ones (see
:mod:`dpstream.audit`)."""

from __future__ import annotations

import hashlib
import math
import numbers
import secrets
from collections.abc import Callable, Mapping, Sequence
from fractions import Fraction
from typing import Any, Literal, cast

import numpy as np

from dpstream._params import int_param
from dpstream._rng import Rng
from dpstream.audit.bounds import IntArray, loss_bounds
from dpstream.audit.events import (
    EventsArg,
    Outputs,
    Predicate,
    candidate_events,
    event_counts,
    given_counts,
    predicate_count,
    predicate_name,
)
from dpstream.audit.results import AuditResult, EventBound


def run_rng(seed: int, side: str, phase: str, index: int) -> Rng:
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
            chunks.append(([mechanism(value, run_rng(seed, side, phase, i)) for i in range(n)], n))
        return chunks
    done = 0
    for j in range(math.ceil(n / batch_size)):
        size = min(batch_size, n - done)
        chunks.append((mechanism(value, run_rng(seed, side, f"{phase}-batch", j), size), size))
        done += size
    return chunks


def _real(value: object, name: str, low: float, high: float, *, closed_low: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, Fraction)):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    v = float(value)
    ok = (v >= low if closed_low else v > low) and v < high
    if not (math.isfinite(v) and ok):
        raise ValueError(f"{name} must be in {'[' if closed_low else '('}{low}, {high}), got {v}")
    return v


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
            given = [(predicate_name(p, i), p) for i, p in enumerate(cast(Sequence[Any], events))]
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
    conv = Outputs()

    def run(side: str, value: Any, n: int, phase: str) -> list[tuple[Any, int]]:
        return _run(mechanism, value, n, seed=seed, side=side, phase=phase, batch_size=batch)

    # 1. Choose the events on the selection runs (if any).
    candidates = 0
    level = alp / (2 * keep)
    if auto:
        sel_a = _stack([conv.convert(o, m) for o, m in run("a", a_in, n_sel, "select")])
        sel_b = _stack([conv.convert(o, m) for o, m in run("b", b_in, n_sel, "select")])
        pool = candidate_events(sel_a, sel_b, conv.names, n_bins)
        candidates = len(pool)
        chosen = _choose(
            event_counts(pool, sel_a), event_counts(pool, sel_b), n_sel, n_audit, keep, level, dlt
        )
        names = [pool[i].name(conv.names) for i, _ in chosen]
    else:
        if n_sel:
            ka = given_counts(given, run("a", a_in, n_sel, "select"), batch)
            kb = given_counts(given, run("b", b_in, n_sel, "select"), batch)
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
                hits = [predicate_count(given[i][1], outputs, m, batch is not None) for i in used]
            counts[side] += np.array(hits, dtype=np.int64)
    where = {i: j for j, i in enumerate(used)}
    ka = np.array([counts["a"][where[i]] for i, _ in chosen], dtype=np.int64)
    kb = np.array([counts["b"][where[i]] for i, _ in chosen], dtype=np.int64)

    # 3. Bonferroni over the two one-sided bounds of every audited pair.
    level = alp / (2 * len(chosen))
    fwd = np.array([d == "a/b" for _, d in chosen])
    k_num, k_den = np.where(fwd, ka, kb), np.where(fwd, kb, ka)
    lower, upper, loss = loss_bounds(k_num, k_den, n_audit, n_audit, level, dlt)
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


def _stack(parts: list[Any]) -> Any:
    if not parts:
        return []
    if isinstance(parts[0], list):
        return [o for p in parts for o in p]
    return np.concatenate(parts)


def _choose(
    k_a: IntArray, k_b: IntArray, n_sel: int, n_audit: int, keep: int, level: float, delta: float
) -> list[tuple[int, Literal["a/b", "b/a"]]]:
    """The ``keep`` (event, direction) pairs with the largest projected lower bound.

    Each event's selection frequencies are scaled to ``n_audit`` runs and turned
    into the bound the audit would report with those counts: this favours events
    whose ratio is large *and* whose probabilities are large enough to resolve.
    """
    scale = n_audit / n_sel
    pa = np.minimum(np.rint(k_a * scale), n_audit).astype(np.int64)
    pb = np.minimum(np.rint(k_b * scale), n_audit).astype(np.int64)
    _, _, fwd = loss_bounds(pa, pb, n_audit, n_audit, level, delta)
    _, _, rev = loss_bounds(pb, pa, n_audit, n_audit, level, delta)
    # Point estimates break ties between events that give no bound yet.
    with np.errstate(divide="ignore", invalid="ignore"):
        ea = np.log((k_a + 0.5) / (k_b + 0.5))
    score = np.concatenate([fwd, rev])
    tie = np.concatenate([ea, -ea])
    order = np.lexsort((-tie, -score))[:keep]
    m = len(k_a)
    return [(int(i % m), "a/b" if i < m else "b/a") for i in order]

"""What Algorithm 3's remainder costs on Adult: the proposed method with oracle measurements.

Algorithm 3 (Kumar, Strohmer and Vershynin) measures a selected workload ``j`` at time
``t`` as ``m(t,j) = C_j(t) + r(t−1,j)``: its counter (the noisy sum of the batches at
the times ``j`` was selected) plus the remainder, the synthetic data's estimate of the
rows that came in at the other times. Once ``j`` is measured, that estimate is taken
as true. This script runs ``dpstream.tabular.TabularStream`` (proposed method) with the
remainder replaced by **non-private oracle values**, to measure how much of the
error on each dataset comes from the remainder and from which part of it:

* ``algorithm 3``: the library, unchanged.
* ``oracle remainder``: ``r`` is the true marginal of the rows at ``j``'s unselected
  times (the counter keeps its noise): what a perfect remainder would give.
* ``oracle margins``: ``r`` raked (iterative proportional fitting) to the true
  one-way margins of those rows; the association between the columns stays the
  model's.
* ``oracle association``: the true marginal of those rows raked to the remainder's
  own one-way margins: the true association, the model's margins.

It also reports, at the last step of the ``algorithm 3`` run, how far the model's
one-way margins are from the real table's (total variation) per column.

The oracle variants read the real data: they are diagnostics, not mechanisms. Every
run is seeded (reproducible, not private). Writes the section "Tabular stream: what
the remainder costs (issue 5)" of benches/RESULTS.md.

Rerun (from the repository root): ``.venv/bin/python benches/diag_tabular_remainder.py``
(about 20 minutes on 2 cores; ``--quick`` runs 12 steps per stream, for a smoke test).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_tabular as bt
import numpy as np
import numpy.typing as npt
from _report import add_steps_option, diag_run_lines, publish
from dpstream.tabular import Adaptive, TabularStream
from dpstream.tabular.workloads import marginal

FloatArray = npt.NDArray[np.float64]

SECTION_TITLE = "## Tabular stream: what the remainder costs (issue 5)"
VARIANTS = ("algorithm 3", "oracle remainder", "oracle margins", "oracle association")
#: (order, batch size, ε, score, variants run)
SETTINGS: tuple[tuple[str, int, float, str, tuple[str, ...]], ...] = (
    ("ordered", 200, 1.0, "l2", ("algorithm 3", "oracle remainder")),
    ("ordered", 200, 1.0, "l2-cell", VARIANTS),
    ("randomized", 200, 1.0, "l2", ("algorithm 3", "oracle remainder")),
    ("randomized", 200, 1.0, "l2-cell", ("algorithm 3", "oracle remainder")),
)
SEED = 5
RAKE_ITERS = 50
QUICK_STEPS = 12


def rake(prior: FloatArray, margins: list[FloatArray], iters: int = RAKE_ITERS) -> FloatArray:
    """Iterative proportional fitting of the non-negative array ``prior`` to one-way
    ``margins`` (one per axis, equal totals): the array closest to ``prior`` in KL
    divergence with those margins (cells of a zero margin become zero)."""
    x = np.array(prior, dtype=np.float64)
    for _ in range(iters):
        for axis, target in enumerate(margins):
            others = tuple(a for a in range(x.ndim) if a != axis)
            sums = x.sum(axis=others)
            factor = np.divide(target, sums, out=np.zeros_like(sums), where=sums > 0)
            shape = [1] * x.ndim
            shape[axis] = -1
            x = x * factor.reshape(shape)
    return x


def _margins(x: FloatArray) -> list[FloatArray]:
    return [x.sum(axis=tuple(a for a in range(x.ndim) if a != ax)) for ax in range(x.ndim)]


class OracleStream(TabularStream):
    """The proposed method with the remainder of each measurement replaced (see module)."""

    def __init__(self, *args: Any, variant: str, policy: Any = None, **kw: Any) -> None:
        policy = Adaptive(remainder="model") if policy is None else policy
        if not isinstance(policy, Adaptive) or policy.remainder != "model":
            # the variants replace Algorithm 3's remainder
            raise ValueError(f"OracleStream varies remainder='model', got {policy!r}")
        super().__init__(*args, policy=policy, **kw)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        self.variant = variant
        n = len(self.workloads)
        self._truth = [np.zeros(int(c)) for c in self._cells]  # q_j(f_{t−1})
        self._selected_sum = [np.zeros(int(c)) for c in self._cells]  # exact Σ at selected t
        self._batch: list[FloatArray] = [np.zeros(0)] * n

    def step(self, batch: Any = None, *, deletions: Any = None) -> Any:
        codes = self.domain.encode(batch)
        self._batch = [marginal(codes, self.domain, c) for c in self.workloads]
        out = super().step(batch, deletions=deletions)
        self._truth = [a + b for a, b in zip(self._truth, self._batch, strict=True)]
        return out

    def _measurement(
        self, j: int, released: FloatArray, stddev: float, size: int, *, grown: int = 0
    ) -> tuple[FloatArray, float]:
        # True marginal of the rows at j's unselected times up to t − 1.
        unselected = self._truth[j] - self._selected_sum[j]
        self._selected_sum[j] = self._selected_sum[j] + self._batch[j]
        if self.variant == "algorithm 3":
            return super()._measurement(j, released, stddev, size, grown=grown)
        if self.variant == "oracle remainder":
            return released + unselected, stddev
        shape = tuple(self.domain.sizes[c] for c in self.workloads[j])
        remainder = np.clip(self._remainder[j], 0.0, None).reshape(shape)
        truth = unselected.reshape(shape)
        if self.variant == "oracle margins":
            raked = rake(remainder + 1e-9, _margins(truth))
        else:
            own = _margins(remainder)
            total = truth.sum()
            own = [m * (total / m.sum()) if m.sum() > 0 else m for m in own]
            raked = rake(truth + 1e-9, own)
        return released + raked.reshape(-1), stddev


def self_check() -> None:
    """Check the oracle before measuring with it, on a small seeded domain: raking fits the
    margins and keeps every 2x2 odds ratio; the ``algorithm 3`` variant is the library's
    stream step for step; the ``oracle remainder`` of each measurement is the exact marginal
    of the rows at the workload's unselected steps. Raises AssertionError."""
    import dpstream
    from dpstream.tabular import Domain

    g = np.random.default_rng(SEED)
    for _ in range(20):
        prior = g.uniform(0.1, 10.0, (3, 4))
        rows = g.uniform(0.1, 10.0, 3)
        cols = g.uniform(0.1, 10.0, 4)
        cols *= rows.sum() / cols.sum()
        x = rake(prior, [rows, cols], iters=500)
        np.testing.assert_allclose(x.sum(axis=1), rows, rtol=1e-6)
        np.testing.assert_allclose(x.sum(axis=0), cols, rtol=1e-6)
        odds = x[0, 0] * x[1, 1] / (x[0, 1] * x[1, 0])
        np.testing.assert_allclose(odds, prior[0, 0] * prior[1, 1] / (prior[0, 1] * prior[1, 0]))
    domain = Domain({"a": 3, "b": 2, "c": 4})
    batches = [np.stack([g.integers(0, n, 30) for n in domain.sizes], axis=1) for _ in range(6)]
    kw: dict[str, Any] = {"policy": Adaptive(k=2, remainder="model"), "iters": 20}
    lib = TabularStream(domain, 1, rng=dpstream.Rng(seed=3), **kw)
    ora = OracleStream(domain, 1, rng=dpstream.Rng(seed=3), variant="algorithm 3", **kw)
    for b in batches:
        np.testing.assert_array_equal(lib.step(b).to_numpy(), ora.step(b).to_numpy())
    s = OracleStream(domain, 1, rng=dpstream.Rng(seed=4), variant="oracle remainder", **kw)
    seen: list[tuple[int, FloatArray, FloatArray]] = []
    inner = s._measurement

    def spy(j: int, released: FloatArray, stddev: float, size: int) -> tuple[FloatArray, float]:
        out = inner(j, released, stddev, size)
        seen.append((j, released, out[0]))
        return out

    s._measurement = spy  # type: ignore[method-assign]
    picked: list[list[int]] = []
    for b in batches:
        before = len(seen)
        s.step(b)
        picked.append([j for j, _, _ in seen[before:]])
    t = 0
    for step, js in enumerate(picked):
        for j in js:
            _, released, out = seen[t]
            t += 1
            unselected = [batches[u] for u in range(step) if j not in picked[u]]
            codes = np.concatenate(unselected) if unselected else np.zeros((0, 3), dtype=np.int64)
            truth = marginal(codes, domain, s.workloads[j])
            np.testing.assert_allclose(out - released, truth)


@dataclass
class Outcome:
    order: str
    batch: int
    epsilon: float
    score: str
    variant: str
    last: list[float]  # the six bench_tabular.METRICS, mean over the last LAST steps
    margin_tv: dict[str, float]  # per column: TV of the model's one-way margin at the end
    steps: int
    seconds: float


def run(setting: tuple[str, int, float, str, str], max_steps: int | None) -> Outcome:
    order, batch, eps, score, variant = setting
    domain, codes = bt.load_adult()
    rows = bt.stream_rows(codes, order, 0)
    ev = bt.Evaluator(domain)
    # The sizes and calibration of the streams it reported before issue 28 (bt.LEGACY_SIZES).
    legacy = {"public_sizes": True, bt.LEGACY_SIZES: True}
    stream = bt.bench_stream(
        domain, eps, SEED, cls=OracleStream, score=score, remainder="model", variant=variant,
        **legacy,
    )  # fmt: skip
    n_steps = math.ceil(rows.shape[0] / batch)
    if max_steps is not None:
        n_steps = min(n_steps, max_steps)
    real = np.zeros(ev.total)
    tail: list[FloatArray] = []
    start = time.perf_counter()
    n = 0
    for t in range(n_steps):
        part = rows[t * batch : (t + 1) * batch]
        real += ev.counts(part)
        n += part.shape[0]
        synth = stream.step(part)
        if t >= n_steps - bt.LAST:
            tail.append(ev.errors(real, n, ev.counts(domain.encode(synth)), n))
    seconds = time.perf_counter() - start
    tv = {}
    model = stream._model
    assert model is not None
    for c, name in enumerate(domain.names):
        fitted = model.marginal((c,))
        true = np.bincount(rows[:n, c], minlength=domain.sizes[c]) / n
        tv[name] = float(np.abs(fitted / fitted.sum() - true).sum() / 2)
    last = [float(v) for v in np.mean(tail, axis=0)]
    return Outcome(order, batch, eps, score, variant, last, tv, n_steps, seconds)


def render(outcomes: list[Outcome], runtime: float, workers: int, quick: int | None) -> str:
    """The section; ``quick``: the steps per stream of a ``--quick`` run (None: whole streams)."""
    metrics = ("AvgWE", "MaxWE", "AvgRelL2", "MaxRelL2")
    index = [bt.METRICS.index(m) for m in metrics]
    cmd = "python benches/diag_tabular_remainder.py" + (
        f" --quick --steps {quick}" if quick else ""
    )
    lines = [
        SECTION_TITLE,
        "",
        "Written by `benches/diag_tabular_remainder.py`: the proposed method of "
        "`dpstream.tabular.TabularStream` with Algorithm 3's remainder replaced by non-private "
        "oracle values, to measure what the remainder costs. **Diagnostics, not mechanisms**: "
        "the oracle variants read the real data.",
        "",
        "### Run",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; whole script "
        f"{runtime / 60:.1f} min on {workers} worker process(es)",
        *diag_run_lines(f".venv/bin/python {cmd.split(' ', 1)[1]}"),
        "",
        "### Setup",
        "",
        '- Same data, orders, k = 3, fit and metrics as the section "Tabular stream on Adult" '
        f"above; one run per row (`dpstream.Rng(seed={SEED})`, the data order of run 0), "
        f"metrics averaged over the last {bt.LAST} steps"
        + (f"; **--quick: the first {quick} steps only**" if quick else "")
        + ".",
        "- Algorithm 3 measures a selected workload j at time t as m(t,j) = C_j(t) + r(t−1,j): "
        "its counter (the noisy sum of the batches at the times j was selected) plus the "
        "remainder, the synthetic data's value for the rows that came in at the other times, "
        "which the measurement then takes as true. Variants: *algorithm 3* (the library); "
        "*oracle remainder*: r is the true marginal of the rows at j's unselected times (the "
        "counter keeps its noise); *oracle margins*: r raked (iterative proportional fitting) "
        "to the true one-way margins of those rows, the association between the two columns "
        "staying the model's; *oracle association*: the true marginal of those rows raked to "
        "r's own one-way margins.",
        "",
        "### Results",
        "",
        "| dataset | ε | score | variant | " + " | ".join(metrics) + " |",
        "|---|---:|---|---|" + "---:|" * len(metrics),
    ]
    for o in outcomes:
        values = " | ".join(bt.fmt(o.last[i]) for i in index)
        lines.append(
            f"| {bt.dataset_name(o.order, o.batch)} | {o.epsilon:g} | `{o.score}` | {o.variant} "
            f"| {values} |"
        )
    base = [o for o in outcomes if o.variant == "algorithm 3"]
    if base:
        names = list(base[0].margin_tv)
        lines += [
            "",
            "One-way margins of the fitted model at the last step, *algorithm 3* runs: total "
            "variation distance from the real table's, per column.",
            "",
            "| dataset | score | " + " | ".join(names) + " |",
            "|---|---|" + "---:|" * len(names),
        ]
        for o in base:
            tvs = " | ".join(f"{o.margin_tv[c]:.3f}" for c in names)
            lines.append(f"| {bt.dataset_name(o.order, o.batch)} | `{o.score}` | {tvs} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_STEPS} steps per stream")
    add_steps_option(parser, QUICK_STEPS)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--results", type=Path, default=bt.RESULTS_PATH, help="RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print, write nothing")
    args = parser.parse_args()
    self_check()  # the oracle is trusted only if it reproduces the library and the truth
    print("self-check passed: raking, the algorithm 3 variant, the oracle remainder", flush=True)
    settings = [(o, b, e, s, v) for o, b, e, s, vs in SETTINGS for v in vs]
    max_steps = max(1, args.steps) if args.quick else None
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        outcomes = list(pool.map(run, settings, [max_steps] * len(settings)))
    for o in outcomes:
        label = f"{o.order}-{o.batch} eps={o.epsilon:g} {o.score} {o.variant}"
        print(f"{label}: AvgWE={o.last[0]:.5f} MaxWE={o.last[1]:.4f} ({o.seconds:.0f} s)")
    section = render(outcomes, time.perf_counter() - start, args.workers, max_steps)
    publish(section, SECTION_TITLE, args.results, args.no_write)


if __name__ == "__main__":
    main()

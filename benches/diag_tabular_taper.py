"""Where does the taper act? The two k schedules of ``TabularStream`` with the same seeds.

``marginals_per_step="auto"`` makes 2 selections at the calm steps of a stream and 3 while
it drifts. ``k_schedule="taper"`` (the library default) drops the calm steps to 1 selection
once the stream has taken 3 steps per workload (step 3W = 273 on Adult) while no recent step
drifted; ``"fixed"`` keeps 2. The columns of ``bench_tabular.py`` run the two schedules with
different seeds, so on a stream where the taper rarely acts they still differ by their
random draws. This script runs the taper with the seeds of the fixed schedule's stored
streams (``bench_tabular.SHRINK_K``): both share every draw up to step 3W, so the difference
of a run's metrics is the taper's, and it counts the steps at each k.

Only the streams with batches of 50 (977 steps) reach step 3W; those with batches of 200
(245 steps) are the same under both schedules. Shuffled stream: every run of the tables;
sorted stream (it is slower): run 0. Seeded generators: reproducible, not private. Writes the
section "Tabular stream: where the taper acts (issue 5)" of benches/RESULTS.md.

Rerun (from the repository root): ``.venv/bin/python benches/diag_tabular_taper.py`` (about
30 minutes on 2 cores; the fixed schedule's streams are read from ``benches/out/tabular_streams``
and run if missing; ``--quick``: 8 steps, no store, for a smoke test).
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import shlex
import sys
import time
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import bench_tabular as bt
import numpy as np
from _report import add_steps_option, diag_run_lines, publish
from dpstream.tabular import AutoK, TabularStream, Taper, all_workloads

DRIFT_K, TAPER_STEPS = AutoK().drifting, Taper().steps_per_workload

#: The per-setting table, written to benches/out (RESULTS.md keeps the summary).
DETAILS = ("### Results",)
SECTION_TITLE = "## Tabular stream: where the taper acts (issue 5)"
FIXED = bt.SHRINK_K  # the fixed schedule; its seeds are used for both
TAPER = bt.TAPER
BATCH = 50
#: Runs per stream order (the sorted stream's are slower).
RUNS = {"randomized": 3, "ordered": 1}
METRICS = ("AvgWE", "MaxWE", "AvgRelL2", "MaxRelL2")


@dataclass(frozen=True)
class Outcome:
    job: bt.Job  # the fixed schedule's job (its seed)
    ks: tuple[int, ...]  # selections per step of the taper stream
    taper: tuple[float, ...]  # bt.METRICS of the taper stream, last LAST steps
    fixed: tuple[float, ...]  # likewise, the fixed schedule's stream
    reused: bool  # the fixed stream came from the store


class _Ks:
    """Collects each step's number of selections (a module-level class: picklable)."""

    def __init__(self) -> None:
        self.ks: list[int] = []

    def __call__(self, stream: TabularStream) -> None:
        self.ks.append(len(stream.last_selected))


def run(args: tuple[bt.Job, bool]) -> Outcome:
    job, use_store = args
    ks = _Ks()
    taper = bt.run_job(job, options=bt.method_options(TAPER), on_step=ks)
    stored = bt.load_stored(bt.STORE_DIR, job) if use_store else None
    fixed = stored if stored is not None else bt.run_job(job)
    if use_store and stored is None:
        bt.save_stored(bt.STORE_DIR, fixed)
    return Outcome(
        job,
        tuple(ks.ks),
        tuple(float(v) for v in taper.last),
        tuple(float(v) for v in fixed.last),
        stored is not None,
    )


def self_check() -> None:
    """The library default is the taper schedule and the fixed schedule differs from it in
    ``k_schedule`` alone (AssertionError otherwise)."""
    taper, fixed = bt.method_options(TAPER), bt.method_options(FIXED)
    assert bt.DEFAULT == TAPER, "the library default is not the taper column"
    assert taper["k_schedule"] == "taper" and fixed["k_schedule"] == "fixed"
    others = {k: v for k, v in taper.items() if k != "k_schedule"}
    assert others == {k: v for k, v in fixed.items() if k != "k_schedule"}


def jobs(quick: bool, steps: int = bt.QUICK_STEPS) -> list[bt.Job]:
    cap = steps if quick else None
    return [
        bt.Job(order, BATCH, eps, FIXED, "simple", run, cap)
        for order, runs in RUNS.items()
        for eps in bt.EPSILONS
        for run in range(1 if quick else runs)
    ]


def render(outcomes: list[Outcome], runtime: float, command: str, workers: int) -> str:
    domain, _ = bt.load_adult()
    workloads = len(all_workloads(domain, 2))
    start = TAPER_STEPS * workloads  # 3W: where the taper may first act
    rows: list[str] = []
    for o in outcomes:
        ks = np.asarray(o.ks)
        counts = [int(np.sum(ks == k)) for k in range(1, DRIFT_K + 1)]
        late = ks[start:]
        share = f"{float(np.mean(late == 1)):.0%}" if late.size else "–"
        cells = [
            f"{bt.fmt(o.fixed[bt.METRICS.index(m)])} → {bt.fmt(o.taper[bt.METRICS.index(m)])}"
            for m in METRICS
        ]
        rows.append(
            f"| {bt.dataset_name(o.job.order, o.job.batch)} | {o.job.epsilon:g} | {o.job.run} | "
            f"{' / '.join(map(str, counts))} | {share} | {' | '.join(cells)} |"
        )
    summary: list[str] = []
    for order in RUNS:
        for eps in bt.EPSILONS:
            group = [o for o in outcomes if o.job.order == order and o.job.epsilon == eps]
            if not group:
                continue
            parts = []
            for m in METRICS:
                i = bt.METRICS.index(m)
                fixed = float(np.mean([o.fixed[i] for o in group]))
                taper = float(np.mean([o.taper[i] for o in group]))
                wins = sum(o.taper[i] <= o.fixed[i] for o in group)
                parts.append(
                    f"{bt.fmt(fixed)} → {bt.fmt(taper)} ({bt.fmt(taper / fixed)}×; "
                    f"{wins}/{len(group)})"
                    if fixed > 0 and math.isfinite(taper)
                    else "–"
                )
            summary.append(
                f"| {bt.dataset_name(order, BATCH)} | {eps:g} | {len(group)} | "
                f"{' | '.join(parts)} |"
            )
    reused = sum(o.reused for o in outcomes)
    lines = [
        SECTION_TITLE,
        "",
        "Written by `benches/diag_tabular_taper.py`: the library default of "
        '`dpstream.tabular.TabularStream` (`k_schedule="taper"`) and the same settings with '
        '`k_schedule="fixed"` on the same seeds, on the Adult streams with batches of 50, to '
        "show where the taper changes a step's number of selections and what it changes.",
        "",
        "### Run",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; whole script "
        f"{runtime / 60:.1f} min on {workers} worker process(es); {len(outcomes)} taper "
        f"streams; {reused} fixed-schedule streams reused from the store "
        "`benches/out/tabular_streams`",
        *diag_run_lines(command),
        "",
        "### Setup",
        "",
        '- Fixed: the column "proposed, auto score, shrinkage stddev, auto k, fixed k '
        'schedule" of the section "Tabular stream on Adult" (its stored streams, the same '
        'seeds); taper: the same options with `k_schedule="taper"` and the same seed, so '
        f"both streams draw the same numbers up to step {start} (3W, W = {workloads} "
        "workloads), where the taper may first act. Shuffled stream: the data order of runs "
        f"0–{RUNS['randomized'] - 1}; sorted stream: run 0. Metrics averaged over the last "
        f"{bt.LAST} steps, as there.",
        "- Steps at k = 1 / 2 / 3: the taper stream's steps by their number of selections "
        "(2 or 3 before step 3W, where the schedules agree; 1 only from there on, at calm "
        f"steps); share: the steps from {start} on at k = 1.",
        "",
        "### Results",
        "",
        "| dataset | ε | run | steps at k = 1 / 2 / 3 | share at k = 1 from step 3W | "
        + " | ".join(f"{bt.metric_label(m)}: fixed → taper" for m in METRICS)
        + " |",
        "|---|---:|---:|---:|---:|" + "---:|" * len(METRICS),
        *rows,
        "",
        "### Summary",
        "",
        "Means over the runs, fixed → taper (ratio; runs where the taper's is lower or equal).",
        "",
        "| dataset | ε | runs | " + " | ".join(bt.metric_label(m) for m in METRICS) + " |",
        "|---|---:|---:|" + "---|" * len(METRICS),
        *summary,
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help=f"{bt.QUICK_STEPS} steps, no store")
    add_steps_option(parser, bt.QUICK_STEPS)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--results", type=Path, default=bt.RESULTS_PATH, help="RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print, write nothing")
    args = parser.parse_args()
    self_check()
    command = shlex.join([".venv/bin/python", "benches/diag_tabular_taper.py", *sys.argv[1:]])
    start = time.perf_counter()
    todo = [(job, not args.quick) for job in jobs(args.quick, max(1, args.steps))]
    workers = max(1, args.workers)
    outcomes: list[Outcome] = []
    with Pool(workers) as pool:
        for out in pool.imap_unordered(run, todo):
            print(f"done {out.job.key}", file=sys.stderr, flush=True)
            outcomes.append(out)
    order = {job.key: i for i, (job, _) in enumerate(todo)}
    outcomes.sort(key=lambda o: order[o.job.key])
    section = render(outcomes, time.perf_counter() - start, command, workers)
    publish(section, SECTION_TITLE, args.results, args.no_write, DETAILS, "diag_tabular_taper")


if __name__ == "__main__":
    main()

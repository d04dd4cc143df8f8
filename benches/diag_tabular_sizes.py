"""What the noisy size costs: ``TabularStream`` with the table's size released privately.

Issue 28 made add/remove one record the default guarantee of
``dpstream.tabular.TabularStream``: the table's size is released by a continual counter
with ε/20 (``stream.SIZE_SHARE``), the other mechanisms share the rest, and every release
has the released (noisy) number of rows. This script runs the library default's options
(the column "library default" of the section "Tabular stream on Adult", ``bench_tabular.
DEFAULT``) three ways on the same seeds:

* ``sizes free``: exact sizes with the noise of one record added or removed at ε, as every
  stream stored before issue 28 (``bench_tabular.LEGACY_SIZES``; ``public_sizes=True`` at
  2ε, whose guarantee is 2ε for one record replaced). Read from the store
  ``benches/out/tabular_streams`` (run if missing): the reference the two others pay against.
* ``add/remove`` (the default, ``public_sizes=False``): ε-DP for one record added or removed.
* ``public sizes`` (``public_sizes=True`` at ε): exact sizes, ε-DP for one record replaced,
  every mechanism calibrated to an ℓ1 change of 2.

It also reports the released size's error: the mean over the last 10 steps (as the metrics)
of ``|released − true| / true``, and its maximum over the steps from step 10 on.

Shuffled stream (Adult-randomized, batches of 200, run 0) at ε = 0.5, 1, 4 and sorted
stream (Adult-ordered, batches of 200, run 0) at ε = 1: four settings, one run each (a
stream takes about half a minute on an idle core; more runs with ``--runs``). Seeded
generators: reproducible, not private. Writes the section "Tabular stream: what the noisy
size costs (issue 28)" of benches/RESULTS.md.

Rerun (from the repository root): ``.venv/bin/python benches/diag_tabular_sizes.py`` (about 3
minutes on 2 idle cores; ``--quick``: 8 steps, no store, for a smoke test).
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
from dpstream.tabular import TabularStream
from dpstream.tabular.selection import SIZE_SHARE

SECTION_TITLE = "## Tabular stream: what the noisy size costs (issue 28)"
METHOD = bt.DEFAULT  # the library default's options; its stored streams are the reference
BATCH = 200
#: ε of each stream order (the sorted stream's steps are slower: fewer settings).
EPSILONS = {"randomized": (0.5, 1.0, 4.0), "ordered": (1.0,)}
METRICS = ("AvgWE", "MaxWE", "AvgRelL2", "MaxRelL2")
#: The size error's maximum is taken from this step on (the first batches are small against
#: the size counter's noise at ε/20).
SIZE_FROM = 10
VARIANTS = ("add/remove", "public sizes")


@dataclass(frozen=True)
class Outcome:
    job: bt.Job
    free: tuple[float, ...]  # bt.METRICS, last LAST steps: sizes free (stored)
    noisy: tuple[float, ...]  # add/remove (the default)
    public: tuple[float, ...]  # public sizes at ε
    size_last: float  # add/remove: mean |released − true| / true over the last LAST steps
    size_max: float  # add/remove: max of it from step SIZE_FROM on
    reused: bool


class _Sizes:
    """Collects each step's released size (a module-level class: picklable)."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    def __call__(self, stream: TabularStream) -> None:
        self.sizes.append(stream.size)


def options(variant: str) -> dict[str, object]:
    """The TabularStream options of a variant: the default method's, with its sizes."""
    base = {k: v for k, v in bt.method_options(METHOD).items() if k != bt.LEGACY_SIZES}
    return {**base, "public_sizes": variant == "public sizes"}


def run(args: tuple[bt.Job, bool]) -> Outcome:
    job, use_store = args
    sizes = _Sizes()
    noisy = bt.run_job(job, options=options("add/remove"), on_step=sizes)
    public = bt.run_job(job, options=options("public sizes"))
    stored = bt.load_stored(bt.STORE_DIR, job) if use_store else None
    free = stored if stored is not None else bt.run_job(job)
    if use_store and stored is None:
        bt.save_stored(bt.STORE_DIR, free)
    _, codes = bt.load_adult()
    n = codes.shape[0]
    true = np.minimum(np.arange(1, len(sizes.sizes) + 1) * job.batch, n)
    rel = np.abs(np.asarray(sizes.sizes) - true) / true
    return Outcome(
        job,
        tuple(float(v) for v in free.last),
        tuple(float(v) for v in noisy.last),
        tuple(float(v) for v in public.last),
        float(np.mean(rel[-bt.LAST :])),
        float(np.max(rel[SIZE_FROM:])) if rel.size > SIZE_FROM else math.nan,
        stored is not None,
    )


def self_check() -> None:
    """The variants are the default's options with their sizes, and the stored streams'
    sizes (``bt.LEGACY_SIZES``) are public sizes at twice ε (AssertionError otherwise)."""
    base = bt.method_options(METHOD)
    assert METHOD == bt.DEFAULT and base["public_sizes"] and base[bt.LEGACY_SIZES]
    noisy, public = options("add/remove"), options("public sizes")
    assert bt.LEGACY_SIZES not in noisy and not noisy["public_sizes"] and public["public_sizes"]
    rest = {k: v for k, v in base.items() if k not in ("public_sizes", bt.LEGACY_SIZES)}
    for o in (noisy, public):
        assert {k: v for k, v in o.items() if k != "public_sizes"} == rest
    domain, _ = bt.load_adult()
    legacy = bt.bench_stream(domain, 1.0, 1, public_sizes=True, **{bt.LEGACY_SIZES: True})
    assert legacy.epsilon == 2 and legacy.public_sizes
    try:
        bt.bench_stream(domain, 1.0, 1, **{bt.LEGACY_SIZES: True})
    except ValueError as exc:
        assert "needs public_sizes" in str(exc)
    else:
        raise AssertionError("legacy sizes without public sizes were accepted")


def jobs(quick: bool, runs: int = 1, steps: int = bt.QUICK_STEPS) -> list[bt.Job]:
    cap = steps if quick else None
    return [
        bt.Job(order, BATCH, eps, METHOD, "simple", run, cap)
        for order, epsilons in EPSILONS.items()
        for eps in epsilons
        for run in range(1 if quick else runs)
    ]


def _cell(free: float, other: float) -> str:
    if not (free > 0 and math.isfinite(other)):
        return "–"
    return f"{bt.fmt(free)} → {bt.fmt(other)} ({bt.fmt(other / free)}×)"


def render(outcomes: list[Outcome], runtime: float, command: str, workers: int) -> str:
    rows: list[str] = []
    for o in outcomes:
        for variant, values in (("add/remove", o.noisy), ("public sizes", o.public)):
            cells = [
                _cell(o.free[bt.METRICS.index(m)], values[bt.METRICS.index(m)]) for m in METRICS
            ]
            size = f"{o.size_last:.2%} / {o.size_max:.2%}" if variant == "add/remove" else "exact"
            rows.append(
                f"| {bt.dataset_name(o.job.order, o.job.batch)} | {o.job.epsilon:g} | "
                f"{o.job.run} | {variant} | {size} | {' | '.join(cells)} |"
            )
    summary: list[str] = []
    for order, epsilons in EPSILONS.items():
        for eps in epsilons:
            group = [o for o in outcomes if o.job.order == order and o.job.epsilon == eps]
            if not group:
                continue
            for variant in VARIANTS:
                parts = []
                for m in METRICS:
                    i = bt.METRICS.index(m)
                    free = float(np.mean([o.free[i] for o in group]))
                    vals = [o.noisy[i] if variant == "add/remove" else o.public[i] for o in group]
                    parts.append(_cell(free, float(np.mean(vals))))
                summary.append(
                    f"| {bt.dataset_name(order, BATCH)} | {eps:g} | {len(group)} | {variant} | "
                    f"{' | '.join(parts)} |"
                )
    reused = sum(o.reused for o in outcomes)
    lines = [
        SECTION_TITLE,
        "",
        "Written by `benches/diag_tabular_sizes.py`: the library default's options of "
        "`dpstream.tabular.TabularStream` with exact sizes calibrated as before issue 28 "
        '("sizes free", the reference), with the size released privately ("add/remove", '
        'the default guarantee) and with exact sizes for one record replaced ("public '
        'sizes", `public_sizes=True`), on the same seeds.',
        "",
        "### Run",
        "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; whole script "
        f"{runtime / 60:.1f} min on {workers} worker process(es); {2 * len(outcomes)} new "
        f"streams; {reused} reference streams reused from the store `benches/out/tabular_streams`",
        *diag_run_lines(command),
        "",
        "### Setup",
        "",
        f'- Options: the column "{bt.DEFAULT}" of the section "Tabular stream on Adult" '
        "(the library's defaults, all 2-way workloads, the PGM fit). Sizes free: its stored "
        "streams (exact sizes, the noise of one record added or removed at ε: "
        "`public_sizes=True` at 2ε, which is 2ε-DP for one record replaced). Add/remove: "
        f"`public_sizes=False`, the size counter gets ε·{SIZE_SHARE} and the other mechanisms "
        "share the rest; each release has the released number of rows (the metrics "
        "normalise each table by its own rows). Public sizes: `public_sizes=True` at ε "
        "(twice the noise of sizes free). The same seed in all three.",
        f"- Size error (add/remove): |released − true| / true, mean over the last {bt.LAST} "
        f"steps / maximum from step {SIZE_FROM} on. Metrics averaged over the last {bt.LAST} "
        "steps, as in the section on Adult.",
        "",
        "### Results",
        "",
        "| dataset | ε | run | sizes | size error | "
        + " | ".join(f"{bt.metric_label(m)}: free → this" for m in METRICS)
        + " |",
        "|---|---:|---:|---|---:|" + "---:|" * len(METRICS),
        *rows,
        "",
        "### Summary",
        "",
        "Means over the runs, sizes free → this variant (ratio).",
        "",
        "| dataset | ε | runs | sizes | " + " | ".join(bt.metric_label(m) for m in METRICS) + " |",
        "|---|---:|---:|---|" + "---|" * len(METRICS),
        *summary,
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help=f"{bt.QUICK_STEPS} steps, no store")
    add_steps_option(parser, bt.QUICK_STEPS)
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--runs", type=int, default=1, help="runs per setting (default 1)")
    parser.add_argument("--results", type=Path, default=bt.RESULTS_PATH, help="RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print, write nothing")
    args = parser.parse_args()
    self_check()
    command = shlex.join([".venv/bin/python", "benches/diag_tabular_sizes.py", *sys.argv[1:]])
    start = time.perf_counter()
    selected = jobs(args.quick, max(1, args.runs), max(1, args.steps))
    todo = [(job, not args.quick) for job in selected]
    workers = max(1, args.workers)
    outcomes: list[Outcome] = []
    with Pool(workers) as pool:
        for out in pool.imap_unordered(run, todo):
            print(f"done {out.job.key}", file=sys.stderr, flush=True)
            outcomes.append(out)
    order = {job.key: i for i, (job, _) in enumerate(todo)}
    outcomes.sort(key=lambda o: order[o.job.key])
    section = render(outcomes, time.perf_counter() - start, command, workers)
    publish(section, SECTION_TITLE, args.results, args.no_write)


if __name__ == "__main__":
    main()

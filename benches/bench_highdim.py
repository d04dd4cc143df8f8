"""High-dimensional tabular streams: seconds per step and accuracy as the columns grow.

Data: ``dpstream.streams.latent_class`` with its documented defaults (6 values per column,
4 latent classes, per-class Dirichlet(0.5) column distributions), data seed ``SEED``. The
stream: ``TabularStream(domain, ε = 1)`` with every option at the library default (all
2-way workloads), noise from ``dpstream.Rng(seed=SEED)`` (reproducible, not private),
batches of ``BATCH`` rows. Per number of columns (one subprocess each, so that the peak
memory is its own):

* seconds per step, median and last (the whole ``step`` call: scoring, selection,
  measurement, fit, sampling of the synthetic table);
* the process's peak resident memory;
* AvgWE / MaxWE over all 2-way workloads of the final synthetic table against the rows
  seen so far, and the same for the *independent-columns, noiseless reference*: the exact
  one-way marginals of those rows, multiplied (no privacy; a floor any useful model of
  dependent columns must beat);
* the model at the end: its junction tree's cells (``max_model_cells`` = 200,000) and the
  number of workloads measured at least once.

``--quick`` (tests): 2 steps of 200 rows at 6 and 8 columns. Default: ``STEPS`` steps per
size. ``--full``: 100 steps per size (long at 100 columns). Per-setting JSON goes to
``benches/out/highdim/`` (ignored by git); the summary table to ``benches/RESULTS.md``
(``--no-write``: printed instead).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import diag_run_lines, publish  # noqa: E402

SECTION_TITLE = "## High-dimensional tabular streams (issue 31)"
COLUMNS = (14, 30, 50, 100)
QUICK_COLUMNS = (6, 8)
BATCH = 1_000
QUICK_BATCH = 200
STEPS = 15
QUICK_STEPS = 2
FULL_STEPS = 100
SEED = 31
EPSILON = 1
OUT_DIR = HERE / "out" / "highdim"


def run_one(columns: int, steps: int, batch: int) -> dict[str, object]:
    """One stream: ``steps`` batches of ``batch`` rows over ``columns`` columns."""
    import dpstream
    from dpstream import streams
    from dpstream.tabular import Domain, TabularStream, workload_errors
    from dpstream.tabular.estimation import marginal_counts

    rows = streams.latent_class(steps * batch, columns, seed=SEED)
    values = streams.LATENT_VALUES
    domain = Domain({f"c{j}": values for j in range(columns)})
    stream = TabularStream(domain, EPSILON, rng=dpstream.Rng(seed=SEED))
    seconds: list[float] = []
    for t in range(steps):
        start = time.perf_counter()
        stream.step(rows[t * batch : (t + 1) * batch])
        seconds.append(time.perf_counter() - start)
    seen = rows[: steps * batch]
    synthetic = stream.synthetic_codes()
    errors = workload_errors(seen, synthetic, domain, 2)
    # the independent-columns noiseless reference: products of the exact one-way marginals
    n = float(seen.shape[0])
    ones = [marginal_counts(seen, domain.sizes, (j,)) / n for j in range(columns)]
    we = [
        float(np.mean(np.abs(marginal_counts(seen, domain.sizes, w) / n
                             - np.outer(ones[w[0]], ones[w[1]]).ravel())))
        for w in stream.workloads
    ]  # fmt: skip
    model = stream._model
    tree_cells = sum(
        int(np.prod([domain.sizes[c] for c in node])) for node in model.junction_tree.nodes
    )
    return {
        "columns": columns,
        "steps": steps,
        "batch": batch,
        "seconds": seconds,
        "median_seconds": statistics.median(seconds),
        "last_seconds": seconds[-1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "avg_we": float(errors.avg_we),
        "max_we": float(errors.max_we),
        "independent_avg_we": float(np.mean(we)),
        "independent_max_we": float(np.max(we)),
        "tree_cells": tree_cells,
        "measured_workloads": int(sum(1 for v in stream.selection_counts.values() if v > 0)),
        "workloads": len(stream.workloads),
    }


#: Random structures for the feasibility comparison: columns, models per size.
AGREEMENT_COLUMNS = (8, 14, 30)
QUICK_AGREEMENT_COLUMNS = (8,)
AGREEMENT_MODELS = 10
QUICK_AGREEMENT_MODELS = 2


def agreement(columns: int, models: int, values: int = 6) -> dict[str, int]:
    """How often the select step's rule (``ModelTree`` insertion) and the greedy rebuild
    of the code before it answer differently, on random models near their bound.

    Each model: random pairs inserted one by one while the model stays within a bound of
    ``b · (values · columns)`` cells (``b`` drawn from 2..20), up to a random number of
    pairs (1 to 3·columns); then every pair outside it is asked both ways."""
    import random

    from dpstream.tabular import junction_tree_size, pgm

    rng = random.Random(columns)
    sizes = (values,) * columns
    counts = {"pairs": 0, "same": 0, "bound refuses": 0, "bound accepts": 0, "over": 0}
    pairs = [(a, b) for a in range(columns) for b in range(a + 1, columns)]
    for _ in range(models):
        cap = rng.randint(2, 20) * values * columns
        tree = pgm.ModelTree(sizes)
        cliques: list[tuple[int, ...]] = []
        stop = rng.randint(1, 3 * columns)  # stop early: near the bound, not always at it
        for c in rng.sample(pairs, len(pairs)):
            if len(cliques) < stop and tree.cells_with(c) <= cap:
                tree, cliques = tree.added(c), [*cliques, c]
        # the fit's tree: the smaller of the greedy one and the chain
        nodes = pgm._model_nodes(sizes, cliques, None)
        counts["over"] += sum(int(np.prod([values] * len(n))) for n in nodes) > cap
        base = pgm.ModelTree(sizes, pgm._tree_of_nodes(sizes, nodes))
        for c in pairs:
            if c in cliques:
                continue
            new = base.cells_with(c) <= cap
            old = junction_tree_size(sizes, [*cliques, c]) <= cap
            counts["pairs"] += 1
            counts["same"] += new == old
            counts["bound refuses"] += old and not new
            counts["bound accepts"] += new and not old
    return counts


def run_child(columns: int, steps: int, batch: int) -> dict[str, object]:
    """:func:`run_one` in a fresh interpreter (its own peak memory)."""
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(columns), str(steps), str(batch)],
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def render(
    results: list[dict[str, object]],
    agreements: dict[int, dict[str, int]],
    command: str,
    wall: float,
    before: dict[int, dict[str, object]] | None = None,
    before_commit: str = "a46e0bb",
) -> str:
    lines = [
        SECTION_TITLE,
        "",
        "Written by `benches/bench_highdim.py`: the default `TabularStream` (ε = 1, all 2-way "
        f"workloads) on `streams.latent_class` data (6 values per column, 4 latent classes, "
        f"Dirichlet(0.5) per class and column; data and noise seed {SEED}), batches of "
        f"{results[0]['batch']:,} rows, {results[0]['steps']} steps per size.",
        "",
        "### Run",
        "",
        f"- Date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; whole script "
        f"{wall / 60:.1f} min, one setting at a time; load average at the end "
        f"{os.getloadavg()[0]:.1f} (2 cores)",
        *diag_run_lines(command),
        "",
        "### Results",
        "",
        "| columns | 2-way workloads | seconds per step: median / last | × the smallest | "
        "peak memory (MB) | AvgWE | MaxWE | independent, noiseless: AvgWE / MaxWE | "
        "model cells | workloads measured |" + (" before: seconds per step, median / last |"
                                                if before is not None else ""),
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if before else ""),
    ]  # fmt: skip
    smallest = float(results[0]["median_seconds"])  # type: ignore[arg-type]
    for r in results:
        row = (
            f"| {r['columns']} | {r['workloads']:,} | {r['median_seconds']:.2f} / "
            f"{r['last_seconds']:.2f} | {float(r['median_seconds']) / smallest:.1f}× | "  # type: ignore[arg-type]
            f"{r['peak_rss_mb']:.0f} | {r['avg_we']:.4f} | {r['max_we']:.4f} | "
            f"{r['independent_avg_we']:.4f} / {r['independent_max_we']:.4f} | "
            f"{r['tree_cells']:,} | {r['measured_workloads']:,} |"
        )
        if before is not None:
            b = before.get(int(r["columns"]))  # type: ignore[call-overload]
            row += f" {b['median_seconds']:.2f} / {b['last_seconds']:.2f} |" if b else " – |"
        lines.append(row)
    lines += [
        "",
        "- Seconds per step: the whole `step` call, on a shared 2-core machine (other jobs "
        "ran: compare within a column). Before: the same script with the Python sources of "
        f"commit {before_commit} and the same data generator, from the folder given to "
        "`--before` (a separate run, at its own time and load).",
        "- Model cells: the cells of the model's junction tree at the end (bound: "
        "`max_model_cells` = 200,000); workloads measured: those selected at least once. "
        "A workload can be measured when its insertion keeps the tree within the bound; an "
        "unmeasured one is estimated by the model (the product of its columns' marginals "
        "where they lie in independent parts of the tree, variable elimination within "
        "one), and its error is in AvgWE / MaxWE, which average over all workloads.",
        "- Independent, noiseless: the product of the exact one-way marginals of the rows "
        "seen (no noise, no privacy): what a model of no dependence at all would reach.",
        "",
        "### The feasibility rule against the greedy rebuild",
        "",
        "Random models of 6-valued columns grown pair by pair (up to 3 per column) within a "
        "random bound of 2–20 cells per category, then every pair outside the model asked "
        "both ways: the rule of "
        "the select step (the model's junction tree with the pair inserted, "
        "`pgm.ModelTree`) and a greedy triangulation of all the cliques (the only check "
        "before). Up to 20 columns, a stream gives a pair the bound refuses a second chance "
        "from the greedy rebuild, so there only the 'bound accepts' column can differ; the "
        "fit keeps the smaller of the two trees, so a model never exceeds its bound "
        "(last column: fits over the bound).",
        "",
        "| columns | models | pairs asked | same answer | bound refuses, greedy accepts | "
        "bound accepts, greedy refuses | fits over the bound |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d, a in agreements.items():
        lines.append(
            f"| {d} | {a['models']} | {a['pairs']:,} | {a['same'] / a['pairs']:.1%} | "
            f"{a['bound refuses'] / a['pairs']:.1%} | {a['bound accepts'] / a['pairs']:.1%} | "
            f"{a['over']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="tiny inputs (tests)")
    mode.add_argument("--full", action="store_true", help=f"{FULL_STEPS} steps per size")
    parser.add_argument("--columns", type=str, default=None, help="comma-separated sizes")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--out", type=Path, default=OUT_DIR, help="per-setting JSON folder")
    parser.add_argument("--results", type=Path, default=HERE / "RESULTS.md")
    parser.add_argument("--no-write", action="store_true", help="print the section instead")
    parser.add_argument(
        "--before",
        type=Path,
        default=None,
        help="a folder of this script's per-setting JSON from earlier code, shown alongside",
    )
    parser.add_argument(
        "--before-commit",
        default="a46e0bb",
        help="the commit whose sources made the --before folder (named in the note)",
    )
    parser.add_argument("--one", nargs=3, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(run_one(*args.one)))
        return 0
    columns = QUICK_COLUMNS if args.quick else COLUMNS
    if args.columns:
        columns = tuple(int(c) for c in args.columns.split(","))
    steps = QUICK_STEPS if args.quick else FULL_STEPS if args.full else STEPS
    steps = args.steps or steps
    batch = QUICK_BATCH if args.quick else BATCH
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results = []
    for d in columns:
        r = run_child(d, steps, batch)
        (args.out / f"columns-{d}-steps-{steps}.json").write_text(json.dumps(r, indent=1))
        print(f"{d} columns: median {r['median_seconds']:.2f} s per step", file=sys.stderr)
        results.append(r)
    models = QUICK_AGREEMENT_MODELS if args.quick else AGREEMENT_MODELS
    agreements = {}
    for d in QUICK_AGREEMENT_COLUMNS if args.quick else AGREEMENT_COLUMNS:
        agreements[d] = {**agreement(d, models), "models": models}
    command = ".venv/bin/python benches/bench_highdim.py" + " ".join(
        [
            "",
            *(["--quick"] if args.quick else []),
            *(["--full"] if args.full else []),
            *([f"--columns {args.columns}"] if args.columns else []),
            *([f"--steps {args.steps}"] if args.steps else []),
        ]
    )
    before = None
    if args.before is not None:
        before = {}
        for d in columns:
            path = args.before / f"columns-{d}-steps-{steps}.json"
            if path.exists():
                before[d] = json.loads(path.read_text())
        command += f" --before {args.before} --before-commit {args.before_commit}"
    section = render(
        results, agreements, command.rstrip(), time.perf_counter() - start, before,
        args.before_commit,
    )  # fmt: skip
    publish(section, SECTION_TITLE, args.results, args.no_write)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

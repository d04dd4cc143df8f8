"""High-dimensional tabular streams: seconds per step and accuracy as the columns grow.

Data: ``dpstream.streams.latent_class`` with its documented defaults (6 values per column,
4 latent classes, per-class Dirichlet(0.5) column distributions), data seed ``SEED``. The
stream: ``TabularStream(domain, ε = 1)`` with every option at the library default (all
2-way workloads), noise from ``dpstream.Rng(seed=SEED)`` (reproducible, not private),
batches of ``BATCH`` rows. Per number of columns (one subprocess each, so that the peak
memory is its own):

* seconds per step, median and last (the whole ``step`` call: measurement, epoch
  releases, fits, sampling of the synthetic table), the same without the sampling and
  decoding of the release's rows (``|f_t|`` of them: that part grows with ``t`` whatever
  the model), and both as medians of each ``BLOCK`` steps;
* the process's peak resident memory;
* total variation over all 2-way marginals (mean and max) and AvgWE / MaxWE over all 2-way
  workloads of the final synthetic table against the rows seen so far, and the same for the
  *independent-columns, noiseless reference*: the exact one-way marginals of those rows,
  multiplied (no privacy; a floor any useful model of dependent columns must beat);
* the epochs closed by the end (the default policy, ``Adaptive()``:
  :mod:`dpstream.tabular.epochs`).

Also: the feasibility rule of ``Paper()``'s selections (``model.ModelTree``) against the
greedy rebuild, on random models.

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
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import diag_run_lines, publish  # noqa: E402

SECTION_TITLE = "## High-dimensional tabular stream"
#: The subsections written to the details file in benches/out, not to RESULTS.md.
DETAILS = ("### Seconds per step", "### The feasibility rule")
COLUMNS = (14, 30, 50, 100)
QUICK_COLUMNS = (6, 8)
BATCH = 1_000
QUICK_BATCH = 200
STEPS = 15
QUICK_STEPS = 2
FULL_STEPS = 100
#: Steps per block of the per-block medians.
BLOCK = 10
SEED = 31
EPSILON = 1
OUT_DIR = HERE / "out" / "highdim"


def run_one(columns: int, steps: int, batch: int) -> dict[str, object]:
    """One stream: ``steps`` batches of ``batch`` rows over ``columns`` columns, the
    default policy."""
    import dpstream
    from dpstream import streams
    from dpstream.tabular import Domain, TabularStream, tv_errors, workload_errors
    from dpstream.tabular.estimation import marginal_counts

    rows = streams.latent_class(steps * batch, columns, seed=SEED)
    values = streams.LATENT_VALUES
    domain = Domain({f"c{j}": values for j in range(columns)})
    stream = TabularStream(domain, EPSILON, rng=dpstream.Rng(seed=SEED))
    # The release's rows are sampled and decoded at the end of each step: |f_t| rows, so
    # that part grows with t whatever the model; timed apart (same calls, same results).
    release = [0.0]

    def timed(f: Any) -> Any:
        def run(*a: Any) -> Any:
            start = time.perf_counter()
            out = f(*a)
            release[0] += time.perf_counter() - start
            return out

        return run

    stream.synthetic_codes = timed(stream.synthetic_codes)  # type: ignore[method-assign]
    stream._table = timed(stream._table)  # type: ignore[method-assign]
    seconds: list[float] = []
    release_seconds: list[float] = []
    for t in range(steps):
        release[0] = 0.0
        start = time.perf_counter()
        stream.step(rows[t * batch : (t + 1) * batch])
        seconds.append(time.perf_counter() - start)
        release_seconds.append(release[0])
    seen = rows[: steps * batch]
    synthetic = stream.synthetic_codes()
    errors = workload_errors(seen, synthetic, domain, 2)
    tv = tv_errors(seen, synthetic, domain)
    # the independent-columns noiseless reference: products of the exact one-way marginals
    n = float(seen.shape[0])
    ones = [marginal_counts(seen, domain.sizes, (j,)) / n for j in range(columns)]
    joint = [
        marginal_counts(seen, domain.sizes, w) / n - np.outer(ones[w[0]], ones[w[1]]).ravel()
        for w in stream.workloads
    ]
    we = [float(np.mean(np.abs(x))) for x in joint]
    independent_tv = [0.5 * float(np.sum(np.abs(x))) for x in joint]
    model_seconds = [a - b for a, b in zip(seconds, release_seconds, strict=True)]
    epochs = stream._epochs
    return {
        "columns": columns,
        "steps": steps,
        "batch": batch,
        "seconds": seconds,
        "release_seconds": release_seconds,
        "median_seconds": statistics.median(seconds),
        "median_model_seconds": statistics.median(model_seconds),
        "last_seconds": seconds[-1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "avg_tv": float(tv.mean_2way),
        "max_tv": float(tv.max_2way),
        "avg_we": float(errors.avg_we),
        "max_we": float(errors.max_we),
        "independent_avg_tv": float(np.mean(independent_tv)),
        "independent_max_tv": float(np.max(independent_tv)),
        "independent_avg_we": float(np.mean(we)),
        "independent_max_we": float(np.max(we)),
        "epochs": len(epochs.epochs) if epochs is not None else 0,
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

    from dpstream.tabular import junction_tree_size
    from dpstream.tabular import model as pgm
    from dpstream.tabular.model import growth, junction_tree

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
        nodes = growth.model_nodes(sizes, cliques, None)
        counts["over"] += sum(int(np.prod([values] * len(n))) for n in nodes) > cap
        base = pgm.ModelTree(sizes, junction_tree.tree_of_nodes(sizes, nodes))
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


def per_block(seconds: list[float], block: int = BLOCK) -> list[float]:
    """Medians of ``seconds`` over consecutive blocks of ``block`` steps (a last, partial
    block included)."""
    return [statistics.median(seconds[k : k + block]) for k in range(0, len(seconds), block)]


def model_seconds(r: dict[str, Any]) -> list[float]:
    """Seconds per step without the sampling and decoding of the release's rows."""
    release = r.get("release_seconds") or [0.0] * len(r["seconds"])
    return [a - b for a, b in zip(r["seconds"], release, strict=True)]


def render(
    results: list[dict[str, Any]],
    agreements: dict[int, dict[str, int]],
    command: str,
    wall: float,
    before: dict[int, dict[str, Any]] | None = None,
    before_commit: str = "a46e0bb",
) -> str:
    lines = [
        SECTION_TITLE,
        "",
        "Written by `benches/bench_highdim.py`: the default `TabularStream` (ε = 1, all 2-way "
        "workloads, `Adaptive()`) on `streams.latent_class` data (6 values per column, 4 "
        f"latent classes, Dirichlet(0.5) per class and column; data and noise seed {SEED}), "
        f"batches of {results[0]['batch']:,} rows, {results[0]['steps']} steps per size.",
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
        "without the release's rows: median (×) | peak memory (MB) | TV 2-way: mean / max | "
        "AvgWE | MaxWE | independent, noiseless: TV mean / max, AvgWE / MaxWE | epochs |"
        + (" before: seconds per step, median / last |" if before is not None else ""),
        "|" + "---:|" * (11 + (before is not None)),
    ]  # fmt: skip
    smallest = float(results[0]["median_seconds"])
    small_model = statistics.median(model_seconds(results[0]))
    for r in results:
        work = statistics.median(model_seconds(r))
        row = (
            f"| {r['columns']} | {r['workloads']:,} | {r['median_seconds']:.2f} / "
            f"{r['last_seconds']:.2f} | {float(r['median_seconds']) / smallest:.1f}× | "
            f"{work:.2f} ({work / small_model:.1f}×) | {r['peak_rss_mb']:.0f} | "
            f"{r['avg_tv']:.4f} / {r['max_tv']:.4f} | {r['avg_we']:.4f} | {r['max_we']:.4f} | "
            f"{r['independent_avg_tv']:.4f} / {r['independent_max_tv']:.4f}, "
            f"{r['independent_avg_we']:.4f} / {r['independent_max_we']:.4f} | {r['epochs']} |"
        )  # fmt: skip
        if before is not None:
            b = before.get(int(r["columns"]))
            row += f" {b['median_seconds']:.2f} / {b['last_seconds']:.2f} |" if b else " – |"
        lines.append(row)
    lines += [
        "",
        "- Seconds per step: the whole `step` call, on a shared 2-core machine (other jobs "
        "ran: compare within a column). Without the release's rows: minus the sampling and "
        "decoding of the synthetic table, which has |f_t| rows (t·batch) and so grows with t "
        "whatever the model (× the smallest size's). Before: the same script with the Python "
        f"sources of commit {before_commit} and the same data generator, from the folder "
        "given to `--before` (a separate run, at its own time and load).",
        "- TV: total variation distance of each 2-way marginal (half the ℓ1 distance of the "
        "normalised marginals); AvgWE / MaxWE: the paper's per-cell workload errors.",
        "- Independent, noiseless: the product of the exact one-way marginals of the rows "
        "seen (no noise, no privacy): what a model of no dependence at all would reach.",
        "- Epochs: the epochs the default policy closed by the end (each released by MST).",
    ]
    blocks = max(len(per_block(r["seconds"])) for r in results)
    lines += [
        "",
        f"### Seconds per step, median of each {BLOCK} steps",
        "",
        "Whole step, and without the release's rows (the model's work: measurement, epoch "
        "releases, fits).",
        "",
        "| columns | run | "
        + " | ".join(f"steps {k * BLOCK + 1}–{(k + 1) * BLOCK}" for k in range(blocks))
        + " |",
        "|---:|---|" + "---:|" * blocks,
    ]

    def block_row(d: Any, name: str, values: list[float]) -> str:
        cells = [f"{v:.2f}" for v in values] + ["–"] * (blocks - len(values))
        return f"| {d} | {name} | " + " | ".join(cells) + " |"

    for r in results:
        d = r["columns"]
        lines.append(block_row(d, "whole step", per_block(r["seconds"])))
        lines.append(block_row(d, "model work", per_block(model_seconds(r))))
        b = (before or {}).get(int(d))
        if b is not None:
            lines.append(block_row(d, "before: whole step", per_block(b["seconds"])))
    lines += [
        "",
        "### The feasibility rule against the greedy rebuild",
        "",
        "Random models of 6-valued columns grown pair by pair (up to 3 per column) within a "
        "random bound of 2–20 cells per category, then every pair outside the model asked "
        "both ways: the rule of "
        "the select step (the model's junction tree with the pair inserted, "
        "`model.ModelTree`) and a greedy triangulation of all the cliques (the only check "
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
        d, n, b = args.one
        print(json.dumps(run_one(d, n, b)))
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
        print(f"  per {BLOCK} steps: {[round(x, 2) for x in per_block(r['seconds'])]}",
              file=sys.stderr)  # fmt: skip
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
    publish(section, SECTION_TITLE, args.results, args.no_write, DETAILS, "bench_highdim")
    ratios = [
        f"{r['columns']}: {float(r['median_seconds']) / float(results[0]['median_seconds']):.1f}×"
        for r in results
    ]
    print(f"median step / the smallest size's: {', '.join(ratios)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""High-dimensional tabular streams: seconds per step and accuracy as the columns grow.

Data: ``dpstream.streams.latent_class`` with its documented defaults (6 values per column,
4 latent classes, per-class Dirichlet(0.5) column distributions), data seed ``SEED``. The
stream: ``TabularStream(domain, ε = 1)`` with every option at the library default (all
2-way workloads), noise from ``dpstream.Rng(seed=SEED)`` (reproducible, not private),
batches of ``BATCH`` rows. Per number of columns (one subprocess each, so that the peak
memory is its own):

* seconds per step, median and last (the whole ``step`` call: scoring, selection,
  measurement, fit, sampling of the synthetic table), the same without the sampling and
  decoding of the release's rows (``|f_t|`` of them: that part grows with ``t`` whatever
  the model), and both as medians of each ``BLOCK`` steps, with the model's cells at the
  end of each block (when does it reach its cap, and does the time stop growing then);
* the process's peak resident memory;
* AvgWE / MaxWE over all 2-way workloads of the final synthetic table against the rows
  seen so far, and the same for the *independent-columns, noiseless reference*: the exact
  one-way marginals of those rows, multiplied (no privacy; a floor any useful model of
  dependent columns must beat);
* the model at the end: its junction tree's cells (``max_model_cells`` = 200,000) and the
  number of workloads measured at least once.

The policy is ``Adaptive(max_scored=...)`` with the library's default (``--max-scored``
to change it, 0 for none): a size with more workloads than that runs a second time
scoring every workload (``max_scored=None``), for the time and the accuracy the bound
costs (``--no-unbounded`` skips it).

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

try:  # sources from before max_scored (a --before run) score every workload
    from dpstream.tabular.policy import MAX_SCORED
except ImportError:  # pragma: no cover - older sources
    MAX_SCORED = None

SECTION_TITLE = "## High-dimensional tabular streams (issue 31)"
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
MBI_PYTHON = HERE.parent / ".venv-mbi" / "bin" / "python"


def run_one(
    columns: int,
    steps: int,
    batch: int,
    max_scored: int | None = MAX_SCORED,
    save_fit: Path | None = None,
) -> dict[str, object]:
    """One stream: ``steps`` batches of ``batch`` rows over ``columns`` columns, the
    default policy with ``Adaptive(max_scored=max_scored)``; ``save_fit``: write the last
    fit's measurements there (:func:`fit_times`)."""
    import dpstream
    from dpstream import streams
    from dpstream.tabular import Adaptive, Domain, TabularStream, workload_errors
    from dpstream.tabular.estimation import marginal_counts

    rows = streams.latent_class(steps * batch, columns, seed=SEED)
    values = streams.LATENT_VALUES
    domain = Domain({f"c{j}": values for j in range(columns)})
    policy = Adaptive(max_scored=max_scored) if MAX_SCORED is not None else Adaptive()
    stream = TabularStream(domain, EPSILON, policy=policy, rng=dpstream.Rng(seed=SEED))
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
    last_fit: list[Any] = []
    fit = stream._fit

    def remember(ms: Any, total: float, warm: Any) -> Any:
        last_fit[:] = [ms, total]
        return fit(ms, total, warm)

    stream._fit = remember
    stream._table = timed(stream._table)  # type: ignore[method-assign]
    seconds: list[float] = []
    release_seconds: list[float] = []
    block_cells: list[int] = []

    def cells(tree: Any) -> int:
        return sum(int(np.prod([domain.sizes[c] for c in node])) for node in tree.nodes)

    for t in range(steps):
        release[0] = 0.0
        start = time.perf_counter()
        stream.step(rows[t * batch : (t + 1) * batch])
        seconds.append(time.perf_counter() - start)
        release_seconds.append(release[0])
        if (t + 1) % BLOCK == 0 or t + 1 == steps:  # the model's size at each block's end
            block_cells.append(cells(stream._model.junction_tree))
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
    tree_cells = cells(stream._model.junction_tree)
    # Which workloads the final model could still take (max_model_cells), and how many of
    # them lie inside one of its nodes already (they cost no cells).
    limit = stream._limit
    structure = limit.structure(stream._model, [])
    fitting = [i for i in range(len(stream.workloads)) if limit.fits(structure, i)]
    inside = sum(structure.tree.covers(stream._workloads[i]) for i in fitting)
    if save_fit is not None and last_fit:
        ms, total = last_fit
        np.savez(
            save_fit,
            sizes=np.array(domain.sizes),
            total=np.array(total),
            stddev=np.array([m.stddev for m in ms]),
            **{f"clique_{k}": np.array(m.clique) for k, m in enumerate(ms)},
            **{f"values_{k}": m.values for k, m in enumerate(ms)},
        )
    model_seconds = [a - b for a, b in zip(seconds, release_seconds, strict=True)]
    return {
        "columns": columns,
        "steps": steps,
        "batch": batch,
        "max_scored": max_scored,
        "seconds": seconds,
        "release_seconds": release_seconds,
        "median_seconds": statistics.median(seconds),
        "median_model_seconds": statistics.median(model_seconds),
        "last_seconds": seconds[-1],
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        "avg_we": float(errors.avg_we),
        "max_we": float(errors.max_we),
        "independent_avg_we": float(np.mean(we)),
        "independent_max_we": float(np.max(we)),
        "tree_cells": tree_cells,
        "block_cells": block_cells,
        "fitting_workloads": len(fitting),
        "inside_node_workloads": int(inside),
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


#: Propagations of each fit timed by :func:`fit_times` (mbi: half as many mirror-descent
#: steps, each two propagations; no early stop for either).
FIT_PROPAGATIONS = 100
#: Seconds an mbi fit may take before it is reported as not finished.
MBI_TIMEOUT = 900


def fit_times(path: Path) -> dict[str, object]:
    """One cold fit on the measurements of ``path`` (the last fit of a run) by the built-in
    PGM and by Private-PGM (``mbi``, when importable): seconds and the loss each reaches.
    Run in the interpreter that has ``mbi`` (``--mbi``)."""
    from dpstream.tabular.estimation import Measurement
    from dpstream.tabular.pgm import estimate_pgm

    data = np.load(path)
    sizes = tuple(int(x) for x in data["sizes"])
    total = float(data["total"])
    ms = [
        Measurement(tuple(int(c) for c in data[f"clique_{k}"]), data[f"values_{k}"], float(sd))
        for k, sd in enumerate(data["stddev"])
    ]

    def loss(model: Any) -> float:
        return float(
            sum(np.sum((model.marginal(m.clique) - m.values) ** 2) / m.stddev**2 for m in ms)
        )

    out: dict[str, object] = {"measurements": len(ms), "cliques": len({m.clique for m in ms})}
    start = time.perf_counter()
    model = estimate_pgm(sizes, ms, total, iters=FIT_PROPAGATIONS, tol=None)
    out["pgm_seconds"] = time.perf_counter() - start
    out["pgm_loss"] = loss(model)
    try:
        from dpstream.tabular.mbi_fit import estimate_mbi

        start = time.perf_counter()
        other = estimate_mbi(sizes, ms, total, iters=FIT_PROPAGATIONS // 2)
        out["mbi_seconds"] = time.perf_counter() - start
        out["mbi_loss"] = loss(other)
        start = time.perf_counter()  # again: jax's compilation of this model is done
        estimate_mbi(sizes, ms, total, iters=FIT_PROPAGATIONS // 2)
        out["mbi_again_seconds"] = time.perf_counter() - start
    except ImportError as e:
        out["mbi_error"] = f"not installed: {e}".splitlines()[0]
    except Exception as e:  # reported, not hidden: where mbi does not run
        out["mbi_error"] = f"{type(e).__name__}: {e}".splitlines()[0][:200]
    return out


def run_fit_times(python: str, path: Path) -> dict[str, object]:
    """:func:`fit_times` in ``python`` (the mbi venv), the sources of this checkout first."""
    env = {**os.environ, "PYTHONPATH": str(HERE.parent / "python")}
    try:
        out = subprocess.run(
            [python, "-W", "ignore", __file__, "--fit-times", str(path)],
            capture_output=True, text=True, check=True, timeout=MBI_TIMEOUT, env=env,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"mbi_error": f"timed out after {MBI_TIMEOUT} s"}
    except subprocess.CalledProcessError as e:
        return {"mbi_error": (e.stderr.strip().splitlines() or ["failed"])[-1][:200]}
    result: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def run_child(
    columns: int, steps: int, batch: int, max_scored: int | None, save_fit: Path | None = None
) -> dict[str, object]:
    """:func:`run_one` in a fresh interpreter (its own peak memory)."""
    scored = str(max_scored or 0)
    extra = ["--save-fit", str(save_fit)] if save_fit is not None else []
    out = subprocess.run(
        [sys.executable, __file__, "--one", str(columns), str(steps), str(batch), scored, *extra],
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


def _label(max_scored: Any) -> str:
    return "all" if max_scored is None else f"{max_scored:,}"


def render(
    results: list[dict[str, Any]],
    agreements: dict[int, dict[str, int]],
    command: str,
    wall: float,
    before: dict[int, dict[str, Any]] | None = None,
    before_commit: str = "a46e0bb",
    unbounded: dict[int, dict[str, Any]] | None = None,
    fits: dict[int, dict[str, Any]] | None = None,
) -> str:
    unbounded = unbounded or {}
    scored = _label(results[0].get("max_scored"))
    lines = [
        SECTION_TITLE,
        "",
        "Written by `benches/bench_highdim.py`: the default `TabularStream` (ε = 1, all 2-way "
        f"workloads, `Adaptive(max_scored={results[0].get('max_scored')})`) on "
        "`streams.latent_class` data (6 values per column, 4 latent classes, "
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
        "without the release's rows: median (×) | "
        "peak memory (MB) | AvgWE | MaxWE | independent, noiseless: AvgWE / MaxWE | "
        "model cells | workloads measured | workloads the model can take (inside a node) |"
        + (" before: seconds per step, median / last |" if before is not None else ""),
        "|" + "---:|" * (12 + (before is not None)),
    ]  # fmt: skip
    smallest = float(results[0]["median_seconds"])
    small_model = statistics.median(model_seconds(results[0]))
    for r in results:
        work = statistics.median(model_seconds(r))
        row = (
            f"| {r['columns']} | {r['workloads']:,} | {r['median_seconds']:.2f} / "
            f"{r['last_seconds']:.2f} | {float(r['median_seconds']) / smallest:.1f}× | "
            f"{work:.2f} ({work / small_model:.1f}×) | "
            f"{r['peak_rss_mb']:.0f} | {r['avg_we']:.4f} | {r['max_we']:.4f} | "
            f"{r['independent_avg_we']:.4f} / {r['independent_max_we']:.4f} | "
            f"{r['tree_cells']:,} | {r['measured_workloads']:,} | "
            + (f"{r['fitting_workloads']:,} ({r['inside_node_workloads']:,}) |"
               if "fitting_workloads" in r else "– |")
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
        "- Model cells: the cells of the model's junction tree at the end (bound: "
        "`max_model_cells` = 200,000); workloads measured: those selected at least once; "
        "the model can take: the workloads whose insertion keeps the final model within the "
        "bound (the candidates of a next selection), inside a node: those it holds already. "
        "A workload can be measured when its insertion keeps the tree within the bound; an "
        "unmeasured one is estimated by the model (the product of its columns' marginals "
        "where they lie in independent parts of the tree, variable elimination within "
        "one), and its error is in AvgWE / MaxWE, which average over all workloads.",
        "- Independent, noiseless: the product of the exact one-way marginals of the rows "
        "seen (no noise, no privacy): what a model of no dependence at all would reach.",
    ]
    if unbounded:
        lines += [
            "",
            f"### Scoring {scored} workloads per step against scoring all",
            "",
            f"With more than {scored} workloads, each step scores a public random subset of "
            f"{scored} (`Adaptive(max_scored={results[0].get('max_scored')})`"
            + (", the default" if results[0].get("max_scored") == MAX_SCORED else "")
            + "); "
            "`max_scored=None` scores every workload, as before. The same data and seed.",
            "",
            f"| columns | workloads | AvgWE: {scored} / all | MaxWE: {scored} / all | "
            f"median seconds per step: {scored} / all | without the release's rows: "
            f"{scored} / all | workloads measured: {scored} / all | model cells: {scored} / all |",
            "|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in results:
            u = unbounded.get(int(r["columns"]))
            if u is None:
                continue
            lines.append(
                f"| {r['columns']} | {r['workloads']:,} | {r['avg_we']:.4f} / {u['avg_we']:.4f} "
                f"({r['avg_we'] / u['avg_we']:.2f}×) | {r['max_we']:.4f} / {u['max_we']:.4f} "
                f"({r['max_we'] / u['max_we']:.2f}×) | {r['median_seconds']:.2f} / "
                f"{u['median_seconds']:.2f} | {statistics.median(model_seconds(r)):.2f} / "
                f"{statistics.median(model_seconds(u)):.2f} | {r['measured_workloads']:,} / "
                f"{u['measured_workloads']:,} | {r['tree_cells']:,} / {u['tree_cells']:,} |"
            )
    blocks = max(len(per_block(r["seconds"])) for r in results)
    lines += [
        "",
        f"### Seconds per step, median of each {BLOCK} steps",
        "",
        "Whole step, and without the release's rows (the model's work: scoring, selection, "
        "measurement, fit). The model's cells at the end of each block show when it reaches "
        "`max_model_cells`.",
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
        runs = [(f"max_scored={_label(r.get('max_scored'))}", r)]
        if int(d) in unbounded:
            runs.append(("max_scored=all", unbounded[int(d)]))
        for name, x in runs:
            lines.append(block_row(d, f"{name}: whole step", per_block(x["seconds"])))
            lines.append(block_row(d, f"{name}: model work", per_block(model_seconds(x))))
            cells = x.get("block_cells")
            if cells:
                lines.append(
                    f"| {d} | {name}: model cells | " + " | ".join(f"{c:,}" for c in cells) + " |"
                )
        b = (before or {}).get(int(d))
        if b is not None:
            lines.append(block_row(d, "before: whole step", per_block(b["seconds"])))
    if fits:
        lines += [
            "",
            "### One fit on the same measurements: the built-in PGM and Private-PGM (mbi)",
            "",
            "The measurements of each run's last fit (the step's selections and every "
            f"workload measured before), fitted once from a cold start, {FIT_PROPAGATIONS} "
            "belief propagations each (mbi: "
            f"`MirrorDescent` with {FIT_PROPAGATIONS // 2} steps of two), no early stop; "
            "loss: Σ ‖μ − y‖² / σ² over the measurements, at the model each returns.",
            "",
            "| columns | measurements (cliques) | built-in: seconds | mbi: seconds, first / "
            "again (compiled) | mbi again / built-in | loss: built-in / mbi |",
            "|---:|---:|---:|---:|---:|---:|",
        ]
        for d, f in fits.items():
            pgm = f.get("pgm_seconds")
            if pgm is None:
                lines.append(f"| {d} | – | – | – | – | {f.get('mbi_error', 'failed')} |")
                continue
            head = f"| {d} | {f['measurements']:,} ({f['cliques']:,}) | {pgm:.2f} |"
            if "mbi_seconds" in f:
                lines.append(
                    f"{head} {f['mbi_seconds']:.2f} / {f['mbi_again_seconds']:.2f} | "
                    f"{f['mbi_again_seconds'] / pgm:.1f}× | "
                    f"{f['pgm_loss']:,.0f} / {f['mbi_loss']:,.0f} |"
                )
            else:
                lines.append(
                    f"{head} did not run: {f['mbi_error']} | – | {f['pgm_loss']:,.0f} / – |"
                )
    lines += [
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
    parser.add_argument(
        "--max-scored",
        type=int,
        default=MAX_SCORED or 0,
        help="Adaptive(max_scored=...) of the runs (0: score all); default the library's",
    )
    parser.add_argument(
        "--no-unbounded",
        action="store_true",
        help="skip the second run, scoring every workload, of sizes with more workloads",
    )
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
    parser.add_argument(
        "--mbi",
        default=None,
        help="a Python with Private-PGM (mbi) to time one fit on the last measurements "
        "(default: the repository's .venv-mbi, if there is one, except with --quick)",
    )
    parser.add_argument("--no-mbi", action="store_true", help="skip the fit timing")
    parser.add_argument("--one", nargs=4, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--save-fit", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--fit-times", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.max_scored < 0:
        parser.error(f"--max-scored must be at least 0, got {args.max_scored}")
    if args.one:
        d, n, b, m = args.one
        print(json.dumps(run_one(d, n, b, m or None, args.save_fit)))
        return 0
    if args.fit_times:
        print(json.dumps(fit_times(args.fit_times)))
        return 0
    mbi = args.mbi
    if mbi is None and MBI_PYTHON.exists() and not args.quick:
        mbi = str(MBI_PYTHON)
    mbi = None if args.no_mbi else mbi
    columns = QUICK_COLUMNS if args.quick else COLUMNS
    if args.columns:
        columns = tuple(int(c) for c in args.columns.split(","))
    steps = QUICK_STEPS if args.quick else FULL_STEPS if args.full else STEPS
    steps = args.steps or steps
    batch = QUICK_BATCH if args.quick else BATCH
    cap = args.max_scored or None
    args.out.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    results = []
    unbounded: dict[int, dict[str, Any]] = {}
    fits: dict[int, dict[str, object]] = {}
    for d in columns:
        saved = args.out / f"fit-{d}-steps-{steps}.npz" if mbi else None
        r = run_child(d, steps, batch, cap, saved)
        if saved is not None and mbi is not None:
            fits[d] = run_fit_times(mbi, saved)
            print(f"  one fit: {fits[d]}", file=sys.stderr)
        (args.out / f"columns-{d}-steps-{steps}.json").write_text(json.dumps(r, indent=1))
        print(f"{d} columns: median {r['median_seconds']:.2f} s per step", file=sys.stderr)
        print(f"  per {BLOCK} steps: {[round(x, 2) for x in per_block(r['seconds'])]}",
              file=sys.stderr)  # fmt: skip
        results.append(r)
        if cap is not None and d * (d - 1) // 2 > cap and not args.no_unbounded:
            u = run_child(d, steps, batch, None)
            (args.out / f"columns-{d}-steps-{steps}-all.json").write_text(json.dumps(u, indent=1))
            print(f"{d} columns, every workload scored: median {u['median_seconds']:.2f} s "
                  f"per step", file=sys.stderr)  # fmt: skip
            unbounded[d] = u
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
            *([f"--max-scored {args.max_scored}"] if args.max_scored != (MAX_SCORED or 0) else []),
            *(["--no-unbounded"] if args.no_unbounded else []),
            *(["--no-mbi"] if args.no_mbi else []),
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
        args.before_commit, unbounded, fits,
    )  # fmt: skip
    publish(section, SECTION_TITLE, args.results, args.no_write)
    ratios = [
        f"{r['columns']}: {float(r['median_seconds']) / float(results[0]['median_seconds']):.1f}×"
        for r in results
    ]
    print(f"median step / the smallest size's: {', '.join(ratios)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

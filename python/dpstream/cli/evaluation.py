"""NOT PRIVATE evaluation of ``--evaluate DIR``: each release against the real data.

Writes ``NOT-PRIVATE-metrics.csv`` (and with ``--plot`` the figure of
:mod:`dpstream.cli.plots`) in ``DIR``, never in ``--out``, and returns the summary
lines, every one labelled NOT PRIVATE: for the data holder, never for publication.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpstream import metrics
from dpstream.cli.lazy import pandas
from dpstream.cli.parquet_input import LazyBatch
from dpstream.cli.plots import plot_points, plot_table
from dpstream.distributed import batch_marginals
from dpstream.io import read_table
from dpstream.tabular import all_workloads
from dpstream.tabular.marginals import BatchMarginals, add_counts
from dpstream.tabular.workloads import marginal_errors

#: Real points the evaluation of a partitioned input samples (about; on the cluster).
_EVAL_SAMPLE = 20_000


def evaluate_points(
    batches: list[Any],
    columns: list[str],
    releases: list[Path],
    bounds: Any,
    directory: Path,
    opts: dict[str, Any],
) -> dict[str, Any]:
    """NOT PRIVATE: W1 of (at most 30) releases to the real points consumed up to each.

    Writes ``NOT-PRIVATE-metrics.csv`` (and ``NOT-PRIVATE-evaluation.png`` with
    ``--plot``) in ``directory``; returns the summary lines, labelled NOT PRIVATE.
    """
    parts = _real_points(batches, columns, bounds)
    real_all = np.concatenate(parts) if parts else np.zeros((0, len(columns)))
    ends = np.cumsum([len(p) for p in parts])
    seen = np.cumsum([len(b.rows) for b in batches])
    index = {b.label: i for i, b in enumerate(batches)}
    stride = max(1, len(releases) // 30)
    chosen = releases[::stride] + ([releases[-1]] if (len(releases) - 1) % stride else [])
    g = np.random.default_rng(0)  # evaluation subsamples, not privacy noise
    rows: list[dict[str, Any]] = []
    last_synth = np.zeros((0, len(columns)))
    last_real = last_synth
    for path in chosen:
        label = path.stem.removeprefix("release-")
        if label not in index:
            continue
        real = real_all[: ends[index[label]]]
        synth = bounds.to_unit(read_table(path)[columns].to_numpy(dtype=np.float64))
        row: dict[str, Any] = {
            "release": label,
            "rows": len(synth),
            "real_rows": int(seen[index[label]]),
        }
        if len(synth) and len(real):
            n = min(1500, len(synth), len(real))
            a = real[g.choice(len(real), n, replace=False)]
            b = synth[g.choice(len(synth), n, replace=False)]
            row["w1"] = float(metrics.wasserstein1(a, b, method="exact"))
        rows.append(row)
        last_synth, last_real = synth, real
    table = _write_metrics(rows, directory)
    out: dict[str, Any] = {"evaluation (NOT PRIVATE)": str(directory)}
    if "w1" in table and table["w1"].notna().any():
        final = table["w1"].dropna().iloc[-1]
        out["final W1 to the real data (unit cube; NOT PRIVATE)"] = f"{final:.4f}"
    if opts.get("plot") and not table.empty:
        out["plot (NOT PRIVATE)"] = str(
            plot_points(table, last_real, last_synth, chosen[-1], directory)
        )
    return out


def _real_points(batches: list[Any], columns: list[str], bounds: Any) -> list[Any]:
    """Each batch's real points in the unit cube: all of them for a pandas input; for a
    partitioned one, a seeded Bernoulli sample of about ``_EVAL_SAMPLE`` points in all,
    drawn on the workers (the same rate in every batch, so every prefix's sample is
    uniform), so that nothing is loaded whole."""
    lazy = any(isinstance(b.rows, LazyBatch) for b in batches)
    rate = min(1.0, _EVAL_SAMPLE / max(1, sum(len(b.rows) for b in batches))) if lazy else 1.0
    out = []
    for i, b in enumerate(batches):
        rows = b.rows.sample(rate, seed=i) if isinstance(b.rows, LazyBatch) else b.rows
        out.append(bounds.to_unit(rows[columns].to_numpy(dtype=np.float64)))
    return out


def evaluate_table(
    batches: list[Any],
    schema: Any,
    codes: Callable[[Any], Any],
    releases: list[Path],
    directory: Path,
    opts: dict[str, Any],
) -> dict[str, Any]:
    """NOT PRIVATE: the workload errors of every release against the real records
    consumed up to it, in ``directory`` (``NOT-PRIVATE-metrics.csv``, and
    ``NOT-PRIVATE-evaluation.png`` with ``--plot``); returns the summary lines. Both
    are compared as codes: the real rows through ``codes``, a release read back with
    the schema."""
    names = list(schema.names)
    domain = schema.coded()
    cliques = all_workloads(domain, 2)
    index = {b.label: i for i, b in enumerate(batches)}
    # The real table's exact 2-way marginals after each batch: counted on the cluster
    # for a partitioned input (never loaded whole), here otherwise.
    totals: list[tuple[int, tuple[Any, ...]]] = []
    n, acc = 0, BatchMarginals.of(domain, cliques, None).inserted
    for b in batches:
        if isinstance(b.rows, LazyBatch):
            m = batch_marginals(b.rows.frame, schema, cliques)
        else:
            m = BatchMarginals.of(domain, cliques, codes(b.rows) if len(b.rows) else None)
        n, acc = n + m.rows_inserted, add_counts(acc, m.inserted)
        totals.append((n, acc))
    rows: list[dict[str, Any]] = []
    for path in releases:
        label = path.stem.removeprefix("release-")
        if label not in index:
            continue
        real_rows, real_counts = totals[index[label]]
        text = {c: schema.column(c).categories for c in names if schema.column(c).categories}
        synth = read_table(path, text=text)
        row: dict[str, Any] = {"release": label, "rows": len(synth), "real_rows": real_rows}
        if real_rows and len(synth):
            synth_codes = schema.encode_columns(synth[names], clipped={}).T
            errors = marginal_errors(list(real_counts), real_rows, synth_codes, domain, cliques)
            row.update(errors._asdict())
        rows.append(row)
    table = _write_metrics(rows, directory)
    out: dict[str, Any] = {"evaluation (NOT PRIVATE)": str(directory)}
    if "avg_we" in table and table["avg_we"].notna().any():
        final = table["avg_we"].dropna().iloc[-1]
        out["final AvgWE to the real data (NOT PRIVATE)"] = f"{final:.4f}"
        if opts.get("plot"):
            out["plot (NOT PRIVATE)"] = str(plot_table(table, directory))
    return out


def _write_metrics(rows: list[dict[str, Any]], directory: Path) -> Any:
    """The rows as a table, written to ``directory/NOT-PRIVATE-metrics.csv``."""
    directory.mkdir(parents=True, exist_ok=True)
    table = pandas().DataFrame(rows)
    table.to_csv(directory / "NOT-PRIVATE-metrics.csv", index=False)
    return table

"""The ``dpstream`` command: private synthetic data from files, without glue code.

::

    dpstream points --input X.csv --columns lon,lat --bounds "-122.52,-122.36,37.70,37.81" \\
        --method online --epsilon 1 --time-column date --release-every month \\
        --start 2024-01 --end 2024-12 --out synth/
    dpstream table --input adult.csv --domain adult-domain.json --batch-size 50 \\
        --epsilon 1 --out releases/ --plot
    dpstream demo

Every option can also come from a TOML file (``--config run.toml``; keys are the
option names with ``_`` or ``-``); flags override it. Invalid options end the
run with one message naming the option (exit status 2).

Privacy: each command spends exactly ``--epsilon`` on the whole stream of
releases (``points --method online``: He–Vershynin–Zhu, all releases together;
``points --method privhp``: one release at the end; ``table``: Kumar–Strohmer–
Vershynin, every step's table). Bounds and domains are public inputs, never
computed from the data; with ``--time-column`` the releases are labelled by
the calendar periods from ``--start`` to ``--end``, which must be given: the release
schedule is public and never read from the data (records outside it are dropped).
``--seed`` makes a run reproducible and **not private**.
Metrics files and plots compare with the real data: they are for the data holder,
not for publication.
"""

from __future__ import annotations

import argparse
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, Literal

import numpy as np

__all__ = ["main"]


class UsageError(Exception):
    """An invalid option: reported as one line, exit status 2."""


# ----------------------------------------------------------------------------- parsing


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpstream", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(s: argparse.ArgumentParser) -> None:
        s.add_argument("--config", type=Path, help="TOML file with any of these options")
        s.add_argument("--input", type=Path, help="a .csv or .parquet file")
        s.add_argument("--epsilon", help="ε for the whole stream (e.g. 1, 0.5, 1/3)")
        s.add_argument("--out", type=Path, help="directory for the release files")
        s.add_argument("--format", choices=["csv", "parquet"], help="release file format")
        s.add_argument("--time-column", help="column holding each record's time")
        s.add_argument("--release-every", help="day, week, month or year (with --time-column)")
        s.add_argument("--start", help="first period (public), e.g. 2024-01")
        s.add_argument("--end", help="last period (public)")
        s.add_argument("--batch-size", type=int, help="rows per time step (no time column)")
        s.add_argument("--checkpoint", type=Path, help="checkpoint file (resume on restart)")
        s.add_argument("--checkpoint-every", type=int, help="batches between checkpoints")
        s.add_argument("--plot", action="store_true", default=None, help="write a PNG summary")
        s.add_argument("--seed", type=int, help="reproducible noise: NOT PRIVATE (tests only)")
        s.add_argument("--quiet", action="store_true", default=None, help="no progress output")

    pts = sub.add_parser("points", help="points in a box: online synthesizer or PrivHP")
    common(pts)
    pts.add_argument("--columns", help="comma-separated numeric columns")
    pts.add_argument("--bounds", help="public bounds lo1,hi1,lo2,hi2,... (one pair per column)")
    pts.add_argument("--method", choices=["online", "privhp"], help="default: online")
    pts.add_argument("--memory", type=int, help="privhp: memory budget in bytes")
    pts.add_argument("--expected-n", type=int, help="privhp: public guess of the stream length")

    tab = sub.add_parser("table", help="categorical table stream (tabular synthesizer)")
    common(tab)
    tab.add_argument("--domain", type=Path, help="JSON: column -> size or category list")
    tab.add_argument(
        "--marginals-per-step",
        type=_int_or_auto,
        help="workloads measured per step: auto (the default: 2 while the stream is calm, 3 "
        "while it drifts) or a positive integer",
    )
    tab.add_argument("--estimator", choices=["pgm", "mw", "mbi"], help="default: pgm")
    tab.add_argument("--table-method", choices=["proposed", "baseline"], help="default: proposed")
    tab.add_argument(
        "--score",
        choices=["auto", "l2", "l2-cell", "paper"],
        help="workload selection score (default: auto, the library's: l2, or l2-cell while "
        "the stream drifts; l2-cell: per cell, favours small workloads; paper: the score "
        "printed in the paper)",
    )
    tab.add_argument(
        "--remainder",
        choices=["model", "pooled"],
        help="how a measurement counts the rows that came in while its workload was not "
        "selected (default: pooled, the counted rows scaled up; model: the paper's)",
    )

    demo = sub.add_parser("demo", help="both commands on the data dpstream ships")
    demo.add_argument("--out", type=Path, default=Path("dpstream-demo"))
    demo.add_argument("--quiet", action="store_true", default=False)
    return p


_DEFAULTS: dict[str, Any] = {
    "format": "csv",
    "method": "online",
    "estimator": "pgm",
    "table_method": "proposed",
    "score": "auto",
    "remainder": "pooled",
    "marginals_per_step": "auto",
    "checkpoint_every": 1,
    "plot": False,
    "quiet": False,
}


def _options(args: argparse.Namespace) -> dict[str, Any]:
    """Flags over the TOML config over the defaults; unknown config keys are refused."""
    opts: dict[str, Any] = dict(_DEFAULTS)
    known = set(vars(args))
    config = getattr(args, "config", None)
    if config is not None:
        try:
            data = tomllib.loads(Path(config).read_text())
        except FileNotFoundError:
            raise UsageError(f"--config: file {config} does not exist") from None
        except tomllib.TOMLDecodeError as e:
            raise UsageError(f"--config: {config} is not valid TOML: {e}") from None
        for key, value in data.items():
            name = key.replace("-", "_")
            if name not in known or name in ("config", "command"):
                raise UsageError(f"--config: unknown option {key!r} in {config}")
            opts[name] = value
    for key, value in vars(args).items():
        if value is not None:
            opts[key] = value
    return opts


def _require(opts: dict[str, Any], *names: str) -> None:
    for n in names:
        if opts.get(n) is None:
            raise UsageError(f"--{n.replace('_', '-')} is required")


def _epsilon(opts: dict[str, Any]) -> Fraction:
    try:
        eps = Fraction(str(opts["epsilon"]))
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--epsilon must be a positive number, got {opts['epsilon']!r}") from None
    if eps <= 0:
        raise UsageError(f"--epsilon must be positive, got {opts['epsilon']!r}")
    return eps


def _positive(opts: dict[str, Any], name: str) -> int | None:
    v = opts.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")
    return v


def _int_or_auto(text: str) -> int | str:
    """``--marginals-per-step``: ``auto`` or an integer (checked by _marginals_per_step)."""
    if text == "auto":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or auto, got {text!r}"
        ) from None


def _marginals_per_step(opts: dict[str, Any]) -> int | Literal["auto"]:
    if opts.get("marginals_per_step") == "auto":
        return "auto"
    k = _positive(opts, "marginals_per_step")
    return "auto" if k is None else k


# ----------------------------------------------------------------------------- batching

_FREQ = {"day": "D", "week": "W", "month": "M", "year": "Y"}


def _batches(frame: Any, opts: dict[str, Any]) -> list[tuple[str, Any]]:
    """``(label, rows)`` per time step, in time order."""
    import pandas as pd

    time_col = opts.get("time_column")
    if time_col is not None:
        if time_col not in frame.columns:
            raise UsageError(f"--time-column: no column {time_col!r} in the input")
        if opts.get("start") is None or opts.get("end") is None:
            # The release schedule is public structure: it must not come from the data.
            raise UsageError(
                "--time-column needs public --start and --end (the first and last period)"
            )
        every = opts.get("release_every")
        if every is None:
            # An integer time index: one step per distinct value in a public range.
            steps = frame[time_col]
            if not np.issubdtype(steps.dtype, np.integer):
                raise UsageError("--time-column without --release-every must hold integer steps")
            lo, hi = int(opts["start"]), int(opts["end"])
            groups = dict(tuple(frame.groupby(time_col, sort=True)))
            return [(str(t), groups.get(t, frame.iloc[:0])) for t in range(lo, hi + 1)]
        if every not in _FREQ:
            raise UsageError(f"--release-every must be one of {sorted(_FREQ)}, got {every!r}")
        try:
            times = pd.to_datetime(frame[time_col])
        except (ValueError, TypeError) as e:
            raise UsageError(f"--time-column {time_col!r}: not dates ({e})") from None
        periods = times.dt.to_period(_FREQ[every])
        first = pd.Period(opts["start"], _FREQ[every])
        last = pd.Period(opts["end"], _FREQ[every])
        order = np.argsort(times.to_numpy(), kind="stable")
        frame, periods = frame.iloc[order], periods.iloc[order]
        groups = {p: g for p, g in frame.groupby(periods.to_numpy(), sort=True)}
        return [
            (str(p), groups.get(p, frame.iloc[:0]))
            for p in pd.period_range(first, last, freq=_FREQ[every])
        ]
    size = _positive(opts, "batch_size") or 10_000
    n = len(frame)
    return [(str(i + 1), frame.iloc[s : s + size]) for i, s in enumerate(range(0, n, size))]


def _progress(opts: dict[str, Any]) -> Any:
    quiet = bool(opts.get("quiet"))

    def wrap(it: Iterator[int], total: int) -> Iterator[int]:
        if quiet:
            return it
        if sys.stderr.isatty():
            from tqdm import tqdm  # type: ignore[import-untyped]

            return iter(tqdm(it, total=total, unit="batch", file=sys.stderr))
        return _log_lines(it, total)

    return wrap


def _log_lines(it: Iterator[int], total: int) -> Iterator[int]:
    t0 = time.monotonic()
    step = max(1, total // 20)
    for k, i in enumerate(it, 1):
        yield i
        if k % step == 0 or k == total:
            rate = k / max(time.monotonic() - t0, 1e-9)
            eta = (total - k) / rate
            print(f"dpstream: {k}/{total} batches, {rate:.1f}/s, eta {eta:.0f} s", file=sys.stderr)


def _rng(opts: dict[str, Any]) -> Any:
    from dpstream import Rng

    if opts.get("seed") is not None:
        print("dpstream: --seed given: reproducible and NOT PRIVATE", file=sys.stderr)
        return Rng(seed=int(opts["seed"]))
    return None


# ----------------------------------------------------------------------------- points


class _OnlinePoints:
    """The online synthesizer on scaled points; releases in the original units."""

    def __init__(self, inner: Any, columns: list[str], bounds: Any) -> None:
        self.inner, self.columns, self.bounds = inner, columns, bounds

    def update(self, rows: Any) -> None:
        x = rows[self.columns].to_numpy(dtype=np.float64)
        self.inner.update(self.bounds.to_unit(x).reshape(-1, len(self.columns)))

    def release(self) -> Any:
        import pandas as pd

        y = self.inner.release()
        return pd.DataFrame(self.bounds.from_unit(y), columns=self.columns)

    def to_bytes(self) -> bytes:
        return bytes(self.inner.to_bytes())


class _PrivHPPoints(_OnlinePoints):
    """PrivHP: one release, at the end of the stream."""

    def release(self) -> Any:
        import pandas as pd

        gen = self.inner.release()
        n = max(0, round(gen.total))
        return pd.DataFrame(self.bounds.from_unit(gen.sample(n)), columns=self.columns)


def cmd_points(opts: dict[str, Any]) -> dict[str, Any]:
    from dpstream import OnlineSynthesizer, PrivHP
    from dpstream.io import parse_bounds, read_table
    from dpstream.runs import Batch, run_stream

    _require(opts, "input", "columns", "bounds", "epsilon", "out")
    eps = _epsilon(opts)
    columns = [c.strip() for c in str(opts["columns"]).split(",") if c.strip()]
    try:
        bounds = parse_bounds(opts["bounds"], len(columns))
    except ValueError as e:
        raise UsageError(f"--bounds: {e}") from None
    frame = read_table(opts["input"], columns)
    labelled = _batches(frame, opts)
    rng = _rng(opts)
    method = opts["method"]
    if method == "online":
        model: _OnlinePoints = _OnlinePoints(
            OnlineSynthesizer(eps, len(columns), rng=rng), columns, bounds
        )
        batches = [Batch(label, rows) for label, rows in labelled]

        def load(state: bytes) -> Any:
            return _OnlinePoints(OnlineSynthesizer.from_bytes(state), columns, bounds)

    else:
        _require(opts, "memory", "expected_n")
        summary = PrivHP.for_memory(
            eps, len(columns), expected_n=int(opts["expected_n"]), memory_bytes=int(opts["memory"])
        )
        model = _PrivHPPoints(summary, columns, bounds)
        last = len(labelled) - 1
        batches = [
            Batch("final" if i == last else label, rows, i == last)
            for i, (label, rows) in enumerate(labelled)
        ]

        def load(state: bytes) -> Any:
            return _PrivHPPoints(PrivHP.from_bytes(state), columns, bounds)

    def on_release(batch: Batch, m: Any, synth: Any) -> dict[str, Any]:
        return {"rows": len(synth)}

    result = run_stream(
        batches,
        model,
        load_model=load,
        out_dir=Path(opts["out"]),
        suffix="." + opts["format"],
        options={
            k: opts.get(k)
            for k in (
                "input",
                "columns",
                "bounds",
                "epsilon",
                "method",
                "time_column",
                "release_every",
                "start",
                "end",
                "batch_size",
                "seed",
                "memory",
                "expected_n",
            )
        },
        checkpoint=opts.get("checkpoint"),
        checkpoint_every=_positive(opts, "checkpoint_every") or 1,
        progress=_progress(opts),
        on_release=on_release,
    )
    summary_out = {
        "command": "points",
        "method": method,
        "epsilon": str(eps),
        "releases": len(result.releases),
        "out": str(opts["out"]),
    }
    if opts.get("plot") and result.releases:
        summary_out["plot"] = str(_plot_points(frame, columns, result.releases, bounds, opts))
    return summary_out


def _plot_points(
    frame: Any, columns: list[str], releases: list[Path], bounds: Any, opts: dict[str, Any]
) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from dpstream import metrics
    from dpstream.io import read_table

    real = bounds.to_unit(frame[columns].to_numpy(dtype=np.float64))
    g = np.random.default_rng(0)
    labels, values = [], []
    stride = max(1, len(releases) // 30)
    for path in releases[::stride] + ([releases[-1]] if len(releases) % stride else []):
        synth = bounds.to_unit(read_table(path)[columns].to_numpy(dtype=np.float64))
        if len(synth) == 0:
            continue
        n = min(1500, len(synth), len(real))
        a = real[g.choice(len(real), n, replace=False)]
        b = synth[g.choice(len(synth), n, replace=False)]
        labels.append(path.stem.removeprefix("release-"))
        method = "exact" if a.shape[1] == 1 or n <= 1500 else "sliced"
        values.append(float(metrics.wasserstein1(a, b, method=method)))
    last = bounds.to_unit(read_table(releases[-1])[columns].to_numpy(dtype=np.float64))
    fig, axes = plt.subplots(1, 3 if last.shape[1] >= 2 else 2, figsize=(14, 4.2))
    if last.shape[1] >= 2:
        k = min(3000, len(real))
        r = real[g.choice(len(real), k, replace=False)]
        axes[0].scatter(r[:, 0], r[:, 1], s=2, alpha=0.4)
        axes[0].set_title("real (all input)")
        s = last[g.choice(len(last), min(k, len(last)), replace=False)]
        axes[1].scatter(s[:, 0], s[:, 1], s=2, alpha=0.4, color="C1")
        axes[1].set_title(f"synthetic ({releases[-1].stem})")
    axes[-1].plot(range(len(values)), values, marker="o")
    axes[-1].set_xticks(range(len(values)), labels, rotation=60, fontsize=6)
    axes[-1].set_title("W1 to the real data (scaled units; not private)")
    fig.tight_layout()
    out = Path(opts["out"]) / "summary.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# ----------------------------------------------------------------------------- table


def cmd_table(opts: dict[str, Any]) -> dict[str, Any]:
    import pandas as pd

    from dpstream.io import read_table
    from dpstream.runs import Batch, run_stream
    from dpstream.tabular import Domain, TabularStream, workload_errors

    _require(opts, "input", "domain", "epsilon", "out")
    eps = _epsilon(opts)
    try:
        domain = Domain.from_json(opts["domain"])
    except (OSError, ValueError, TypeError) as e:
        raise UsageError(f"--domain: {e}") from None
    frame = read_table(opts["input"])
    if opts.get("time_column") is None and opts.get("batch_size") is None:
        raise UsageError("give --time-column or --batch-size")
    labelled = _batches(frame, opts)
    try:
        stream = TabularStream(
            domain,
            eps,
            marginals_per_step=_marginals_per_step(opts),
            method=opts["table_method"],
            estimator=opts["estimator"],
            score=opts["score"],
            remainder=opts["remainder"],
            rng=_rng(opts),
        )
    except (ValueError, TypeError, ImportError) as e:
        raise UsageError(str(e)) from None

    class _Table:
        def __init__(self, s: Any) -> None:
            self.s = s
            self.last: Any = None

        def update(self, rows: Any) -> None:
            synth = self.s.step(rows[list(domain.names)] if len(rows) else None)
            self.last = synth  # labelled as the input

        def release(self) -> Any:
            return self.last

        def to_bytes(self) -> bytes:
            return bytes(self.s.to_bytes())

    real_codes: list[Any] = []

    def on_release(batch: Batch, m: Any, synth: Any) -> dict[str, Any]:
        real_codes.append(domain.encode(batch.rows[list(domain.names)]))
        real = np.concatenate(real_codes)
        row: dict[str, Any] = {"rows": len(synth)}
        if len(real) and len(synth):
            row.update(workload_errors(real, synth, domain)._asdict())
        return row

    out = Path(opts["out"])
    result = run_stream(
        [Batch(label, rows) for label, rows in labelled],
        _Table(stream),
        load_model=lambda state: _Table(TabularStream.from_bytes(state)),
        out_dir=out,
        suffix="." + opts["format"],
        options={
            k: opts.get(k)
            for k in (
                "input",
                "domain",
                "epsilon",
                "time_column",
                "release_every",
                "start",
                "end",
                "batch_size",
                "seed",
                "marginals_per_step",
                "estimator",
                "table_method",
                "score",
            )
        },
        checkpoint=opts.get("checkpoint"),
        checkpoint_every=_positive(opts, "checkpoint_every") or 1,
        progress=_progress(opts),
        on_release=on_release,
    )
    metrics = pd.DataFrame(result.log)
    metrics.to_csv(out / "metrics.csv", index=False)
    summary = {
        "command": "table",
        "epsilon": str(eps),
        "releases": len(result.releases),
        "out": str(out),
        "metrics": str(out / "metrics.csv"),
    }
    if not metrics.empty and "avg_we" in metrics:
        summary["final_avg_we"] = f"{metrics['avg_we'].iloc[-1]:.4f}"
    if opts.get("plot") and not metrics.empty and "avg_we" in metrics:
        summary["plot"] = str(_plot_table(metrics, out))
    return summary


def _plot_table(metrics: Any, out: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for ax, key in zip(axes, ["avg_we", "max_we", "avg_rel_we", "max_rel_we"], strict=True):
        ax.plot(range(len(metrics)), metrics[key])
        ax.set_title(key + " (not private)")
        ax.set_xlabel("step")
    fig.tight_layout()
    path = out / "metrics.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- demo


def cmd_demo(opts: dict[str, Any]) -> dict[str, Any]:
    """Both commands on shipped data: clustered points and the Adult table."""
    from importlib import resources

    import pandas as pd

    from dpstream import streams

    out = Path(opts["out"])
    out.mkdir(parents=True, exist_ok=True)
    x = streams.clustered(40_000, 2, seed=3)
    pts = pd.DataFrame({"x": x[:, 0] * 10, "y": x[:, 1] * 10})
    pts.to_csv(out / "points.csv", index=False)
    base = resources.files("dpstream") / "data"
    quiet = bool(opts.get("quiet"))
    p = cmd_points(
        {
            **_DEFAULTS,
            "input": out / "points.csv",
            "columns": "x,y",
            "bounds": "0,10,0,10",
            "epsilon": 1,
            "out": out / "points",
            "batch_size": 4000,
            "plot": True,
            "quiet": quiet,
        }
    )
    adult = pd.read_csv(str(base / "adult.csv"), nrows=4000)
    adult.to_csv(out / "adult.csv", index=False)
    (out / "adult-domain.json").write_text((base / "adult-domain.json").read_text())
    t = cmd_table(
        {
            **_DEFAULTS,
            "input": out / "adult.csv",
            "domain": out / "adult-domain.json",
            "batch_size": 400,
            "epsilon": 1,
            "out": out / "table",
            "plot": True,
            "quiet": quiet,
        }
    )
    real = pd.read_csv(out / "points.csv").to_numpy()
    synth = pd.read_csv(out / "points" / "release-10.csv").to_numpy()
    g = np.random.default_rng(0)
    a = real[g.choice(len(real), 1500, replace=False)] / 10
    b = synth[g.choice(len(synth), 1500, replace=False)] / 10
    from dpstream import metrics

    p["final W1 to the real points (unit square; not private)"] = (
        f"{metrics.wasserstein1(a, b, method='exact'):.4f}"
    )
    p["points"] = "40000 clustered points in [0,10]^2, 10 batches of 4000"
    t["rows"] = "4000 Adult rows, 10 batches of 400, 14 columns, all 91 2-way workloads"
    return {
        "points (online synthesizer, releases after every batch)": p,
        "table (tabular stream)": t,
        "epsilon spent": "1 for the point stream + 1 for the table stream (separate data)",
    }


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpstream`` console script; returns the exit status."""
    args = _parser().parse_args(_join_negative_values(list(sys.argv[1:] if argv is None else argv)))
    try:
        opts = _options(args) if args.command != "demo" else {**_DEFAULTS, **vars(args)}
        if opts.get("format") not in ("csv", "parquet"):
            raise UsageError(f"--format must be csv or parquet, got {opts.get('format')!r}")
        command = {"points": cmd_points, "table": cmd_table, "demo": cmd_demo}[args.command]
        summary = command(opts)
    except UsageError as e:
        print(f"dpstream {args.command}: error: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"dpstream {args.command}: error: {e}", file=sys.stderr)
        return 2
    _print_summary(summary)
    return 0


def _join_negative_values(argv: list[str]) -> list[str]:
    """``--bounds -122.5,...`` as ``--bounds=-122.5,...``: argparse would take a value
    starting with ``-`` for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        nxt = argv[i + 1] if i + 1 < len(argv) else ""
        numeric = nxt[:1] == "-" and (nxt[1:2].isdigit() or nxt[1:2] == ".")
        if tok in ("--bounds", "--epsilon", "--start", "--end") and numeric:
            out.append(f"{tok}={nxt}")
            i += 2
            continue
        out.append(tok)
        i += 1
    return out


def _print_summary(summary: dict[str, Any], indent: str = "") -> None:
    for key, value in summary.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            _print_summary(value, indent + "  ")
        else:
            print(f"{indent}{key}: {value}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

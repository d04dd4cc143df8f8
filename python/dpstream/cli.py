"""The ``dpstream`` command: private synthetic data from files, without glue code.

::

    dpstream points --input X.csv --columns lon,lat --bounds "-122.52,-122.36,37.70,37.81" \\
        --method online --epsilon 1 --time-column date --release-every month \\
        --start 2024-01 --end 2024-12 --out synth/
    dpstream table --input adult.csv --domain adult-domain.json --batch-size 50 \\
        --epsilon 1 --out releases/ --evaluate eval/ --plot
    dpstream demo

Every option can also come from a TOML file (``--config run.toml``; keys are the
option names with ``_`` or ``-``); flags override it. Invalid options end the
run with one message naming the option (exit status 2).

Privacy: each command spends exactly ``--epsilon`` on the whole stream of
releases (``points --method online``: all releases together, the default online
synthesizer; ``--method online-paper``: He–Vershynin–Zhu's Algorithm 1;
``points --method privhp``: one release at the end; ``table``: Kumar–Strohmer–
Vershynin, every step's table), for the neighbouring relation of the command
(:data:`RELATIONS`, also in each command's ``--help``). Bounds and domains are
public inputs, never computed from the data; with ``--time-column`` the releases
are labelled by the calendar periods from ``--start`` to ``--end`` (or
``--release-at``), which must be given: the release schedule is public and never
read from the data (:mod:`dpstream.schedule`). The input is checked in full before
the first release (:mod:`dpstream.inputs`); errors, warnings and notes go to
standard error and may name rows, values and counts, release files never do.
``--seed`` makes a run reproducible and **not private**.

The release directory (``--out``) receives release files only. Evaluation against
the real data (metrics, plots, figures printed) is NOT PRIVATE: it is produced
only with ``--evaluate DIR``, in ``DIR`` (never ``--out`` or inside it), in files
named ``NOT-PRIVATE-…``. A checkpoint holds exact counts and may not sit inside
``--out`` either.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
import textwrap
import time
import tomllib
from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dpstream.inputs import (
    check_points,
    check_table,
    clipped_note,
    in_command_words,
    read_input,
    where,
)
from dpstream.schedule import is_integer_axis, parquet_outside, periods, split

__all__ = ["RELATIONS", "main"]


class UsageError(Exception):
    """An invalid option: reported as one line, exit status 2."""


#: The options that only some ``points`` methods use: an option a method does not use is
#: refused rather than silently ignored.
_POINTS_METHOD_OPTIONS: dict[str, tuple[str, ...]] = {
    "online": ("memory", "expected_n", "release_at"),
    "online-paper": ("release_at",),
    "privhp": ("memory", "expected_n"),
}


def _refuse_unused_options(opts: dict[str, Any], method: str) -> None:
    used = _POINTS_METHOD_OPTIONS[method]
    for name in sorted({n for names in _POINTS_METHOD_OPTIONS.values() for n in names}):
        if opts.get(name) is not None and name not in used:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} is not used by --method {method}; remove it")


#: The neighbouring relation each command's ε protects (shown in its ``--help``).
RELATIONS: dict[str, str] = {
    "points --method online": (
        "one time step's point replaced. Each record is one time step of the model, "
        "and time is public there (He-Vershynin-Zhu): the number of records at each "
        "release is public. With --time-column every release therefore publishes the "
        "exact count of records so far. The same holds for --method online-paper."
    ),
    "points --method privhp": (
        "one record added or removed; the one release's size comes from the noisy total."
    ),
    "table": (
        "one record added to or removed from one batch (default); with --public-sizes: "
        "one record's values replaced, batch sizes public (every release then has exactly "
        "as many rows as records so far)."
    ),
}

_SCHEDULE = (
    "Release times must not depend on the data: they come from --batch-size, or from the "
    "public --start, --end and --release-every, never from the records."
)

_EVALUATION = (
    "The --out directory receives release files only. --evaluate DIR (outside --out) "
    "writes NOT-PRIVATE-metrics.csv (and with --plot NOT-PRIVATE-evaluation.png), "
    "computed against the real data, and prints the final figure: for the data holder, "
    "never for publication."
)

# Options given as paths (a TOML value for them is read as a path too).
_PATH_OPTIONS = frozenset({"config", "input", "out", "checkpoint", "domain", "evaluate"})

# Options that change neither the releases nor the stream they come from: every
# other option, present or future, is in a checkpoint's fingerprint.
_NOT_FINGERPRINTED = frozenset(
    {
        "config",  # its values are in the other options
        "input",  # the input is identified by the digest of the rows consumed
        "end",  # a later --end extends the public schedule: the periodic rerun
        "checkpoint",
        "checkpoint_every",
        "quiet",
        "evaluate",  # evaluation goes elsewhere and changes no release
        "dask",  # where the counting runs changes no release, nor the input's digest
        "plot",
        "sep",  # how the file is parsed: the rows consumed are in the digest
        "encoding",
        "strict",  # refuses, never changes a release
        "drop_outside",  # without it such rows are refused: no release differs
    }
)

#: Options added after checkpoints existed: fingerprinted only when set, so that a
#: checkpoint from before them still matches a run that does not use them.
_FINGERPRINTED_WHEN_SET = frozenset({"release_at", "max_model_cells"})


# ----------------------------------------------------------------------------- parsing


def _fill(text: str, first: str = "", rest: str = "") -> str:
    return textwrap.fill(
        text, 78, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    )


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dpstream", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)

    def common(s: argparse.ArgumentParser) -> None:
        s.add_argument("--config", type=Path, help="TOML file with any of these options")
        s.add_argument(
            "--input", type=Path, help="a .csv or .parquet file, or a directory of Parquet files"
        )
        s.add_argument("--epsilon", help="ε for the whole stream (e.g. 1, 0.5, 1/3)")
        s.add_argument("--out", type=Path, help="directory for the release files (only them)")
        s.add_argument("--format", choices=["csv", "parquet"], help="release file format")
        s.add_argument("--time-column", help="column holding each record's time")
        s.add_argument(
            "--release-every",
            help="with --time-column: a date column takes day, week, month, year or a count "
            "and a unit (10y, 3mo, 2w, 7d); an integer column (years, steps) a number of its "
            "units (10); periods anchored at --start",
        )
        s.add_argument(
            "--release-at",
            help="with --time-column: the release times instead, comma-separated (2024-03,"
            "2024-06 or 1900,1950); each period ends at one of them",
        )
        s.add_argument("--start", help="first period (public), e.g. 2024-01 or 1890")
        s.add_argument(
            "--end",
            help="last period (public; it must close a whole period); a later --end "
            "continues a checkpointed run",
        )
        s.add_argument(
            "--drop-outside",
            action="store_true",
            default=None,
            help="leave out rows before --start (counted and reported) instead of refusing",
        )
        s.add_argument("--sep", help="CSV separator (default ,), e.g. ';' or '\\t'")
        s.add_argument("--encoding", help="CSV encoding (default utf-8), e.g. latin-1")
        s.add_argument(
            "--strict",
            action="store_true",
            default=None,
            help="refuse values outside the public bounds instead of clipping them "
            "(a warning counts them)",
        )
        s.add_argument("--batch-size", type=int, help="rows per time step (no time column)")
        s.add_argument(
            "--checkpoint",
            type=Path,
            help="checkpoint file, outside --out (resume on restart; rows appended to the "
            "input continue the run)",
        )
        s.add_argument("--checkpoint-every", type=int, help="batches between checkpoints")
        s.add_argument(
            "--evaluate",
            type=Path,
            metavar="DIR",
            help="write NOT PRIVATE evaluation against the real data to DIR (outside --out)",
        )
        s.add_argument(
            "--plot", action="store_true", default=None, help="with --evaluate: also a PNG"
        )
        s.add_argument(
            "--dask",
            metavar="SCHEDULER",
            help="count on a Dask cluster: a scheduler address, or local:N for a LocalCluster "
            "of N worker processes; the input (a .parquet or .csv file or a directory of "
            "Parquet files) is read partition by partition on the workers",
        )
        s.add_argument("--seed", type=int, help="reproducible noise: NOT PRIVATE (tests only)")
        s.add_argument("--quiet", action="store_true", default=None, help="no progress output")

    def described(name: str, summary: str, *relations: str) -> argparse.ArgumentParser:
        lines = [summary, "", "Neighbouring relation (what ε protects):"]
        lines += [_fill(r, "  ", "    ") for r in relations]
        lines += ["", _fill(_SCHEDULE)]
        lines += ["", _fill(_EVALUATION)]
        return sub.add_parser(
            name,
            help=summary,
            description="\n".join(lines),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    pts = described(
        "points",
        "points in a box: online synthesizer or PrivHP",
        f"--method online (and online-paper): {RELATIONS['points --method online']}",
        f"--method privhp: {RELATIONS['points --method privhp']}",
    )
    common(pts)
    pts.add_argument("--columns", help="comma-separated numeric columns")
    pts.add_argument("--bounds", help="public bounds lo1,hi1,lo2,hi2,... (one pair per column)")
    pts.add_argument(
        "--method",
        choices=list(_POINTS_METHOD_OPTIONS),
        help="default: online (releases at every period, one time step's point replaced; "
        "with --memory and --expected-n: in fixed memory); online-paper: He-Vershynin-Zhu's "
        "Algorithm 1 as printed; privhp: one release at the end, one record added or removed",
    )
    pts.add_argument(
        "--memory", type=int, help="privhp, online: memory budget in bytes (fixed memory)"
    )
    pts.add_argument(
        "--expected-n", type=int, help="privhp, online: public guess of the stream length"
    )

    tab = described(
        "table",
        "a table stream from a schema: categories, binned numbers, missing values",
        f"table: {RELATIONS['table']}",
    )
    common(tab)
    tab.add_argument(
        "--domain",
        type=Path,
        help="JSON schema, one entry per column: a size, a category list, or "
        '{"numeric": [lo, hi], "bins": b}, {"edges": [...]}, {"categories": [...]}, '
        'with "missing": true and (numbers) "integer": true; see docs/cli.md',
    )
    tab.add_argument(
        "--max-model-cells",
        type=int,
        help="the largest model the fit may build, in cells (default 200000)",
    )
    tab.add_argument(
        "--policy",
        choices=["adaptive", "paper", "baseline"],
        help="how each step measures and fits (default: adaptive, the library's: an MST "
        "release per epoch, insertions only; paper: Algorithm 3 as printed; baseline: "
        "Algorithm 2, StreamingMWEM). Set its fields in the TOML config's [policy] table "
        '(name = "adaptive", growth = 2; name = "paper", k = 3, counter = "simple"; '
        'name = "baseline", estimator = "mw"); this flag selects a policy with its '
        "defaults",
    )
    tab.add_argument(
        "--public-sizes",
        action="store_true",
        default=None,
        help="treat batch sizes as public: ε then protects one record's values replaced "
        "(not one record added or removed), and each release has the exact size",
    )

    demo = sub.add_parser(
        "demo",
        help="both commands on the data dpstream ships",
        description="Both commands on the data dpstream ships, with their NOT PRIVATE "
        "evaluation in OUT/NOT-PRIVATE-evaluation/ (the releases are in OUT/points, "
        "OUT/table and OUT/cars, the input copies in OUT/data).",
    )
    demo.add_argument("--out", type=Path, default=Path("dpstream-demo"))
    demo.add_argument("--quiet", action="store_true", default=False)
    return p


#: Options ``table`` had before ``--policy``, as every ``points`` run fingerprinted them.
_RETIRED_TABLE_OPTIONS = {
    "marginals_per_step": "auto",
    "remainder": "pooled",
    "score": "auto",
    "table_method": "proposed",
}

_DEFAULTS: dict[str, Any] = {
    "format": "csv",
    "method": "online",
    # No option any more (a Baseline field): kept, as every earlier run fingerprinted it.
    "estimator": "pgm",
    "checkpoint_every": 1,
    "plot": False,
    "quiet": False,
    "public_sizes": False,
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
            opts[name] = Path(value) if name in _PATH_OPTIONS and value is not None else value
    for key, value in vars(args).items():
        if value is not None or key not in opts:
            opts[key] = value  # every option is present, None if unset
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


def _table_policy(opts: dict[str, Any]) -> Any:
    """The ``table`` policy: ``--policy NAME`` (its defaults), or the TOML ``[policy]``
    table (``name`` and fields; name ``adaptive`` if absent). Bad fields: UsageError."""
    from dpstream.tabular.policy import from_dict

    value = opts.get("policy")
    value = "adaptive" if value is None else value
    if isinstance(value, dict):
        value = {"name": "adaptive", **value}
    try:
        return from_dict(value)
    except (TypeError, ValueError) as e:
        raise UsageError(f"--policy: {e}") from None


def _refuse_old_table_checkpoint(checkpoint: Path | None) -> None:
    """A ``table`` run checkpoint from before ``--policy``, or of a policy whose options were
    removed, is refused, saying why."""
    from dpstream.runs import _decode_checkpoint
    from dpstream.tabular.policy import REMOVED_FIELDS

    if checkpoint is None or not checkpoint.exists():
        return
    try:
        header, _, _ = _decode_checkpoint(checkpoint)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if "policy" not in header["options"] and "table_method" in header["options"]:
        raise UsageError(
            f"checkpoint {checkpoint} was made before --policy replaced --table-method, "
            "--score, --remainder and --marginals-per-step: its options cannot be matched "
            "with this run's. Finish that run with the dpstream that made it, or remove the "
            "checkpoint to start over (TabularStream.from_bytes still loads the stream state)"
        )
    try:
        stored = json.loads(header["options"].get("policy") or "null")
    except (TypeError, ValueError):
        return  # not a policy this run could match: the fingerprint check refuses it
    if isinstance(stored, dict) and stored.get("name") == "adaptive":
        removed = [key for key in stored if key in REMOVED_FIELDS]
        if removed:
            raise UsageError(
                f"checkpoint {checkpoint} was made by a run whose policy used "
                f"Adaptive({', '.join(removed)}), options removed in dpstream 0.2: the run "
                "cannot continue. Finish it with the dpstream that made it, or remove the "
                "checkpoint to start over (TabularStream.from_bytes still loads the stream "
                "state and re-releases its last table)"
            )


def _inside(path: Any, directory: Any) -> bool:
    """``path`` is ``directory`` or lies under it (after resolving links and ``..``)."""
    p, d = Path(path).resolve(), Path(directory).resolve()
    return p == d or d in p.parents


def _release_paths(opts: dict[str, Any]) -> Path | None:
    """Check that nothing but releases goes to ``--out``; the evaluation directory or None.

    Refused: ``--evaluate`` equal to ``--out`` or inside it (NOT PRIVATE files),
    ``--checkpoint`` inside ``--out`` (exact counts), ``--input`` inside ``--out`` (the
    real data), and ``--plot`` without ``--evaluate`` (a plot compares with the real data).
    """
    out = Path(opts["out"])
    evaluate = opts.get("evaluate")
    if evaluate is not None and _inside(evaluate, out):
        raise UsageError(
            f"--evaluate {evaluate} is --out {out} or inside it: evaluation is NOT PRIVATE "
            "and must not sit with the releases; give a directory outside --out"
        )
    if evaluate is not None and Path(evaluate).exists() and not Path(evaluate).is_dir():
        raise UsageError(f"--evaluate {evaluate} is not a directory")
    checkpoint = opts.get("checkpoint")
    if checkpoint is not None and _inside(checkpoint, out):
        raise UsageError(
            f"--checkpoint {checkpoint} is inside --out {out}: a checkpoint holds exact "
            "counts, as sensitive as the data; keep it outside the release directory"
        )
    if opts.get("input") is not None and _inside(opts["input"], out):
        raise UsageError(
            f"--input {opts['input']} is inside --out {out}: the release directory holds "
            "releases only; keep the data elsewhere"
        )
    if opts.get("plot") and evaluate is None:
        raise UsageError(
            "--plot draws the evaluation against the real data (NOT PRIVATE): "
            "give --evaluate DIR too"
        )
    from dpstream.runs import check_out_dir

    check_out_dir(out, opts.get("checkpoint"))
    return None if evaluate is None else Path(evaluate)


def _run_options(opts: dict[str, Any], eps: Fraction) -> dict[str, Any]:
    """The options a checkpoint must match: every option but :data:`_NOT_FINGERPRINTED`.

    Values are canonical: ε as an exact fraction, a file by the SHA-256 of its
    contents (``--domain``), a directory by its resolved path, other values as text
    (so ``1`` in a TOML file and ``--batch-size 1`` agree).
    """
    canon: dict[str, Any] = {}
    for key, value in sorted(opts.items()):
        if key in _NOT_FINGERPRINTED or (key in _FINGERPRINTED_WHEN_SET and value is None):
            continue
        if value is None or isinstance(value, bool):
            canon[key] = value
        elif isinstance(value, Path):
            if value.is_file():
                canon[key] = "sha256 " + hashlib.sha256(value.read_bytes()).hexdigest()
            else:
                canon[key] = str(value.resolve())
        else:
            canon[key] = str(value)
    canon["epsilon"] = str(eps)
    return canon


# ----------------------------------------------------------------------------- batching


def _calendar(opts: dict[str, Any], integer: bool) -> list[Any]:
    """The public periods of ``--time-column`` runs (:mod:`dpstream.schedule`)."""

    return periods(
        integer=integer,
        column=str(opts["time_column"]),
        start=opts.get("start"),
        end=opts.get("end"),
        every=opts.get("release_every"),
        at=opts.get("release_at"),
    )


def _batches(
    frame: Any, opts: dict[str, Any], consumed: Sequence[int], command: str = "table"
) -> list[tuple[str, Any]]:
    """``(label, rows)`` per time step, in time order.

    ``consumed``: the sizes of the batches a checkpoint has consumed. Without a time
    column, those rows are cut as before and the rows after them into new batches of
    ``--batch-size`` (a grown input continues the stream); the checkpoint's digest then
    says whether the consumed rows are unchanged. With a time column the public
    calendar defines the batches: rows before it are refused (``--drop-outside``:
    counted and left out), rows after it wait for a later run (counted in a note).
    """

    time_col = opts.get("time_column")
    if time_col is not None:
        if time_col not in frame.columns:
            raise UsageError(
                f"--time-column: no column {time_col!r} in the input; it has "
                f"{[str(c) for c in frame.columns]}"
            )
        integer = is_integer_axis(frame, time_col)
        calendar = _calendar(opts, integer)
        try:
            batches, outside = split(frame, time_col, calendar, integer)
        except ValueError as e:
            row = getattr(e, "row", None)
            if row is None:
                raise
            place = where(Path(opts["input"]), row)
            raise UsageError(f"{place}, column {time_col!r}: {e.problem}") from None  # type: ignore[attr-defined]
        first = outside.first_before
        place = f"{where(Path(opts['input']), first)} (the first)" if outside.before else ""
        _outside(opts, command, outside.before, outside.after, place, calendar[-1].label)
        return batches
    size = _positive(opts, "batch_size") or 10_000
    n = len(frame)
    out: list[tuple[str, Any]] = []
    pos = 0
    for k in consumed:  # may come out short if rows were removed: the digest check says so
        out.append((str(len(out) + 1), frame.iloc[pos : pos + k]))
        pos += k
    for s in range(pos, n, size):
        out.append((str(len(out) + 1), frame.iloc[s : s + size]))
    return out


#: Notes printed when the run has finished (a refused run prints its error alone).
_NOTES: list[str] = []


def _outside(
    opts: dict[str, Any], command: str, before: int, after: int, place: str, last: str
) -> None:
    """Rows outside the calendar: before ``--start`` refused (``--drop-outside``: left out
    and counted in a note), after ``--end`` counted in a note (they wait for a later run).
    ``place``: where the first row before ``--start`` is, or the input. A count given as a
    bool (``True``: some rows; a partitioned input) is not shown."""

    def rows(n: int) -> str:
        return "rows" if isinstance(n, bool) else f"{n} row(s)"

    if before and not opts.get("drop_outside"):
        raise UsageError(
            f"{place}: {rows(before)} come before --start {opts['start']} in column "
            f"{opts['time_column']!r}; move --start earlier, or give --drop-outside to leave "
            "them out"
        )
    if before:
        _note(command, f"{rows(before)} before --start {opts['start']} left out")
    if after:
        _note(
            command,
            f"{rows(after)} after --end {opts.get('end') or last} wait for a later run "
            "(with --checkpoint, a later --end continues this one)",
        )


def _released(opts: dict[str, Any], labelled: list[tuple[str, Any]]) -> list[Any]:
    """The run's batches, each released unless ``--release-at`` (with ``--batch-size``:
    batch numbers, or ``last``) leaves it out: the stream still takes every batch."""
    from dpstream.runs import Batch

    at = opts.get("release_at")
    if at is None or opts.get("time_column") is not None:
        return [Batch(label, rows) for label, rows in labelled]
    items = at if isinstance(at, (list, tuple)) else str(at).split(",")
    chosen: set[str] = set()
    for item in (str(v).strip() for v in items):
        if item == "last" and labelled:
            chosen.add(labelled[-1][0])
        elif item.isdigit() and int(item) >= 1:
            chosen.add(str(int(item)))
        else:
            raise UsageError(
                f"--release-at with --batch-size takes batch numbers or last, got {item!r}"
            )
    return [Batch(label, rows, label in chosen) for label, rows in labelled]


def _note(command: str, text: str, kind: str = "note") -> None:
    """One line to the curator (standard error): may hold counts, never a release. A
    warning is printed at once, a note when the run has finished."""
    line = f"dpstream {command}: {kind}: {text}"
    if kind == "note":
        _NOTES.append(line)
    else:
        print(line, file=sys.stderr)


def _partitioned(opts: dict[str, Any]) -> bool:
    """Whether the input is read partition by partition (``--dask`` or a directory)."""
    return opts.get("dask") is not None or Path(opts["input"]).is_dir()


def _lazy_batches(
    opts: dict[str, Any],
    columns: list[str],
    canonical: Callable[[Any], Any],
    consumed: list[int],
    command: str = "table",
) -> list[tuple[str, Any]]:
    """:func:`_batches` for a partitioned input: the same public schedule, each batch a
    :class:`dpstream.partitioned.LazyBatch` (periods read with a filter pushed down to
    the Parquet reader; ``--batch-size`` batches as slices of the partitions)."""
    import pandas as pd

    from dpstream import partitioned

    path = Path(opts["input"])
    time_col = opts.get("time_column")
    for option in ("sep", "encoding"):
        if opts.get(option) is not None:
            raise UsageError(
                f"--{option} is for a CSV file read without --dask; a partitioned input is "
                "read by Dask with its defaults: convert the file to Parquet"
            )
    partitioned.check_parquet(path, columns)
    if time_col is None:
        size = _positive(opts, "batch_size") or 10_000
        return partitioned.row_batches(path, columns, size, consumed, canonical)
    dtype = partitioned.time_dtype(path, time_col)
    partitioned.check_parquet(path, [time_col])
    integer = pd.api.types.is_integer_dtype(dtype)
    if not integer and not pd.api.types.is_datetime64_any_dtype(dtype):
        raise UsageError(
            f"--time-column {time_col!r}: a partitioned input is filtered by the reader, "
            f"so the column must be stored as timestamps or integers, got {dtype}"
        )
    tz = getattr(dtype, "tz", None)
    calendar = _calendar(opts, integer)
    bounds: list[tuple[str, Any, Any]] = [
        (p.label, p.lo, p.hi) if integer else (p.label, _timestamp(p.lo, tz), _timestamp(p.hi, tz))
        for p in calendar
    ]
    _check_lazy_calendar(opts, command, path, bounds[0][1], bounds[-1][2])
    return partitioned.periods(path, columns, time_col, bounds, canonical)


def _check_lazy_calendar(
    opts: dict[str, Any], command: str, path: Path, low: Any, high: Any
) -> None:
    """Rows outside the calendar of a partitioned input, from the Parquet statistics
    (no partition is read, no counts): as :func:`_outside` says."""

    found = parquet_outside(path, str(opts["time_column"]), low, high)
    if found is not None:
        before, after, _, last = found
        _outside(opts, command, before, after, str(path), f"{opts.get('end')} (up to {last})")


def _timestamp(t: Any, tz: Any) -> Any:
    return t if tz is None else t.tz_localize(tz)


class _Input(NamedTuple):
    """The labelled batches of a run and how the run digests them."""

    batches: list[tuple[str, Any]]
    digest: Callable[[Any], bytes]  # a batch's digest (:mod:`dpstream._digest`)
    legacy: Callable[[Any], bytes] | None  # its bytes in order (format-2 checkpoints)


def _input_batches(
    opts: dict[str, Any],
    columns: list[str] | None,
    canonical: Callable[[Any], Any],
    frame: Any = None,
    command: str = "table",
) -> _Input:
    """The labelled batches of the run and their digests: of ``canonical(rows)``, the
    ``(n, d)`` int64 or float64 values the model consumes, as a multiset, so that a
    single file and a partitioned input of the same rows have the same digests (a
    partitioned batch's is computed on the cluster, with its counts). ``frame``: the
    input file already read (and checked) by the command."""
    from dpstream._digest import digest, row_sums
    from dpstream.partitioned import LazyBatch
    from dpstream.runs import consumed_sizes

    def batch_digest(rows: Any) -> bytes:
        return rows.digest() if isinstance(rows, LazyBatch) else digest(row_sums(canonical(rows)))

    def row_bytes(rows: Any) -> bytes:
        return np.ascontiguousarray(canonical(rows)).tobytes()

    consumed = consumed_sizes(opts.get("checkpoint"))
    if not _partitioned(opts):
        if frame is None:  # pragma: no cover - every command reads and checks it first
            frame = _read_input(opts, columns or [])
        batches = _batches(frame, opts, consumed, command)
        return _Input(batches, batch_digest, row_bytes)
    if columns is None:
        raise UsageError("internal: a partitioned input needs its columns")  # pragma: no cover
    batches = _lazy_batches(opts, columns, canonical, consumed, command)
    return _Input(batches, batch_digest, None)


def _read_input(
    opts: dict[str, Any], needed: list[str], text: dict[str, tuple[str, ...]] | None = None
) -> Any:
    """The input file with ``--sep`` and ``--encoding`` (:func:`dpstream.inputs.read_input`)."""

    return read_input(
        Path(opts["input"]), needed, opts.get("time_column"), opts.get("sep"),
        opts.get("encoding"), text,
    )  # fmt: skip


def _clipped(
    opts: dict[str, Any], command: str, clipped: dict[str, int], rows: int, what: str
) -> None:
    """Values outside the public bounds: a warning, or with ``--strict`` an error."""

    strict = bool(opts.get("strict"))
    note = clipped_note(Path(opts["input"]), clipped, rows, what, strict)
    if note is not None and strict:
        raise UsageError(note)
    if note is not None:
        _note(command, note, "warning")


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


def _derived_rng(opts: dict[str, Any], purpose: str) -> Any:
    """A seeded run's generator for one purpose (``None``, i.e. OS-seeded, without
    ``--seed``): a function of the seed alone, so a resumed run draws what an
    uninterrupted one draws."""
    from dpstream import Rng

    if opts.get("seed") is None:
        return None
    key = hashlib.sha256(f"dpstream-cli {purpose} {int(opts['seed'])}".encode()).digest()
    return Rng(seed=key)


# ----------------------------------------------------------------------------- points


class _OnlinePoints:
    """The online synthesizer on scaled points; releases in the original units."""

    def __init__(self, inner: Any, columns: list[str], bounds: Any) -> None:
        self.inner, self.columns, self.bounds = inner, columns, bounds

    def update(self, rows: Any) -> None:
        from dpstream.partitioned import LazyBatch

        if isinstance(rows, LazyBatch):  # scaled and counted on the cluster, in one pass
            from dpstream.distributed import summary_graph, update_online

            x = rows.points(self.bounds.to_unit)
            if hasattr(self.inner, "empty_copy"):  # PrivHP: a summary on its hash keys
                (summary,) = rows.gather([summary_graph(x, self.inner.empty_copy())])
                self.inner.merge(summary)
            else:
                update_online(self.inner, x, gather=rows.gather)
            return
        x = rows[self.columns].to_numpy(dtype=np.float64)
        self.inner.update(self.bounds.to_unit(x).reshape(-1, len(self.columns)))

    def release(self) -> Any:
        import pandas as pd

        y = self.inner.release()
        return pd.DataFrame(self.bounds.from_unit(y), columns=self.columns)

    def to_bytes(self) -> bytes:
        return bytes(self.inner.to_bytes())


class _PrivHPPoints(_OnlinePoints):
    """PrivHP: one release, at the end of the stream.

    ``release_rng()`` gives the generator of the release's noise and sampling
    (``None``: OS-seeded); with ``--seed`` it is derived from the seed.
    """

    def __init__(
        self, inner: Any, columns: list[str], bounds: Any, release_rng: Callable[[], Any]
    ) -> None:
        super().__init__(inner, columns, bounds)
        self.release_rng = release_rng

    def release(self) -> Any:
        import pandas as pd

        rng = self.release_rng()
        gen = self.inner.release(rng=rng)
        n = max(0, round(gen.total))
        return pd.DataFrame(self.bounds.from_unit(gen.sample(n, rng=rng)), columns=self.columns)


def _point_values(columns: list[str]) -> Callable[[Any], Any]:
    """The points the model consumes, ``(n, d)`` float64 little-endian (canonical)."""

    def values(rows: Any) -> Any:
        return np.ascontiguousarray(rows[columns].to_numpy(dtype=np.float64), dtype="<f8")

    return values


def cmd_points(opts: dict[str, Any]) -> dict[str, Any]:
    from dpstream import OnlineSynthesizer, PrivHP
    from dpstream.io import parse_bounds
    from dpstream.runs import Batch, run_stream

    _require(opts, "input", "columns", "bounds", "epsilon", "out")
    eps = _epsilon(opts)
    evaluate = _release_paths(opts)
    columns = [c.strip() for c in str(opts["columns"]).split(",") if c.strip()]
    try:
        bounds = parse_bounds(opts["bounds"], len(columns))
    except ValueError as e:
        raise UsageError(f"--bounds: {e}") from None
    method = opts["method"]
    _refuse_unused_options(opts, method)
    if method == "privhp":
        _require(opts, "memory", "expected_n")
    checkpoint = opts.get("checkpoint")
    if _partitioned(opts) and method == "online-paper":
        raise UsageError(
            "--method online-paper tests every time step in order, so it cannot count a "
            "partitioned input (--dask or a Parquet directory); use --method online"
        )
    frame = None
    if not _partitioned(opts):
        frame = _read_input(opts, columns)
        clipped = check_points(frame, columns, bounds, Path(opts["input"]))
        _clipped(opts, "points", clipped, len(frame), "--bounds")
    run_input = _input_batches(opts, columns, _point_values(columns), frame, "points")
    labelled = run_input.batches
    rng = _rng(opts)
    # Points runs fingerprinted the table options --policy replaced (at their defaults):
    # kept, so that their checkpoints resume.
    run_options = {**_RETIRED_TABLE_OPTIONS, **_run_options(opts, eps)}
    if method in ("online", "online-paper"):
        if opts.get("memory") is not None or opts.get("expected_n") is not None:
            # The cap is part of the run: a checkpoint made with another number of
            # periods (a later --end, appended batches) is refused before any step.
            run_options["max_releases"] = str(len(labelled))
            # Fixed memory: R, the public cap on releases, is the number of release periods.
            _require(opts, "memory", "expected_n")
            synth: OnlineSynthesizer = OnlineSynthesizer.for_memory(
                eps,
                len(columns),
                memory_bytes=int(opts["memory"]),
                expected_n=int(opts["expected_n"]),
                max_releases=len(labelled),
                rng=rng,
            )
        else:
            algorithm = "paper" if method == "online-paper" else "epochs"
            synth = OnlineSynthesizer(eps, len(columns), method=algorithm, rng=rng)
        model: _OnlinePoints = _OnlinePoints(synth, columns, bounds)
        batches = _released(opts, labelled)

        def load(state: bytes) -> Any:
            # The checkpoint's options match this run's (fingerprint, --seed included):
            # a seeded checkpoint is resumed only by a run that was itself given --seed.
            synth = OnlineSynthesizer.from_bytes(state, allow_seeded=rng is not None)
            return _OnlinePoints(synth, columns, bounds)

    else:
        summary = PrivHP.for_memory(
            eps,
            len(columns),
            expected_n=int(opts["expected_n"]),
            memory_bytes=int(opts["memory"]),
            rng=rng,
        )

        def release_rng() -> Any:
            return _derived_rng(opts, "privhp-release")

        model = _PrivHPPoints(summary, columns, bounds, release_rng)
        last = len(labelled) - 1
        batches = [
            Batch("final" if i == last else label, rows, i == last)
            for i, (label, rows) in enumerate(labelled)
        ]

        def load(state: bytes) -> Any:
            return _PrivHPPoints(PrivHP.from_bytes(state), columns, bounds, release_rng)

    result = run_stream(
        batches,
        model,
        load_model=load,
        out_dir=Path(opts["out"]),
        suffix="." + opts["format"],
        options=run_options,
        batch_digest=run_input.digest,
        legacy_row_bytes=run_input.legacy,
        checkpoint=checkpoint,
        checkpoint_every=_positive(opts, "checkpoint_every") or 1,
        progress=_progress(opts),
        one_shot=method == "privhp",
    )
    summary_out: dict[str, Any] = {
        "command": "points",
        "method": method,
        "epsilon": str(eps),
        "releases": len(result.releases),
        "out": str(opts["out"]),
    }
    if evaluate is not None and result.releases:
        summary_out.update(
            _evaluate_points(batches, columns, result.releases, bounds, evaluate, opts)
        )
    return summary_out


def _evaluate_points(
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
    import pandas as pd

    from dpstream import metrics
    from dpstream.io import read_table

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
    directory.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    table.to_csv(directory / "NOT-PRIVATE-metrics.csv", index=False)
    out: dict[str, Any] = {"evaluation (NOT PRIVATE)": str(directory)}
    if "w1" in table and table["w1"].notna().any():
        final = table["w1"].dropna().iloc[-1]
        out["final W1 to the real data (unit cube; NOT PRIVATE)"] = f"{final:.4f}"
    if opts.get("plot") and not table.empty:
        out["plot (NOT PRIVATE)"] = str(
            _plot_points(table, last_real, last_synth, chosen[-1], directory)
        )
    return out


#: Real points the evaluation of a partitioned input samples (about; on the cluster).
_EVAL_SAMPLE = 20_000


def _real_points(batches: list[Any], columns: list[str], bounds: Any) -> list[Any]:
    """Each batch's real points in the unit cube: all of them for a pandas input; for a
    partitioned one, a seeded Bernoulli sample of about ``_EVAL_SAMPLE`` points in all,
    drawn on the workers (the same rate in every batch, so every prefix's sample is
    uniform), so that nothing is loaded whole."""
    from dpstream.partitioned import LazyBatch

    lazy = any(isinstance(b.rows, LazyBatch) for b in batches)
    rate = min(1.0, _EVAL_SAMPLE / max(1, sum(len(b.rows) for b in batches))) if lazy else 1.0
    out = []
    for i, b in enumerate(batches):
        rows = b.rows.sample(rate, seed=i) if isinstance(b.rows, LazyBatch) else b.rows
        out.append(bounds.to_unit(rows[columns].to_numpy(dtype=np.float64)))
    return out


def _plot_points(table: Any, real: Any, synth: Any, release: Path, directory: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    g = np.random.default_rng(0)
    two_d = real.shape[1] >= 2
    fig, axes = plt.subplots(1, 3 if two_d else 1, figsize=(14 if two_d else 6, 4.2))
    axes = np.atleast_1d(axes)
    if two_d:
        k = min(3000, len(real))
        r = real[g.choice(len(real), k, replace=False)] if k else real
        axes[0].scatter(r[:, 0], r[:, 1], s=2, alpha=0.4)
        axes[0].set_title("NOT PRIVATE: the real records")
        s = synth[g.choice(len(synth), min(k, len(synth)), replace=False)] if len(synth) else synth
        axes[1].scatter(s[:, 0], s[:, 1], s=2, alpha=0.4, color="C1")
        axes[1].set_title(f"synthetic ({release.stem})")
        for ax in axes[:2]:
            ax.set_xlim(0, 1)
            ax.set_ylim(0, 1)
    if "w1" in table:
        axes[-1].plot(range(len(table)), table["w1"], marker="o")
    axes[-1].set_xticks(range(len(table)), table["release"], rotation=60, fontsize=6)
    axes[-1].set_title("NOT PRIVATE: W1 to the real data (scaled units)")
    fig.suptitle("NOT PRIVATE evaluation: compares the releases with the real data")
    fig.tight_layout()
    out = directory / "NOT-PRIVATE-evaluation.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out


# ----------------------------------------------------------------------------- table


def cmd_table(opts: dict[str, Any]) -> dict[str, Any]:
    from dpstream.runs import run_stream
    from dpstream.tabular import Domain, TabularStream
    from dpstream.tabular.policy import to_dict

    _require(opts, "input", "domain", "epsilon", "out")
    eps = _epsilon(opts)
    evaluate = _release_paths(opts)
    try:
        domain = Domain.from_json(opts["domain"])
    except (OSError, ValueError, TypeError) as e:
        raise UsageError(f"--domain {opts['domain']}: {e}") from None
    if opts.get("time_column") is None and opts.get("batch_size") is None:
        raise UsageError("give --time-column or --batch-size")
    checkpoint = opts.get("checkpoint")
    policy = _table_policy(opts)
    _refuse_old_table_checkpoint(checkpoint)
    names = list(domain.names)
    # The stream counts codes: category lists as before, every other column by its size.
    coded = domain.coded()
    frame, file_codes = None, None
    if not _partitioned(opts):
        text = {c: domain.column(c).categories or () for c in names}
        frame = _read_input(opts, names, {c: t for c, t in text.items() if t})
        file_codes, clipped = check_table(frame, domain, Path(opts["input"]))
        _clipped(opts, "table", clipped, len(frame), "the schema's bounds")

    def codes(rows: Any) -> Any:
        """The records as the model consumes them: codes, int64 little-endian (canonical)."""
        if not len(rows):
            return np.zeros((0, len(names)), dtype="<i8")
        if file_codes is not None and rows.index.dtype.kind == "i":
            out = file_codes[rows.index.to_numpy()]  # checked in full above, in file order
        else:
            out = domain.encode(rows[names])
        return np.ascontiguousarray(out, dtype="<i8")

    run_input = _input_batches(opts, names if _partitioned(opts) else None, codes, frame)
    labelled = run_input.batches
    # The fingerprint holds the serialised policy (every field), not the option's form.
    run_options = {**_run_options(opts, eps), "policy": json.dumps(to_dict(policy))}
    extra: dict[str, Any] = {}
    if opts.get("max_model_cells") is not None:
        extra["max_model_cells"] = _positive(opts, "max_model_cells")
    try:
        stream = TabularStream(
            coded,
            eps,
            policy=policy,
            public_sizes=bool(opts.get("public_sizes")),
            rng=_rng(opts),
            **extra,
        )
    except (TypeError, ValueError, ImportError) as e:
        raise UsageError(in_command_words(str(e), names)) from None

    def decoded(release: Any, t: int) -> Any:
        """A release in the schema's values (numbers drawn inside their bins): the
        stream's table of codes and category labels, decoded (post-processing)."""
        if domain.is_codes or release is None:
            return release
        return domain.decode(coded.encode(release), _decode_rng(opts, t))

    class _Table:
        def __init__(self, s: Any) -> None:
            self.s = s
            self.last: Any = None

        def update(self, rows: Any) -> None:
            from dpstream.partitioned import LazyBatch

            if isinstance(rows, LazyBatch):  # counted on the cluster, in one pass
                from dpstream.distributed import marginals_graph, marginals_of

                workloads = self.s.workloads
                (counted,) = rows.gather([marginals_graph(rows.parts, domain, workloads)])
                self.last = self._step(marginals_of(coded, workloads, counted))
                return
            self.last = self._step(codes(rows) if len(rows) else None)

        def _step(self, batch: Any) -> Any:
            try:
                return self.s.step(batch)
            except ValueError as e:  # in the command's words: columns, options
                raise ValueError(in_command_words(str(e), names)) from None

        def release(self) -> Any:
            return decoded(self.last, int(self.s._t))

        def to_bytes(self) -> bytes:
            return bytes(self.s.to_bytes())

    batches = _released(opts, labelled)
    result = run_stream(
        batches,
        _Table(stream),
        # --seed is in the fingerprint: only a seeded run resumes a seeded checkpoint.
        load_model=lambda state: _Table(
            TabularStream.from_bytes(state, allow_seeded=opts.get("seed") is not None)
        ),
        out_dir=Path(opts["out"]),
        suffix="." + opts["format"],
        options=run_options,
        batch_digest=run_input.digest,
        legacy_row_bytes=run_input.legacy,
        checkpoint=checkpoint,
        checkpoint_every=_positive(opts, "checkpoint_every") or 1,
        progress=_progress(opts),
    )
    summary: dict[str, Any] = {
        "command": "table",
        "epsilon": str(eps),
        "releases": len(result.releases),
        "out": str(opts["out"]),
    }
    if evaluate is not None and result.releases:
        summary.update(_evaluate_table(batches, domain, codes, result.releases, evaluate, opts))
    return summary


def _decode_rng(opts: dict[str, Any], step: int) -> Any:
    """The generator that draws a release's numbers inside their bins (post-processing,
    not privacy noise): OS-seeded, or with ``--seed`` a function of the seed and the step
    alone, so that a resumed run draws what an uninterrupted one draws."""
    if opts.get("seed") is None:
        return np.random.default_rng()
    return np.random.default_rng([int(opts["seed"]), step, 40])


def _evaluate_table(
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
    import pandas as pd

    from dpstream.io import read_table
    from dpstream.partitioned import LazyBatch
    from dpstream.tabular import all_workloads
    from dpstream.tabular.marginals import BatchMarginals, add_counts
    from dpstream.tabular.workloads import marginal_errors

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
            from dpstream.distributed import batch_marginals

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
    directory.mkdir(parents=True, exist_ok=True)
    table = pd.DataFrame(rows)
    table.to_csv(directory / "NOT-PRIVATE-metrics.csv", index=False)
    out: dict[str, Any] = {"evaluation (NOT PRIVATE)": str(directory)}
    if "avg_we" in table and table["avg_we"].notna().any():
        final = table["avg_we"].dropna().iloc[-1]
        out["final AvgWE to the real data (NOT PRIVATE)"] = f"{final:.4f}"
        if opts.get("plot"):
            out["plot (NOT PRIVATE)"] = str(_plot_table(table, directory))
    return out


def _plot_table(metrics: Any, directory: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(16, 3.6))
    for ax, key in zip(axes, ["avg_we", "max_we", "avg_rel_we", "max_rel_we"], strict=True):
        ax.plot(range(len(metrics)), metrics[key])
        ax.set_title(f"NOT PRIVATE: {key}")
        ax.set_xlabel("release")
    fig.suptitle("NOT PRIVATE evaluation: compares the releases with the real data")
    fig.tight_layout()
    path = directory / "NOT-PRIVATE-evaluation.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- demo


def cmd_demo(opts: dict[str, Any]) -> dict[str, Any]:
    """Both commands on shipped data: clustered points, the Adult table, and the cars
    CSV with its schema (numbers, missing values, a release every 3 years).

    ``OUT/data`` holds the inputs, ``OUT/points``, ``OUT/table`` and ``OUT/cars`` the
    releases only, ``OUT/NOT-PRIVATE-evaluation`` the evaluation against the real data.
    A previous demo's output in ``OUT`` is replaced; any other non-empty ``OUT`` is
    refused.
    """
    import shutil
    from importlib import resources

    import pandas as pd

    from dpstream import streams

    out = Path(opts["out"])
    data = out / "data"
    evaluation = out / "NOT-PRIVATE-evaluation"
    marker = out / ".dpstream-demo"
    if out.is_dir() and any(out.iterdir()):
        if not marker.exists():
            raise UsageError(f"--out {out} is not empty and not a demo's output: give a new one")
        for sub in ("data", "points", "table", "cars", "NOT-PRIVATE-evaluation"):
            shutil.rmtree(out / sub, ignore_errors=True)  # the previous demo's, replaced
    data.mkdir(parents=True, exist_ok=True)
    marker.touch()
    x = streams.clustered(40_000, 2, seed=3)
    pts = pd.DataFrame({"x": x[:, 0] * 10, "y": x[:, 1] * 10})
    pts.to_csv(data / "points.csv", index=False)
    base = resources.files("dpstream") / "data"
    quiet = bool(opts.get("quiet"))
    p = cmd_points(
        {
            **_DEFAULTS,
            "input": data / "points.csv",
            "columns": "x,y",
            "bounds": "0,10,0,10",
            "epsilon": 1,
            "out": out / "points",
            "batch_size": 4000,
            "evaluate": evaluation / "points",
            "plot": True,
            "quiet": quiet,
        }
    )
    adult = pd.read_csv(str(base / "adult.csv"), nrows=4000)
    adult.to_csv(data / "adult.csv", index=False)
    (data / "adult-domain.json").write_text((base / "adult-domain.json").read_text())
    t = cmd_table(
        {
            **_DEFAULTS,
            "input": data / "adult.csv",
            "domain": data / "adult-domain.json",
            "batch_size": 400,
            "epsilon": 1,
            "out": out / "table",
            "evaluate": evaluation / "table",
            "plot": True,
            "quiet": quiet,
        }
    )
    for name in ("cars.csv", "cars-schema.json"):
        (data / name).write_bytes((base / name).read_bytes())
    c = cmd_table(
        {
            **_DEFAULTS,
            "input": data / "cars.csv",
            "domain": data / "cars-schema.json",
            "time_column": "Year",
            "start": "1970",
            "end": "1981",
            "release_every": "3y",
            "epsilon": 1,
            "out": out / "cars",
            "evaluate": evaluation / "cars",
            "quiet": quiet,
        }
    )
    p["points"] = "40000 clustered points in [0,10]^2, 10 batches of 4000"
    t["rows"] = "4000 Adult rows, 10 batches of 400, 14 columns, all 91 2-way workloads"
    c["rows"] = "406 cars (numbers, missing values), a release every 3 years from 1970 to 1981"
    return {
        "points (online synthesizer, releases after every batch)": p,
        "table (tabular stream)": t,
        "cars (a CSV and its schema, data/cars-schema.json)": c,
        "epsilon spent": "1 for each of the three streams (separate data)",
    }


# ----------------------------------------------------------------------------- main


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpstream`` console script; returns the exit status."""
    args = _parser().parse_args(_join_negative_values(list(sys.argv[1:] if argv is None else argv)))
    _NOTES.clear()
    try:
        opts = _options(args) if args.command != "demo" else {**_DEFAULTS, **vars(args)}
        if opts.get("format") not in ("csv", "parquet"):
            raise UsageError(f"--format must be csv or parquet, got {opts.get('format')!r}")
        command = {"points": cmd_points, "table": cmd_table, "demo": cmd_demo}[args.command]
        with _dask_client(opts.get("dask")):
            summary = command(opts)
    except UsageError as e:
        print(f"dpstream {args.command}: error: {e}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as e:  # bad input: a value or a type (a bool column)
        print(f"dpstream {args.command}: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # a file that cannot be read or written: one line, no traceback
        print(f"dpstream {args.command}: error: {e}", file=sys.stderr)
        return 2
    for line in _NOTES:
        print(line, file=sys.stderr)
    _print_summary(summary)
    return 0


@contextlib.contextmanager
def _dask_client(spec: str | None) -> Iterator[None]:
    """The ``--dask`` client (and LocalCluster) for the duration of a command."""
    if spec is None:
        yield
        return
    from dpstream.partitioned import connect

    client, cluster = connect(str(spec))
    try:
        yield
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


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

"""A command's input cut into its time steps by the public schedule.

Release times never depend on the data: batches come from ``--batch-size``, or from
the public calendar of ``--time-column`` (:mod:`dpstream.schedule`). A file is read
and checked in full before the first release (:mod:`dpstream.inputs`); a partitioned
input (``--dask`` or a directory of Parquet files) is read partition by partition
(:mod:`dpstream.cli.parquet_input`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from dpstream._digest import digest, row_sums
from dpstream.cli import parquet_input
from dpstream.cli.lazy import pandas
from dpstream.cli.options import UsageError, positive
from dpstream.cli.parquet_input import LazyBatch
from dpstream.cli.report import note, progress
from dpstream.inputs import clipped_note, read_input, where
from dpstream.runs import Batch, Model, RunResult, consumed_sizes, run_stream
from dpstream.schedule import is_integer_axis, parquet_outside, periods, split


def is_partitioned(opts: dict[str, Any]) -> bool:
    """Whether the input is read partition by partition (``--dask`` or a directory)."""
    return opts.get("dask") is not None or Path(opts["input"]).is_dir()


def read_input_file(
    opts: dict[str, Any], needed: list[str], text: dict[str, tuple[str, ...]] | None = None
) -> Any:
    """The input file with ``--sep`` and ``--encoding`` (:func:`dpstream.inputs.read_input`)."""

    return read_input(
        Path(opts["input"]), needed, opts.get("time_column"), opts.get("sep"),
        opts.get("encoding"), text,
    )  # fmt: skip


def report_clipped(
    opts: dict[str, Any], command: str, clipped: dict[str, int], rows: int, what: str
) -> None:
    """Values outside the public bounds: a warning, or with ``--strict`` an error."""

    strict = bool(opts.get("strict"))
    text = clipped_note(Path(opts["input"]), clipped, rows, what, strict)
    if text is not None and strict:
        raise UsageError(text)
    if text is not None:
        note(command, text, "warning")


def read_checked(
    opts: dict[str, Any],
    command: str,
    needed: list[str],
    check: Callable[[Any, Path], tuple[Any, dict[str, int]]],
    what: str,
    text: dict[str, tuple[str, ...]] | None = None,
) -> tuple[Any, Any]:
    """The input file read and checked in full before the first release: ``(frame,
    kept)``. ``check(frame, path)`` returns what the command keeps of it and the values
    clipped to the public bounds (``what``) per column, reported by
    :func:`report_clipped`. A partitioned input is checked partition by partition:
    ``(None, None)``."""
    if is_partitioned(opts):
        return None, None
    frame = read_input_file(opts, needed, text)
    kept, clipped = check(frame, Path(opts["input"]))
    report_clipped(opts, command, clipped, len(frame), what)
    return frame, kept


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
    size = positive(opts, "batch_size") or 10_000
    n = len(frame)
    out: list[tuple[str, Any]] = []
    pos = 0
    for k in consumed:  # may come out short if rows were removed: the digest check says so
        out.append((str(len(out) + 1), frame.iloc[pos : pos + k]))
        pos += k
    for s in range(pos, n, size):
        out.append((str(len(out) + 1), frame.iloc[s : s + size]))
    return out


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
        note(command, f"{rows(before)} before --start {opts['start']} left out")
    if after:
        note(
            command,
            f"{rows(after)} after --end {opts.get('end') or last} wait for a later run "
            "(with --checkpoint, a later --end continues this one)",
        )


def released(opts: dict[str, Any], labelled: list[tuple[str, Any]]) -> list[Batch]:
    """The run's batches, each released unless ``--release-at`` (with ``--batch-size``:
    batch numbers, or ``last``) leaves it out: the stream still takes every batch."""
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


def _lazy_batches(
    opts: dict[str, Any],
    columns: list[str],
    canonical: Callable[[Any], Any],
    consumed: list[int],
    command: str = "table",
) -> list[tuple[str, Any]]:
    """:func:`_batches` for a partitioned input: the same public schedule, each batch a
    :class:`dpstream.cli.parquet_input.LazyBatch` (periods read with a filter pushed down to
    the Parquet reader; ``--batch-size`` batches as slices of the partitions)."""
    pd = pandas()
    path = Path(opts["input"])
    time_col = opts.get("time_column")
    for option in ("sep", "encoding"):
        if opts.get(option) is not None:
            raise UsageError(
                f"--{option} is for a CSV file read without --dask; a partitioned input is "
                "read by Dask with its defaults: convert the file to Parquet"
            )
    parquet_input.check_parquet(path, columns)
    if time_col is None:
        size = positive(opts, "batch_size") or 10_000
        return parquet_input.row_batches(path, columns, size, consumed, canonical)
    dtype = parquet_input.time_dtype(path, time_col)
    parquet_input.check_parquet(path, [time_col])
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
    return parquet_input.periods(path, columns, time_col, bounds, canonical)


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


class RunInput(NamedTuple):
    """The labelled batches of a run and how the run digests them."""

    batches: list[tuple[str, Any]]
    digest: Callable[[Any], bytes]  # a batch's digest (:mod:`dpstream._digest`)
    legacy: Callable[[Any], bytes] | None  # its bytes in order (format-2 checkpoints)


def input_batches(
    opts: dict[str, Any],
    columns: list[str] | None,
    canonical: Callable[[Any], Any],
    frame: Any = None,
    command: str = "table",
) -> RunInput:
    """The labelled batches of the run and their digests: of ``canonical(rows)``, the
    ``(n, d)`` int64 or float64 values the model consumes, as a multiset, so that a
    single file and a partitioned input of the same rows have the same digests (a
    partitioned batch's is computed on the cluster, with its counts). ``frame``: the
    input file already read (and checked) by the command."""

    def batch_digest(rows: Any) -> bytes:
        return rows.digest() if isinstance(rows, LazyBatch) else digest(row_sums(canonical(rows)))

    def row_bytes(rows: Any) -> bytes:
        return np.ascontiguousarray(canonical(rows)).tobytes()

    consumed = consumed_sizes(opts.get("checkpoint"))
    if not is_partitioned(opts):
        if frame is None:  # pragma: no cover - every command reads and checks it first
            frame = read_input_file(opts, columns or [])
        batches = _batches(frame, opts, consumed, command)
        return RunInput(batches, batch_digest, row_bytes)
    if columns is None:
        raise UsageError("internal: a partitioned input needs its columns")  # pragma: no cover
    batches = _lazy_batches(opts, columns, canonical, consumed, command)
    return RunInput(batches, batch_digest, None)


def run_batches(
    opts: dict[str, Any],
    run_input: RunInput,
    batches: list[Batch],
    model: Model,
    load_model: Callable[[bytes], Any],
    fingerprint: dict[str, Any],
    one_shot: bool = False,
    drawn: bool = False,
) -> RunResult:
    """The command's run over ``batches`` (:func:`dpstream.runs.run_stream`): releases in
    ``--out`` as ``--format``, ``--checkpoint`` every ``--checkpoint-every`` batches (a
    checkpoint resumes only a run whose options ``fingerprint`` match), progress unless
    ``--quiet``. ``drawn``: ``model`` is a :class:`dpstream.runs.Drawn` (each release a
    directory its workers write)."""
    return run_stream(
        batches,
        model,
        load_model=load_model,
        out_dir=Path(opts["out"]),
        suffix="." + opts["format"],
        options=fingerprint,
        batch_digest=run_input.digest,
        legacy_row_bytes=run_input.legacy,
        checkpoint=opts.get("checkpoint"),
        checkpoint_every=positive(opts, "checkpoint_every") or 1,
        progress=progress(opts),
        one_shot=one_shot,
        drawn=drawn,
    )

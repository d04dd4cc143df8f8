"""Inputs read partition by partition for the ``dpstream`` command (``--dask``, Parquet
directories): the batches of a run as lazy Dask collections, never loaded whole.

A run over a partitioned input cuts its batches exactly as over a pandas frame
(:mod:`dpstream.cli.batching`): by the public calendar periods of ``--time-column``
(each period read with a **filter pushed down to the Parquet reader**, so row groups
outside it are skipped) or by ``--batch-size`` rows in input order (partition slices;
the partitions' lengths come from the Parquet footers, so cutting the batches reads no
data).
Every batch is a :class:`LazyBatch`: the models count it on the cluster with tasks
built on its partitions, and :meth:`LazyBatch.gather` computes them together with the
batch's row count and digest, so each partition is read once per batch. The client
holds counts, digests and models, never the records.

Digest of a batch (for checkpoints): :mod:`dpstream._digest`, a multiset hash of its
rows whose partitions' sums add up. It is the digest a pandas run computes from one
file of the same rows, so checkpoints resume across the two (and across ``--dask``).

Without ``--dask`` the same graphs run on Dask's local threaded scheduler: the input is
still read one partition at a time.
"""

from __future__ import annotations

import importlib
import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from dpstream._dask import gather_in_order, naming_partition
from dpstream._digest import digest, row_sums
from dpstream.cli.cluster import require_dask
from dpstream.inputs import InputError

__all__ = ["LazyBatch", "periods", "read", "row_batches"]


def read(path: Path, columns: list[str] | None = None, filters: Any = None) -> Any:
    """A Dask DataFrame over a ``.csv`` file, a ``.parquet`` file or a directory of Parquet
    files (only ``columns``; ``filters`` pushed down to the Parquet reader)."""
    dd = require_dask("dask.dataframe")
    if not path.exists():
        raise InputError(f"input {path} does not exist")
    if path.is_file() and path.suffix.lower() == ".csv":
        frame = dd.read_csv(str(path), blocksize="64MB")
        if columns is not None:
            _check_columns(path, frame, columns)
            frame = frame[columns]
        return frame
    if path.is_file() and path.suffix.lower() != ".parquet":
        raise InputError(f"{path}: only .csv, .parquet and Parquet directories are supported")
    try:
        frame = dd.read_parquet(str(path), columns=columns, filters=filters)
    except (ValueError, KeyError, OSError) as e:
        reason = " ".join(str(e).split())  # one line
        raise InputError(
            f"{path}: cannot read it as Parquet with columns {columns} ({reason})"
        ) from None
    if columns is not None:
        _check_columns(path, frame, columns)
    return frame


#: The file names Dask's Parquet reader takes from a directory.
_PARQUET = (".parq", ".parquet", ".pq")


def check_parquet(path: Path, columns: list[str]) -> None:
    """Refuse, before anything is read, a Parquet input whose files do not all hold
    ``columns`` with one type each (a CSV file is checked when it is read). Reads the
    files' footers only."""
    if not path.exists():
        raise InputError(f"input {path} does not exist")
    if path.is_file():
        return
    pads = require_dask("pyarrow.dataset")
    names = sorted(  # the files Dask reads: by extension, not hidden
        str(p)
        for p in path.rglob("*")
        if p.suffix.lower() in _PARQUET
        and p.is_file()
        and not any(part.startswith((".", "_")) for part in p.relative_to(path).parts)
    )
    if not names:
        raise InputError(f"{path}: no Parquet files (*.parquet, *.parq, *.pq) in it")
    try:
        data = pads.dataset(
            names, format="parquet", partitioning="hive", partition_base_dir=str(path)
        )
        files = list(data.get_fragments())
        first: dict[str, tuple[str, Any]] = {}
        for f in files:
            schema = f.physical_schema
            name = Path(f.path).relative_to(path)
            keys = pads.get_partition_keys(f.partition_expression)  # hive directories
            for c in columns:
                if c in keys:
                    continue
                if c not in schema.names:
                    raise InputError(f"{path}: {name} has no column {c!r}; it has {schema.names}")
                seen = first.setdefault(c, (str(name), schema.field(c).type))
                if schema.field(c).type != seen[1]:
                    raise InputError(
                        f"{path}: column {c!r} is {schema.field(c).type} in {name} but "
                        f"{seen[1]} in {seen[0]}; write every file with the same types"
                    )
    except (OSError, ValueError) as e:
        if isinstance(e, InputError):
            raise
        reason = " ".join(str(e).split())  # one line
        raise InputError(f"{path}: cannot read it as Parquet ({reason})") from None


def _check_columns(path: Path, frame: Any, columns: list[str]) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: no column(s) {missing}; it has {list(frame.columns)}")


def _rows(part: Any, start: int, stop: int) -> Any:
    """Task body: rows ``start:stop`` of a partition."""
    return part.iloc[start:stop]


def _partition_sums(part: Any, canonical: Callable[[Any], Any], index: int) -> Any:
    """Task body: :func:`dpstream._digest.row_sums` of a partition's canonical rows (a
    refusal names the partition, as the counting tasks do)."""
    with naming_partition(index):
        return row_sums(canonical(part))


def _unit_points(part: Any, to_unit: Callable[[Any], Any]) -> Any:
    """Task body: a partition's points as float64, scaled to the unit cube."""
    return to_unit(part.to_numpy(dtype=np.float64))


class LazyBatch:
    """One time step's rows as a Dask DataFrame. The models count it on the cluster
    with tasks built on :attr:`parts` and computed by :meth:`gather`, which computes
    the batch's row count and digest in the same pass: each partition is read once."""

    def __init__(self, frame: Any, canonical: Callable[[Any], Any]) -> None:
        self.frame = frame
        self._canonical = canonical
        self._parts: list[Any] | None = None
        self._sums: Any = None

    @property
    def parts(self) -> list[Any]:
        """The batch's partitions, as ``dask.delayed`` pandas frames."""
        if self._parts is None:
            self._parts = list(self.frame.to_delayed())
        return self._parts

    def gather(self, tasks: list[Any]) -> Iterator[Any]:
        """Compute ``tasks`` (built on :attr:`parts`) with the batch's row count and
        digest, in one submission, and yield the tasks' results in order: all or
        nothing (:func:`dpstream._dask.gather_in_order`)."""
        task = require_dask().delayed(_partition_sums, pure=True)
        parts = [] if self._sums is not None else self.parts
        own = [task(p, self._canonical, i) for i, p in enumerate(parts)]
        results = gather_in_order([*own, *tasks])
        if own:
            self._sums = np.sum([next(results) for _ in own], axis=0, dtype=np.uint64)
        yield from results

    def _computed(self) -> Any:
        if self._sums is None:
            for _ in self.gather([]):
                pass
        return self._sums

    def __len__(self) -> int:
        return int(self._computed()[0])

    def digest(self) -> bytes:
        """The batch's digest for the run (:mod:`dpstream._digest`), as a pandas run
        computes it from the same rows in one file."""
        return digest(self._computed())

    def points(self, to_unit: Callable[[Any], Any]) -> list[Any]:
        """The batch's points scaled to the unit cube with the public bounds, one
        ``dask.delayed`` float64 array per partition (for :meth:`gather`)."""
        task = require_dask().delayed(_unit_points, pure=True)
        return [task(p, to_unit) for p in self.parts]

    def sample(self, fraction: float, seed: int) -> Any:
        """A Bernoulli sample of the rows at rate ``fraction`` (drawn on the workers,
        seeded: evaluation only), as a pandas frame."""
        if fraction >= 1:
            return self.frame.compute()
        return self.frame.sample(frac=fraction, random_state=seed).compute()


def periods(
    path: Path,
    columns: list[str],
    time_column: str,
    bounds: list[tuple[str, Any, Any]],
    canonical: Callable[[Any], Any],
) -> list[tuple[str, LazyBatch]]:
    """One batch per public period ``(label, low, high)``: the rows with
    ``low <= time < high``, read with that filter pushed down to the reader."""
    out = []
    for label, low, high in bounds:
        filters = [(time_column, ">=", low), (time_column, "<", high)]
        frame = read(path, [*columns, time_column], filters)
        if not str(path).lower().endswith(".parquet") and path.is_file():
            frame = frame[(frame[time_column] >= low) & (frame[time_column] < high)]
        out.append((label, LazyBatch(frame[columns], canonical)))
    return out


def time_dtype(path: Path, time_column: str) -> Any:
    """The dtype of the time column (from the input's schema: nothing is read)."""
    frame = read(path)
    if time_column not in frame.columns:
        raise InputError(f"--time-column: no column {time_column!r} in the input")
    return frame[time_column].dtype


def partition_lengths(frame: Any, parts: list[Any]) -> list[int]:
    """The rows of each of ``parts`` (``frame.to_delayed()``). From the Parquet files'
    footers when Dask knows them for exactly these partitions (nothing is read); else
    counted by one pass on the cluster (or Dask's local scheduler), one partition per
    task: only the counts reach the client."""
    dask = require_dask()
    try:
        expr = importlib.import_module("dask.dataframe.dask_expr._expr")  # untyped
        known = expr.Lengths(frame.expr).optimize()
        if isinstance(known, expr.Literal) and len(known.value) == len(parts):
            return [int(n) for n in known.value]
    except (ImportError, AttributeError, TypeError, ValueError, OSError):
        pass  # another Dask, or statistics it cannot give: count them
    return [int(n) for n in dask.compute(*[dask.delayed(len)(p) for p in parts])]


def row_batches(
    path: Path,
    columns: list[str],
    size: int,
    consumed: list[int],
    canonical: Callable[[Any], Any],
) -> list[tuple[str, LazyBatch]]:
    """Batches of ``size`` rows in input order (after the ``consumed`` sizes of a
    checkpoint, cut as before), as slices of the input's partitions."""
    dask = require_dask()
    dd = require_dask("dask.dataframe")
    frame = read(path, columns)
    parts = frame.to_delayed()  # the partitions every batch is cut from
    lengths = partition_lengths(frame, parts)
    starts = np.concatenate([[0], np.cumsum(lengths)]).astype(int)
    total = int(starts[-1])
    cuts = [0]
    for k in consumed:
        cuts.append(min(cuts[-1] + k, total))
    cuts += [*range(cuts[-1] + size, total, size), total]
    cuts = sorted(set(cuts)) if total else [0]
    take = dask.delayed(_rows, pure=True)
    out: list[tuple[str, LazyBatch]] = []
    for a, b in itertools.pairwise(cuts):
        pieces = []
        for i, n in enumerate(lengths):
            lo, hi = max(a, starts[i]), min(b, starts[i] + n)
            if lo < hi:
                pieces.append(take(parts[i], int(lo - starts[i]), int(hi - starts[i])))
        batch = dd.from_delayed(pieces, meta=frame._meta)
        out.append((str(len(out) + 1), LazyBatch(batch, canonical)))
    return out

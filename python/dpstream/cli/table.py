"""``dpstream table``: a table stream from a schema (:class:`dpstream.tabular.TabularStream`).

The records are encoded by the public schema (``--domain``): categories as codes,
numbers by their bins, missing values as their own code. A release is decoded back
to the schema's values, numbers drawn inside their bins (post-processing). ε is spent
on every step's table for the relation of :data:`dpstream.cli.parser.RELATIONS`.

With ``--dask`` and ``--format parquet`` a release is the directory
``release-<label>.parquet/`` of ``part-<i>.parquet`` files, one per chunk of
:data:`dpstream.tabular.release.CHUNK_ROWS` rows, drawn, decoded and written by the
workers (:func:`chunk_rng`): the client holds the models, never the rows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpstream._dask import gather_in_order
from dpstream._dask import require as module
from dpstream.cli.batching import input_batches, is_partitioned, read_checked, released, run_batches
from dpstream.cli.evaluation import evaluate_table
from dpstream.cli.options import (
    UsageError,
    epsilon,
    noise_rng,
    positive,
    release_paths,
    require,
    run_options,
)
from dpstream.cli.parquet_input import LazyBatch
from dpstream.cli.report import run_summary
from dpstream.distributed import marginals_graph, marginals_of
from dpstream.inputs import check_table, in_command_words
from dpstream.runs import _decode_checkpoint
from dpstream.tabular import Domain, ModelOptions, TabularStream
from dpstream.tabular.policy import REMOVED_FIELDS, from_dict, to_dict


def _table_policy(opts: dict[str, Any]) -> Any:
    """The ``table`` policy: ``--policy NAME`` (its defaults), or the TOML ``[policy]``
    table (``name`` and fields; name ``adaptive`` if absent). Bad fields: UsageError."""
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


def decode_rng(opts: dict[str, Any], step: int) -> Any:
    """The generator that draws a release's numbers inside their bins (post-processing,
    not privacy noise): OS-seeded, or with ``--seed`` a function of the seed and the step
    alone, so that a resumed run draws what an uninterrupted one draws."""
    seed = opts.get("seed")
    return chunk_rng(None if seed is None else int(seed), step, 0)


def chunk_rng(seed: int | None, step: int, index: int) -> Any:
    """The generator of chunk ``index`` of a release written by the workers, as
    :func:`decode_rng` for a whole release: OS-seeded, or with ``--seed`` a function of
    ``(seed, step, index)`` alone, so that any worker (or one process) draws the same
    numbers. Chunk 0's is :func:`decode_rng`'s: a release of one chunk is the rows of the
    run without ``--dask``; later chunks draw other numbers in the same bins."""
    if seed is None:
        return np.random.default_rng()
    return np.random.default_rng([seed, step, 40, *([index] if index else [])])


_Shared = tuple[Domain, Domain, Any, "int | None", int]


def _write_chunk(part: Any, shared: _Shared, index: int, directory: str) -> int:
    """Task body (on a worker): chunk ``index`` of a release (a partition of
    ``TabularStream.synthetic_dask``) in the schema's values, written to
    ``directory/part-<index>.parquet`` with the release's Arrow schema and synced to
    disk; its row count."""
    coded, domain, schema, seed, step = shared
    if not domain.is_codes:
        part = domain.decode(coded.encode(part), chunk_rng(seed, step, index))
    pa, pq = module("pyarrow"), module("pyarrow.parquet")
    out = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pandas(part, schema=schema, preserve_index=False), out)
    with open(Path(directory) / f"part-{index:05d}.parquet", "wb") as f:
        f.write(out.getvalue().to_pybytes())
        f.flush()
        os.fsync(f.fileno())
    return len(part)


def release_writer(
    table: Any, coded: Domain, domain: Domain, seed: int | None, step: int
) -> Callable[[Path], None]:
    """What writes ``table`` (``synthetic_dask()`` of step ``step``, in ``coded``'s
    labels) into a directory, one Parquet file per partition, on the workers. Every
    part has the schema's column types, whatever values its chunk holds."""
    zeros = np.zeros((1, len(coded)), dtype=np.int64)
    one = coded.decode(zeros) if domain.is_codes else domain.decode(zeros, chunk_rng(0, 0, 0))
    schema = module("pyarrow").Schema.from_pandas(one, preserve_index=False)
    shared: _Shared = (coded, domain, schema.remove_metadata(), seed, step)

    def write(directory: Path) -> None:
        dask = module()
        key = dask.delayed(shared, pure=True)
        task = dask.delayed(_write_chunk, pure=False)  # it writes a file
        parts = table.to_delayed()
        for _ in gather_in_order([task(p, key, i, str(directory)) for i, p in enumerate(parts)]):
            pass

    return write


def cmd_table(opts: dict[str, Any]) -> dict[str, Any]:
    """Run ``dpstream table`` with the options ``opts``; the summary lines."""
    require(opts, "input", "domain", "epsilon", "out")
    eps = epsilon(opts)
    evaluate = release_paths(opts)
    try:
        domain = Domain.from_json(opts["domain"])
    except (OSError, ValueError, TypeError) as e:
        raise UsageError(f"--domain {opts['domain']}: {e}") from None
    if opts.get("time_column") is None and opts.get("batch_size") is None:
        raise UsageError("give --time-column or --batch-size")
    policy = _table_policy(opts)
    _refuse_old_table_checkpoint(opts.get("checkpoint"))
    names = list(domain.names)
    # The stream counts codes: category lists as before, every other column by its size.
    coded = domain.coded()
    text = {c: domain.column(c).categories or () for c in names}

    def check(frame: Any, path: Path) -> tuple[Any, dict[str, int]]:
        return check_table(frame, domain, path)

    frame, file_codes = read_checked(
        opts, "table", names, check, "the schema's bounds", {c: t for c, t in text.items() if t}
    )

    def codes(rows: Any) -> Any:
        """The records as the model consumes them: codes, int64 little-endian (canonical)."""
        if not len(rows):
            return np.zeros((0, len(names)), dtype="<i8")
        if file_codes is not None and rows.index.dtype.kind == "i":
            out = file_codes[rows.index.to_numpy()]  # checked in full above, in file order
        else:
            out = domain.encode(rows[names])
        return np.ascontiguousarray(out, dtype="<i8")

    run_input = input_batches(opts, names if is_partitioned(opts) else None, codes, frame)
    labelled = run_input.batches
    # The fingerprint holds the serialised policy (every field), not the option's form.
    fingerprint = {**run_options(opts, eps), "policy": json.dumps(to_dict(policy))}
    cells = positive(opts, "max_model_cells")
    try:
        model = ModelOptions() if cells is None else ModelOptions(max_model_cells=cells)
        stream = TabularStream(
            coded,
            eps,
            policy=policy,
            model=model,
            public_sizes=bool(opts.get("public_sizes")),
            rng=noise_rng(opts),
        )
    except (TypeError, ValueError, ImportError) as e:
        raise UsageError(in_command_words(str(e), names)) from None

    def decoded(release: Any, t: int) -> Any:
        """A release in the schema's values (numbers drawn inside their bins): the
        stream's table of codes and category labels, decoded (post-processing)."""
        if domain.is_codes or release is None:
            return release
        return domain.decode(coded.encode(release), decode_rng(opts, t))

    # --dask with Parquet: each release drawn and written by the workers (runs.Drawn).
    drawn = opts.get("dask") is not None and opts.get("format") == "parquet"
    seed = None if opts.get("seed") is None else int(opts["seed"])

    class _Table:
        def __init__(self, s: Any) -> None:
            self.s = s
            self.last: Any = None

        def update(self, rows: Any) -> None:
            if isinstance(rows, LazyBatch):  # counted on the cluster, in one pass
                workloads = self.s.workloads
                (counted,) = rows.gather([marginals_graph(rows.parts, domain, workloads)])
                self.last = self._step(marginals_of(coded, workloads, counted))
                return
            self.last = self._step(codes(rows) if len(rows) else None)

        def _step(self, batch: Any) -> Any:
            try:
                return self.s.step(batch, draw=not drawn)
            except ValueError as e:  # in the command's words: columns, options
                raise ValueError(in_command_words(str(e), names)) from None

        def release(self) -> Any:
            return decoded(self.last, int(self.s._t))

        def draw(self) -> Callable[[Path], None]:
            """The step's release, drawn as the step would have drawn it, written by the
            workers (:func:`release_writer`)."""
            return release_writer(self.s.synthetic_dask(), coded, domain, seed, int(self.s.t))

        def to_bytes(self) -> bytes:
            return bytes(self.s.to_bytes())

    batches = released(opts, labelled)
    # --seed is in the fingerprint: only a seeded run resumes a seeded checkpoint.
    seeded = opts.get("seed") is not None

    def load(state: bytes) -> Any:
        return _Table(TabularStream.from_bytes(state, allow_seeded=seeded))

    result = run_batches(opts, run_input, batches, _Table(stream), load, fingerprint, drawn=drawn)
    summary = run_summary(opts, eps, result.releases, command="table")
    if evaluate is not None and result.releases:
        summary.update(evaluate_table(batches, domain, codes, result.releases, evaluate, opts))
    return summary

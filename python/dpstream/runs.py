"""A stream run over files: batches in, one file per release out, crash-safe checkpoints.

The engine behind the ``dpstream`` command. For every batch the model is
updated; when a release is due it is computed and written to
``release-<name>.<csv|parquet>``.

Checkpoints (``checkpoint=`` path, ``checkpoint_every=N`` batches) make a
killed run resumable with the same command:

* the model's state, the number of batches consumed and the names of the
  releases written are saved atomically (temp file, fsync, rename);
* a release is saved *inside* the checkpoint (as the bytes of its file)
  before its file is written, so a crash between the two re-writes the same
  bytes on resume: a release is computed once and never recomputed with new
  noise (no ε is spent twice for it);
* batches are consumed in a fixed order from the input, and the checkpoint
  records how many were consumed, so none is lost or counted twice;
* a checkpoint of a different configuration is refused.

A checkpoint holds the model's exact counts: protect it like the raw data.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from dpstream._files import atomic_write
from dpstream.io import table_bytes

__all__ = ["Batch", "Model", "RunResult", "run_stream"]

_MAGIC = b"DPSTREAM-RUN\x00\x01"


class Model(Protocol):
    """What a run drives: updates, releases and (for checkpoints) its state."""

    def update(self, batch: Any) -> None: ...
    def release(self) -> Any: ...
    def to_bytes(self) -> bytes: ...


@dataclass(frozen=True)
class Batch:
    """One time step of input: its public label and its rows."""

    label: str
    rows: Any
    release: bool = True


@dataclass
class RunResult:
    """What a run did: batches consumed, release files written, the model."""

    batches: int
    releases: list[Path]
    model: Any
    resumed_from: int = 0
    log: list[dict[str, Any]] = field(default_factory=list)


def _fault(point: str, index: int) -> None:
    """Test hook: ``DPSTREAM_FAULT=<point>:<batch index>`` kills the process there."""
    spec = os.environ.get("DPSTREAM_FAULT")
    if spec and spec == f"{point}:{index}":
        sys.stderr.flush()
        os._exit(137)


def fingerprint(options: dict[str, Any]) -> str:
    """A digest of the options that define a run (a checkpoint must match them)."""
    return hashlib.sha256(json.dumps(options, sort_keys=True, default=str).encode()).hexdigest()


def _encode_checkpoint(header: dict[str, Any], state: bytes, pending: bytes) -> bytes:
    head = json.dumps(header).encode()
    return b"".join(
        [_MAGIC, struct.pack("<Q", len(head)), head, struct.pack("<Q", len(state)), state, pending]
    )


def _decode_checkpoint(data: bytes) -> tuple[dict[str, Any], bytes, bytes]:
    try:
        if not data.startswith(_MAGIC):
            raise ValueError("not a dpstream run checkpoint")
        pos = len(_MAGIC)
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        header = json.loads(data[pos : pos + n])
        pos += n
        (m,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        if pos + m > len(data):
            raise ValueError("truncated")
        return header, data[pos : pos + m], data[pos + m :]
    except (struct.error, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ValueError(f"corrupt run checkpoint: {e}") from None


def run_stream(
    batches: Sequence[Batch],
    model: Model,
    *,
    load_model: Callable[[bytes], Any],
    out_dir: Path,
    suffix: str,
    options: dict[str, Any],
    checkpoint: Path | None = None,
    checkpoint_every: int = 1,
    progress: Callable[[Iterator[int], int], Iterator[int]] | None = None,
    on_release: Callable[[Batch, Any, Any], dict[str, Any]] | None = None,
) -> RunResult:
    """Drive ``model`` over ``batches``; see the module docs for the guarantees.

    ``on_release(batch, model, frame)`` may return a dict logged with the release
    (e.g. evaluation metrics); the log is kept in the checkpoint.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    digest = fingerprint(options)
    start = 0
    written: list[str] = []
    log: list[dict[str, Any]] = []
    if checkpoint is not None and checkpoint.exists():
        header, state, pending = _decode_checkpoint(checkpoint.read_bytes())
        if header.get("fingerprint") != digest:
            raise ValueError(
                f"checkpoint {checkpoint} was made by a run with different options; "
                "use the same command, or remove the checkpoint to start over"
            )
        start = int(header["batches"])
        written = list(header["releases"])
        log = list(header.get("log", []))
        if header.get("pending"):
            name = header["pending"]
            atomic_write(out_dir / name, pending)  # the same bytes as before the crash
            if name not in written:
                written.append(name)
        model = load_model(state) if state else model
    resumed = start

    def save(done: int, state: bytes, pending: tuple[str, bytes] | None) -> None:
        if checkpoint is None:
            return
        header = {
            "fingerprint": digest,
            "batches": done,
            "releases": written,
            "pending": pending[0] if pending else None,
            "log": log,
        }
        atomic_write(checkpoint, _encode_checkpoint(header, state, pending[1] if pending else b""))

    indices: Iterator[int] = iter(range(start, len(batches)))
    if progress is not None:
        indices = progress(indices, len(batches) - start)
    for i in indices:
        batch = batches[i]
        model.update(batch.rows)
        done = i + 1
        if batch.release:
            frame = model.release()
            name = f"release-{batch.label}{suffix}"
            data = table_bytes(frame, suffix)
            if on_release is not None:
                log.append({"release": batch.label, **on_release(batch, model, frame)})
            _fault("before-checkpoint", i)
            if checkpoint is not None:
                save(done, _state(model, done == len(batches)), (name, data))
            _fault("after-checkpoint", i)
            atomic_write(out_dir / name, data)
            written.append(name)
            _fault("after-write", i)
        elif checkpoint is not None and done % checkpoint_every == 0:
            save(done, _state(model, False), None)
    if checkpoint is not None and resumed < len(batches) and not batches[-1].release:
        save(len(batches), _state(model, True), None)
    return RunResult(len(batches), [out_dir / n for n in written], model, resumed, log)


def _state(model: Model, final: bool) -> bytes:
    """The model's state, or nothing once the run is over (a finished run only
    needs its release files; a one-shot model cannot be saved after releasing)."""
    return b"" if final else bytes(model.to_bytes())

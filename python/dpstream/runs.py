"""A stream run over files: batches in, one file per release out, crash-safe checkpoints.

The engine behind the ``dpstream`` command. For every batch the model is
updated; when a release is due it is computed and written to
``release-<name>.<csv|parquet>`` in the output directory, which receives
nothing else (evaluation against the real data is the caller's business and
goes elsewhere).

Checkpoints (``checkpoint=`` path, ``checkpoint_every=N`` batches) make a
killed run resumable with the same command, and a finished run continuable
when rows are appended to its input:

* the model's state, the sizes of the batches consumed, a SHA-256 digest of
  the rows consumed (of each batch's ``batch_digest``: a digest of its rows as a
  multiset, :mod:`dpstream._digest`, so that it does not depend on how the input is
  stored or partitioned) and the names of the releases written are saved
  atomically (temp file, fsync, rename);
* a release is saved *inside* the checkpoint (as the bytes of its file)
  before its file is written, so a crash between the two re-writes the same
  bytes on resume: a release is computed once and never recomputed with new
  noise (no ε is spent twice for it);
* a :class:`Drawn` model's release (rows drawn and written by a cluster's
  workers, never held here) is named in the checkpoint (``redraw``) with the
  state it is drawn from, a deterministic function of it: on resume it is drawn
  again from that state, the same rows, and written unless its directory is
  there (written into a temporary directory, then renamed: it appears whole);
* batches are consumed in a fixed order from the input, and the checkpoint
  records how many were consumed, so none is lost or counted twice;
* the checkpoint stores the run's options; a run with other options is
  refused, naming the options that differ;
* on resume the consumed prefix of the new input is hashed again: if it
  differs (a row changed, removed or inserted among the consumed ones, or
  moved to another batch), the run is refused. Rows after the consumed
  prefix continue the stream, which is the normal periodic rerun on a grown
  input; the model keeps its state at the end of a run for this;
* a one-shot model (``one_shot=True``: PrivHP, released once at the end)
  cannot continue after its release: rows appended to a finished one-shot
  run are refused, never counted by a fresh model that would overwrite the
  release.

Every refusal happens before anything is written. A checkpoint holds the
model's exact counts: protect it like the raw data (and keep it out of the
release directory).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, cast

from dpstream._files import atomic_write
from dpstream.io import table_bytes

__all__ = [
    "Batch",
    "Drawn",
    "Model",
    "RunResult",
    "check_out_dir",
    "consumed_sizes",
    "run_stream",
]

_MAGIC = b"DPSTREAM-RUN\x00\x03"
#: Format 2 hashed the rows' canonical bytes in input order (a partitioned run: its
#: partitions' SHA-256s); format 3 hashes each batch as a multiset.
_MAGIC_V2 = b"DPSTREAM-RUN\x00\x02"
_MAGIC_V1 = b"DPSTREAM-RUN\x00\x01"


class Model(Protocol):
    """What a run drives: updates, releases and (for checkpoints) its state."""

    def update(self, batch: Any) -> None: ...
    def release(self) -> Any: ...
    def to_bytes(self) -> bytes: ...


class Drawn(Protocol):
    """A model whose releases are written by its own means (a cluster's workers) into a
    directory: :meth:`update` draws nothing; :meth:`draw` draws the step's release from
    the state after the update (:meth:`to_bytes` then), a deterministic function of it,
    moves the state past it and returns what writes it into a new directory. It is
    called at every step, released or not, so the state moves the same way."""

    def update(self, batch: Any) -> None: ...
    def draw(self) -> Callable[[Path], None]: ...
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


def _fault(point: str, index: int) -> None:
    """Test hook: ``DPSTREAM_FAULT=<point>:<batch index>`` kills the process there."""
    spec = os.environ.get("DPSTREAM_FAULT")
    if spec and spec == f"{point}:{index}":
        sys.stderr.flush()
        os._exit(137)


def _encode_checkpoint(header: dict[str, Any], state: bytes, pending: bytes) -> bytes:
    head = json.dumps(header, sort_keys=True).encode()
    return b"".join(
        [_MAGIC, struct.pack("<Q", len(head)), head, struct.pack("<Q", len(state)), state, pending]
    )


def _decode_checkpoint(path: Path) -> tuple[dict[str, Any], bytes, bytes]:
    """``(header, state, pending)``; a format-2 header has ``"format": 2``."""
    data = path.read_bytes()
    version = 3
    if data.startswith(_MAGIC_V2):
        data, version = _MAGIC + data[len(_MAGIC_V2) :], 2
    if data.startswith(_MAGIC_V1):
        raise ValueError(
            f"checkpoint {path} was written by an older dpstream that did not record the "
            "input it consumed; finish that run with the older version, or remove the "
            "checkpoint to start over"
        )
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
        _check_header(header)
        header["format"] = version
        return header, data[pos : pos + m], data[pos + m :]
    except (struct.error, json.JSONDecodeError, UnicodeDecodeError, ValueError) as e:
        raise ValueError(f"corrupt run checkpoint {path}: {e}") from None


def _is_release_name(name: Any) -> bool:
    """A plain file name ``release-…`` (never a path out of the release directory)."""
    return isinstance(name, str) and name.startswith("release-") and Path(name).name == name


def _check_header(header: Any) -> None:
    """The header's fields and their types; ``ValueError`` naming the first bad one."""
    if not isinstance(header, dict):
        raise ValueError("the header is not an object")
    sizes = header.get("sizes")
    checks = {
        "options": isinstance(header.get("options"), dict),
        "sizes": isinstance(sizes, list)
        and all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in sizes),
        "batches": isinstance(sizes, list) and header.get("batches") == len(sizes),
        "input_sha256": isinstance(header.get("input_sha256"), str),
        "releases": isinstance(header.get("releases"), list)
        and all(_is_release_name(r) for r in header["releases"]),
        "pending": header.get("pending") is None or _is_release_name(header["pending"]),
        "redraw": header.get("redraw") is None or _is_release_name(header["redraw"]),
        "closed": isinstance(header.get("closed"), bool),
    }
    bad = [name for name, ok in checks.items() if not ok]
    if bad:
        raise ValueError(f"bad header field {bad[0]!r}")


def _write_directory(target: Path, write: Callable[[Path], None]) -> None:
    """``write(directory)`` into a temporary sibling of ``target``, then renamed to it:
    the directory appears whole. One already at ``target`` appeared so and is kept; a
    temporary one left by a crash was never part of a release and is removed first."""
    if target.is_dir():
        return
    tmp = target.with_name(f".{target.name}.tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    write(tmp)
    _fsync(tmp)
    os.rename(tmp, target)
    _fsync(target.parent)


def _fsync(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def check_out_dir(out: Path, checkpoint: Path | None) -> None:
    """A non-empty release directory is only for continuing the run whose checkpoint
    exists (:func:`run_stream` then checks that it is that run): a new run there would
    overwrite some releases and leave others from before. ``ValueError`` otherwise."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} is a file, not a directory")
    if not out.is_dir() or not any(out.iterdir()):
        return
    if checkpoint is not None and Path(checkpoint).exists():
        return
    raise ValueError(
        f"--out {out} is not empty and no --checkpoint of the run that wrote it exists: a "
        "new run would mix its releases with those there; give a new or empty directory"
    )


def consumed_sizes(checkpoint: Path | None) -> list[int]:
    """The row counts of the batches a checkpoint has consumed, in order (``[]`` if none).

    A caller that cuts batches by row count uses them to cut the consumed prefix
    exactly as before and the rows after it into new batches.
    """
    if checkpoint is None or not checkpoint.exists():
        return []
    header, _, _ = _decode_checkpoint(checkpoint)
    return [int(s) for s in header["sizes"]]


def _option_changes(saved: dict[str, Any], now: dict[str, Any]) -> str:
    keys = sorted(set(saved) | set(now))
    diffs = [
        f"--{k.replace('_', '-')}: {saved.get(k)!r} then, {now.get(k)!r} now"
        for k in keys
        if saved.get(k) != now.get(k)
    ]
    return "; ".join(diffs)


def _legacy_digest(
    checkpoint: Path, header: dict[str, Any], legacy_row_bytes: Callable[[Any], bytes] | None
) -> Any:
    """The SHA-256 a format-2 checkpoint's ``input_sha256`` continues (``None`` for
    format 3); refuses the format-2 checkpoints this run cannot check."""
    if header["format"] == 3:
        return None
    if header["options"].get("input_digest") == "partitions" or legacy_row_bytes is None:
        raise ValueError(
            f"checkpoint {checkpoint} was written by an older dpstream whose digest of a "
            "partitioned input depended on its partitions; finish that run with the older "
            "version, or remove the checkpoint to start over"
            if header["options"].get("input_digest") == "partitions"
            else f"checkpoint {checkpoint} was written by an older dpstream from a single-file "
            "input; resume it once on that file (without --dask) to upgrade it"
        )
    return hashlib.sha256()


def run_stream(
    batches: Sequence[Batch],
    model: Model,
    *,
    load_model: Callable[[bytes], Any],
    out_dir: Path,
    suffix: str,
    options: dict[str, Any],
    batch_digest: Callable[[Any], bytes],
    checkpoint: Path | None = None,
    checkpoint_every: int = 1,
    progress: Callable[[Iterator[int], int], Iterator[int]] | None = None,
    one_shot: bool = False,
    legacy_row_bytes: Callable[[Any], bytes] | None = None,
    drawn: bool = False,
) -> RunResult:
    """Drive ``model`` over ``batches``; see the module docs for the guarantees.

    Args:
        options: the run's options, JSON-serialisable (every option that affects
            the releases); a checkpoint made with other options is refused.
        batch_digest: a digest of a batch's rows as the model consumes them, as a
            multiset (:func:`dpstream._digest.row_sums` of their canonical values),
            so that it depends neither on the rows' order within the batch nor on
            how the input is stored (one file, many files, partitions). Called after
            the batch's update (a partitioned batch computes it in the same pass).
        one_shot: the model releases once, at the last batch, and cannot be saved
            or updated afterwards.
        legacy_row_bytes: the canonical bytes of a batch's rows in input order,
            which a format-2 checkpoint hashed; given, such a checkpoint is checked
            with them and continues in format 3. ``None``: it is refused.
        drawn: ``model`` (and what ``load_model`` returns) is a :class:`Drawn`: each
            release is the directory ``release-<label><suffix>/`` its writer fills.

    Raises:
        ValueError: a corrupt or foreign checkpoint, other options, a changed
            consumed prefix, fewer batches than consumed, new rows for a
            finished one-shot run, or a release to draw again (``redraw``) for a
            model that is not :class:`Drawn`. Nothing is written then.
    """
    start = 0
    written: list[str] = []
    sizes: list[int] = []
    digest = hashlib.sha256()
    pending_write: tuple[str, bytes] | None = None
    redraw: str | None = None
    closed = False
    if checkpoint is not None and checkpoint.exists():
        header, state, pending = _decode_checkpoint(checkpoint)
        legacy = _legacy_digest(checkpoint, header, legacy_row_bytes)
        if header["options"] != options:
            raise ValueError(
                f"checkpoint {checkpoint} was made by a run with different options "
                f"({_option_changes(header['options'], options)}); use the same options, "
                "or remove the checkpoint to start over"
            )
        start = int(header["batches"])
        sizes = [int(s) for s in header["sizes"]]
        last = header.get("last")
        if start > len(batches):
            raise ValueError(
                f"checkpoint {checkpoint} has consumed {start} batches (through {last}), "
                f"but this run has only {len(batches)}: the schedule or the input shrank"
            )
        for b in batches[:start]:
            digest.update(batch_digest(b.rows))
            if legacy is not None:
                legacy.update(legacy_row_bytes(b.rows))  # type: ignore[misc]
        now = [len(b.rows) for b in batches[:start]]
        check = digest if legacy is None else legacy
        if now != sizes or check.hexdigest() != header["input_sha256"]:
            raise ValueError(
                f"the input changed: its rows in the first {start} batches (through {last}) "
                f"differ from those checkpoint {checkpoint} consumed; appended rows continue "
                "a run, changed or removed ones cannot (their releases are out): restore the "
                "input, or remove the checkpoint to start over"
            )
        closed = bool(header.get("closed"))
        if closed and start < len(batches):
            raise ValueError(
                f"checkpoint {checkpoint} belongs to a finished one-shot run (its one release "
                f"is written); the {len(batches) - start} new batches cannot be counted "
                "without a second release: start a new run with another --checkpoint and --out"
            )
        written = list(header["releases"])
        if header.get("pending"):
            pending_write = (str(header["pending"]), pending)
        redraw = header.get("redraw")
        if redraw is not None and not drawn:
            raise ValueError(
                f"checkpoint {checkpoint} holds release {redraw} still to be drawn and "
                "written by the workers: resume the run with --dask (and --format parquet)"
            )
        if state:
            model = load_model(state)
    out_dir.mkdir(parents=True, exist_ok=True)
    if pending_write is not None:
        name, data = pending_write
        atomic_write(out_dir / name, data)  # the same bytes as before the crash
        if name not in written:
            written.append(name)

    def draw() -> Callable[[Path], None]:
        return cast("Drawn", model).draw()

    if redraw is not None:  # drawn again from the state it was drawn from: the same rows
        _write_directory(out_dir / redraw, draw())
        if redraw not in written:
            written.append(redraw)
    resumed = start

    def save(
        done: int,
        label: str,
        pending: tuple[str, bytes] | None,
        final: bool,
        redraw: str | None = None,
    ) -> None:
        if checkpoint is None:
            return
        shot = final and one_shot
        header = {
            "options": options,
            "batches": done,
            "sizes": sizes,
            "input_sha256": digest.hexdigest(),
            "last": label,
            "releases": written,
            "pending": pending[0] if pending else None,
            "closed": shot,
        }
        if redraw is not None:  # only then: other checkpoints are as before
            header["redraw"] = redraw
        state = b"" if shot and redraw is None else bytes(model.to_bytes())
        atomic_write(checkpoint, _encode_checkpoint(header, state, pending[1] if pending else b""))

    indices: Iterator[int] = iter(range(start, len(batches)))
    if progress is not None:
        indices = progress(indices, len(batches) - start)
    for i in indices:
        batch = batches[i]
        model.update(batch.rows)
        digest.update(batch_digest(batch.rows))
        sizes.append(len(batch.rows))
        done = i + 1
        final = done == len(batches)
        name = f"release-{batch.label}{suffix}"
        if drawn and batch.release:
            _fault("before-checkpoint", i)
            save(done, batch.label, None, final, redraw=name)  # the state it is drawn from
            _fault("after-checkpoint", i)
            _write_directory(out_dir / name, draw())
            written.append(name)
            _fault("after-write", i)
        elif batch.release:
            frame = model.release()
            data = table_bytes(frame, suffix)
            _fault("before-checkpoint", i)
            save(done, batch.label, (name, data), final)
            _fault("after-checkpoint", i)
            atomic_write(out_dir / name, data)
            written.append(name)
            _fault("after-write", i)
        else:
            if drawn:
                draw()
            if done % checkpoint_every == 0 or final:
                save(done, batch.label, None, final)
    return RunResult(len(batches), [out_dir / n for n in written], model, resumed)

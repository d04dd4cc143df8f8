"""``dpstream points``: points in a public box, released by the online synthesizer or PrivHP.

The points are scaled to the unit cube by the public ``--bounds`` and the releases
scaled back (post-processing). ``--method online`` and ``online-paper`` release at
every period, ``privhp`` once at the end; ε is spent on the whole stream of releases
for the relation of :data:`dpstream.cli.parser.RELATIONS`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from dpstream import OnlineSynthesizer, PrivHP
from dpstream.cli.batching import input_batches, is_partitioned, read_checked, released, run_batches
from dpstream.cli.evaluation import evaluate_points
from dpstream.cli.lazy import pandas
from dpstream.cli.options import (
    UsageError,
    derived_rng,
    epsilon,
    noise_rng,
    release_paths,
    require,
    run_options,
)
from dpstream.cli.parquet_input import LazyBatch
from dpstream.cli.report import run_summary
from dpstream.distributed import summary_graph, update_online
from dpstream.inputs import check_points
from dpstream.io import parse_bounds
from dpstream.runs import Batch

#: The options that only some ``points`` methods use: an option a method does not use is
#: refused rather than silently ignored.
METHOD_OPTIONS: dict[str, tuple[str, ...]] = {
    "online": ("memory", "expected_n", "release_at"),
    "online-paper": ("release_at",),
    "privhp": ("memory", "expected_n"),
}

#: Options ``table`` had before ``--policy``, as every ``points`` run fingerprinted them.
_RETIRED_TABLE_OPTIONS = {
    "marginals_per_step": "auto",
    "remainder": "pooled",
    "score": "auto",
    "table_method": "proposed",
}


def _refuse_unused_options(opts: dict[str, Any], method: str) -> None:
    used = METHOD_OPTIONS[method]
    for name in sorted({n for names in METHOD_OPTIONS.values() for n in names}):
        if opts.get(name) is not None and name not in used:
            flag = "--" + name.replace("_", "-")
            raise UsageError(f"{flag} is not used by --method {method}; remove it")


class _OnlinePoints:
    """The online synthesizer on scaled points; releases in the original units."""

    def __init__(self, inner: Any, columns: list[str], bounds: Any) -> None:
        self.inner, self.columns, self.bounds = inner, columns, bounds

    def update(self, rows: Any) -> None:
        if isinstance(rows, LazyBatch):  # scaled and counted on the cluster, in one pass
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
        y = self.inner.release()
        return pandas().DataFrame(self.bounds.from_unit(y), columns=self.columns)

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
        rng = self.release_rng()
        gen = self.inner.release(rng=rng)
        n = max(0, round(gen.total))
        points = self.bounds.from_unit(gen.sample(n, rng=rng))
        return pandas().DataFrame(points, columns=self.columns)


def _point_values(columns: list[str]) -> Callable[[Any], Any]:
    """The points the model consumes, ``(n, d)`` float64 little-endian (canonical)."""

    def values(rows: Any) -> Any:
        return np.ascontiguousarray(rows[columns].to_numpy(dtype=np.float64), dtype="<f8")

    return values


def cmd_points(opts: dict[str, Any]) -> dict[str, Any]:
    """Run ``dpstream points`` with the options ``opts``; the summary lines."""
    require(opts, "input", "columns", "bounds", "epsilon", "out")
    eps = epsilon(opts)
    evaluate = release_paths(opts)
    columns = [c.strip() for c in str(opts["columns"]).split(",") if c.strip()]
    try:
        bounds = parse_bounds(opts["bounds"], len(columns))
    except ValueError as e:
        raise UsageError(f"--bounds: {e}") from None
    method = opts["method"]
    _refuse_unused_options(opts, method)
    if method == "privhp":
        require(opts, "memory", "expected_n")
    if is_partitioned(opts) and method == "online-paper":
        raise UsageError(
            "--method online-paper tests every time step in order, so it cannot count a "
            "partitioned input (--dask or a Parquet directory); use --method online"
        )

    def check(frame: Any, path: Path) -> tuple[None, dict[str, int]]:
        return None, check_points(frame, columns, bounds, path)

    frame, _ = read_checked(opts, "points", columns, check, "--bounds")
    run_input = input_batches(opts, columns, _point_values(columns), frame, "points")
    labelled = run_input.batches
    rng = noise_rng(opts)
    # Points runs fingerprinted the table options --policy replaced (at their defaults):
    # kept, so that their checkpoints resume.
    fingerprint = {**_RETIRED_TABLE_OPTIONS, **run_options(opts, eps)}
    if method in ("online", "online-paper"):
        if opts.get("memory") is not None or opts.get("expected_n") is not None:
            # The cap is part of the run: a checkpoint made with another number of
            # periods (a later --end, appended batches) is refused before any step.
            fingerprint["max_releases"] = str(len(labelled))
            # Fixed memory: R, the public cap on releases, is the number of release periods.
            require(opts, "memory", "expected_n")
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
        batches = released(opts, labelled)

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
            return derived_rng(opts, "privhp-release")

        model = _PrivHPPoints(summary, columns, bounds, release_rng)
        last = len(labelled) - 1
        batches = [
            Batch("final" if i == last else label, rows, i == last)
            for i, (label, rows) in enumerate(labelled)
        ]

        def load(state: bytes) -> Any:
            return _PrivHPPoints(PrivHP.from_bytes(state), columns, bounds, release_rng)

    result = run_batches(
        opts, run_input, batches, model, load, fingerprint, one_shot=method == "privhp"
    )
    summary_out = run_summary(opts, eps, result.releases, command="points", method=method)
    if evaluate is not None and result.releases:
        summary_out.update(
            evaluate_points(batches, columns, result.releases, bounds, evaluate, opts)
        )
    return summary_out

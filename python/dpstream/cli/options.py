"""The options of a command: read from flags and the TOML config, checked, fingerprinted.

An invalid option raises :class:`UsageError` (one line, exit status 2). A
checkpoint's fingerprint (:func:`run_options`) holds every option that shapes a
release, so that a run resumes only with the options that started it.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import tomllib
from fractions import Fraction
from pathlib import Path
from typing import Any

from dpstream import Rng
from dpstream.runs import check_out_dir


class UsageError(Exception):
    """An invalid option: reported as one line, exit status 2."""


#: Every command's defaults, under the TOML config and the flags.
DEFAULTS: dict[str, Any] = {
    "format": "csv",
    "method": "online",
    # No option any more (a Baseline field): kept, as every earlier run fingerprinted it.
    "estimator": "pgm",
    "checkpoint_every": 1,
    "plot": False,
    "quiet": False,
    "public_sizes": False,
}

# Options given as paths (a TOML value for them is read as a path too).
_PATH_OPTIONS = frozenset({"config", "input", "out", "checkpoint", "domain", "evaluate"})

#: Options that change neither the releases nor the stream they come from: every
#: other option, present or future, is in a checkpoint's fingerprint.
NOT_FINGERPRINTED = frozenset(
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
FINGERPRINTED_WHEN_SET = frozenset({"release_at", "max_model_cells"})


def read_options(args: argparse.Namespace) -> dict[str, Any]:
    """Flags over the TOML config over the defaults; unknown config keys are refused."""
    opts: dict[str, Any] = dict(DEFAULTS)
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


def require(opts: dict[str, Any], *names: str) -> None:
    """Each of ``names`` is given, or a UsageError names the first missing."""
    for n in names:
        if opts.get(n) is None:
            raise UsageError(f"--{n.replace('_', '-')} is required")


def epsilon(opts: dict[str, Any]) -> Fraction:
    """``--epsilon`` as an exact positive fraction (``1/3`` is one third)."""
    try:
        eps = Fraction(str(opts["epsilon"]))
    except (ValueError, ZeroDivisionError):
        raise UsageError(f"--epsilon must be a positive number, got {opts['epsilon']!r}") from None
    if eps <= 0:
        raise UsageError(f"--epsilon must be positive, got {opts['epsilon']!r}")
    return eps


def positive(opts: dict[str, Any], name: str) -> int | None:
    """Option ``name`` as a positive integer, or None if unset."""
    v = opts.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int) or v < 1:
        raise UsageError(f"--{name.replace('_', '-')} must be a positive integer, got {v!r}")
    return v


def _inside(path: Any, directory: Any) -> bool:
    """``path`` is ``directory`` or lies under it (after resolving links and ``..``)."""
    p, d = Path(path).resolve(), Path(directory).resolve()
    return p == d or d in p.parents


def release_paths(opts: dict[str, Any]) -> Path | None:
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
    check_out_dir(out, opts.get("checkpoint"))
    return None if evaluate is None else Path(evaluate)


def run_options(opts: dict[str, Any], eps: Fraction) -> dict[str, Any]:
    """The options a checkpoint must match: every option but :data:`NOT_FINGERPRINTED`.

    Values are canonical: ε as an exact fraction, a file by the SHA-256 of its
    contents (``--domain``), a directory by its resolved path, other values as text
    (so ``1`` in a TOML file and ``--batch-size 1`` agree).
    """
    canon: dict[str, Any] = {}
    for key, value in sorted(opts.items()):
        if key in NOT_FINGERPRINTED or (key in FINGERPRINTED_WHEN_SET and value is None):
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


def noise_rng(opts: dict[str, Any]) -> Rng | None:
    """The generator of the run's privacy noise: ``None`` (OS-seeded, private), or with
    ``--seed`` a seeded one, reproducible and NOT PRIVATE (said on standard error)."""
    if opts.get("seed") is not None:
        print("dpstream: --seed given: reproducible and NOT PRIVATE", file=sys.stderr)
        return Rng(seed=int(opts["seed"]))
    return None


def derived_rng(opts: dict[str, Any], purpose: str) -> Rng | None:
    """A seeded run's generator for one purpose (``None``, i.e. OS-seeded, without
    ``--seed``): a function of the seed alone, so a resumed run draws what an
    uninterrupted one draws."""
    if opts.get("seed") is None:
        return None
    key = hashlib.sha256(f"dpstream-cli {purpose} {int(opts['seed'])}".encode()).digest()
    return Rng(seed=key)

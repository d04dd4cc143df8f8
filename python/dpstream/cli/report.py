"""What a command tells the curator: notes and warnings, progress, the final summary.

Notes, warnings and progress go to standard error and may hold counts, never a
release; the summary goes to standard output.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

#: Notes printed when the run has finished (a refused run prints its error alone).
NOTES: list[str] = []


def note(command: str, text: str, kind: str = "note") -> None:
    """One line to the curator (standard error): may hold counts, never a release. A
    warning is printed at once, a note when the run has finished."""
    line = f"dpstream {command}: {kind}: {text}"
    if kind == "note":
        NOTES.append(line)
    else:
        print(line, file=sys.stderr)


def progress(opts: dict[str, Any]) -> Callable[[Iterator[int], int], Iterator[int]]:
    """The run's progress over its batches: nothing with ``--quiet``, a bar on a
    terminal, else a line every twentieth of the run."""
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


def run_summary(opts: dict[str, Any], eps: Any, releases: list[Any], **head: Any) -> dict[str, Any]:
    """A run's summary: ``head`` (the command and its method), ε, the number of
    releases and where they are."""
    return {**head, "epsilon": str(eps), "releases": len(releases), "out": str(opts["out"])}


def print_summary(summary: dict[str, Any], indent: str = "") -> None:
    """The command's summary on standard output, nested dictionaries indented."""
    for key, value in summary.items():
        if isinstance(value, dict):
            print(f"{indent}{key}:")
            print_summary(value, indent + "  ")
        else:
            print(f"{indent}{key}: {value}")

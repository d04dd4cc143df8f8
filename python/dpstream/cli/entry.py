"""The entry point of the ``dpstream`` console script: parse, run the command, report.

An invalid option or input ends the run with one line on standard error and exit
status 2; a finished run prints its notes on standard error, its summary on
standard output, and returns 0.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator, Sequence

from dpstream.cli.cluster import connect
from dpstream.cli.demo import cmd_demo
from dpstream.cli.options import DEFAULTS, UsageError, read_options
from dpstream.cli.parser import build_parser, join_negative_values
from dpstream.cli.points import cmd_points
from dpstream.cli.report import NOTES, print_summary
from dpstream.cli.table import cmd_table


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``dpstream`` console script; returns the exit status."""
    args = build_parser().parse_args(
        join_negative_values(list(sys.argv[1:] if argv is None else argv))
    )
    NOTES.clear()
    try:
        opts = read_options(args) if args.command != "demo" else {**DEFAULTS, **vars(args)}
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
    for line in NOTES:
        print(line, file=sys.stderr)
    print_summary(summary)
    return 0


@contextlib.contextmanager
def _dask_client(spec: str | None) -> Iterator[None]:
    """The ``--dask`` client (and LocalCluster) for the duration of a command."""
    if spec is None:
        yield
        return
    client, cluster = connect(str(spec))
    try:
        yield
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

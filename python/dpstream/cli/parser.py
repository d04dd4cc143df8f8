"""The ``dpstream`` argument parser: the commands, their options and their ``--help``.

Each command's help states the neighbouring relation its ε protects
(:data:`RELATIONS`), that the release schedule is public, and where the NOT PRIVATE
evaluation goes.
"""

from __future__ import annotations

import argparse
import textwrap
from pathlib import Path
from typing import Any

from dpstream.cli.points import METHOD_OPTIONS

_DESCRIPTION = "The ``dpstream`` command: private synthetic data from files, without glue code."

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


#: A flag that is only switched on: unset (``None``) when not given, so that the
#: TOML config's value stands.
_SWITCH: dict[str, Any] = {"action": "store_true", "default": None}

#: The options of ``points`` and ``table``, in their ``--help`` order.
_COMMON_OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("--config", {"type": Path, "help": "TOML file with any of these options"}),
    (
        "--input",
        {"type": Path, "help": "a .csv or .parquet file, or a directory of Parquet files"},
    ),
    ("--epsilon", {"help": "ε for the whole stream (e.g. 1, 0.5, 1/3)"}),
    ("--out", {"type": Path, "help": "directory for the release files (only them)"}),
    ("--format", {"choices": ["csv", "parquet"], "help": "release file format"}),
    ("--time-column", {"help": "column holding each record's time"}),
    (
        "--release-every",
        {
            "help": "with --time-column: a date column takes day, week, month, year or a "
            "count and a unit (10y, 3mo, 2w, 7d); an integer column (years, steps) a number "
            "of its units (10); periods anchored at --start"
        },
    ),
    (
        "--release-at",
        {
            "help": "with --time-column: the release times instead, comma-separated (2024-03,"
            "2024-06 or 1900,1950); each period ends at one of them"
        },
    ),
    ("--start", {"help": "first period (public), e.g. 2024-01 or 1890"}),
    (
        "--end",
        {
            "help": "last period (public; it must close a whole period); a later --end "
            "continues a checkpointed run"
        },
    ),
    (
        "--drop-outside",
        {
            **_SWITCH,
            "help": "leave out rows before --start (counted and reported) instead of refusing",
        },
    ),
    ("--sep", {"help": "CSV separator (default ,), e.g. ';' or '\\t'"}),
    ("--encoding", {"help": "CSV encoding (default utf-8), e.g. latin-1"}),
    (
        "--strict",
        {
            **_SWITCH,
            "help": "refuse values outside the public bounds instead of clipping them "
            "(a warning counts them)",
        },
    ),
    ("--batch-size", {"type": int, "help": "rows per time step (no time column)"}),
    (
        "--checkpoint",
        {
            "type": Path,
            "help": "checkpoint file, outside --out (resume on restart; rows appended to the "
            "input continue the run)",
        },
    ),
    ("--checkpoint-every", {"type": int, "help": "batches between checkpoints"}),
    (
        "--evaluate",
        {
            "type": Path,
            "metavar": "DIR",
            "help": "write NOT PRIVATE evaluation against the real data to DIR (outside --out)",
        },
    ),
    ("--plot", {**_SWITCH, "help": "with --evaluate: also a PNG"}),
    (
        "--dask",
        {
            "metavar": "SCHEDULER",
            "help": "count on a Dask cluster: a scheduler address, or local:N for a "
            "LocalCluster of N worker processes; the input (a .parquet or .csv file or a "
            "directory of Parquet files) is read partition by partition on the workers",
        },
    ),
    ("--seed", {"type": int, "help": "reproducible noise: NOT PRIVATE (tests only)"}),
    ("--quiet", {**_SWITCH, "help": "no progress output"}),
)


def _fill(text: str, first: str = "", rest: str = "") -> str:
    return textwrap.fill(
        text, 78, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False
    )


def build_parser() -> argparse.ArgumentParser:
    """The parser of the commands ``points``, ``table`` and ``demo`` and their options."""
    p = argparse.ArgumentParser(prog="dpstream", description=_DESCRIPTION)
    sub = p.add_subparsers(dest="command", required=True)

    def common(s: argparse.ArgumentParser) -> None:
        for flag, kwargs in _COMMON_OPTIONS:
            s.add_argument(flag, **kwargs)

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
        choices=list(METHOD_OPTIONS),
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
        **_SWITCH,
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


def join_negative_values(argv: list[str]) -> list[str]:
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

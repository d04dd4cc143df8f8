"""Shared reporting for the benchmark scripts: machine facts and RESULTS.md sections."""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import dpstream

REPO_DIR = Path(__file__).resolve().parent.parent
#: Everything the scripts regenerate (stored streams, per-setting tables, figures): git-ignored.
OUT_DIR = REPO_DIR / "benches" / "out"

RESULTS_HEADER = (
    "# dpstream benchmark results\n\n"
    "One section per capability, each written by the benchmark script named in it; rerun the\n"
    "command given there to refresh it. Absolute rates depend on the machine; the ratios,\n"
    "measured against the peers in the same run, are the figures to compare. The sections hold\n"
    "the summary tables; the scripts write the streams, the per-setting tables and the figures\n"
    "to the git-ignored `benches/out/`. `make bench` reruns these benchmarks (about 30 minutes on\n"
    "2 cores). The papers' reproductions and the sweeps (`make reproduce`, hours) write to\n"
    "`research/`.\n"
)


def version(dist: str) -> str:
    """Installed version of distribution ``dist``, or 'not installed'."""
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    """The CPU's model name, from /proc/cpuinfo where available."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def git_revision() -> str:
    """Short HEAD revision of the repository, flagged when the tree is dirty."""

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", "-C", str(REPO_DIR), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        rev = git("rev-parse", "--short", "HEAD")
        # a script's own outputs (RESULTS.md, figures written before it) are not code changes
        dirty = git(
            "status",
            "--porcelain",
            "--untracked-files=no",
            "--",
            ".",
            ":(exclude)benches/RESULTS.md",
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{rev}, with uncommitted changes" if dirty else rev


def load_average() -> str:
    """The 1-minute load average, or 'n/a' where the platform has none."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "n/a"


def run_log(began: float) -> Callable[[str], None]:
    """A progress log to standard error, each line headed by the seconds since ``began``
    (a ``time.perf_counter()`` reading)."""

    def log(msg: str) -> None:
        print(f"[{time.perf_counter() - began:6.1f} s] {msg}", file=sys.stderr, flush=True)

    return log


def rerun_command(script: str, argv: list[str] | None = None) -> str:
    """The command that reruns ``benches/{script}`` with ``argv`` (default: this run's
    arguments), from the repository root."""
    args = sys.argv[1:] if argv is None else argv
    return shlex.join([".venv/bin/python", f"benches/{script}", *args])


def add_output_options(parser: argparse.ArgumentParser, duration: str, figures: str) -> None:
    """``--quick`` (a smoke run taking ``duration``), ``--results`` and ``--figure-dir``
    (the directory of the PNG ``figures``)."""
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"tiny smoke run ({duration}); unless --results/--figure-dir are given it writes "
        "to a temporary directory, never over benches/RESULTS.md",
    )
    parser.add_argument("--results", type=Path, help="RESULTS.md to update")
    parser.add_argument("--figure-dir", type=Path, help=f"directory of the PNG {figures}")


def output_paths(
    args: argparse.Namespace, script: str, results: Path, figures: Path
) -> tuple[Path, Path]:
    """The RESULTS.md and the figure directory of a run: ``--results`` and ``--figure-dir``;
    with ``--quick`` and either missing, in a new temporary directory (never over
    benches/RESULTS.md); else ``results`` and ``figures``. Absolute."""
    results_path, figure_dir = args.results, args.figure_dir
    if args.quick and (results_path is None or figure_dir is None):
        tmp = Path(tempfile.mkdtemp(prefix=f"{script}_quick_"))
        results_path = results_path or tmp / "RESULTS.md"
        figure_dir = figure_dir or tmp / "figures"
    return (results_path or results).resolve(), (figure_dir or figures).resolve()


def save_figure(fig: Any, path: Path, dpi: int) -> None:
    """Write the matplotlib figure ``fig`` to ``path`` (its directory made) and close it."""
    import matplotlib.pyplot as plt

    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def machine_line(loads: str = "") -> str:
    """The ``- Machine:`` line of a section's Run list: platform, architecture, CPU and
    cores, then ``loads`` (the load averages of the run), if given."""
    text = (
        f"- Machine: {platform.platform()}; {platform.uname().machine}; {cpu_model()}; "
        f"os.cpu_count() = {os.cpu_count()}"
    )
    return f"{text}; {loads}" if loads else text


def version_lines(others: str) -> list[str]:
    """The ``- Python`` and ``- dpstream`` lines of a section's Run list: the versions of
    Python, dpstream (and its git revision), numpy, then ``others`` (e.g. ``pandas 2.2.3``)."""
    return [
        f"- Python {platform.python_version()} ({platform.python_implementation()})",
        f"- dpstream {dpstream.__version__} (git {git_revision()}), numpy {version('numpy')}, "
        + others,
    ]


def diag_run_lines(command: str) -> list[str]:
    """The machine, versions and rerun lines of a diagnostic section's "Run" list (the
    ``benches/diag_*.py`` scripts; the benchmarks give more detail)."""
    return [
        f"- Machine: {platform.platform()}; {cpu_model()}",
        f"- dpstream {version('dpstream')} (git {git_revision()}), numpy {version('numpy')}",
        f"- Rerun (from the repository root): `{command}`",
    ]


def write_section(section: str, title: str, results_path: Path) -> None:
    """Replace the section headed ``title`` of ``results_path`` (up to the next
    '## ' heading), or append it; the file is replaced atomically."""
    if results_path.exists():
        old = results_path.read_text(encoding="utf-8").splitlines()
    else:
        old = RESULTS_HEADER.splitlines()
    start = next((i for i, line in enumerate(old) if line.strip() == title), None)
    new_lines = section.rstrip("\n").splitlines()
    if start is None:
        while old and not old[-1].strip():
            old.pop()
        lines = [*old, "", *new_lines]
    else:
        end = next(
            (i for i in range(start + 1, len(old)) if old[i].startswith("## ")),
            len(old),
        )
        rest = old[end:]
        lines = [*old[:start], *new_lines, *(["", *rest] if rest else [])]
    tmp = results_path.with_suffix(".md.tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.replace(tmp, results_path)


def split_details(section: str, moved: tuple[str, ...], details_path: Path) -> tuple[str, str]:
    """The RESULTS.md summary of ``section`` and its full text for ``details_path``.

    The full text is ``section`` itself. The summary drops the ``### `` subsections whose
    titles start with one of ``moved`` (per-setting tables, setup, notes) and every embedded
    figure (``![...](...)`` lines and the caption lines that start with the figure's path in
    backquotes), and puts, where the first moved subsection was, a ``### Details``
    (``... and figures``) subsection naming the file that holds them. Figures and the details
    file are regenerated, never committed (``benches/out/`` is git-ignored), so the summary
    names them without linking them.
    """
    shown = (
        details_path.relative_to(REPO_DIR)
        if details_path.is_relative_to(REPO_DIR)
        else details_path
    )
    lines = section.rstrip("\n").splitlines()
    figure_links = {ln[ln.rfind("(") + 1 : ln.rfind(")")] for ln in lines if ln.startswith("![")}

    def is_moved(line: str) -> bool:
        return line.startswith("### ") and line.strip().startswith(moved)

    held = [ln.strip().removeprefix("### ") for ln in lines if is_moved(ln)]
    if figure_links:
        held.append(
            "the figures " + ", ".join(f"`{shown.parent / link}`" for link in sorted(figure_links))
        )
    pointer = [
        "### Details" + (" and figures" if figure_links else ""),
        "",
        f"Written by the same run next to its regenerated data, in `{shown}` (not committed): "
        + "; ".join(held)
        + ".",
        "",
    ]
    out: list[str] = []
    skipping = placed = False
    for line in lines:
        if line.startswith("### ") or line.startswith("## "):
            skipping = is_moved(line)
            if skipping and not placed:
                out += pointer
                placed = True
        if skipping:
            continue
        if line.startswith("!["):
            continue
        if any(line.startswith(f"`{link}`") for link in figure_links):
            continue
        out.append(line)
    if not placed and figure_links:
        out += ["", *pointer]
    summary = "\n".join(out) + "\n"
    while "\n\n\n" in summary:
        summary = summary.replace("\n\n\n", "\n\n")
    return summary, section


def write_details(details: str, details_path: Path) -> None:
    """Write ``details`` (a section's full text) to ``details_path``, atomically."""
    details_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = details_path.with_suffix(".md.tmp")
    tmp.write_text(details.rstrip("\n") + "\n", encoding="utf-8")
    os.replace(tmp, details_path)


def write_split(
    section: str, title: str, results_path: Path, moved: tuple[str, ...], details_path: Path
) -> None:
    """Write ``section`` in full to ``details_path`` and its summary (``split_details``)
    into ``results_path`` under ``title``."""
    summary, details = split_details(section, moved, details_path)
    write_details(details, details_path)
    write_section(summary, title, results_path)


def report_section(
    section: str,
    title: str,
    results_path: Path,
    moved: tuple[str, ...],
    details_path: Path,
    no_write: bool,
    log: Callable[[str], None],
) -> None:
    """Print ``section``; unless ``no_write``, also write it (:func:`write_split`) and log
    it."""
    print(section)
    if not no_write:
        write_split(section, title, results_path, moved, details_path)
        log(f"wrote the section '{title[3:]}' of {results_path}")


def require_modules(
    parser: argparse.ArgumentParser, script: str, needed: list[tuple[str, str]], make: str
) -> None:
    """Exit now (status 2), not after minutes of computation, if a module of ``needed``
    ``(module, distribution)`` is missing, saying how to install it (``make``: the make
    target that does)."""
    for module, dist in needed:
        try:
            importlib.import_module(module)
        except ImportError as exc:
            parser.exit(
                2,
                f"{script} needs {dist} ({exc}): `make {make}` installs it, or run "
                f"`.venv/bin/python -m pip install {dist}`\n",
            )


def add_steps_option(parser: argparse.ArgumentParser, default: int) -> None:
    """The ``--steps N`` option of the tabular diagnostics: steps per stream in ``--quick``."""
    parser.add_argument(
        "--steps",
        type=int,
        default=default,
        metavar="N",
        help="steps per stream in --quick (default %(default)s; tests use fewer)",
    )


def publish(
    section: str,
    title: str,
    results_path: Path,
    no_write: bool,
    moved: tuple[str, ...] = (),
    script: str = "",
) -> None:
    """Print ``section`` (``no_write``), or write it into ``results_path`` under ``title``.

    With ``moved`` (``### `` titles), the full section goes to ``out/{script}.md`` beside
    ``results_path`` (``benches/out/`` for the default RESULTS.md) and RESULTS.md gets the
    summary of ``split_details``."""
    if no_write:
        sys.stdout.write(section)
        return
    if moved:
        details_path = results_path.resolve().parent / "out" / f"{script}.md"
        write_split(section, title, results_path, moved, details_path)
        print(f"wrote {details_path}", file=sys.stderr, flush=True)
    else:
        write_section(section, title, results_path)
    print(f"wrote {results_path}", file=sys.stderr, flush=True)


def rule_verdict(
    pairs: list[tuple[tuple[float, float], tuple[float, float]]],
) -> tuple[int, float, bool]:
    """Issue 29's rule for keeping a heuristic in the default, over settings given as
    ``((AvgWE, MaxWE) with it, (AvgWE, MaxWE) without it)`` (means over seeds): the number
    of settings it wins (lower AvgWE and lower MaxWE), the worst ratio with/without over
    both metrics, and whether it passes (wins in at least 75% of the settings, never more
    than 10% worse)."""
    wins = sum(w[0] < wo[0] and w[1] < wo[1] for w, wo in pairs)
    worst = max((max(w[0] / wo[0], w[1] / wo[1]) for w, wo in pairs), default=0.0)
    return wins, float(worst), bool(pairs and wins >= 0.75 * len(pairs) and worst <= 1.10)


#: Above this share of one core used by other processes, a run is not on an idle machine.
IDLE_SHARE = 0.05


class OtherCpu:
    """CPU time the rest of the machine used while a benchmark ran, from ``/proc/stat``
    and the benchmark's own processes (this one, its live descendants such as Dask
    workers, and its reaped children). Linux only; nothing elsewhere. A load average
    cannot tell this: it counts the benchmark's own processes.

    * other processes: the machine's user time (user, nice) minus the benchmark's;
    * kernel time not charged to the benchmark's processes: the machine's system, irq and
      softirq time minus the benchmark's system time (interrupts, the loopback network
      stack of Dask's transfers, kernel threads: mostly caused by the benchmark itself);
    * steal: time the hypervisor gave this machine's CPUs to others."""

    def __init__(self) -> None:
        self.start = self._sample()

    @staticmethod
    def _sample() -> tuple[float, ...] | None:
        try:
            import psutil

            with open("/proc/stat", encoding="utf-8") as f:
                fields = [int(x) for x in f.readline().split()[1:9]]
        except (OSError, ImportError, ValueError):
            return None
        tick = os.sysconf("SC_CLK_TCK")
        user = (fields[0] + fields[1]) / tick
        kernel = (fields[2] + fields[5] + fields[6]) / tick
        steal = fields[7] / tick
        me = psutil.Process()
        own_user = own_system = 0.0
        for p in [me, *me.children(recursive=True)]:
            try:
                t = p.cpu_times()
            except psutil.Error:
                continue
            own_user, own_system = own_user + t.user, own_system + t.system
        t = os.times()
        return (
            user,
            kernel,
            steal,
            own_user + t.children_user,
            own_system + t.children_system,
        )

    def since_start(self) -> tuple[float, float, float] | None:
        """``(other processes', uncharged kernel, steal)`` CPU seconds since construction."""
        end = self._sample()
        if end is None or self.start is None:
            return None
        user, kernel, steal, own_user, own_system = (
            b - a for a, b in zip(self.start, end, strict=True)
        )
        return max(user - own_user, 0.0), max(kernel - own_system, 0.0), steal

    def report(self, wall: float) -> tuple[str, bool]:
        """One sentence for a results section over ``wall`` seconds, with its verdict, and
        whether the machine was busy: other processes above :data:`IDLE_SHARE` of a core
        (steal is the host's, outside the machine: shown, not tested)."""
        got = self.since_start()
        if got is None:
            return "CPU time of other processes: not measured on this platform", False

        def part(x: float) -> str:
            return f"{x:.1f} s ({100 * x / wall:.1f}% of one core)"

        other, kernel, steal = got
        busy = other / wall > IDLE_SHARE
        verdict = (
            f"more than {100 * IDLE_SHARE:.0f}% of a core: the 2-worker figures measure "
            "contention as much as scaling; rerun on an idle machine"
            if busy
            else "an idle machine"
        )
        return (
            f"in the {wall:.0f} s of the run, CPU time of other processes: {part(other)}; "
            f"kernel time not charged to the benchmark's processes: {part(kernel)}; "
            f"hypervisor steal: {part(steal)} ({verdict})",
            busy,
        )

"""Noise throughput of dpstream against its peers, measured side by side in one run (issue 2).

Measures samples per second of discrete Laplace noise at scales 10 and 10**6 for

* dpstream: ``dpstream.noise.discrete_laplace`` (exact CKS sampler, ChaCha12 CSPRNG), with a
  shared ``dpstream.Rng()`` and with ``rng=None`` (a fresh OS-seeded generator per call);
* OpenDP: ``make_laplace`` on a vector of int64 zeros (exact, but slow: timed on fewer draws);
* numpy: difference of two geometric draws (fast; neither exact nor a CSPRNG);
* diffprivlib: ``Geometric(...).randomise(0)``, one Python call per draw (timed on fewer draws);

and, as a secondary table, discrete Gaussian noise (dpstream and OpenDP's ``make_gaussian``).

Every case is timed once per round, rounds interleave the libraries (these machines are noisy, so
a transient load hits all of them alike), and the best round counts. Before timing, each case's
output is checked (mean near 0, standard deviation near the distribution's) so that a broken peer
call is caught rather than timed. The results replace the "Noise" section
of ``benches/RESULTS.md``.

Run from the repository root::

    .venv/bin/python benches/bench_noise.py            # or: make bench

The peers are optional; ``make bench`` installs them (``pip install opendp diffprivlib``).
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import math
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dpstream
import numpy as np
from _report import machine_line, version, version_lines, write_section

BENCH_DIR = Path(__file__).resolve().parent
REPO_DIR = BENCH_DIR.parent
RESULTS_PATH = BENCH_DIR / "RESULTS.md"
SECTION_TITLE = "## Noise"
INSTALL_HINT = (
    "run `make bench` (its bench-deps step runs `pip install opendp diffprivlib` into .venv), "
    "or `.venv/bin/python -m pip install opendp diffprivlib`"
)

SCALES = (10, 10**6)
DRAWS = 10**6

# Issue 2's targets: dpstream >= 100x OpenDP and >= 0.5x numpy (discrete Laplace).
TARGET_VS_OPENDP = 100.0
TARGET_VS_NUMPY = 0.5

# Output sanity checks: |mean| within MEAN_TOL_SE standard errors of 0, and the sample standard
# deviation within SD_REL_TOL of the distribution's. Loose on purpose: they catch a wrong call
# (wrong scale, epsilon instead of scale, constant output), not subtle bias.
MEAN_TOL_SE = 6.0
SD_REL_TOL = 0.10


# --------------------------------------------------------------------------------------------
# Cases


@dataclass
class Case:
    """One timed call: ``run()`` returns ``draws`` samples as a 1-D integer array."""

    library: str
    call: str
    family: str  # "laplace", "gaussian" or "overhead"
    scale: int
    draws: int
    run: Callable[[], np.ndarray]
    expected_sd: float | None  # None: no sanity check (overhead cases)
    times: list[float] = field(default_factory=list)

    @property
    def best(self) -> float:
        return min(self.times)

    @property
    def rate(self) -> float:
        """Samples per second, from the best round."""
        return self.draws / self.best


@dataclass
class Skipped:
    library: str
    reason: str


def laplace_sd(scale: float) -> float:
    """Standard deviation of the discrete Laplace ``P(z) ~ exp(-|z| / scale)``."""
    q = math.exp(-1.0 / scale)
    one_minus_q = -math.expm1(-1.0 / scale)
    return math.sqrt(2.0 * q) / one_minus_q


def gaussian_sd(sigma: float) -> float:
    """Standard deviation of the discrete Gaussian: ``sigma`` to far better than SD_REL_TOL."""
    return float(sigma)


def expected_sd(family: str, scale: int) -> float:
    return laplace_sd(scale) if family == "laplace" else gaussian_sd(scale)


def dpstream_cases() -> list[Case]:
    shared = dpstream.Rng()
    cases = []
    for scale in SCALES:

        def lap_rng(s: int = scale) -> np.ndarray:
            return dpstream.noise.discrete_laplace(s, DRAWS, rng=shared)

        def lap_none(s: int = scale) -> np.ndarray:
            return dpstream.noise.discrete_laplace(s, DRAWS, rng=None)

        def gauss_rng(s: int = scale) -> np.ndarray:
            return dpstream.noise.discrete_gaussian(s, DRAWS, rng=shared)

        def gauss_none(s: int = scale) -> np.ndarray:
            return dpstream.noise.discrete_gaussian(s, DRAWS, rng=None)

        cases += [
            Case(
                "dpstream",
                "discrete_laplace(scale, n, rng=Rng())",
                "laplace",
                scale,
                DRAWS,
                lap_rng,
                laplace_sd(scale),
            ),
            Case(
                "dpstream (rng=None)",
                "discrete_laplace(scale, n, rng=None)",
                "laplace",
                scale,
                DRAWS,
                lap_none,
                laplace_sd(scale),
            ),
            Case(
                "dpstream",
                "discrete_gaussian(sigma, n, rng=Rng())",
                "gaussian",
                scale,
                DRAWS,
                gauss_rng,
                gaussian_sd(scale),
            ),
            Case(
                "dpstream (rng=None)",
                "discrete_gaussian(sigma, n, rng=None)",
                "gaussian",
                scale,
                DRAWS,
                gauss_none,
                gaussian_sd(scale),
            ),
        ]
    return cases


def numpy_cases() -> list[Case]:
    gen = np.random.default_rng()
    cases = []
    for scale in SCALES:
        p = -math.expm1(-1.0 / scale)  # 1 - exp(-1/scale), without cancellation

        def run(p: float = p) -> np.ndarray:
            return gen.geometric(p, DRAWS) - gen.geometric(p, DRAWS)

        cases.append(
            Case(
                "numpy",
                "g.geometric(p, n) - g.geometric(p, n), p = 1 - exp(-1/scale)",
                "laplace",
                scale,
                DRAWS,
                run,
                laplace_sd(scale),
            )
        )
    return cases


def opendp_cases(draws: int) -> list[Case]:
    import opendp.prelude as dp

    # "honest-but-curious" is only for make_identity, which times the Python <-> Rust conversion
    # alone so that the report can say how much of OpenDP's time is the sampler.
    dp.enable_features("contrib", "honest-but-curious")
    zeros = np.zeros(draws, dtype=np.int64)
    l1_space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l1_distance(T="i64")
    l2_space = dp.vector_domain(dp.atom_domain(T="i64")), dp.l2_distance(T="i64")

    def wrap(meas: Any) -> Callable[[], np.ndarray]:
        # The call returns a Python list; converting it is left out of the timing.
        return lambda: meas(zeros)

    cases = []
    for scale in SCALES:
        laplace = dp.m.make_laplace(*l1_space, scale=float(scale))
        gaussian = dp.m.make_gaussian(*l2_space, scale=float(scale))
        cases += [
            Case(
                "OpenDP",
                "make_laplace(vector_domain(atom_domain(T='i64')), l1_distance(T='i64'), "
                "scale=scale)(zeros)",
                "laplace",
                scale,
                draws,
                wrap(laplace),
                laplace_sd(scale),
            ),
            Case(
                "OpenDP",
                "make_gaussian(vector_domain(atom_domain(T='i64')), l2_distance(T='i64'), "
                "scale=sigma)(zeros)",
                "gaussian",
                scale,
                draws,
                wrap(gaussian),
                gaussian_sd(scale),
            ),
        ]
    identity = dp.t.make_identity(*l1_space)
    cases.append(
        Case(
            "OpenDP",
            "make_identity(...)(zeros): conversion only, no noise",
            "overhead",
            0,
            draws,
            wrap(identity),
            None,
        )
    )
    return cases


def diffprivlib_cases(draws: int) -> list[Case]:
    from diffprivlib.mechanisms import Geometric

    cases = []
    for scale in SCALES:
        mech = Geometric(epsilon=1.0 / scale, sensitivity=1)

        def run(mech: Geometric = mech) -> np.ndarray:
            return np.fromiter((mech.randomise(0) for _ in range(draws)), np.int64, draws)

        cases.append(
            Case(
                "diffprivlib",
                "Geometric(epsilon=1/scale, sensitivity=1).randomise(0), once per draw",
                "laplace",
                scale,
                draws,
                run,
                laplace_sd(scale),
            )
        )
    return cases


def load_peer(module: str, build: Callable[[int], list[Case]], draws: int) -> list[Case] | Skipped:
    """Build a peer's cases, or explain why the peer is skipped."""
    name = {"opendp": "OpenDP", "diffprivlib": "diffprivlib"}[module]
    try:
        return build(draws)
    except ImportError as exc:
        missing = isinstance(exc, ModuleNotFoundError) and (exc.name or "").split(".")[0] == module
        if missing:
            reason = f"{module} is not installed"
            print(
                f"SKIPPING {name}: {reason}. To install the peers, {INSTALL_HINT}.", file=sys.stderr
            )
            return Skipped(name, reason)
        # Installed but broken, e.g. diffprivlib 0.6.6 against scikit-learn >= 1.9, whose
        # sklearn.tree._tree no longer exports DOUBLE.
        reason = f"{module} failed to import ({type(exc).__name__}: {exc})"
        hint = ""
        if module == "diffprivlib" and "sklearn" in str(exc):
            hint = " (diffprivlib 0.6.6 needs scikit-learn < 1.9: pip install 'scikit-learn<1.9')"
        print(f"SKIPPING {name}: {reason}{hint}.", file=sys.stderr)
        return Skipped(name, reason + hint)


# --------------------------------------------------------------------------------------------
# Measuring


def sanity_problems(case: Case, sample: Any) -> list[str]:
    if case.expected_sd is None:
        return []
    a = np.asarray(sample)
    if a.shape != (case.draws,):
        return [f"shape {a.shape}, expected ({case.draws},)"]
    if not np.issubdtype(a.dtype, np.integer):
        return [f"dtype {a.dtype}, expected an integer dtype"]
    mean = float(np.mean(a, dtype=np.float64))
    sd = float(np.std(a, dtype=np.float64))
    problems = []
    mean_tol = MEAN_TOL_SE * case.expected_sd / math.sqrt(case.draws)
    if not abs(mean) <= mean_tol:
        problems.append(f"mean {mean:.4g} is not within {mean_tol:.3g} of 0")
    if not abs(sd / case.expected_sd - 1.0) <= SD_REL_TOL:
        problems.append(
            f"std {sd:.5g} is not within {SD_REL_TOL:.0%} of the expected {case.expected_sd:.5g}"
        )
    return problems


def time_once(case: Case) -> tuple[float, Any]:
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter()
        out = case.run()
        elapsed = time.perf_counter() - start
    finally:
        if gc_was_enabled:
            gc.enable()
    return elapsed, out


def measure(cases: list[Case], repeats: int) -> None:
    print(f"warm-up and output check of {len(cases)} cases ...", file=sys.stderr)
    failures = []
    for case in cases:
        _, out = time_once(case)
        for problem in sanity_problems(case, out):
            failures.append(f"{case.library} {case.family} scale {case.scale}: {problem}")
    if failures:
        print("Output check FAILED (nothing was written):", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        sys.exit(1)
    for rnd in range(1, repeats + 1):
        start = time.perf_counter()
        for case in cases:
            elapsed, _ = time_once(case)
            case.times.append(elapsed)
        print(f"round {rnd}/{repeats}: {time.perf_counter() - start:.1f} s", file=sys.stderr)


# --------------------------------------------------------------------------------------------
# Reporting


def fmt_rate(rate: float) -> str:
    return f"{rate:,.0f}"


def fmt_ratio(ratio: float) -> str:
    return f"{ratio:.3g}x"


def scale_label(scale: int) -> str:
    exponent = round(math.log10(scale))
    return f"10^{exponent}" if 10**exponent == scale and exponent > 1 else str(scale)


def find(cases: list[Case], library: str, family: str, scale: int) -> Case | None:
    for case in cases:
        if case.library == library and case.family == family and case.scale == scale:
            return case
    return None


def throughput_table(cases: list[Case], family: str, skipped: list[Skipped]) -> list[str]:
    param = "sigma" if family == "gaussian" else "scale"
    head = "| library | call | draws per timing |"
    rule = "|---|---|---:|"
    for scale in SCALES:
        head += f" {param} {scale_label(scale)} (samples/s) |"
        rule += "---:|"
    lines = [head, rule]
    libraries = list(dict.fromkeys(c.library for c in cases if c.family == family))
    for library in libraries:
        row_cases = [find(cases, library, family, s) for s in SCALES]
        first = next(c for c in row_cases if c is not None)
        row = f"| {library} | `{first.call}` | {first.draws:,} |"
        for case in row_cases:
            row += f" {fmt_rate(case.rate)} |" if case else " n/a |"
        lines.append(row)
    for skip in skipped:
        cells = [skip.library, f"skipped: {skip.reason}", "", *["n/a"] * len(SCALES)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def ratio_rows(cases: list[Case]) -> tuple[list[str], list[str]]:
    """Markdown rows of the Laplace ratios, and one verdict line per target."""
    lines = [
        "| dpstream call | scale | dpstream / OpenDP | "
        f">= {TARGET_VS_OPENDP:g}x? | dpstream / numpy | >= {TARGET_VS_NUMPY:g}x? |",
        "|---|---:|---:|---|---:|---|",
    ]
    verdicts: dict[tuple[str, str], list[bool | None]] = {}
    for variant in ("dpstream", "dpstream (rng=None)"):
        for scale in SCALES:
            ours = find(cases, variant, "laplace", scale)
            if ours is None:
                continue
            cells = []
            for peer, target in (("OpenDP", TARGET_VS_OPENDP), ("numpy", TARGET_VS_NUMPY)):
                theirs = find(cases, peer, "laplace", scale)
                met: bool | None
                if theirs is None:
                    cells += ["not measured", "not measured"]
                    met = None
                else:
                    ratio = ours.rate / theirs.rate
                    met = ratio >= target
                    cells += [fmt_ratio(ratio), "met" if met else "**NOT met**"]
                verdicts.setdefault((variant, peer), []).append(met)
            lines.append(f"| {variant} | {scale_label(scale)} | " + " | ".join(cells) + " |")
    summary = []
    for (variant, peer), mets in verdicts.items():
        target = TARGET_VS_OPENDP if peer == "OpenDP" else TARGET_VS_NUMPY
        if any(m is None for m in mets):
            verdict = "not measured (peer skipped)"
        elif all(mets):
            verdict = "MET at both scales"
        elif any(mets):
            verdict = "NOT MET (met at one scale only)"
        else:
            verdict = "NOT MET at either scale"
        summary.append(f"- {variant} >= {target:g}x {peer}: {verdict}")
    return lines, summary


def gaussian_ratio_lines(cases: list[Case]) -> list[str]:
    lines = []
    for scale in SCALES:
        ours = find(cases, "dpstream", "gaussian", scale)
        theirs = find(cases, "OpenDP", "gaussian", scale)
        if ours and theirs:
            lines.append(
                f"- sigma {scale_label(scale)}: dpstream / OpenDP = "
                f"{fmt_ratio(ours.rate / theirs.rate)}"
            )
    return lines


def render(
    cases: list[Case], skipped: list[Skipped], args: argparse.Namespace, command: str
) -> str:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [
        SECTION_TITLE,
        "",
        "Written by `benches/bench_noise.py`. Samples per second, best of "
        f"{args.repeats} timed round(s) after a warm-up, each round timing every case in turn; "
        "every case's output was checked "
        f"(mean within {MEAN_TOL_SE:g} standard errors of 0, std within {SD_REL_TOL:.0%} of the "
        "distribution's) before timing. dpstream and numpy are timed on "
        f"{DRAWS:,} draws per call; OpenDP and diffprivlib, being much slower, on "
        f"{args.peer_draws:,}.",
        "",
        "### Run",
        "",
        f"- Date: {now}",
        machine_line(),
        *version_lines(
            f"opendp {version('opendp')}, diffprivlib {version('diffprivlib')} "
            f"(scikit-learn {version('scikit-learn')})"
        ),
        f"- Rerun (from the repository root): `{command}` (or `make bench`)",
        "",
        "### Discrete Laplace, P(z) ~ exp(-|z| / scale)",
        "",
        *throughput_table(cases, "laplace", skipped),
        "",
        "### Ratios and targets",
        "",
    ]
    ratio_lines, summary = ratio_rows(cases)
    lines += [*ratio_lines, "", *summary, ""]
    lines += [
        "### Discrete Gaussian, P(z) ~ exp(-z^2 / (2 sigma^2))",
        "",
        *throughput_table(cases, "gaussian", [s for s in skipped if s.library == "OpenDP"]),
        "",
        *gaussian_ratio_lines(cases),
    ]
    notes = []
    overhead = find(cases, "OpenDP", "overhead", 0)
    opendp_lap = find(cases, "OpenDP", "laplace", SCALES[0])
    if overhead and opendp_lap:
        share = opendp_lap.rate / overhead.rate
        notes.append(
            "- OpenDP's Python <-> Rust conversion alone (`make_identity` on the same int64 "
            f"array) runs at {fmt_rate(overhead.rate)} samples/s, i.e. {share:.1%} of its "
            f"Laplace time at scale {scale_label(SCALES[0])}: OpenDP's rate is its sampler's, "
            "not its FFI's."
        )
    notes += [
        "- numpy's geometric difference has the right distribution only up to floating-point "
        "error and draws from PCG64, which is not cryptographically secure; diffprivlib's "
        "geometric mechanism is computed in floating point too. dpstream and OpenDP are exact.",
        "- `rng=None` seeds a fresh ChaCha12 generator from the OS on every call; that cost "
        "is included.",
    ]
    lines += ["", "### Notes", "", *notes, ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--repeats", type=int, default=5, help="timed rounds; the best counts (default 5)"
    )
    parser.add_argument(
        "--peer-draws",
        type=int,
        default=10**5,
        help="draws per call for the slow peers, OpenDP and diffprivlib (default 100000)",
    )
    parser.add_argument(
        "--no-write", action="store_true", help="print the results without touching RESULTS.md"
    )
    args = parser.parse_args()
    if args.repeats < 1 or args.peer_draws < 1000:
        parser.error("--repeats must be >= 1 and --peer-draws >= 1000")
    command = shlex.join([".venv/bin/python", "benches/bench_noise.py", *sys.argv[1:]])

    cases = dpstream_cases() + numpy_cases()
    skipped = []
    for module, build in (("opendp", opendp_cases), ("diffprivlib", diffprivlib_cases)):
        peer = load_peer(module, build, args.peer_draws)
        if isinstance(peer, Skipped):
            skipped.append(peer)
        else:
            cases += peer

    measure(cases, args.repeats)
    section = render(cases, skipped, args, command)
    print(section)
    if not args.no_write:
        write_section(section, SECTION_TITLE, RESULTS_PATH)
        print(f"wrote the section '{SECTION_TITLE[3:]}' of {RESULTS_PATH}", file=sys.stderr)


if __name__ == "__main__":
    main()

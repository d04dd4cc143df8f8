"""Which tails of ``D`` the sharp online audits count (issue 28).

The sharp audits (``tests/audit/test_audit_online_sharp.py``) reduce each release to
``D = count(A) − count(B)`` (``tests/audit/online_setups.py``) and count two tails,
``{D >= upper}`` and ``{D <= lower}``. This script chose them: it runs a setup's mechanism
on both neighbours with seeds the tests do not use, and prints, for every tail, the counts,
the observed log ratio and the Clopper–Pearson lower bound that many audited runs would
give (α = 1e-6, Bonferroni over the four comparisons an audit of two tails makes). The
tests then use the tails with the best bound on the release build.

Rerun (from the repository root): ``.venv/bin/python research/diag_audit_tails.py epochs``
(about 20 s on an idle core), ``... paper --runs 8000`` (about a minute) and ``... privhp``
(``OnlineSynthesizer.for_memory``; about 30 s), ``... paper-threshold --runs 5000``
(``method="paper"`` with the replaced step deciding two threshold crossings, the audit of
``make audit-long``; about 2 minutes on a loaded machine). With the
planted-bugs extension on ``PYTHONPATH`` (``make test-planted`` builds it into
``build/planted``), ``--planted 2`` shows the tails under the planted bug.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from audit.online_setups import epochs_setup, paper_setup, paper_threshold_setup, privhp_setup
from dpstream import Rng, _core
from dpstream.audit import clopper_pearson

SETUPS = {
    "epochs": epochs_setup,
    "paper": paper_setup,
    "paper-threshold": paper_threshold_setup,
    "privhp": privhp_setup,
}
ALPHA = 1e-6


def tails(da: np.ndarray, db: np.ndarray, cuts: range) -> list[tuple[str, int, int, float, float]]:
    """``(tail, count in its favoured stream, count in the other, observed log ratio, bound)``
    for ``{D >= c}`` (favours ``a``) and ``{D <= -c}`` (favours ``b``)."""
    n = da.size
    level = ALPHA / 4
    rows = []
    for c in cuts:
        for name, k_num, k_den in (
            (f"D >= {c}", int(np.sum(da >= c)), int(np.sum(db >= c))),
            (f"D <= {-c}", int(np.sum(db <= -c)), int(np.sum(da <= -c))),
        ):
            lower, _ = clopper_pearson(k_num, n, level)
            _, upper = clopper_pearson(k_den, n, level)
            est = float(np.log(k_num / k_den)) if k_num and k_den else float("nan")
            bound = float(np.log(lower / upper)) if lower > 0 else float("-inf")
            rows.append((name, k_num, k_den, est, bound))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("method", choices=sorted(SETUPS))
    parser.add_argument("--runs", type=int, default=30_000, help="runs per neighbour")
    parser.add_argument("--max-cut", type=int, default=8)
    parser.add_argument("--planted", type=int, default=1, help="planted ε factor (planted build)")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.max_cut < 1 or args.planted < 1:
        parser.error("--runs, --max-cut and --planted must be positive")
    hook = getattr(_core, "_planted_set_epsilon_factor", None)
    if args.planted != 1 and hook is None:
        parser.error("--planted needs the planted-bugs extension (make test-planted)")
    setup = SETUPS[args.method]()
    start = time.perf_counter()
    if hook is not None:
        hook(args.planted)
    try:
        da = setup.mechanism(setup.neighbours[0], Rng(seed=b"tails-a".ljust(32, b".")), args.runs)
        db = setup.mechanism(setup.neighbours[1], Rng(seed=b"tails-b".ljust(32, b".")), args.runs)
    finally:
        if hook is not None:
            hook(1)
    seconds = time.perf_counter() - start
    print(f"## {setup.name}: pair loss {float(setup.loss):.4f}, planted factor {args.planted}")
    print(f"{args.runs} runs per neighbour in {seconds:.1f} s; D undefined in ", end="")
    print(f"{np.mean(np.isnan(da)):.2%} / {np.mean(np.isnan(db)):.2%} of them\n")
    print("| tail | favoured | other | log ratio | lower bound | bound / loss |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, k_num, k_den, est, bound in tails(da, db, range(1, args.max_cut + 1)):
        ratio = bound / float(setup.loss)
        print(f"| {name} | {k_num} | {k_den} | {est:.3f} | {bound:.3f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()

"""How much of the ``for_memory`` audit's shortfall comes from count-min collisions of A and B.

The sharp audit of ``OnlineSynthesizer.for_memory`` (``tests/audit/online_setups.py``,
``privhp_setup``) claims the pair loss ``2σ_8 ≈ 1.172``: the replaced step moves one point
between the level-8 count-min buckets of the sibling cells ``A`` and ``B``. The hash keys
are drawn at random (public, independent of the data) for each run, and when ``A`` and
``B`` share their level-8 bucket the step changes nothing: in those runs both streams have
the same law. This script reruns the audit's runs (``--seed 2803`` and ``--runs 30000``
are exactly those of ``test_audit_online_sharp.py``) and tells them apart by the public
hash keys: for each run it counts, on a copy of the synthesizer's public template
(``summary_template()``), ``--probe`` points at ``A``'s centre, releases that copy with
noise from a separate generator, and marks the run as a collision when ``B``'s released
count is at least a quarter of ``A``'s and ``B``'s together (``B`` is then a share of
``A``'s bucket; without a collision it is noise around 0). The probe uses no data and
no randomness of the audited runs, so their ``D`` values are the audit's own.

It prints the audit's two tails (``D >= 3``, ``D <= -3``) on all runs and on the runs
without a collision, with the Clopper–Pearson lower bound of the audit (α = 1e-6,
Bonferroni over the four comparisons), and the share of the shortfall ``loss − bound``
that removing the collisions recovers. Conditioning on public hash keys is legitimate
for an audit: for every fixed keys the pair loses at most ``2σ_8``.

Rerun (from the repository root): ``.venv/bin/python research/diag_privhp_collisions.py``
(60 000 synthesizer runs and as many probes: about 5 minutes on an idle core).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from audit.online_setups import (
    PRIVHP_A,
    PRIVHP_B,
    PRIVHP_EPOCH1,
    centre,
    privhp_setup,
    privhp_synthesizer,
    released_count,
)
from dpstream import OnlineSynthesizer, Rng
from dpstream.audit import clopper_pearson
from dpstream.audit.runner import run_rng as audit_rng  # the audit's per-batch generators

ALPHA = 1e-6
TAILS = (3, -3)  # the audit's


def collided(synth: OnlineSynthesizer, probe: int, rng: Rng) -> bool:
    """Whether ``A`` and ``B`` share their level-8 bucket under ``synth``'s public hash
    keys: ``probe`` points at ``A`` counted on a copy of its template and released."""
    template = synth.summary_template()
    template.update(np.repeat(centre(PRIVHP_A)[None], probe, axis=0))
    cells = template.release(rng=rng).cells()
    a, b = released_count(*cells, PRIVHP_A), released_count(*cells, PRIVHP_B)
    return bool(b >= 0.25 * (a + b)) if a + b > 0 else False


def runs(points: np.ndarray, rng: Rng, size: int, probe: int) -> tuple[np.ndarray, np.ndarray]:
    """``D`` of the audit's mechanism (two releases, ``D`` of the second) for ``size``
    runs drawing from ``rng``, and whether each run's keys make ``A`` and ``B`` collide."""
    probe_rng = Rng(seed=b"privhp-collision-probe".ljust(32, b"."))
    d, hit = np.empty(size), np.zeros(size, dtype=bool)
    for i in range(size):
        s = privhp_synthesizer(rng)
        hit[i] = collided(s, probe, probe_rng)
        s.update(points[:PRIVHP_EPOCH1])
        s.cells()
        s.update(points[PRIVHP_EPOCH1:])
        cells = s.cells()
        d[i] = released_count(*cells, PRIVHP_A) - released_count(*cells, PRIVHP_B)
    return d, hit


def bounds(da: np.ndarray, db: np.ndarray) -> list[tuple[str, int, int, float, float]]:
    """``(tail, favoured count, other count, log ratio, lower bound)`` per tail: each
    side's probability out of its own runs."""
    level = ALPHA / 8
    out = []
    for name, (k_num, n_num), (k_den, n_den) in (
        (
            f"D >= {TAILS[0]}",
            (int(np.sum(da >= TAILS[0])), da.size),
            (int(np.sum(db >= TAILS[0])), db.size),
        ),
        (
            f"D <= {TAILS[1]}",
            (int(np.sum(db <= TAILS[1])), db.size),
            (int(np.sum(da <= TAILS[1])), da.size),
        ),
    ):
        lower, _ = clopper_pearson(k_num, n_num, level)
        _, upper = clopper_pearson(k_den, n_den, level)
        ok = k_num and k_den
        est = float(np.log(k_num / n_num) - np.log(k_den / n_den)) if ok else float("nan")
        bound = float(np.log(lower / upper)) if lower > 0 else float("-inf")
        out.append((name, k_num, k_den, est, bound))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=30_000, help="runs per neighbour")
    parser.add_argument("--seed", type=int, default=2803, help="the audit's seed")
    parser.add_argument("--probe", type=int, default=64, help="points of the probe at A")
    args = parser.parse_args(argv)
    if args.runs < 1 or args.probe < 1 or args.seed < 0:
        parser.error("--runs and --probe must be positive, --seed non-negative")
    setup = privhp_setup()
    loss = float(setup.loss)
    start = time.perf_counter()
    (da, ha), (db, hb) = (
        runs(pts, audit_rng(args.seed, side, "audit-batch", 0), args.runs, args.probe)
        for side, pts in zip("ab", setup.neighbours, strict=True)
    )
    seconds = time.perf_counter() - start
    header = (
        f"## {setup.name}: pair loss {loss:.4f}\n{args.runs} runs per neighbour (seed "
        f"{args.seed}) in {seconds:.0f} s; A and B collide in {ha.mean():.2%} / "
        f"{hb.mean():.2%} of them\n\n"
        "| runs | tail | runs a / b | favoured | other | log ratio | bound | bound / loss |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|"
    )
    print(header)
    best = {}
    for label, (xa, xb) in (("all", (da, db)), ("no collision", (da[~ha], db[~hb]))):
        rows = bounds(xa, xb)
        best[label] = max(r[4] for r in rows)
        for name, k_num, k_den, est, bound in rows:
            print(
                f"| {label} | {name} | {xa.size} / {xb.size} | {k_num} | {k_den} | {est:.3f} | "
                f"{bound:.3f} | {bound / loss:.2f} |"
            )
    gap = loss - best["all"]
    share = (best["no collision"] - best["all"]) / gap if gap > 0 else float("nan")
    print(
        f"\nbest bound {best['all']:.3f} on all runs, {best['no collision']:.3f} without "
        f"collisions: {share:.0%} of the shortfall {gap:.3f} is due to the collisions"
    )


if __name__ == "__main__":
    main()

"""The structured tuning stream of the default online synthesizer's depth and block split.

Not one of ``bench_online_compare.py``'s streams: it exists so that constants which act on the
depth of the partition can be chosen away from the benchmark. ``tune_online_epochs.py``'s
stream (3 smooth blobs) hides depth effects, because a few levels already resolve it.

The generator (``structured``): multi-scale clusters in d dimensions, seeds 7000 + seed.

- 6 regions with centres uniform in ``[0.15, 0.85]^d`` and heavy-tailed weights (Pareto 1.2);
- each region holds 150 sub-clusters at ``N(centre, 0.07²)`` with Pareto(1.1) sizes and a
  log-uniform spread between 0.001 and 0.012: many tiny dense clusters of very unequal size;
- 10% of the points uniform on the cube.

Arrival order (``order``): ``"shuffled"`` (stationary), or ``"regions"``, where each region's
points arrive in one contiguous run, regions in random order (a drift, like a file sorted by
region). The tuning score is the pair of orders.

    PYTHONPATH=python .venv/bin/python research/tune_online_structured.py [--seeds 5] [--eps 1]

prints, for R = 100 (and --releases), the final release's range-query error of the default over
the one-release floor's, and the worst default / naive-composition ratio over the evaluated
releases (the benchmark's metrics, from ``bench_online_compare.run_setting``), per order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import bench_online_compare as bench

REGIONS = 6
SUBS = 150
BACKGROUND = 0.1
NAIVE = "naive ε/R (replace)"


def structured(n: int, d: int, seed: int, order: str = "shuffled") -> np.ndarray:
    """``n`` points of the structured tuning stream (see the module docs)."""
    rng = np.random.default_rng(7000 + seed)
    centres = 0.15 + 0.7 * rng.random((REGIONS, d))
    region_w = rng.pareto(1.2, REGIONS) + 1.0
    sub_region = rng.integers(0, REGIONS, REGIONS * SUBS)
    sub_centres = centres[sub_region] + 0.07 * rng.standard_normal((REGIONS * SUBS, d))
    sub_sd = np.exp(rng.uniform(np.log(0.001), np.log(0.012), REGIONS * SUBS))
    sub_w = (rng.pareto(1.1, REGIONS * SUBS) + 1.0) * region_w[sub_region]
    sub = rng.choice(REGIONS * SUBS, n, p=sub_w / sub_w.sum())
    pts = sub_centres[sub] + sub_sd[sub, None] * rng.standard_normal((n, d))
    background = rng.random(n) < BACKGROUND
    pts[background] = rng.random((int(background.sum()), d))
    region = np.where(background, rng.integers(0, REGIONS, n), sub_region[sub])
    if order == "regions":
        rank = rng.permutation(REGIONS)[region]
        pts = pts[np.argsort(rank, kind="stable")]
    elif order != "shuffled":
        raise ValueError(f"order must be 'shuffled' or 'regions', got {order!r}")
    return np.clip(pts, 0.0, 1.0)


def register() -> tuple[str, str]:
    """Add the two orders to ``bench.STREAMS`` (d = 2 and 3) and return their names."""
    names = ("tuning shuffled", "tuning regions")
    for name, order in zip(names, ("shuffled", "regions"), strict=True):
        bench.STREAMS[name] = (
            lambda n, d, seed, order=order: structured(n, d, seed, order),
            (2, 3),
        )
    return names


def score(stream: str, d: int, eps: float, r: int, n: int, seeds: int) -> tuple[float, float]:
    """(final default / floor, worst default / naive over the evaluated releases)."""
    per: dict[str, dict[int, list[float]]] = {}
    for seed in range(seeds):
        for row in bench.run_setting(stream, d, eps, r, n, seed, ("default", NAIVE, "floor")):
            method = str(row["method"])
            if not method.endswith("(time)"):
                release = int(row["release"])  # type: ignore[call-overload]
                per.setdefault(method, {}).setdefault(release, []).append(
                    float(row["range_rel"])  # type: ignore[arg-type]
                )
    mean = {m: {i: float(np.mean(v)) for i, v in at.items()} for m, at in per.items()}
    last = max(mean["default"])
    final = mean["default"][last] / mean["floor"][last]
    worst = max(mean["default"][i] / mean[NAIVE][i] for i in mean["default"])
    return final, worst


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=5)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--dim", type=int, default=2)
    p.add_argument("--eps", default="1", help="comma-separated ε")
    p.add_argument("--releases", default="100", help="comma-separated R")
    p.add_argument("--label", default="")
    args = p.parse_args(argv)
    names = register()
    for eps in (float(e) for e in args.eps.split(",")):
        for r in (int(x) for x in args.releases.split(",")):
            parts = []
            for name in names:
                final, worst = score(name, args.dim, eps, r, args.n, args.seeds)
                parts.append(f"{name}: final/floor {final:.3f}, worst/naive {worst:.3f}")
            print(f"{args.label} d={args.dim} eps={eps:g} R={r} | " + " | ".join(parts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

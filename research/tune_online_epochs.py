"""The tuning stream of the default online synthesizer's two public constants.

``DEPTH_FACTOR`` and ``EXPAND_SDS`` (``rust/core/src/synth/epochs.rs``) were chosen on this
stream, which is not one of ``bench_online_compare.py``'s: 3 anisotropic Gaussian blobs (sd
0.02 × 0.06) over a 20% uniform background, d = 2, ε = 1, n = 60,000, R ∈ {10, 100}, seeds
900-902. The sweep rebuilt the extension with each value (the constants are compile-time) and
ran this script; it prints the mean range-query error (relative to uniform points) of the
default and of the one-release floor, over the evaluated releases, and the log-log slope of each
against t (the seeds' mean error per release). The values tried and the results are in
``research/online_design.md``. Any value keeps the privacy guarantee (both are public).

    .venv/bin/python research/tune_online_epochs.py [label]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import bench_online_compare as bench


def tuning(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(900 + seed)
    centres = 0.2 + 0.6 * rng.random((3, d))
    labels = rng.integers(0, 3, n)
    sd = np.array([0.02, 0.06])[:d]
    pts = centres[labels] + sd * rng.standard_normal((n, d))
    background = rng.random(n) < 0.2
    pts[background] = rng.random((int(background.sum()), d))
    return np.clip(pts, 0.0, 1.0)


def main(label: str = "") -> None:
    bench.STREAMS["tuning"] = (tuning, (2,))
    out = []
    for r in (10, 100):
        rows = []
        for seed in range(3):
            rows += bench.run_setting("tuning", 2, 1.0, r, 60_000, seed, ("default", "floor"))
        per: dict[str, dict[int, list[float]]] = {}
        for row in rows:
            if not str(row["method"]).endswith("(time)"):
                at = per.setdefault(str(row["method"]), {})
                at.setdefault(int(row["t"]), []).append(float(row["range_rel"]))  # type: ignore[call-overload, arg-type]
        summary = []
        for method in ("default", "floor"):
            ts = sorted(per[method])
            errs = [float(np.mean(per[method][t])) for t in ts]
            summary.append(f"{method} {np.mean(errs):.4f} (slope {bench.slope(ts, errs):.2f})")
        out.append(f"R={r} " + " ".join(summary))
    print(label, " | ".join(out))


if __name__ == "__main__":
    main(" ".join(sys.argv[1:]))

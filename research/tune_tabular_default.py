"""Tuning study of the tabular default (``Adaptive``): variants of its ε split and growth on
the four TUNING tables of ``benches/_tables.py`` (weather, diamonds, randhie, cps1988; some
with ``--tables=``), never on the reported ones. Final mean 2-way and 1-way TV, ε = 1, seeds
0 and 1, natural and shuffled, R ∈ {5, 12, 50}; MST ε/R and independent 1-way marginals
alongside. Findings: ``research/tabular_default.md``.

    .venv/bin/python research/tune_tabular_default.py current,growth1.5,more-one-way
    .venv/bin/python research/tune_tabular_default.py fresh-half --no-alternatives
    .venv/bin/python research/tune_tabular_default.py pooled-unmerge --no-alternatives
    .venv/bin/python research/tune_tabular_default.py extra-r2,current --no-alternatives \
        --seeds=0,1,2,3

    .venv/bin/python research/tune_tabular_default.py before,current,fine-off,tp-off \
        --no-alternatives --seeds=0,1,2,3,4,5,6,7

The ``extra-*`` variants set the split's ``extra`` share and the constants of
:mod:`dpstream.tabular.epochs` named in ``CONSTANTS``; "current" is the default (extra
pairs, the tree penalty and the open epoch's fine split), "before" the default without the
last two. Variants older than "before" ran on the default of their time (no penalty, no
fine split: add both constants at 0 to rerun them as measured).
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import sys
import types
from fractions import Fraction
from multiprocessing import Pool
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import _alternatives as alt
import _tables
from dpstream import Rng
from dpstream.tabular import Adaptive, ModelOptions, TabularStream, epoch_split, epochs, tv_errors
from dpstream.tabular.epochs import EpochMechanism
from dpstream.tabular.release import Part, ReleasePlan


def _split(shares: str) -> epoch_split.Split:
    """A variant's ε split from its shares ``"fresh settle select tree fresh_tree"``
    (fractions); ``size`` is 1/40 in every variant."""
    fresh, settle, select, tree, fresh_tree, *extra = (Fraction(x) for x in shares.split())
    return epoch_split.Split(
        fresh, settle, select, tree, fresh_tree, size=Fraction(1, 40), extra=sum(extra, Fraction(0))
    )


#: ``name: (growth, split)``.
VARIANTS = {
    "current": (2.0, epoch_split.SPLIT),
    "no-extra": (2.0, _split("1/10 1/8 1/8 3/8 1/4")),
    "growth1.5": (1.5, epoch_split.SPLIT),
    "more-one-way": (2.0, _split("1/8 1/4 1/10 3/10 1/5")),
    "half-one-way": (2.0, _split("1/4 1/4 1/10 1/4 1/8")),
    "fresh-half": (2.0, _split("1/2 0 1/8 1/4 1/10")),
    "fresh-3/8": (2.0, _split("3/8 0 1/8 3/8 1/10")),
    "pooled-unmerge": (2.0, epoch_split.SPLIT),
    "extra-tree": (2.0, _split("1/10 1/8 1/8 1/4 1/4 1/8")),
    "extra-fresh": (2.0, _split("1/10 1/8 1/8 3/8 1/8 1/8")),
    "extra-big": (2.0, _split("1/10 1/8 1/8 1/4 1/8 1/4")),
    "extra-tree-p2": (2.0, _split("1/10 1/8 1/8 1/4 1/4 1/8")),
    "extra-tree-fresh": (2.0, _split("1/10 1/8 1/8 1/4 1/4 1/8")),
    "extra-r2": (2.0, _split("1/10 1/8 1/8 1/4 1/4 1/8")),
    "extra-r5": (2.0, _split("1/10 1/8 1/8 1/4 1/4 1/8")),
    "extra-big-r5": (2.0, _split("1/10 1/8 1/8 1/4 1/8 1/4")),
    "extra-sel-half": (2.0, _split("1/10 1/8 1/8 1/4 1/4 1/8")),
    "shrink-open-ones": (2.0, epoch_split.SPLIT),
    "project-unmerge-before": (2.0, epoch_split.SPLIT),
    "shrink-all-before": (2.0, epoch_split.SPLIT),
    "before": (2.0, epoch_split.SPLIT),
    "fine-off": (2.0, epoch_split.SPLIT),
    "tp-off": (2.0, epoch_split.SPLIT),
    "tp50": (2.0, epoch_split.SPLIT),
    "fine-w05": (2.0, epoch_split.SPLIT),
    "fine-w025": (2.0, epoch_split.SPLIT),
    "fit-before": (2.0, epoch_split.SPLIT),
    "fit-tol1e-3": (2.0, epoch_split.SPLIT),
    "fit-tol1e-2": (2.0, epoch_split.SPLIT),
}
#: module constants of ``dpstream.tabular.epochs`` a variant sets: ``name: {constant: value}``.
CONSTANTS = {
    "extra-tree": {"EXTRA_ROUNDS": 3},
    "extra-fresh": {"EXTRA_ROUNDS": 3},
    "extra-big": {"EXTRA_ROUNDS": 3},
    "extra-tree-p2": {"EXTRA_ROUNDS": 3, "EXTRA_PENALTY": 2.0},
    "extra-tree-fresh": {"EXTRA_ROUNDS": 3},
    "extra-r2": {"EXTRA_ROUNDS": 2},
    "extra-r5": {"EXTRA_ROUNDS": 5},
    "extra-big-r5": {"EXTRA_ROUNDS": 5},
    "extra-sel-half": {"EXTRA_ROUNDS": 3, "EXTRA_SELECT": Fraction(1, 2)},
    # the tree penalty and the fine split off: the default before them (0cca919)
    "before": {"TREE_PENALTY": 0.0, "FINE_WEIGHT": 0.0},
    "project-unmerge-before": {"TREE_PENALTY": 0.0, "FINE_WEIGHT": 0.0},
    "shrink-all-before": {"TREE_PENALTY": 0.0, "FINE_WEIGHT": 0.0},
    "fine-off": {"FINE_WEIGHT": 0.0},
    "tp-off": {"TREE_PENALTY": 0.0},
    "tp50": {"TREE_PENALTY": 0.5},
    "fine-w05": {"FINE_WEIGHT": 0.5},
    "fine-w025": {"FINE_WEIGHT": 0.25},
    # every fit to a fixed count of propagations (100 cold, 30 or 60 warm; 9147e0f)
    "fit-before": {"FIT_TOL": None, "OPEN_ITERS": 30, "EXTRA_ITERS": 60},
    "fit-tol1e-3": {"FIT_TOL": 1e-3},
    "fit-tol1e-2": {"FIT_TOL": 1e-2},
}
#: The model's ``iters`` (cap of a cold fit) of a variant, if not the default.
ITERS = {"fit-before": 100}
_DEFAULTS = {n: getattr(epochs, n) for v in CONSTANTS.values() for n in v}


def _project(y: np.ndarray) -> np.ndarray:
    """The nearest (ℓ2) non-negative vector with the same sum (bisection on the shift)."""
    total = max(float(y.sum()), 0.0)
    lo, hi = float(y.min()) - total, float(y.max())
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if np.clip(y - mid, 0, None).sum() > total else (lo, mid)
    return np.clip(y - hi, 0, None)


def _pooled_release_plan(self: EpochMechanism, rng: np.random.Generator, method: str = "round"):
    """Variant "pooled-unmerge": a merged code is drawn back to a category with the 1-way
    sums of every epoch (closed and open) added up and projected, instead of its own
    epoch's (post-processing; same ε)."""
    if self.key is None:
        self.key = int(rng.integers(2**63))
    ones = tuple(
        _project(sum((e.ones[j] for e in self.epochs), np.zeros(s)) + self.ones[j])
        for j, s in enumerate(self.sizes)
    )
    parts, sizes = [], []
    for e in self.epochs:
        if (n := self._rows(e.size, e.rows)) > 0 and e.model is not None:
            parts.append(Part(e.model, tuple(e.maps), ones))
            sizes.append(n)
    if (n := self.open_rows) > 0 and self.open_model is not None:
        parts.append(Part(self.open_model, tuple(self.epochs[-1].maps), ones))
        sizes.append(n)
    return ReleasePlan.mixture(len(self.sizes), parts, sizes, (self.key, self.t), method)


#: Seeds, release counts and ε of each setting (``--seeds=0,1,2,3``, ``--R=200``,
#: ``--eps=1/2`` set them).
SEEDS = (0, 1)
RS = (5, 12, 50)
EPS = Fraction(1)


def _shrunk_release_plan(self: EpochMechanism, rng: np.random.Generator, method: str = "round"):
    """Variant "shrink-open-ones": the open epoch's merged codes are drawn back with its
    fresh 1-way sums shrunk towards the last closed epoch's (scaled to the open epoch's
    size) by inverse variance, the prior's variance its noise plus the drift the fresh sums
    show (post-processing; same ε)."""
    if self.key is None:
        self.key = int(rng.integers(2**63))
    parts, sizes = [], []
    for e in self.epochs:
        if (n := self._rows(e.size, e.rows)) > 0 and e.model is not None:
            parts.append(Part(e.model, tuple(e.maps), tuple(e.ones)))
            sizes.append(n)
    if (n := self.open_rows) > 0 and self.open_model is not None:
        last = self.epochs[-1]
        ratio = self.open_size / max(last.size, 1.0)
        ones = []
        for j, fresh in enumerate(self.ones):
            prior = np.clip(last.ones[j], 0, None) * ratio
            var_f = max(self.ones_var[j], 1e-9)
            var_p = ratio * ratio * last.ones_var[j]
            gap = fresh - prior
            tau2 = max(0.0, float(np.mean(gap * gap)) - var_f - var_p)
            w = 1.0 / max(var_p + tau2, 1e-9)
            ones.append((fresh / var_f + prior * w) / (1.0 / var_f + w))
        parts.append(Part(self.open_model, tuple(last.maps), tuple(ones)))
        sizes.append(n)
    return ReleasePlan.mixture(len(self.sizes), parts, sizes, (self.key, self.t), method)


def _projected(maps: tuple[np.ndarray, ...], ones: tuple[np.ndarray, ...]) -> tuple:
    """Each column's released 1-way sums with its merged group projected (``_project``)."""
    out = []
    for m, y in zip(maps, ones, strict=True):
        y = np.asarray(y, dtype=np.float64).copy()
        group = np.flatnonzero(np.bincount(m)[m] > 1)
        if group.size:
            y[group] = _project(y[group])
        out.append(y)
    return tuple(out)


def _projected_release_plan(self: EpochMechanism, rng: np.random.Generator, method: str = "round"):
    """Variant "project-unmerge-before": each part's merged codes are drawn back with its own 1-way
    sums projected onto the non-negative vectors of the same sum inside the merged group,
    instead of clipped at 0 (post-processing; same ε)."""
    plan = EpochMechanism.release_plan(self, rng, method)
    parts = tuple(Part(p.model, p.maps, _projected(p.maps, p.ones)) for p in plan.parts)
    return dataclasses.replace(plan, parts=parts)


def _shrunk(
    own: np.ndarray, var: float, others: list[tuple[np.ndarray, float, float]], size: float
):
    """``own`` (per-cell variance ``var``) shrunk towards the other parts' sums scaled to
    ``size`` (``others``: sums, per-cell variance, size), by inverse variance, the prior's
    variance its noise plus the drift the gap shows."""
    total = sum(n for _, _, n in others)
    if total < 1:
        return own
    r = size / total
    prior = np.clip(sum(o for o, _, _ in others), 0, None) * r
    var_p = r * r * sum(v for _, v, _ in others)
    gap = own - prior
    tau2 = max(0.0, float(np.mean(gap * gap)) - var - var_p)
    w = 1.0 / max(var_p + tau2, 1e-9)
    return (own / max(var, 1e-9) + prior * w) / (1.0 / max(var, 1e-9) + w)


def _shrink_all_release_plan(self: EpochMechanism, rng: np.random.Generator, method: str = "round"):
    """Variant "shrink-all-before": every part's merged codes are drawn back with its 1-way sums
    shrunk towards the other parts' (empirical Bayes, per column; post-processing)."""
    if self.key is None:
        self.key = int(rng.integers(2**63))
    items = [
        (e.ones, e.ones_var, e.size, e.model, e.maps, self._rows(e.size, e.rows))
        for e in self.epochs
    ]
    if self.epochs:
        items.append(
            (
                self.ones,
                self.ones_var,
                self.open_size,
                self.open_model,
                self.epochs[-1].maps,
                self.open_rows,
            )
        )
    parts, sizes = [], []
    for k, (ones, var, size, model, maps, n) in enumerate(items):
        if n <= 0 or model is None:
            continue
        out = []
        for j in range(len(self.sizes)):
            others = [(o[j], v[j], z) for q, (o, v, z, *_rest) in enumerate(items) if q != k]
            out.append(_shrunk(ones[j], var[j], others, size))
        parts.append(Part(model, tuple(maps), tuple(out)))
        sizes.append(n)
    return ReleasePlan.mixture(len(self.sizes), parts, sizes, (self.key, self.t), method)


def run(job: tuple[str, str, int, int, str]) -> tuple[tuple[str, str, int, str], float, float]:
    table, order, r, seed, method = job
    _, domain, _ = _tables.load(table)
    parts = _tables.batches(table, r, order, seed)
    x = np.concatenate(parts)
    if method == "mst":
        synth = alt.mst(x, domain.sizes, EPS / len(parts), Rng(seed=seed))
    elif method == "independent":
        synth = alt.independent(parts, domain, EPS, Rng(seed=seed))
    else:
        growth, shares = VARIANTS[method]
        for name in {n for v in CONSTANTS.values() for n in v}:  # a worker runs many jobs
            setattr(epochs, name, CONSTANTS.get(method, {}).get(name, _DEFAULTS[name]))
        model = ModelOptions(iters=ITERS[method]) if method in ITERS else ModelOptions()
        stream = TabularStream(
            domain, EPS, policy=Adaptive(growth=growth), model=model, rng=Rng(seed=seed)
        )
        stream._epochs.budget = epoch_split.split(stream.epsilon, shares)  # type: ignore[union-attr]
        if method == "pooled-unmerge":
            stream._epochs.release_plan = types.MethodType(_pooled_release_plan, stream._epochs)  # type: ignore[union-attr,method-assign]
        if method == "extra-tree-fresh":  # the open epoch measures the extra pairs too
            stream._epochs._fresh_pairs = types.MethodType(  # type: ignore[union-attr,method-assign]
                lambda self: list(self.epochs[-1].tree) if self.epochs else [], stream._epochs
            )
        if method == "shrink-all-before":
            stream._epochs.release_plan = types.MethodType(_shrink_all_release_plan, stream._epochs)  # type: ignore[union-attr,method-assign]
        if method == "project-unmerge-before":
            stream._epochs.release_plan = types.MethodType(_projected_release_plan, stream._epochs)  # type: ignore[union-attr,method-assign]
        if method == "shrink-open-ones":
            stream._epochs.release_plan = types.MethodType(_shrunk_release_plan, stream._epochs)  # type: ignore[union-attr,method-assign]
        for batch in parts:
            stream.step(batch)
        synth = stream.synthetic_codes()
    err = tv_errors(x, synth, domain)
    return (table, order, len(parts), method), err.mean_2way, err.mean_1way


def main() -> None:
    global SEEDS, RS, EPS
    tables = [n for n, t in _tables.TABLES.items() if t.tuning]
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    for a in sys.argv[1:]:
        if a.startswith("--seeds="):
            SEEDS = tuple(int(x) for x in a.split("=", 1)[1].split(","))
        if a.startswith("--eps="):
            EPS = Fraction(a.split("=", 1)[1])
        if a.startswith("--tables="):
            tables = [t for t in a.split("=", 1)[1].split(",") if _tables.TABLES[t].tuning]
        if a.startswith("--R="):
            RS = tuple(int(x) for x in a.split("=", 1)[1].split(","))
    methods = args[0].split(",") if args else list(VARIANTS)
    if "--no-alternatives" not in sys.argv:
        methods += ["mst", "independent"]
    jobs = list(itertools.product(tables, ("natural", "shuffled"), RS, SEEDS, methods))
    with Pool(2) as pool:
        out = pool.map(run, jobs, chunksize=1)
    two, one = collections.defaultdict(list), collections.defaultdict(list)
    for key, tv2, tv1 in out:
        two[key].append(tv2)
        one[key].append(tv1)
    print("| table | order | R | " + " | ".join(methods) + " |")
    for k in sorted({k[:3] for k in two}):
        cells = [f"{np.mean(two[(*k, m)]):.4f} ({np.mean(one[(*k, m)]):.4f})" for m in methods]
        print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()

"""Where a tabular default's 2-way error is, on one tuning table: the final TV of every pair
(default and independent columns), and the default's mean 2-way TV when its merged codes are
drawn back with the exact 1-way counts of each part's rows (a diagnostic oracle, not a
release). Seeds 0 and 1, ε = 1. Findings: ``research/tabular_default.md``.

    .venv/bin/python research/diag_tabular_pairs.py cps1988 12 shuffled --before
    .venv/bin/python research/diag_tabular_pairs.py cps1988 12 natural

``--before``: the tree penalty and the fine split off (the default before them).
"""

from __future__ import annotations

import itertools
import sys
import types
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benches"))
import _alternatives as alt
import _tables
from dpstream import Rng
from dpstream.tabular import TabularStream, epochs, tv_errors
from dpstream.tabular.epochs import EpochMechanism
from dpstream.tabular.release import Part, ReleasePlan


def _oracle_plan(x: np.ndarray, ends: np.ndarray, sizes: tuple[int, ...]):
    """A release plan whose parts draw merged codes back with their rows' exact counts."""

    def exact(first: int, last: int) -> tuple[np.ndarray, ...]:
        rows = x[ends[first] : ends[last + 1]]
        return tuple(
            np.bincount(rows[:, j], minlength=k).astype(float) for j, k in enumerate(sizes)
        )

    def plan(self: EpochMechanism, rng: np.random.Generator, method: str = "round") -> ReleasePlan:
        parts, n = [], []
        for e in self.epochs:
            parts.append(Part(e.model, tuple(e.maps), exact(e.first, e.last)))
            n.append(self._rows(e.size, e.rows))
        if self.open_model is not None:
            parts.append(
                Part(self.open_model, tuple(self.epochs[-1].maps), exact(self.first, self.t - 1))
            )
            n.append(self.open_rows)
        return ReleasePlan.mixture(len(self.sizes), parts, n, (self.key or 0, self.t), method)

    return plan


def _pair_tv(a: np.ndarray, b: np.ndarray, i: int, j: int, k: tuple[int, ...]) -> float:
    ha = np.bincount(a[:, i] * k[j] + a[:, j], minlength=k[i] * k[j]) / len(a)
    hb = np.bincount(b[:, i] * k[j] + b[:, j], minlength=k[i] * k[j]) / len(b)
    return 0.5 * float(np.abs(ha - hb).sum())


def main() -> None:
    name, r, order = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if "--before" in sys.argv:
        epochs.TREE_PENALTY, epochs.FINE_WEIGHT = 0.0, 0.0
    _, domain, _ = _tables.load(name)
    k = domain.sizes
    pairs: dict[tuple[int, int], list[tuple[float, float]]] = {}
    for seed in (0, 1):
        parts = _tables.batches(name, r, order, seed)
        x = np.concatenate(parts)
        ends = np.concatenate([[0], np.cumsum([len(p) for p in parts])])
        stream = TabularStream(domain, 1.0, rng=Rng(seed=seed))
        for batch in parts:
            stream.step(batch)
        synth = np.asarray(stream.synthetic_codes(), dtype=np.int64)
        ind = alt.independent(parts, domain, 1.0, Rng(seed=seed))
        for i, j in itertools.combinations(range(len(k)), 2):
            pairs.setdefault((i, j), []).append(
                (_pair_tv(x, synth, i, j, k), _pair_tv(x, ind, i, j, k))
            )
        mech = stream._epochs
        assert mech is not None
        trees = [e.tree for e in mech.epochs]
        mech.release_plan = types.MethodType(_oracle_plan(x, ends, k), mech)  # type: ignore[method-assign]
        oracle = tv_errors(x, mech.release_plan(np.random.default_rng(0)).sample(), domain)
        base = tv_errors(x, synth, domain)
        print(f"seed {seed}: mean 2-way TV {base.mean_2way:.4f}, exact split", end=" ")
        print(f"{oracle.mean_2way:.4f}; trees {trees}")
    print("| pair | default | independent |\n|---|---:|---:|")
    for (i, j), v in sorted(pairs.items(), key=lambda kv: -np.mean([a for a, _ in kv[1]])):
        a, b = np.mean(v, axis=0)
        print(f"| {domain.names[i]}-{domain.names[j]} | {a:.3f} | {b:.3f} |")


if __name__ == "__main__":
    main()

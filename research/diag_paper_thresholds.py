"""Where ``method="paper"``'s sparse-counter thresholds can be crossed inside a time level.

The audit of issue 28 needs a stream whose replaced step crosses an Algorithm-2 threshold
of the online synthesizer (He, Vershynin, Zhu, Algorithm 1 with the counters of
:class:`dpstream.counters.InhomogeneousSparseCounter`). This script lists, for a dimension
``d``, each ε given and a horizon ``T``, every non-empty time level ``r`` that starts by
``T``:

* the level's steps ``t_r ≤ t < t_{r+1}`` (``t_r = ⌈2^r/ε⌉``) and their number ``H``;
* ``ε_r = online_epsilon(ε, d, r, r)``, the level's ε for the depth-``r`` cells (the
  deepest at level ``r``, and the largest ``ε_{j,r}``, hence the smallest threshold);
* ``T_0``, the public threshold of the level's Algorithm-2 counter (``ε_r/2``, horizon
  ``H``), as the library computes it (``SparseCounter(ε_r/2, H).threshold``);
* ``one``: a single cell can cross it without noise inside the level, ``T_0 ≤ H − 2``
  (the last test of the level counts the first ``H − 1`` steps, and a crossing needs
  ``T_0 + 1`` points);
* ``pair``: two sibling cells ``A`` and ``B`` can both sit at their thresholds, the
  replaced step (in ``A`` in one stream, ``B`` in the other) deciding each crossing:
  ``T_0`` points in each, the replaced step and the tests, ``2 T_0 + 2 ≤ H``;
* ``loss``: the analytical privacy loss of that pair for one release inside the level,
  ``(ε_r/2)(1 + 1/L)`` with ``L = ⌈log2(H + 1)⌉`` (``tests/audit/online_setups.py``,
  ``paper_threshold_setup``): each counter's partition ``ε_r/4`` and one p-sum of its
  tree, at scale ``4L/ε_r``.

The last lines name, for each ε, the first level with ``one`` and with ``pair``.

Rerun (from the repository root): ``.venv/bin/python research/diag_paper_thresholds.py
--dim 2 --epsilon 4 8 16 32 64 128 256 --steps 4096`` (a few seconds).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from dpstream.counters import SparseCounter, online_epsilon


@dataclass(frozen=True)
class Level:
    """One time level of the paper's synthesizer and its depth-``r`` threshold."""

    level: int
    start: int  # t_r
    steps: int  # H = t_{r+1} - t_r
    eps_r: Fraction  # online_epsilon(ε, d, r, r)
    threshold: int  # T_0 of the level's Algorithm-2 counter (ε_r/2, horizon H)

    @property
    def one(self) -> bool:
        return self.threshold <= self.steps - 2

    @property
    def pair(self) -> bool:
        return 2 * self.threshold + 2 <= self.steps

    @property
    def tree_levels(self) -> int:
        return math.ceil(math.log2(self.steps + 1))

    @property
    def pair_loss(self) -> float:
        return float(self.eps_r) / 2 * (1 + 1 / self.tree_levels)


def level_start(epsilon: Fraction, r: int) -> int:
    """``t_r = ⌈2^r / ε⌉``."""
    return math.ceil(Fraction(2**r) / epsilon)


def levels(epsilon: Fraction, dim: int, horizon: int) -> Iterator[Level]:
    """The non-empty levels ``r ≥ 1`` with ``t_r ≤ horizon`` (depth ``r`` cells exist)."""
    r = 1
    while level_start(epsilon, r) <= horizon:
        start, end = level_start(epsilon, r), level_start(epsilon, r + 1)
        if end > start:
            eps_r = online_epsilon(epsilon, dim, r, r)
            threshold = SparseCounter(eps_r / 2, end - start).threshold
            yield Level(r, start, end - start, eps_r, threshold)
        r += 1


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dim", type=int, default=2)
    parser.add_argument("--epsilon", type=Fraction, nargs="+", default=[Fraction(64)])
    parser.add_argument("--steps", type=int, default=4096, help="horizon T (levels starting by T)")
    args = parser.parse_args(argv)
    if args.dim < 2:
        parser.error("--dim must be at least 2 (d = 1 cells count from t_0: another schedule)")
    if args.steps < 1 or any(e <= 0 for e in args.epsilon):
        parser.error("--steps and every --epsilon must be positive")
    print(f"## Algorithm-2 thresholds of method='paper', d = {args.dim}, T = {args.steps}\n")
    print("| ε | level r | t_r | H | ε_r | T_0 | one | pair | pair loss |")
    print("|---:|---:|---:|---:|---:|---:|:-:|:-:|---:|")
    first: dict[Fraction, tuple[Level | None, Level | None]] = {}
    for eps in args.epsilon:
        one = pair = None
        for lv in levels(eps, args.dim, args.steps):
            mark = ("yes" if lv.one else "no", "yes" if lv.pair else "no")
            print(
                f"| {eps} | {lv.level} | {lv.start} | {lv.steps} | {float(lv.eps_r):.3f} | "
                f"{lv.threshold} | {mark[0]} | {mark[1]} | {lv.pair_loss:.3f} |"
            )
            one = one or (lv if lv.one else None)
            pair = pair or (lv if lv.pair else None)
        first[eps] = (one, pair)
    print()
    for eps, (one, pair) in first.items():
        words = []
        for name, lv in (("one cell", one), ("a sibling pair", pair)):
            words.append(
                f"{name} from level {lv.level} (t = {lv.start}..{lv.start + lv.steps - 1}, "
                f"T_0 = {lv.threshold})"
                if lv
                else f"{name} never by T"
            )
        print(f"ε = {eps}: thresholds crossed by " + "; ".join(words))


if __name__ == "__main__":
    main()

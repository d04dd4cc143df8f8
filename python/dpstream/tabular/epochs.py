"""The default policy's mechanism: every column on every batch, an MST per epoch.

A record is in exactly one batch, so measurements of different batches compose in
parallel (each batch may spend the whole ε on its own rows). The mechanism is built on
that alone:

* **Every batch, every column.** Each batch's 1-way marginals of all ``d`` columns, its
  row count and the last closed epoch's tree marginals are measured when it arrives (the
  *fresh* shares of ε). No column is ever unmeasured, and no batch's counts are scaled up
  to the table. A column with categories the last epoch merged (which its tree cannot
  tell apart) gets part of the fresh tree share for its 1-way marginal too.
* **Epochs.** Consecutive batches form epochs at public times: the open epoch closes
  after the step at which the released table reaches ``growth`` times its size when the
  epoch opened (the first epoch is the first batch). At its close, an epoch is released as
  an offline MST release of its own rows (McKenna, Miklau and Sheldon 2021): its 1-way
  marginals measured again over all its rows (the *settle* share), each column's rare
  categories merged (those whose released count is below ``KEEP_SD`` standard deviations
  of its noise; MST's compression), a spanning tree of 2-way marginals of the merged
  columns chosen by permute-and-flip (the *select* share; a pair's score counts the noise
  its measurement would add against it, AIM's correction), and the tree's marginals
  measured (the *tree* share). Then AIM-style rounds (McKenna et al. 2022; the *extra*
  share) may add pairs the tree cannot represent: each round picks the pair the fitted
  model gets most wrong beyond the noise its measurement would add, or stops; what a stop
  leaves measures the epoch's 1-way marginals again. Measuring once per epoch, not once
  per batch, keeps the noise of a closed epoch's sums independent of its number of
  batches.
* **Release.** The synthetic table is the mixture of one graphical model per closed epoch
  (fitted to its sums, which cover exactly its rows) and one for the open epoch (its fresh
  sums, with the last closed epoch's tree marginals as a prior whose variance is that
  epoch's noise plus the drift the fresh sums show), each sampled to its own released
  size. Every fit runs until converged (:data:`FIT_TOL`). A table whose distribution
  drifts is followed epoch by epoch.

**Privacy** (add/remove one record, ``Δ = 1``; with ``public_sizes``, one record's values
replaced, ``Δ = 2``, the batch sizes public and exact). A marginal given budget ``ε_m``
gets exact discrete Laplace noise of scale ``Δ/ε_m`` per cell: one record moves one cell
of a marginal by 1 (under replacement, two cells by 1), and the row count by 1 (not
measured under replacement, where it is public). Each batch spends, on its own rows, when
it arrives: ``fresh·ε`` over its ``d`` 1-way marginals (split by the public weights of
:mod:`~dpstream.tabular.epoch_split`), ``size·ε`` on its row count, and ``fresh_tree·ε``
over the last closed epoch's tree marginals on that epoch's merged cells and the 1-way
marginals of the columns with a merged group there (by weights, a group of ``g``
categories counting ``FINE_WEIGHT·g`` cells, added to the column's fresh budget; the first
epoch, which has none, gives this share to its own tree); and when its epoch closes:
``settle·ε`` (the epoch's 1-way marginals, by weights), ``select·ε`` (``c − 1``
permute-and-flip rounds of ``select·ε/(c − 1)``, ``c`` the columns the candidate pairs
touch; a score is the ℓ1 distance of a pair's exact merged 2-way marginal from the product
of released 1-way marginals scaled to a released size, rounded to a public grid, less a
public penalty, ``TREE_PENALTY`` times its merged cells times the noise scale the tree's
budget shared equally over its edges would give: it moves by at most ``Δ``), ``tree·ε``
(the tree's marginals, by the weights of their merged cells) and ``extra·ε``
(``EXTRA_ROUNDS`` rounds of ``extra·ε/EXTRA_ROUNDS``: a quarter to permute-and-flip over
the remaining candidate pairs and a stop option of score 0, a pair's score the ℓ1 distance
of its exact merged 2-way marginal from the marginal of the model fitted to the epoch's
released sums, rounded to the grid, less a public penalty, so it moves by at most ``Δ``;
three quarters to measuring the picked pair; after a stop, or with no candidate left, the
rest over the epoch's 1-way marginals, by weights). The shares sum to 1
(:mod:`~dpstream.tabular.epoch_split`, one place). The epoch boundaries depend on released
values, but every record is in one batch and one epoch whatever they are, so its total
loss is at most ε in every run (adaptive composition with a fixed per-record bound). Every
batch's spend, summed from the noise scales actually used, is kept in
:attr:`EpochMechanism.ledger`; the tests check it equals ε for every batch of a closed
epoch. Public: the domain, the policy, the time, the epoch boundaries (functions of
released sizes), the merges, trees and extra pairs (functions of released values and
outputs of permute-and-flip), and every noisy sum. The sizes, fits and sampling are
post-processing."""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np
import numpy.typing as npt

from dpstream._rng import Rng
from dpstream.noise import discrete_laplace, permute_and_flip
from dpstream.tabular.epoch_split import SPLIT, Split, shared, split
from dpstream.tabular.estimation import Measurement
from dpstream.tabular.merging import compress, merge_one, merge_pair
from dpstream.tabular.model import GraphicalModel, estimate_pgm
from dpstream.tabular.model.junction_tree import junction_tree_size
from dpstream.tabular.release import Part, ReleasePlan

__all__ = ["Epoch", "EpochMechanism", "pair_candidates"]

Clique = tuple[int, ...]
FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]

#: The grid (2^-GRID) the public part of a selection score is rounded to, so that every
#: score is an exact float64 sum and moves by at most the sensitivity.
GRID = 10
#: Belief propagations of a fit at most (``ModelOptions(iters=None)``).
FIT_ITERS = 1000
#: Every fit stops once ten belief propagations lower its loss by at most this fraction
#: (``estimate_pgm``'s ``tol``; ``None``: it spends its whole budget of propagations).
FIT_TOL: float | None = 3e-3
#: At most this many belief propagations of the open epoch's fit at each step (warm-started
#: from the last).
OPEN_ITERS = 300
#: The open epoch's prior (the last closed epoch's tree marginals, scaled to the open
#: epoch's size) counts with this many times the standard deviation of those marginals.
PRIOR_WIDTH = 4.0
#: Rounds of extra pairs after a closed epoch's tree, the share of a round's ε its
#: selection takes, and the junction-tree cells an extra pair may grow the model to.
EXTRA_ROUNDS = 2
EXTRA_SELECT = Fraction(1, 4)
EXTRA_CELLS = 10**5
#: At most this many belief propagations of the fits that score a round (the second
#: warm-started).
EXTRA_ITERS = 300
#: The expected ℓ1 noise of an extra pair's measurement counts this many times against it.
EXTRA_PENALTY = 1.0
#: The expected ℓ1 noise of measuring a pair counts this many times against it when the
#: spanning tree is chosen (AIM's correction: a pair too large to measure well loses).
TREE_PENALTY = 1.0
#: A column's merged group of ``g`` categories counts as a marginal of ``FINE_WEIGHT·g``
#: cells in the split of the fresh tree share (0: the groups get none of it).
FINE_WEIGHT = 1.0


def pair_candidates(workloads: list[Clique]) -> list[Clique]:
    """The pairs of columns a tree may use: every pair inside a workload (sorted)."""
    pairs = {(a, b) for w in workloads for i, a in enumerate(w) for b in w[i + 1 :]}
    return sorted(pairs)


def merged_groups(maps: list[IntArray]) -> list[int]:
    """Per column, how many categories share a merged code (0: none merged)."""
    out = []
    for m in maps:
        count = np.bincount(m)
        out.append(int(count[count > 1].sum()))
    return out


def laplace_variance(scale: Fraction) -> float:
    """Variance of the discrete Laplace distribution ``P(z) ∝ exp(−|z|/scale)``."""
    q = math.exp(-1.0 / float(scale))
    return max(2.0 * q / (1.0 - q) ** 2, 1e-9)


@dataclass
class Epoch:
    """A closed epoch (everything public): its steps, the released size when it opened,
    its merges, its tree, its noisy 1-way and tree sums with per-cell noise variances, its
    exact rows (public only with ``public_sizes``) and released size, and its model."""

    first: int
    last: int
    base: int
    maps: list[IntArray]
    tree: list[Clique]
    ones: list[FloatArray]
    ones_var: list[float]
    sums: list[FloatArray]
    variances: list[float]
    rows: int
    size: float
    seed: int = 0
    model: GraphicalModel | None = None
    #: how many of ``tree``'s pairs (the last ones) are extra pairs, not spanning-tree edges
    extra: int = 0

    @property
    def spanning(self) -> list[Clique]:
        """The spanning tree's pairs (``tree`` without the extra pairs)."""
        return self.tree[: len(self.tree) - self.extra]

    @property
    def msizes(self) -> tuple[int, ...]:
        return tuple(int(m.max()) + 1 for m in self.maps)


class EpochMechanism:
    """The default policy's state (see the module): closed epochs and the open one.

    Args:
        sizes: the domain's column sizes.
        epsilon: ε of the whole stream.
        growth: an epoch closes once the released table reaches ``growth`` times its size
            when the epoch opened (> 1).
        candidates: the pairs of columns a tree may use (sorted pairs).
        public_sizes: the guarantee's relation (see the module).
        rng: the noise generator (the stream sets each step's before the step:
            :mod:`dpstream.tabular.keys`).
        iters: the most belief propagations of a closed epoch's fit and of the open
            epoch's first (every fit stops once converged, :data:`FIT_TOL`; the open
            epoch's warm starts take at most :data:`OPEN_ITERS`, the extra rounds' fits
            :data:`EXTRA_ITERS`).
        shares: the split of ε (:data:`~dpstream.tabular.epoch_split.SPLIT`).

    :meth:`step` takes a batch's exact 1-way histograms (``ones[j]`` for column ``j``),
    its exact 2-way histograms of the candidate pairs (flattened in C order) and its
    exact row count (read only with ``public_sizes``). **Sensitive state**: the open
    epoch's exact counts."""

    def __init__(
        self,
        sizes: tuple[int, ...],
        epsilon: Fraction,
        *,
        growth: float,
        candidates: list[Clique],
        public_sizes: bool,
        rng: Rng,
        iters: int = FIT_ITERS,
        shares: Split = SPLIT,
    ) -> None:
        self.sizes = tuple(sizes)
        self.epsilon = epsilon
        self.growth = float(growth)
        self.candidates = list(candidates)
        self.delta = 2 if public_sizes else 1
        self.public_sizes = bool(public_sizes)
        self.rng = rng
        self.iters = iters
        self.budget = split(epsilon, shares)
        self.epochs: list[Epoch] = []
        self.t = 0
        #: ε each batch has spent, from the noise scales used (public; tests sum it).
        self.ledger: list[Fraction] = []
        #: the seed of the closed epochs' samples (drawn at the first release; public)
        self.key: int | None = None
        self._open_reset(0)

    def _open_reset(self, base: int) -> None:
        d = len(self.sizes)
        self.base = base  # released size when the open epoch opened
        self.first = self.t
        self.pairs: dict[Clique, IntArray] = {}  # exact (sensitive)
        self.exact_ones = [np.zeros(s, dtype=np.int64) for s in self.sizes]  # exact
        self.exact_rows = 0  # exact (public only with public_sizes)
        self.ones = [np.zeros(s) for s in self.sizes]  # fresh noisy sums (public)
        self.ones_var = [0.0] * d
        self.count = np.zeros(1)  # the fresh noisy row counts' sum (public)
        self.count_var = 0.0
        self.open_model: GraphicalModel | None = None
        # fresh sums of the last closed epoch's tree marginals (full domain; public)
        self.open_tree = self._fresh_pairs()
        self.tree_sums = [np.zeros(c) for c in self._open_cells()]
        self.tree_var = [0.0] * len(self.open_tree)

    def _fresh_pairs(self) -> list[Clique]:
        """The pairs each batch of the open epoch measures: the last closed epoch's
        spanning tree (its extra pairs are in the open epoch's prior only)."""
        return list(self.epochs[-1].spanning) if self.epochs else []

    def _open_cells(self) -> list[int]:
        """The cells of each fresh tree marginal (on the last closed epoch's merges)."""
        if not self.epochs:
            return []
        ms = self.epochs[-1].msizes
        return [ms[i] * ms[j] for i, j in self.open_tree]

    def _laplace(
        self, exact: npt.NDArray[Any], eps: Fraction
    ) -> tuple[npt.NDArray[Any], float, Fraction]:
        """``exact`` plus discrete Laplace noise of scale ``Δ/eps`` per cell; the noise's
        variance per cell, and the ε it spends (``Δ/scale``, for the ledger)."""
        scale = Fraction(self.delta) / eps
        noisy = exact + discrete_laplace(scale, np.size(exact), rng=self.rng)
        return noisy, laplace_variance(scale), self.delta / scale

    # ------------------------------------------------------------------ public values

    @property
    def size(self) -> int:
        """The released table size: the closed epochs' released sizes and the open one's."""
        return sum(self._rows(e.size, e.rows) for e in self.epochs) + self.open_rows

    @property
    def open_size(self) -> float:
        if self.public_sizes:
            return float(self.exact_rows)
        if self.t == self.first:
            return 0.0
        return max(_total([*self.ones, self.count], [*self.ones_var, self.count_var]), 0.0)

    @property
    def open_rows(self) -> int:
        return self._rows(self.open_size, self.exact_rows)

    def _rows(self, size: float, exact: int) -> int:
        return exact if self.public_sizes else max(0, round(size))

    # ------------------------------------------------------------------ the step

    def step(self, ones: list[IntArray], pairs: dict[Clique, IntArray], rows: int) -> None:
        """Measure one batch (fresh 1-way marginals); close the epoch if it is due."""
        spent = Fraction(0)
        cells = list(self.sizes)
        tree_eps, fine_eps = self._fresh_split()
        for j, eps in enumerate(shared(self.budget.fresh, cells)):
            noisy, var, cost = self._laplace(ones[j], eps + fine_eps.get(j, 0))
            self.ones[j] = self.ones[j] + noisy
            self.ones_var[j] += var
            spent += cost
        if self.budget.fresh_tree > 0 and self.open_tree:
            maps = self.epochs[-1].maps
            for k, eps in enumerate(tree_eps):
                i, j = c = self.open_tree[k]
                exact = merge_pair(pairs[c], (self.sizes[i], self.sizes[j]), (maps[i], maps[j]))
                noisy, var, cost = self._laplace(exact, eps)
                self.tree_sums[k] = self.tree_sums[k] + noisy
                self.tree_var[k] += var
                spent += cost
        if self.budget.size > 0 and not self.public_sizes:
            noisy, var, cost = self._laplace(np.array([int(rows)]), self.budget.size)
            self.count = self.count + noisy
            self.count_var += var
            spent += cost
        for j in range(len(self.sizes)):
            self.exact_ones[j] = self.exact_ones[j] + ones[j]
        for c in self.candidates:
            p = np.asarray(pairs[c], dtype=np.int64)
            self.pairs[c] = self.pairs[c] + p if c in self.pairs else p.copy()
        self.exact_rows += int(rows)
        self.ledger.append(spent)
        self.t += 1
        if self.base == 0 or self.size >= self.growth * self.base:
            self._close()
        else:
            self._fit_open()

    def _close(self) -> None:
        """Release the open epoch as an offline MST release of its rows."""
        d = len(self.sizes)
        spent = Fraction(0)
        ones, ones_var = list(self.ones), list(self.ones_var)
        spent += self._remeasure_ones(self._by_weights(self.budget.settle), ones, ones_var)
        maps = [compress(ones[j], ones_var[j]) for j in range(d)]
        counted = ([self.count], [self.count_var]) if self.count_var > 0 else ([], [])
        size = (
            self.exact_rows
            if self.public_sizes
            else max(_total([*ones, *counted[0]], [*ones_var, *counted[1]]), 0.0)
        )
        # the candidates' exact 2-way marginals on merged cells (sensitive)
        merged: dict[Clique, FloatArray] = {
            (i, j): merge_pair(
                self.pairs[(i, j)], (self.sizes[i], self.sizes[j]), (maps[i], maps[j])
            )
            for i, j in self.candidates
        }
        tree = self._select(merged, maps, ones, float(size))
        spent += self.budget.select if tree else 0
        sums, variances = [], []
        msizes = [int(m.max()) + 1 for m in maps]
        cells = [msizes[i] * msizes[j] for i, j in tree]
        for c, eps in zip(tree, shared(self._tree_budget(), cells) if tree else [], strict=True):
            noisy, var, cost = self._laplace(merged[c], eps)
            sums.append(noisy)
            variances.append(var)
            spent += cost
        spanning = len(tree)
        if self.budget.extra > 0 and tree:
            spent += self._extras(merged, maps, ones, ones_var, tree, sums, variances, float(size))
        if not self.public_sizes and sums:
            size = max(
                _total([*ones, *sums, *counted[0]], [*ones_var, *variances, *counted[1]]), 0.0
            )
        for k in range(self.first, self.t):
            self.ledger[k] += spent
        e = Epoch(
            first=self.first, last=self.t - 1, base=self.base, maps=maps, tree=tree,
            ones=ones, ones_var=ones_var, sums=sums, variances=variances,
            rows=self.exact_rows, size=float(size), seed=len(self.epochs),
            extra=len(tree) - spanning,
        )  # fmt: skip
        e.model = self._fit(e)
        self.epochs.append(e)
        self._open_reset(sum(self._rows(x.size, x.rows) for x in self.epochs))

    # ------------------------------------------------------------------ selection

    def _select(
        self,
        merged: dict[Clique, FloatArray],
        maps: list[IntArray],
        ones: list[FloatArray],
        n: float,
    ) -> list[Clique]:
        """A spanning tree over the candidate pairs (``merged``: their exact merged 2-way
        marginals), edge by edge (Kruskal) by permute-and-flip on the open epoch's rows."""
        cands = self.candidates
        cols = sorted({j for c in cands for j in c})
        if len(cols) < 2:
            return []
        probs = []
        for j in range(len(self.sizes)):
            v = merge_one(np.clip(ones[j], 0, None), maps[j])
            probs.append(v / v.sum() if v.sum() > 0 else np.full(v.size, 1.0 / v.size))
        # the noise a tree pair's measurement would add, with the tree's budget shared
        # equally over its edges (public)
        budget = self._tree_budget()
        noise_l1 = float(Fraction(self.delta) * (len(cols) - 1) / budget) if budget > 0 else 0.0
        scores: dict[Clique, float] = {}
        for i, j in cands:
            expected = np.round(n * np.outer(probs[i], probs[j]).ravel() * (1 << GRID)) / (
                1 << GRID
            )
            cells = probs[i].size * probs[j].size  # merged cells
            penalty = round(TREE_PENALTY * cells * noise_l1 * (1 << GRID)) / (1 << GRID)
            scores[(i, j)] = float(np.abs(merged[(i, j)] - expected).sum()) - penalty
        parent = list(range(len(self.sizes)))

        def root(i: int) -> int:
            while parent[i] != i:
                i = parent[i]
            return i

        eps_round = self.budget.select / (len(cols) - 1)
        tree: list[Clique] = []
        for _ in range(len(cols) - 1):
            live = [c for c in cands if root(c[0]) != root(c[1])]
            if not live:
                break
            pick = permute_and_flip([scores[c] for c in live], eps_round, self.delta, rng=self.rng)
            i, j = live[pick]
            tree.append((i, j))
            parent[root(i)] = root(j)
        return sorted(tree)

    def _extras(
        self,
        merged: dict[Clique, FloatArray],
        maps: list[IntArray],
        ones: list[FloatArray],
        ones_var: list[float],
        tree: list[Clique],
        sums: list[FloatArray],
        variances: list[float],
        n: float,
    ) -> Fraction:
        """AIM-style rounds after the tree: each picks (permute-and-flip) a candidate pair
        the fitted model gets most wrong beyond the noise its measurement would add, or
        stops (a score-0 option); a picked pair is measured and the model refitted. What a
        stop leaves is spent on the epoch's 1-way marginals again. ``merged``: the exact
        merged 2-way marginals of the candidate pairs (sensitive). Appends to ``tree``,
        ``sums``, ``variances``; updates ``ones``/``ones_var``; returns the ε spent."""
        pool = self.budget.extra
        rounds = EXTRA_ROUNDS
        sel = pool / rounds * EXTRA_SELECT
        meas = pool / rounds - sel
        spent = Fraction(0)
        msizes = tuple(int(m.max()) + 1 for m in maps)
        cap = max(EXTRA_CELLS, 2 * junction_tree_size(msizes, tree))
        model: GraphicalModel | None = None
        for _ in range(rounds):
            live = [
                c for c in self.candidates if c not in tree and msizes[c[0]] * msizes[c[1]] <= cap
            ]
            if n < 1 or not live:
                break
            e = Epoch(0, 0, 0, maps, tree, ones, ones_var, sums, variances, 0, n)
            model = self._fit(e, warm_start=model, iters=EXTRA_ITERS)
            if model is None:
                break
            scale = Fraction(self.delta) / meas
            noise_l1 = float(scale)  # E|Z| of the discrete Laplace, about its scale
            scores = []
            for c in live:
                fit = np.round(model.marginal(c) * (1 << GRID)) / (1 << GRID)
                cells = msizes[c[0]] * msizes[c[1]]
                penalty = round(EXTRA_PENALTY * cells * noise_l1 * (1 << GRID)) / (1 << GRID)
                scores.append(float(np.abs(merged[c] - fit).sum()) - penalty)
            pick = permute_and_flip([0.0, *scores], sel, self.delta, rng=self.rng)
            spent += sel
            # a pick whose model would be too large stops too (post-processing of the pick)
            if pick == 0 or junction_tree_size(msizes, [*tree, live[pick - 1]]) > cap:
                break
            c = live[pick - 1]
            noisy, var, cost = self._laplace(merged[c], meas)
            tree.append(c)
            sums.append(noisy)
            variances.append(var)
            spent += cost
        return spent + self._remeasure_ones(self._by_weights(pool - spent), ones, ones_var)

    def _tree_budget(self) -> Fraction:
        """The ε of a closed epoch's tree marginals: the tree share, and the fresh tree
        share too for an epoch that had no fresh tree (the first)."""
        return self.budget.tree + (self.budget.fresh_tree if not self.open_tree else 0)

    def _by_weights(self, budget: Fraction) -> dict[int, Fraction]:
        """``budget`` over the columns by weights (none when it is 0)."""
        return dict(enumerate(shared(budget, list(self.sizes)))) if budget > 0 else {}

    def _fresh_split(self) -> tuple[list[Fraction], dict[int, Fraction]]:
        """A batch's fresh tree share, split by weights over the last closed epoch's tree
        marginals (their merged cells) and the columns with a merged group there
        (:func:`merged_groups`, a group of ``g`` categories weighted as ``FINE_WEIGHT·g``
        cells): the tree marginals' budgets and each such column's extra 1-way budget. The
        tree cannot tell a group's categories apart; their 1-way counts can."""
        cells = self._open_cells()
        if not cells:
            return [], {}
        groups = merged_groups(self.epochs[-1].maps) if FINE_WEIGHT > 0 else []
        fine = [j for j, g in enumerate(groups) if g > 0]
        eps = shared(self.budget.fresh_tree, [*cells, *(FINE_WEIGHT * groups[j] for j in fine)])
        return eps[: len(cells)], dict(zip(fine, eps[len(cells) :], strict=True))

    def _remeasure_ones(
        self, budgets: dict[int, Fraction], ones: list[FloatArray], var: list[float]
    ) -> Fraction:
        """Measure the open epoch's 1-way marginal of each column ``j`` in ``budgets`` with
        its budget and pool it with ``ones[j]`` by inverse variance (in place); returns the
        ε spent."""
        spent = Fraction(0)
        for j, eps in budgets.items():
            noisy, v, cost = self._laplace(self.exact_ones[j], eps)
            a, b = 1.0 / var[j], 1.0 / v  # inverse-variance mean (post-processing)
            ones[j] = (a * ones[j] + b * noisy) / (a + b)
            var[j] = 1.0 / (a + b)
            spent += cost
        return spent

    # ------------------------------------------------------------------ fit and release

    def _one_way(
        self, maps: list[IntArray], ones: list[FloatArray], var: list[float]
    ) -> list[Measurement]:
        out = []
        for j, m in enumerate(maps):
            group = np.bincount(m).astype(np.float64)
            out.append(Measurement((j,), merge_one(ones[j], m), np.sqrt(var[j] * group)))
        return out

    def _fit(
        self, e: Epoch, warm_start: GraphicalModel | None = None, iters: int | None = None
    ) -> GraphicalModel | None:
        """A closed epoch's model, fitted to its sums (post-processing)."""
        if e.size < 1:
            return None
        meas = self._one_way(e.maps, e.ones, e.ones_var)
        meas += [
            Measurement(c, s, math.sqrt(v))
            for c, s, v in zip(e.tree, e.sums, e.variances, strict=True)
        ]
        return estimate_pgm(
            e.msizes, meas, e.size, iters=self.iters if iters is None else iters,
            warm_start=warm_start, tol=FIT_TOL,
        )  # fmt: skip

    def _fit_open(self) -> None:
        """The open epoch's model: its fresh 1-way sums, with the last closed epoch's tree
        marginals scaled to the open epoch's size as a prior (post-processing)."""
        last = self.epochs[-1]
        size = self.open_size
        if size < 1 or last.model is None:
            self.open_model = None
            return
        meas = self._one_way(last.maps, self.ones, self.ones_var)
        ratio = size / max(last.size, 1.0)
        fresh = self.budget.fresh_tree > 0
        measured = {c: k for k, c in enumerate(self.open_tree)}
        priors = [last.model.marginal(c) * ratio for c in last.tree]
        drift: dict[int, float] = {}  # per-cell drift variance of each fresh pair
        for n, c in enumerate(last.tree):
            if fresh and (k := measured.get(c)) is not None:
                gap = self.tree_sums[k] - priors[n]
                drift[k] = max(0.0, float(np.mean(gap * gap)) - self.tree_var[k])
        for n, c in enumerate(last.tree):
            prior = priors[n]
            m = measured.get(c)
            if fresh:  # the prior's spread: its own noise and the drift the fresh sums show
                if m is not None:
                    meas.append(Measurement(c, self.tree_sums[m], math.sqrt(self.tree_var[m])))
                    tau2 = drift[m]
                else:
                    tau2 = float(np.mean(list(drift.values()))) if drift else 0.0
                sd = math.sqrt(max(tau2 + ratio * ratio * last.variances[n], 1e-6))
            else:
                sd = math.sqrt(last.variances[n]) * max(ratio, 1.0) * PRIOR_WIDTH
            meas.append(Measurement(c, prior, sd))
        warm = self.open_model
        iters = self.iters if warm is None else OPEN_ITERS
        self.open_model = estimate_pgm(
            last.msizes, meas, size, iters=iters, warm_start=warm, tol=FIT_TOL
        )

    def release_plan(self, rng: np.random.Generator, method: str = "round") -> ReleasePlan:
        """The synthetic table's plan (post-processing, :mod:`dpstream.tabular.release`):
        each closed epoch's model and the open epoch's give their released sizes, mixed
        in every chunk; chunk ``i`` is drawn from ``default_rng([key, t, i])``, ``key``
        drawn once from ``rng`` (at the first release), so a step's release is the same
        at every call."""
        if self.key is None:
            self.key = int(rng.integers(2**63))
        parts, sizes = [], []
        for e in self.epochs:
            n = self._rows(e.size, e.rows)
            if n > 0 and e.model is not None:
                parts.append(Part(e.model, tuple(e.maps), tuple(e.ones)))
                sizes.append(n)
        n = self.open_rows
        if n > 0 and self.open_model is not None:
            parts.append(Part(self.open_model, tuple(self.epochs[-1].maps), tuple(self.ones)))
            sizes.append(n)
        return ReleasePlan.mixture(len(self.sizes), parts, sizes, (self.key, self.t), method)

    # ------------------------------------------------------------------ state

    def state(self) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]]:
        """The state as a JSON header and arrays (**sensitive**: the open epoch's exact
        counts). The closed epochs' models are not stored: a load fits them again from
        their sums (a fit is deterministic); the open epoch's model is (it warm-starts the
        next fit)."""
        arrays: dict[str, npt.NDArray[Any]] = {}
        head: dict[str, Any] = {
            "t": self.t, "base": self.base, "first": self.first, "exact_rows": self.exact_rows,
            "ones_var": self.ones_var, "ledger": [str(x) for x in self.ledger], "epochs": [],
            "tree_var": self.tree_var, "key": self.key,
            "count": float(self.count[0]), "count_var": self.count_var,
            "open_model": None,
        }  # fmt: skip
        if self.open_model is not None:
            nodes = self.open_model.junction_tree.nodes
            head["open_model"] = {
                "total": self.open_model.total,
                "cliques": [list(c) for c in self.open_model.potentials],
                "nodes": [list(c) for c in nodes],
                "step_scale": self.open_model.step_scale,
            }
            for k, theta in enumerate(self.open_model.potentials.values()):
                arrays[f"open_theta_{k}"] = theta
        for k, v in enumerate(self.tree_sums):
            arrays[f"open_tree_{k}"] = v
        for j in range(len(self.sizes)):
            arrays[f"open_ones_{j}"] = self.ones[j]
            arrays[f"open_exact_{j}"] = self.exact_ones[j]
        for k, c in enumerate(self.candidates):
            if c in self.pairs:
                arrays[f"open_pair_{k}"] = self.pairs[c]
        for n, e in enumerate(self.epochs):
            head["epochs"].append({
                "first": e.first, "last": e.last, "base": e.base, "tree": e.tree,
                "ones_var": e.ones_var, "variances": e.variances, "rows": e.rows,
                "size": e.size, "seed": e.seed, "extra": e.extra,
            })  # fmt: skip
            for j in range(len(self.sizes)):
                arrays[f"e{n}_map_{j}"] = e.maps[j]
                arrays[f"e{n}_ones_{j}"] = e.ones[j]
            for k, s in enumerate(e.sums):
                arrays[f"e{n}_sum_{k}"] = s
        return head, arrays

    def load_state(self, head: dict[str, Any], arrays: dict[str, npt.NDArray[Any]]) -> None:
        """Restore :meth:`state` into a fresh mechanism of the same options."""
        d = len(self.sizes)
        self.t, self.base, self.first = int(head["t"]), int(head["base"]), int(head["first"])
        self.exact_rows = int(head["exact_rows"])
        self.ones_var = [float(v) for v in head["ones_var"]]
        self.ledger = [Fraction(x) for x in head["ledger"]]
        self.ones = [np.asarray(arrays[f"open_ones_{j}"], dtype=np.float64) for j in range(d)]
        self.exact_ones = [np.asarray(arrays[f"open_exact_{j}"], dtype=np.int64) for j in range(d)]
        self.pairs = {
            c: np.asarray(arrays[f"open_pair_{k}"], dtype=np.int64)
            for k, c in enumerate(self.candidates)
            if f"open_pair_{k}" in arrays
        }
        self.epochs = []
        for n, h in enumerate(head["epochs"]):
            tree = [tuple(int(x) for x in c) for c in h["tree"]]
            self.epochs.append(Epoch(
                first=int(h["first"]), last=int(h["last"]), base=int(h["base"]),
                maps=[np.asarray(arrays[f"e{n}_map_{j}"], dtype=np.int64) for j in range(d)],
                tree=tree,
                ones=[np.asarray(arrays[f"e{n}_ones_{j}"], dtype=np.float64) for j in range(d)],
                ones_var=[float(v) for v in h["ones_var"]],
                sums=[
                    np.asarray(arrays[f"e{n}_sum_{k}"], dtype=np.float64)
                    for k in range(len(tree))
                ],
                variances=[float(v) for v in h["variances"]], rows=int(h["rows"]),
                size=float(h["size"]), seed=int(h["seed"]), extra=int(h.get("extra", 0)),
            ))  # fmt: skip
        self.open_tree = self._fresh_pairs()
        self.tree_var = [float(v) for v in head["tree_var"]]
        self.tree_sums = [
            np.asarray(arrays[f"open_tree_{k}"], dtype=np.float64)
            for k in range(len(self.open_tree))
        ]
        if len(self.tree_var) != len(self.open_tree):
            raise ValueError("corrupt TabularStream state: open epoch's tree")
        self.key = None if head["key"] is None else int(head["key"])
        self.count = np.array([float(head["count"])])
        self.count_var = float(head["count_var"])
        for e in self.epochs:
            e.model = self._fit(e)
        self.open_model = None
        info = head["open_model"]
        if info is not None:
            cliques = [tuple(int(x) for x in c) for c in info["cliques"]]
            model = GraphicalModel(
                self.epochs[-1].msizes,
                {c: arrays[f"open_theta_{k}"] for k, c in enumerate(cliques)},
                float(info["total"]),
                junction_tree=[tuple(int(x) for x in c) for c in info["nodes"]],
            )
            model.step_scale = float(info["step_scale"])
            self.open_model = model


def _total(sums: list[FloatArray], variances: list[float]) -> float:
    """The inverse-variance mean of the totals of noisy marginals of the same rows."""
    inv = [1.0 / max(v * s.size, 1e-9) for s, v in zip(sums, variances, strict=True)]
    return sum(w * float(s.sum()) for w, s in zip(inv, sums, strict=True)) / sum(inv)

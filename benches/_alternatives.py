"""What a user would run instead of the tabular stream: the alternatives of the suite.

Every mechanism here is pure ε-DP under add/remove one record (the table's size is private:
it is released through noisy counts). The noise is the package's exact integer noise
(:func:`dpstream.noise.discrete_laplace`) and selections are by permute-and-flip
(:func:`dpstream.noise.permute_and_flip`), drawn from the :class:`dpstream.Rng` passed in
(seeded in the benchmarks: reproducible and NOT private). What is public: the domain, ε, the
batch boundaries of a stream (the number of batches and which batch a record is in is the
stream's time; the batches' sizes are not released except through noise), and every
constant below. The ε split of each mechanism is computed in one place and returned with
:func:`aim_budget` / :func:`mst_budget` so that a test can sum it.

* :func:`independent` / :func:`independent_releases` — a streaming baseline: noisy 1-way
  histograms per batch, summed, columns sampled independently.
* :func:`mst` — MST (McKenna, Miklau, Sheldon 2021) made pure ε-DP (1-way marginals, the
  tree's selection and its marginals at ε/3 each); "MST re-run at ε/R" calls it on the rows
  so far at ε/R.
* :func:`aim` — an AIM-style select–measure–fit release (McKenna et al. 2022), pure ε-DP.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterator, Sequence
from fractions import Fraction

import numpy as np
from dpstream import Rng
from dpstream.noise import discrete_laplace, permute_and_flip
from dpstream.tabular import (
    Domain,
    GraphicalModel,
    Measurement,
    estimate_pgm,
    junction_tree_size,
    marginal_counts,
)

__all__ = ["aim", "aim_budget", "independent", "independent_releases", "mst", "mst_budget"]

Clique = tuple[int, ...]


def _generator(rng: Rng) -> np.random.Generator:
    """A numpy generator for post-processing (sampling rows), seeded from ``rng``."""
    return np.random.default_rng(rng.integers(4).astype(np.uint64))


def _rounded(n: int, p: np.ndarray) -> np.ndarray:
    """Counts summing to ``n`` closest to ``n·p`` (largest remainders)."""
    want = n * p
    out = np.floor(want).astype(np.int64)
    short = n - int(out.sum())
    if short > 0:
        out[np.argsort(-(want - out), kind="stable")[:short]] += 1
    return out


# --------------------------------------------------------------------------- independent


def independent_releases(
    batches: Sequence[np.ndarray], domain: Domain, eps: float, rng: Rng
) -> Iterator[np.ndarray]:
    """The independent-columns stream: after each batch, a synthetic table of the rows so far.

    Privacy (pure ε, add/remove one record): a batch's d one-way histograms move by 1 in d
    cells in all (ℓ1-sensitivity d), so discrete Laplace noise of scale d/ε per cell makes
    each batch's release ε-DP; a record is in one batch only, so the batches compose in
    parallel: ε for the whole stream. Everything after the noise is post-processing: the
    noisy histograms summed over the batches so far, clipped at 0, the table's size the
    mean of the d noisy totals (rounded, at least 0), each column drawn on its own with the
    clipped histogram's proportions (rounded counts, shuffled).
    """
    sizes = domain.sizes
    d = len(sizes)
    scale = Fraction(d) / Fraction(eps)
    sums = [np.zeros(s, dtype=np.int64) for s in sizes]
    sampler = _generator(rng)
    for batch in batches:
        x = np.asarray(batch, dtype=np.int64).reshape(-1, d)
        for j, s in enumerate(sizes):
            sums[j] += np.bincount(x[:, j], minlength=s) + discrete_laplace(scale, s, rng=rng)
        n = max(round(float(np.mean([h.sum() for h in sums]))), 0)
        out = np.empty((n, d), dtype=np.int64)
        for j, h in enumerate(sums):
            c = np.clip(h, 0, None).astype(np.float64)
            p = c / c.sum() if c.sum() > 0 else np.full(len(c), 1 / len(c))
            out[:, j] = sampler.permutation(np.repeat(np.arange(len(c)), _rounded(n, p)))
        yield out


def independent(batches: Sequence[np.ndarray], domain: Domain, eps: float, rng: Rng) -> np.ndarray:
    """The synthetic table after the last batch of :func:`independent_releases`."""
    out = np.zeros((0, len(domain)), dtype=np.int64)
    for out in independent_releases(batches, domain, eps, rng):  # noqa: B007
        pass
    return out


# --------------------------------------------------------------------------- MST


def mst_budget(eps: float) -> dict[str, Fraction]:
    """MST's ε split: the one-way marginals, the tree's selection, the tree's marginals."""
    third = Fraction(eps) / 3
    return {"one-way": third, "tree selection": third, "tree marginals": eps - 2 * third}


def mst(codes: np.ndarray, sizes: Sequence[int], eps: float, rng: Rng) -> np.ndarray:
    """An MST release of ``codes`` (pure ε-DP for one record added or removed; the number
    of rows is released through the one-way marginals' noisy totals).

    MST made pure ε-DP (with the split exact, :func:`mst_budget`):
    every one-way marginal with discrete Laplace noise (ε/3, ℓ1-sensitivity d), a spanning
    tree of 2-way marginals chosen edge by edge by permute-and-flip on their ℓ1 distance
    from the one-way model (ε/3 over the d − 1 edges; a score moves by ≤ 1), the tree's
    marginals with discrete Laplace noise (ε/3, ℓ1-sensitivity d − 1), and the package's
    PGM estimator (post-processing)."""
    sizes = tuple(int(s) for s in sizes)
    codes = np.asarray(codes, dtype=np.int64).reshape(-1, len(sizes))
    d = len(sizes)
    split = mst_budget(eps)
    # 1. every one-way marginal: one record moves d counts by 1 (ℓ1-sensitivity d)
    scale1 = d / split["one-way"]
    ones = [
        marginal_counts(codes, sizes, (j,)) + discrete_laplace(scale1, sizes[j], rng=rng)
        for j in range(d)
    ]
    total = max(float(np.mean([o.sum() for o in ones])), 1.0)
    meas = [Measurement((j,), ones[j], math.sqrt(2) * float(scale1)) for j in range(d)]
    if d > 1:
        probs = [np.clip(o, 0, None) / max(np.clip(o, 0, None).sum(), 1.0) for o in ones]
        comp = list(range(d))

        def root(i: int) -> int:
            while comp[i] != i:
                i = comp[i]
            return i

        # 2. a spanning tree: d - 1 edges by permute-and-flip (ℓ1 scores move by ≤ 1)
        score = {
            (i, j): float(
                np.abs(
                    marginal_counts(codes, sizes, (i, j))
                    - total * np.outer(probs[i], probs[j]).ravel()
                ).sum()
            )
            for i in range(d)
            for j in range(i + 1, d)
        }
        edges: list[Clique] = []
        for _ in range(d - 1):
            cands = [(i, j) for i, j in score if root(i) != root(j)]
            pick = permute_and_flip(
                [score[c] for c in cands], split["tree selection"] / (d - 1), 1, rng=rng
            )
            i, j = cands[pick]
            edges.append((i, j))
            comp[root(i)] = root(j)
        # 3. the tree's marginals: one record moves d - 1 counts (ℓ1-sensitivity d - 1)
        scale3 = (d - 1) / split["tree marginals"]
        meas += [
            Measurement(
                e,
                marginal_counts(codes, sizes, e)
                + discrete_laplace(scale3, sizes[e[0]] * sizes[e[1]], rng=rng),
                math.sqrt(2) * float(scale3),
            )
            for e in edges
        ]
    model = estimate_pgm(sizes, meas, total)
    return model.sample(round(total), _generator(rng), method="round")


# --------------------------------------------------------------------------- AIM

#: AIM's constants, public. ``ROUNDS_PER_COLUMN``: the first round's budget is ε/(this · d)
#: (AIM takes 16·d rounds under zCDP, where rounds cost √ of their number; under pure ε
#: they add up, so fewer, larger rounds). ``SELECT_SHARE``: each round's share for the
#: selection (AIM: 10%); the rest measures. ``MAX_MODEL_CELLS``: the model's cells when the
#: whole budget is spent (AIM's size limit grows with the budget used, as here). Three-way
#: candidates when the domain has at most ``THREE_WAY_COLUMNS`` columns.
ROUNDS_PER_COLUMN = 4
SELECT_SHARE = Fraction(1, 10)
MAX_MODEL_CELLS = 200_000
THREE_WAY_COLUMNS = 10
FIT_ITERS = 100


def aim_budget(eps: float, d: int) -> dict[str, Fraction]:
    """The ε of AIM's first steps: ``round`` (one round: selection + measurement), the
    one-way marginals' total (``d`` measurements at a round's measurement share) and each
    round's ``select`` and ``measure`` shares. Annealing doubles a round's ε; the last
    round spends what remains (:func:`aim` returns the ε of every step it took)."""
    per_round = Fraction(eps) / (ROUNDS_PER_COLUMN * d)
    measure = per_round * (1 - SELECT_SHARE)
    return {
        "round": per_round,
        "select": per_round * SELECT_SHARE,
        "measure": measure,
        "one-way": d * measure,
    }


def _workload(d: int) -> tuple[list[Clique], dict[Clique, float]]:
    """AIM's candidates (the downward closure of the workload: every k-way marginal, k = 3
    for at most :data:`THREE_WAY_COLUMNS` columns, else 2) and their weights (Σ over the
    workload's marginals of the columns they share), normalised to a largest weight of 1."""
    k = min(3 if d <= THREE_WAY_COLUMNS else 2, d)
    work = list(itertools.combinations(range(d), k))
    cands = [c for m in range(2, k + 1) for c in itertools.combinations(range(d), m)]
    weight = {c: float(sum(len(set(c) & set(w)) for w in work)) for c in cands}
    top = max(weight.values(), default=1.0)
    return cands, {c: w / top for c, w in weight.items()}


def aim(
    codes: np.ndarray,
    sizes: Sequence[int],
    eps: float,
    rng: Rng,
    max_seconds: float = 60.0,
    *,
    steps: list[tuple[str, Fraction]] | None = None,
) -> np.ndarray:
    """An AIM-style release of ``codes``, pure ε-DP for one record added or removed.

    The loop of AIM (McKenna, Mullins, Sheldon, Miklau 2022) with pure-ε pieces:

    1. every one-way marginal with discrete Laplace noise of scale 1/ε_m (ℓ1-sensitivity 1
       each: d of them cost d·ε_m), ε_m = 90% of the first round's ε (:func:`aim_budget`);
       the table's size is the mean of their noisy totals; a PGM fit;
    2. rounds: a candidate marginal ``r`` (2-way, and 3-way with few columns; only those
       that keep the model within ``MAX_MODEL_CELLS · ε_used/ε`` cells) is selected by
       permute-and-flip at 10% of the round's ε with AIM's quality ``w_r (‖M_r(D) −
       M_r(model)‖₁ − n_r·E|Z|)`` (``n_r·E|Z|`` the expected ℓ1 norm of the measurement's
       noise, ``E|Z| = 1/sinh(1/b)`` for discrete Laplace of scale ``b``, about ``b``;
       ``w_r ≤ 1`` the workload weight: the score's sensitivity is 1), measured with
       discrete Laplace of scale ``b = 1/ε_m`` (ε_m the other 90%), and the model refitted
       (warm start);
    3. annealing as AIM: when the refit moved the selected marginal by less than its
       expected noise ``n_r·E|Z|``, the round's ε doubles; when less than two rounds' ε is
       left (or ``max_seconds`` have passed: a public, benchmark-only stop), the last
       round spends all that remains.

    The steps' ε add up to ``eps`` exactly (Fractions; a step's ε is appended to
    ``steps`` when a list is given). Everything after the noise is post-processing.
    ``max_seconds`` makes the number of rounds depend on the machine's speed: fine for a
    benchmark, a timing channel for a deployment.
    """
    start = time.perf_counter()
    sizes = tuple(int(s) for s in sizes)
    d = len(sizes)
    codes = np.asarray(codes, dtype=np.int64).reshape(-1, d)
    total_eps = Fraction(eps)
    log = steps if steps is not None else []
    split = aim_budget(eps, d)
    # 1. the one-way marginals
    b = 1 / split["measure"]
    ones = [
        marginal_counts(codes, sizes, (j,)) + discrete_laplace(b, sizes[j], rng=rng)
        for j in range(d)
    ]
    log.append(("one-way", split["one-way"]))
    used = split["one-way"]
    total = max(float(np.mean([o.sum() for o in ones])), 1.0)
    meas = [Measurement((j,), ones[j], math.sqrt(2) * float(b)) for j in range(d)]
    model = estimate_pgm(sizes, meas, total, iters=FIT_ITERS)
    cands, weight = _workload(d)
    exact = {c: marginal_counts(codes, sizes, c) for c in cands}
    round_eps = split["round"]
    while used < total_eps and cands:
        left = total_eps - used
        last = left < 2 * round_eps or time.perf_counter() - start > max_seconds
        if last:
            round_eps = left
        eps_select = round_eps * SELECT_SHARE
        eps_measure = round_eps - eps_select
        b = 1 / eps_measure
        limit = MAX_MODEL_CELLS * float(used + round_eps) / float(total_eps)
        cliques = [m.clique for m in meas]
        ok = [c for c in cands if junction_tree_size(sizes, [*cliques, c]) <= limit]
        # none fits: the measured ones (the model does not grow), else the smallest
        ok = ok or [c for c in cands if c in cliques] or [min(cands, key=lambda c: len(exact[c]))]
        before = {c: model.marginal(c) for c in ok}
        noise = 1 / math.sinh(1 / float(b))  # E|Z| of discrete Laplace noise of scale b
        scores = [
            weight[c] * (float(np.abs(exact[c] - before[c]).sum()) - noise * len(exact[c]))
            for c in ok
        ]
        r = ok[permute_and_flip(scores, eps_select, 1, rng=rng)]
        y = exact[r] + discrete_laplace(b, len(exact[r]), rng=rng)
        meas.append(Measurement(r, y, math.sqrt(2) * float(b)))
        log.append((f"round {r}", round_eps))
        used += round_eps
        model = estimate_pgm(sizes, meas, total, iters=FIT_ITERS, warm_start=model)
        if last:
            break
        moved = float(np.abs(model.marginal(r) - before[r]).sum())
        if moved <= noise * len(exact[r]):
            round_eps = 2 * round_eps
    if used > total_eps:  # pragma: no cover - the split above is exact
        raise AssertionError(f"AIM spent {used} > ε = {total_eps}")
    return _sample(model, total, rng)


def _sample(model: GraphicalModel, total: float, rng: Rng) -> np.ndarray:
    return model.sample(round(total), _generator(rng), method="round")

"""A tour of the library's mechanisms on the data the package ships.

Exact discrete Laplace noise on a histogram of the Adult data, a private
selection by permute-and-flip, and PrivHP: a fixed-memory ε-DP generator of
2-D points (age, hours per week) streamed from the same data.
Run with ``python -m dpstream.demo`` (``make demo`` runs the command-line demo,
``dpstream demo``). The errors it prints compare the private outputs with the
real data: they are evaluation, marked NOT PRIVATE, and only printed because the
shipped Adult copy is public.
"""

from __future__ import annotations

import time
from fractions import Fraction

import numpy as np

from dpstream import PrivHP, Rng, metrics, noise
from dpstream.datasets import load_adult


def main() -> None:
    """Print a short summary of each demo step and the total ε spent."""
    codes, columns, domain = load_adult()
    n = len(codes)
    rng = Rng()  # OS-seeded: the only private choice
    print(f"Adult: {n} rows, {len(columns)} columns (shipped with dpstream)")

    # 1. Laplace mechanism on a histogram: one person changes one count by 1
    #    (add/remove neighbours), so scale 1/ε gives ε-DP.
    eps_hist = Fraction(1)
    col = columns.index("age")
    counts = np.bincount(codes[:, col], minlength=domain["age"]).astype(np.int64)
    noisy = counts + noise.discrete_laplace(1 / eps_hist, counts.shape, rng=rng)
    err = np.abs(noisy - counts)
    p = np.exp(-float(eps_hist))
    expected_abs = 2 * p / (1 - p * p)  # E|Z| for discrete Laplace with ratio p
    print(
        f"\n[1] age histogram ({domain['age']} bins), discrete Laplace, ε = {eps_hist}:"
        f"\n    NOT PRIVATE: mean |error| = {err.mean():.2f} (expected ≈ {expected_abs:.2f}),"
        f" max |error| = {err.max()}, relative L1 error = {err.sum() / n:.2e}"
    )

    # 2. Permute-and-flip: the most common occupation, scores = counts
    #    (sensitivity 1 under add/remove).
    eps_sel = Fraction(1, 2)
    col = columns.index("occupation")
    occ = np.bincount(codes[:, col], minlength=domain["occupation"])
    pick = noise.permute_and_flip(occ, eps_sel, 1, rng=rng)
    best = int(np.argmax(occ))
    print(
        f"\n[2] most common occupation by permute-and-flip, ε = {eps_sel}:"
        f" picked code {pick}; NOT PRIVATE: its count {occ[pick]}, true mode code {best}"
        f" (count {occ[best]})"
    )

    # 3. Speed of the exact sampler (not a release: draws are not data-dependent).
    draws = 10**6
    start = time.perf_counter()
    noise.discrete_laplace(10, draws, rng=rng)
    rate = draws / (time.perf_counter() - start)
    print(f"\n[3] exact discrete Laplace: {rate / 1e6:.1f} M samples/s (scale 10, ChaCha12 CSPRNG)")

    # 4. PrivHP: stream (age, hours-per-week) as points in [0,1]^2, scaled by the
    #    public domain sizes, through a summary of fixed memory; release once.
    eps_gen = Fraction(1)
    cols = [columns.index("age"), columns.index("hours-per-week")]
    sizes = np.array([domain["age"], domain["hours-per-week"]], dtype=np.float64)
    points = (codes[:, cols] + 0.5) / sizes
    summary = PrivHP.for_memory(eps_gen, 2, expected_n=50_000, memory_bytes=256 * 1024, rng=rng)
    before = summary.memory_bytes()
    for batch in np.array_split(points, 50):  # the stream arrives in batches
        summary.update(batch)
    generator = summary.release(rng=rng)
    synthetic = generator.sample(n, rng=rng)
    m = 1500
    subsample = np.random.default_rng(0)  # evaluation only: not privacy noise
    real = points[subsample.choice(n, m, replace=False)]
    w1 = metrics.wasserstein1(real, synthetic[:m], method="exact")
    other = points[subsample.choice(n, m, replace=False)]
    floor = metrics.wasserstein1(real, other, method="exact")
    print(
        f"\n[4] PrivHP on (age, hours-per-week), ε = {eps_gen}: k = {summary.k}, "
        f"width = {summary.width}, depth = {summary.depth};"
        f"\n    summary memory {before} bytes before and {summary.memory_bytes()} after"
        f" {n} points; generator: {generator.n_leaves} cells, noisy total {generator.total:.0f}"
        f"\n    NOT PRIVATE: W1(real, synthetic) = {w1:.4f} on {m} vs {m} points (exact OT, ℓ∞);"
        f" two real subsamples: {floor:.4f}"
    )

    total = eps_hist + eps_sel + eps_gen
    print(f"\nTotal privacy spent on the Adult data: ε = {total} (sequential composition)")


if __name__ == "__main__":
    main()

"""Continual-release counters: API, cross-language reference, exact noise law, error orders.

* A pure-Python, textbook implementation of every counter (noisy values stored
  explicitly, as in the papers) draws its noise from the same seeded generator through
  ``dpstream.noise.discrete_laplace`` and must reproduce the Rust releases bit for bit.
* The noise structure: the error ``release - true sum`` at time ``t`` is a sum of
  independent discrete Laplace terms whose number and scales follow from the mechanism
  (``noise_terms`` below). Its empirical second moment is checked against the exact
  variance ``Σ 2ρ/(1-ρ)²`` (``ρ = e^{-1/scale}``) with a three-moment (Pearson III)
  bound, and its law against the exact convolution by a chi-square test, at
  α = 1e-6 per test with fixed seeds. Coordinates of a vector counter are independent
  runs, so one counter of ``dim = R`` gives R samples.
* Error orders: mean absolute errors at two horizons scale as √t (simple), T^(1/4)
  (block), t^(1/3) (unbounded block) and log^1.5 (binary tree, hybrid).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from conftest import ALPHA, assert_integer_distribution
from dpstream import Rng, _core, noise
from dpstream.counters import KINDS, Counter, Share
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

BOUNDED = ("block", "binary-tree")


def make(kind: str, epsilon: object, dim: int = 1, horizon: int = 64, **kw: object) -> Counter:
    return Counter(
        kind,  # type: ignore[arg-type]
        epsilon,  # type: ignore[arg-type]
        dim,
        horizon=horizon if kind in BOUNDED else None,
        **kw,  # type: ignore[arg-type]
    )


# ---------------------------------------------------------------------------------------
# Textbook reference implementations (pure Python)
# ---------------------------------------------------------------------------------------


def block_size(horizon: int) -> int:
    """``⌈√T⌉``, the bounded block counter's block size."""
    r = math.isqrt(horizon)
    return r if r * r == horizon else r + 1


def decomposition(tau: int) -> list[tuple[int, int]]:
    """Dyadic intervals ``(a, b]`` of the binary decomposition of ``tau``, high bits first."""
    out, start = [], 0
    for j in reversed(range(tau.bit_length())):
        if tau >> j & 1:
            out.append((start, start + (1 << j)))
            start += 1 << j
    return out


def reference(
    kind: str, eps: Fraction, horizon: int | None, xs: np.ndarray, seed: int
) -> np.ndarray:
    """Releases of the textbook mechanism on ``xs`` (shape ``(T, dim)``).

    Step ``t``'s noise is drawn from a generator keyed by the counter's master key (the
    first 32 bytes of its seeded generator), ``t`` and a digest of the increments up
    to ``t`` (issue 41: a reloaded checkpoint fed the same data repeats its noise)."""
    n_steps, dim = xs.shape
    master = Rng(seed=seed).integers(4).astype("<u8").tobytes()
    keys = _core._counter_step_keys(master, [int(v) for v in xs.ravel()], dim)
    step = [0]

    def lap(num: int) -> np.ndarray:  # one step's noise vector, scale num/ε
        # The release code draws exactly one noise vector per step, in order.
        rng = Rng(seed=keys[step[0]])
        step[0] += 1
        return noise.discrete_laplace(Fraction(num) / eps, dim, rng=rng)

    def window(a: int, b: int) -> np.ndarray:  # exact sum of steps a+1..b
        return xs[a:b].sum(axis=0)

    out = np.zeros((n_steps, dim), dtype=np.int64)
    if kind == "simple":  # Simple II: g(t) = Σ (x_s + Lap(1/ε))
        g = np.zeros(dim, dtype=np.int64)
        for t in range(n_steps):
            g = g + xs[t] + lap(1)
            out[t] = g
    elif kind in ("block", "unbounded-block"):  # Algorithm 4, line by line
        if kind == "block":
            assert horizon is not None
            b, part = block_size(horizon), None
        else:
            b, part = 2, 4
        last_block = np.zeros(dim, dtype=np.int64)
        true_in = np.zeros(dim, dtype=np.int64)
        synth_in = np.zeros(dim, dtype=np.int64)
        t_at = 0
        for i in range(n_steps):
            t = i + 1
            delta = t - t_at
            true_in = true_in + xs[i]
            if delta % b == 0:
                last_block = last_block + true_in + lap(2)
                true_in[:] = 0
                synth_in[:] = 0
                out[i] = last_block
                if delta == part:
                    t_at, b = t, b + 1
                    part = b * b
            else:
                synth_in = synth_in + xs[i] + lap(2)
                out[i] = last_block + synth_in
    elif kind == "binary-tree":
        assert horizon is not None
        levels = horizon.bit_length()
        psums: dict[tuple[int, int], np.ndarray] = {}
        for t in range(1, n_steps + 1):
            a = t - (t & -t)
            psums[(a, t)] = window(a, t) + lap(levels)
            out[t - 1] = sum((psums[iv] for iv in decomposition(t)), np.zeros(dim, np.int64))
    elif kind == "hybrid":
        log_total = np.zeros(dim, dtype=np.int64)
        psums = {}
        for t in range(1, n_steps + 1):
            if t & (t - 1) == 0:  # a power of two
                log_total = log_total + window(t // 2, t) + lap(2)
                out[t - 1] = log_total
            else:
                k = t.bit_length() - 1
                base, tau = 1 << k, t - (1 << k)
                a = tau - (tau & -tau)
                psums[(base + a, base + tau)] = window(base + a, base + tau) + lap(2 * k)
                tree = sum(
                    (psums[(base + a, base + b)] for a, b in decomposition(tau)),
                    np.zeros(dim, np.int64),
                )
                out[t - 1] = log_total + tree
    else:
        raise AssertionError(kind)
    return out


def noise_terms(kind: str, eps: Fraction, horizon: int | None, t: int) -> list[Fraction]:
    """Scales of the independent noise terms in the release at time ``t`` (the noiseless
    structure of the mechanism)."""
    if kind == "simple":
        return [1 / eps] * t
    if kind == "block":
        assert horizon is not None
        b = block_size(horizon)
        return [2 / eps] * (t // b + t % b)
    if kind == "unbounded-block":
        blocks, b, start = 0, 2, 0
        while t - start >= b * b:  # whole intervals of b² steps: b blocks each
            blocks, start, b = blocks + b, start + b * b, b + 1
        return [2 / eps] * (blocks + (t - start) // b + (t - start) % b)
    if kind == "binary-tree":
        assert horizon is not None
        return [Fraction(horizon.bit_length()) / eps] * t.bit_count()
    if kind == "hybrid":
        k = t.bit_length() - 1
        return [2 / eps] * (k + 1) + [2 * k / eps] * (t - (1 << k)).bit_count()
    raise AssertionError(kind)


# ---------------------------------------------------------------------------------------
# Cross-language: Rust releases == textbook releases, bit for bit
# ---------------------------------------------------------------------------------------


@given(
    kind=st.sampled_from(KINDS),
    horizon=st.integers(1, 80),
    dim=st.integers(1, 3),
    eps=st.sampled_from([Fraction(1), Fraction(1, 3), Fraction(5, 2), Fraction(0.1)]),
    seed=st.integers(0, 2**32),
    data=st.data(),
)
def test_releases_equal_the_textbook_mechanisms(
    kind: str, horizon: int, dim: int, eps: Fraction, seed: int, data: st.DataObject
) -> None:
    n_steps = data.draw(st.integers(0, horizon))
    xs = np.asarray(
        data.draw(
            st.lists(
                st.lists(st.integers(-50, 50), min_size=dim, max_size=dim),
                min_size=n_steps,
                max_size=n_steps,
            )
        ),
        dtype=np.int64,
    ).reshape(n_steps, dim)
    c = make(kind, eps, dim, horizon, rng=Rng(seed=seed))
    got = np.array([c.step(x) for x in xs], dtype=np.int64).reshape(n_steps, dim)
    want = reference(kind, eps, horizon if kind in BOUNDED else None, xs, seed)
    np.testing.assert_array_equal(got, want)
    # The batch call gives the same releases.
    c2 = make(kind, eps, dim, horizon, rng=Rng(seed=seed))
    np.testing.assert_array_equal(c2.run(xs), want)


def test_long_streams_equal_the_textbook_mechanisms() -> None:
    # Several hybrid epochs and unbounded-block intervals (4 + 9 + 16 + 25 + ... steps).
    xs = np.random.default_rng(3).integers(-3, 4, size=(300, 2))
    for kind in KINDS:
        c = make(kind, Fraction(1, 2), 2, 300, rng=Rng(seed=17))
        want = reference(kind, Fraction(1, 2), 300, xs, 17)
        np.testing.assert_array_equal(c.run(xs), want, err_msg=kind)


def test_noise_terms_reference_is_consistent() -> None:
    eps = Fraction(1)
    # Unbounded block: at the end of each interval only its whole blocks remain.
    ends = np.cumsum([b * b for b in range(2, 8)])
    for j, t in enumerate(ends):
        assert len(noise_terms("unbounded-block", eps, None, int(t))) == sum(range(2, 3 + j))
    assert len(noise_terms("unbounded-block", eps, None, 5)) == 2 + 1
    assert len(noise_terms("block", eps, 100, 25)) == 2 + 5
    assert noise_terms("binary-tree", eps, 1000, 7) == [Fraction(10)] * 3
    assert noise_terms("hybrid", eps, None, 11) == [Fraction(2)] * 4 + [Fraction(6)] * 2


# ---------------------------------------------------------------------------------------
# The exact law of the error
# ---------------------------------------------------------------------------------------


def laplace_cumulants(scale: float) -> tuple[float, float, float]:
    """Cumulants κ2, κ4, κ6 of the discrete Laplace law with this scale."""
    reach = math.ceil(80 * scale) + 10
    z = np.arange(-reach, reach + 1, dtype=np.float64)
    p = np.exp(-np.abs(z) / scale)
    p /= p.sum()
    m2, m4, m6 = (float(np.sum(p * z**k)) for k in (2, 4, 6))
    return m2, m4 - 3 * m2**2, m6 - 15 * m4 * m2 + 30 * m2**3


def error_pmf(scales: list[Fraction]) -> tuple[np.ndarray, int]:
    """Exact pmf of a sum of independent discrete Laplace terms on ``[-M, M]``: (pmf, M).

    The characteristic function of one term is ``(1-ρ)² / (1 - 2ρ cos θ + ρ²)``; the
    product is inverted by a DFT on ``N > 2M`` points. ``M`` is beyond 50 standard
    deviations plus 50 of the largest scale, so the aliased tail mass is below 1e-20.
    """
    bs = np.array([float(s) for s in scales])
    rho = np.exp(-1.0 / bs)
    sd = math.sqrt(float(np.sum(2 * rho / (1 - rho) ** 2)))
    m = math.ceil(50 * sd + 50 * float(bs.max()))
    n = 1 << (2 * m + 1).bit_length()
    theta = 2 * np.pi * np.arange(n) / n
    log_phi = np.zeros(n)
    for r, count in zip(*np.unique(rho, return_counts=True), strict=True):
        log_phi += count * (2 * np.log1p(-r) - np.log1p(-2 * r * np.cos(theta) + r * r))
    pmf = np.fft.ifft(np.exp(log_phi)).real
    pmf = np.concatenate([pmf[n - m :], pmf[: m + 1]])  # z = -M .. M
    return np.clip(pmf, 0.0, None), m


def assert_second_moment(errors: np.ndarray, scales: list[Fraction], a: float, label: str) -> None:
    """Two-sided check of ``mean(errors²)`` against the exact variance.

    The mean of R i.i.d. copies of ``E²`` has known mean, variance and skewness (from
    the cumulants of E); its quantiles are taken from the Pearson type III law with
    those three moments, which is accurate for sums of skewed positive variables.
    """
    cum = np.array([laplace_cumulants(float(s)) for s in scales]).sum(axis=0)
    k2, k4, k6 = (float(v) for v in cum)
    mu2, mu4, mu6 = k2, k4 + 3 * k2**2, k6 + 15 * k4 * k2 + 15 * k2**3
    var_y = mu4 - mu2**2
    skew_y = (mu6 - 3 * mu4 * mu2 + 2 * mu2**3) / var_y**1.5
    r = errors.size
    law = stats.pearson3(skew_y / math.sqrt(r), loc=mu2, scale=math.sqrt(var_y / r))
    lo, hi = float(law.ppf(a / 2)), float(law.isf(a / 2))
    m = float(np.mean(errors.astype(np.float64) ** 2))
    assert lo <= m <= hi, (
        f"{label}: mean squared error {m:.3f} outside [{lo:.3f}, {hi:.3f}] "
        f"(exact variance {mu2:.3f}, {len(scales)} terms)"
    )


VARIANCE_RUNS = 20_000
VARIANCE_TIMES = [1, 2, 3, 7, 8, 13, 29, 100, 127, 128, 129, 200, 255]
LAW_TIMES = [7, 200]


@pytest.mark.parametrize("kind", KINDS)
def test_error_has_the_exact_noise_law(kind: str) -> None:
    eps = Fraction(1, 2)
    horizon = 255
    r = VARIANCE_RUNS
    c = make(kind, eps, r, horizon, rng=Rng(seed=4242 + KINDS.index(kind)))
    data = np.random.default_rng(KINDS.index(kind))
    checks = 2 * len(VARIANCE_TIMES) + len(LAW_TIMES)
    a = ALPHA / checks
    total = np.zeros(r, dtype=np.int64)
    for t in range(1, max(VARIANCE_TIMES) + 1):
        x = data.integers(-2, 3, size=r)  # a different stream in every coordinate
        total += x
        err = c.step(x) - total
        if t in VARIANCE_TIMES:
            scales = noise_terms(kind, eps, horizon, t)
            assert_second_moment(err, scales, a, f"{kind} t={t}")
            # The error is symmetric around 0: the sign of the mean is a fair coin.
            sd = math.sqrt(sum(laplace_cumulants(float(s))[0] for s in scales) / r)
            z = float(stats.norm.isf(a / 2))
            assert abs(float(err.mean())) <= z * sd, f"{kind} t={t}: biased mean"
        if t in LAW_TIMES:
            pmf, zero = error_pmf(noise_terms(kind, eps, horizon, t))
            cum = np.cumsum(pmf)

            def cdf(k: np.ndarray, cum: np.ndarray = cum, zero: int = zero) -> np.ndarray:
                idx = np.asarray(k, dtype=np.int64) + zero
                inside = cum[np.clip(idx, 0, len(cum) - 1)]
                return np.where(idx < 0, 0.0, np.where(idx >= len(cum), 1.0, inside))

            assert_integer_distribution(err, cdf, zero, f"{kind} law t={t}", alpha=a)


def test_vector_coordinates_are_independent() -> None:
    # Coordinates of one vector counter are independent runs: the correlation of the
    # errors of two coordinates over many runs is ~0, as for two separate counters.
    runs = 4000
    c = make("binary-tree", 1, 2 * runs, 64, rng=Rng(seed=5))
    out = c.run(np.zeros((63, 2 * runs), dtype=np.int64))[-1].reshape(runs, 2)
    rho = float(np.corrcoef(out[:, 0], out[:, 1])[0, 1])
    # Under independence rho ~ N(0, 1/runs); 5.3 sd is a false-alarm rate of 1e-7.
    assert abs(rho) < 5.3 / math.sqrt(runs), rho


# ---------------------------------------------------------------------------------------
# Error orders
# ---------------------------------------------------------------------------------------


def mean_abs_error(
    kind: str, horizon: int, runs: int, seed: int, times: range | None = None
) -> float:
    """Mean over ``times`` (default: all of 1..horizon) of the MAE over ``runs`` runs."""
    c = make(kind, 1, runs, horizon, rng=Rng(seed=seed))
    zero = np.zeros((256, runs), dtype=np.int64)
    maes = np.empty(horizon)
    t = 0
    while t < horizon:
        n = min(256, horizon - t)
        maes[t : t + n] = np.abs(c.run(zero[:n])).mean(axis=1)
        t += n
    sel = np.arange(horizon) if times is None else np.asarray(times) - 1
    return float(maes[sel].mean())


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "small", "large", "predicted"),
    [
        # Simple: error √t; MAE at t over 1..T averages √t: ratio (16)^(1/2).
        ("simple", 256, 4096, 4.0),
        # Block, B = √T: about √T terms at every t: ratio (16)^(1/4).
        ("block", 256, 4096, 2.0),
        # Unbounded block: t^(2/3) terms: ratio 8^(1/3) between 1000 and 8000.
        ("unbounded-block", 1000, 8000, 2.0),
        # Binary tree: popcount(t) terms of scale L/ε with L = 8 and 12: (12/8)^1.5.
        ("binary-tree", 255, 4095, 1.5**1.5),
        # Hybrid, averaged over the epochs starting at 2^8 and 2^12: (12/8)^1.5.
        ("hybrid", 256, 4096, 1.5**1.5),
    ],
    ids=KINDS,
)
def test_error_grows_at_the_predicted_order(
    kind: str, small: int, large: int, predicted: float
) -> None:
    runs = 2000
    seed = 900 + KINDS.index(kind)
    if kind == "hybrid":
        a = mean_abs_error(kind, 2 * small - 1, runs, seed, range(small, 2 * small))
        b = mean_abs_error(kind, 2 * large - 1, runs, seed + 50, range(large, 2 * large))
    elif kind == "unbounded-block":
        # Average over a window of times to smooth the position inside the current block.
        a = mean_abs_error(kind, small, runs, seed, range(small // 2, small + 1))
        b = mean_abs_error(kind, large, runs, seed + 50, range(large // 2, large + 1))
    else:
        a = mean_abs_error(kind, small, runs, seed)
        b = mean_abs_error(kind, large, runs, seed + 50)
    # Statistical error of the ratio: about 2.5% (2000 runs, correlated across times).
    ratio = b / a
    assert abs(ratio / predicted - 1) < 0.2, (
        f"{kind}: MAE {a:.2f} -> {b:.2f}, ratio {ratio:.3f}, predicted {predicted:.3f}"
    )


def test_the_tree_counters_beat_the_simple_counter_on_long_streams() -> None:
    t = 4095
    simple = mean_abs_error("simple", t, 500, 1, range(t - 10, t + 1))
    tree = mean_abs_error("binary-tree", t, 500, 2, range(t - 10, t + 1))
    assert tree < 0.8 * simple


# ---------------------------------------------------------------------------------------
# Privacy split, memory
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("eps", [Fraction(1), Fraction(1, 10), 0.1, Fraction(7, 3)])
def test_epsilon_split_sums_to_epsilon(kind: str, eps: float | Fraction) -> None:
    c = make(kind, eps, 1, 1000)
    shares = c.epsilon_split()
    assert all(isinstance(s, Share) and s.epsilon > 0 for s in shares)
    assert sum(s.epsilon for s in shares) == c.epsilon == Fraction(eps)
    expected = {
        "simple": [("step value", 1)],
        "block": [("block sum", 1), ("step value", 1)],
        "unbounded-block": [("block sum", 1), ("step value", 1)],
        "binary-tree": [("p-sum", 10)],  # T = 1000 has 10 bits
        "hybrid": [("power-of-two increment", 1), ("epoch p-sum", None)],
    }[kind]
    assert [(s.family, s.sensitivity) for s in shares] == expected


@pytest.mark.parametrize("kind", KINDS)
def test_memory_is_flat_or_logarithmic(kind: str) -> None:
    dim = 64
    c = make(kind, 1, dim, 1 << 14)
    base = c.memory_bytes()
    marks = {}
    zero = np.zeros((1024, dim), dtype=np.int64)
    for _ in range(16):
        c.run(zero)
        marks[c.time] = c.memory_bytes()
    if kind == "hybrid":
        # k levels of dim int64 after 2^k steps: grows by 8·dim bytes per doubling.
        assert marks[1 << 14] - marks[1 << 10] == 4 * 8 * dim
        assert marks[1 << 14] - base == 14 * 8 * dim
    else:
        assert set(marks.values()) == {base}
        # Seven dim-long buffers, plus the block noise or 15 tree levels.
        bound = (7 + 15) * 8 * dim + 1024 if kind == "binary-tree" else (7 + 1) * 8 * dim + 1024
        assert base <= bound, (kind, base)


# ---------------------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_seeded_counters_repeat_and_say_so(kind: str) -> None:
    xs = np.arange(40).reshape(20, 2) - 20
    a = make(kind, 1, 2, 20, rng=Rng(seed=8)).run(xs)
    b = make(kind, 1, 2, 20, rng=Rng(seed=8)).run(xs)
    c = make(kind, 1, 2, 20, rng=Rng(seed=9)).run(xs)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    seeded = make(kind, 1, 2, 20, rng=Rng(seed=8))
    assert seeded.seeded and "NOT PRIVATE" in repr(seeded)
    private = make(kind, 1, 2, 20)
    assert not private.seeded and "NOT PRIVATE" not in repr(private)
    assert repr(private).startswith(f"Counter({kind!r}, epsilon=1, dim=2")
    os1, os2 = make(kind, 1, 2, 20).run(xs), make(kind, 1, 2, 20).run(xs)
    assert not np.array_equal(os1, os2)


def test_properties_and_release() -> None:
    c = Counter("binary-tree", Fraction(1, 4), 3, horizon=10, rng=Rng(seed=1))
    assert (c.kind, c.epsilon, c.dim, c.horizon) == ("binary-tree", Fraction(1, 4), 3, 10)
    assert c.time == 0
    np.testing.assert_array_equal(c.release, np.zeros(3, dtype=np.int64))
    r = c.step([1, 2, 3])
    assert r.dtype == np.int64 and r.shape == (3,)
    np.testing.assert_array_equal(c.release, r)
    assert c.time == 1
    h = Counter("hybrid", 2, rng=Rng(seed=1))
    assert h.horizon is None and h.dim == 1
    out = h.run([1, 2, 3])
    assert out.shape == (3,) and out.dtype == np.int64
    assert h.step(np.int64(4)).shape == (1,)
    assert h.run(np.zeros((0, 1), dtype=np.int64)).shape == (0, 1)
    assert h.run([]).shape == (0,)
    assert h.time == 4


def test_shared_generator_is_used_in_order() -> None:
    # Two counters on one seeded generator take their master keys from it in turn.
    g = Rng(seed=3)
    a, b = Counter("simple", 1, rng=g), Counter("simple", 1, rng=g)
    ra, rb = a.step(0), b.step(0)
    words = Rng(seed=3).integers(8).astype("<u8").tobytes()
    for got, master in [(ra, words[:32]), (rb, words[32:])]:
        (key,) = _core._counter_step_keys(master, [0], 1)
        assert int(got[0]) == int(noise.discrete_laplace(1, 1, rng=Rng(seed=key))[0])


@pytest.mark.parametrize("kind", KINDS)
def test_rejected_steps_change_nothing(kind: str) -> None:
    g = Rng(seed=12)
    c = make(kind, 1, 2, 5, rng=g)
    c.step([2**62, 1])
    before, t = c.release.copy(), c.time
    twin_rng = Rng(seed=12)
    twin = make(kind, 1, 2, 5, rng=twin_rng)
    twin.step([2**62, 1])
    with pytest.raises(OverflowError):
        c.step([2**62, 0])  # the exact running sum leaves int64
    with pytest.raises(OverflowError):
        c.run([[1, 1], [2**62, 0]])  # all-or-nothing batch
    with pytest.raises(ValueError, match="shape"):
        c.step([1, 2, 3])
    with pytest.raises(ValueError, match="int increment needs dim == 1"):
        c.step(1)
    with pytest.raises(TypeError, match="integers"):
        c.step([1.5, 2.0])
    with pytest.raises(TypeError, match="integers"):
        c.step([True, False])
    with pytest.raises(TypeError, match="integers"):
        c.step(["a", "b"])
    with pytest.raises(ValueError, match="int64"):
        c.step([2**63, 0])
    with pytest.raises(ValueError, match="int64"):
        c.step(np.array([2**63, 0], dtype=np.uint64))
    with pytest.raises(ValueError, match="shape"):
        c.run(np.zeros((3, 3), dtype=np.int64))
    with pytest.raises(ValueError, match="shape"):
        c.run(np.zeros(3, dtype=np.int64))
    np.testing.assert_array_equal(c.release, before)
    assert c.time == t
    # Counter and generator continue exactly like a twin that saw no rejected step.
    np.testing.assert_array_equal(c.step([-5, 5]), twin.step([-5, 5]))


@pytest.mark.parametrize("kind", BOUNDED)
def test_horizon_is_enforced(kind: str) -> None:
    c = Counter(kind, 1, horizon=3, rng=Rng(seed=2))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="horizon"):
        c.run([1, 2, 3, 4])
    assert c.time == 0
    c.run([1, 2])
    c.step(3)
    with pytest.raises(ValueError, match="horizon of 3 steps is reached"):
        c.step(4)
    assert c.time == 3


def test_bad_parameters() -> None:
    with pytest.raises(TypeError, match="kind"):
        Counter(3, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind must be"):
        Counter("tree", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs a horizon"):
        Counter("block", 1)
    with pytest.raises(ValueError, match="has no horizon"):
        Counter("hybrid", 1, horizon=10)
    with pytest.raises(ValueError, match="epsilon"):
        Counter("simple", 0)
    with pytest.raises(ValueError, match="epsilon"):
        Counter("simple", float("nan"))
    with pytest.raises(TypeError, match="epsilon"):
        Counter("simple", "1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dim"):
        Counter("simple", 1, 0)
    with pytest.raises(TypeError, match="dim"):
        Counter("simple", 1, 2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="horizon"):
        Counter("binary-tree", 1, horizon=0)
    with pytest.raises(TypeError, match="horizon"):
        Counter("binary-tree", 1, horizon=True)
    with pytest.raises(ValueError, match="horizon"):
        Counter("binary-tree", 1, horizon=2**64)
    with pytest.raises(TypeError, match="rng"):
        Counter("simple", 1, rng=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at most 2\\^56"):
        Counter("hybrid", Fraction(1, 2**52))

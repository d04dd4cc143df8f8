//! Lazy skipping over steps that each fire independently with probability
//! `p = P(Z > c)`, `Z` discrete Laplace with rational scale `s`: the first
//! firing step among `1..=n` by inversion of ONE uniform, exactly.
//!
//! With `ρ = e^{-1/s}`, `p = ρ^{c+1}/(1+ρ)` for `c ≥ 0` and
//! `p = 1 − ρ^{|c|}/(1+ρ)` for `c < 0`. For a uniform `V ∈ [0, 1)`,
//! `G = min{g ≥ 1 : V ≥ (1−p)^g}` has `P(G > g) = (1−p)^g`, the law of the
//! first success of independent `Bernoulli(p)` steps. `V` is revealed bit by
//! bit and compared against rigorous dyadic brackets of `(1−p)^g` (all
//! rounding directed outward), so only exact integer comparisons decide.
//! `(1−p)^g` is irrational for every `g ≥ 1` (`ρ` is transcendental), so
//! every comparison terminates with probability one.

use crate::error::{invalid, Result};
use crate::noise::bernoulli::LazyUniform;
use crate::noise::DiscreteLaplace;
use crate::rational::Rational;
use crate::rng::Rng;
use num_bigint::BigUint;
use num_traits::{CheckedSub, One, ToPrimitive, Zero};

/// The first firing step `G ∈ {1, 2, …}` among steps `1..=n`, or `None` if no
/// step in `1..=n` fires, with exactly the distribution of running `n`
/// independent per-step tests (`P(G > g) = (1−p)^g`), where each step fires
/// with probability `p = P(Z > c)` for `Z` discrete Laplace of scale `scale`.
///
/// One uniform decides the whole call: `None` is one comparison at `g = n`,
/// and otherwise `G` is found by binary search on `[1, n]` with the same
/// uniform. `n == 0` returns `None` without drawing. Fails when `scale` is zero.
pub fn first_firing(rng: &mut Rng, scale: &Rational, c: i64, n: u64) -> Result<Option<u64>> {
    Ok(FiringSkipper::new(scale, c)?.first_firing(rng, n))
}

/// [`first_firing`] for repeated calls with the same `scale` and `c`: the
/// brackets of `1 − p` are computed once per precision and reused, which
/// makes a call several times cheaper. Same draws, same results.
pub struct FiringSkipper {
    thresholds: Thresholds,
}

impl FiringSkipper {
    /// Steps firing with probability `P(Z > c)`, `Z` discrete Laplace of
    /// scale `scale`. Fails when `scale` is zero.
    pub fn new(scale: &Rational, c: i64) -> Result<Self> {
        if scale.is_zero() {
            return Err(invalid!("scale must be positive, got 0"));
        }
        Ok(Self {
            thresholds: Thresholds::new(scale, c),
        })
    }

    /// As [`first_firing`] with this skipper's `scale` and `c`.
    pub fn first_firing(&mut self, rng: &mut Rng, n: u64) -> Option<u64> {
        if n == 0 {
            return None;
        }
        let first = rng.next_u32();
        self.first_firing_from(rng, n, first)
    }

    /// [`FiringSkipper::first_firing`] whose uniform `V` starts with the 32
    /// bits `first` (already drawn from `rng`, e.g. by [`TailTest`]'s fast
    /// path); further bits come from `rng`. `n ≥ 1`.
    fn first_firing_from(&mut self, rng: &mut Rng, n: u64, first: u32) -> Option<u64> {
        let thresholds = &mut self.thresholds;
        let mut v = LazyUniform::new(first);
        if v.below(rng, |bits| thresholds.power_bracket(n, bits)) {
            // V < (1−p)^n: no step in 1..=n fires.
            return None;
        }
        // Invariant: V < (1−p)^lo (vacuous for lo = 0) and V ≥ (1−p)^hi.
        let (mut lo, mut hi) = (0u64, n);
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            if v.below(rng, |bits| thresholds.power_bracket(mid, bits)) {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        Some(hi)
    }
}

/// Runs up to this length that may fire are drawn test by test.
const SHORT_RUN: u64 = 32;
/// The bit length of [`SHORT_RUN`]: `min_c[SHORT_RUN_BITS]` covers `n ≤ SHORT_RUN`.
const SHORT_RUN_BITS: usize = 6;

/// Runs of threshold tests "`Z > c`?" with `Z` discrete Laplace of a fixed
/// scale, as sparse-vector counters make them: [`TailTest::first_firing`]
/// returns the first firing test among `n` with exactly the law of `n`
/// independent draws, at the cost of one 32-bit word when firing is
/// negligible.
///
/// Fast path: if `n·p ≤ 2^{-32}` then `(1−p)^n ≥ 1 − n·p ≥ 1 − 2^{-32}`, so
/// a uniform `V` whose first 32 bits `w` satisfy `w ≤ 2^{32} − 2` has
/// `V < (w+1)/2^{32} ≤ (1−p)^n`: no test fires, decided exactly. The bound
/// on `n·p` is checked in integers: `p ≤ ρ^{c+1} = e^{−(c+1)/s}` for `c ≥ 0`,
/// and `n < 2^k` with `k` the bit length of `n`, so `c + 1 ≥ (32 + k)·s·ln 2`
/// suffices; [`TailTest::new`] tabulates the smallest such `c` per `k` with
/// `ln 2` rounded up. Otherwise: a single test is one exact draw of `Z`, and
/// a run is [`FiringSkipper`] continuing from the same 32 bits (so the fast
/// path only short-cuts a comparison whose outcome is certain).
#[derive(Clone, Debug)]
pub struct TailTest {
    noise: DiscreteLaplace,
    /// `min_c[k]`: the smallest `c` for which the fast path holds for every
    /// `n < 2^k` (`i64::MAX` when none fits).
    min_c: [i64; 65],
}

impl TailTest {
    /// Tests against discrete Laplace noise of scale `scale` (`0 < scale ≤ 2^56`).
    pub fn new(scale: &Rational) -> Result<Self> {
        let noise = DiscreteLaplace::new(scale)?;
        // ln 2 < 69314718056 / 10^11.
        let ln2_num = BigUint::from(69_314_718_056u64);
        let ln2_den = BigUint::from(100_000_000_000u64);
        let mut min_c = [i64::MAX; 65];
        for (k, slot) in min_c.iter_mut().enumerate() {
            // c + 1 ≥ ⌈(32 + k)·s·ln 2⌉, s = num/den.
            let num = BigUint::from(32 + k as u64) * scale.numer() * &ln2_num;
            let den = scale.denom() * &ln2_den;
            let need = (num + &den - 1u32) / den;
            if let Some(c) = need.to_i64() {
                *slot = c - 1;
            }
        }
        Ok(Self { noise, min_c })
    }

    /// The scale of the test noise.
    pub fn scale(&self) -> &Rational {
        self.noise.scale()
    }

    /// One draw of the test noise `Z` (for the thresholds, which use the same scale).
    pub fn sample(&self, rng: &mut Rng) -> Result<i64> {
        self.noise.sample(rng)
    }

    /// The first of `n` independent tests `Z_i > c` that fires (`Some(i)`,
    /// `1 ≤ i ≤ n`), or `None`; exact. `n = 0` draws nothing. Fails only if
    /// a draw of `Z` overflows `i64` (probability below `e^{-64}`).
    pub fn first_firing(&self, rng: &mut Rng, c: i64, n: u64) -> Result<Option<u64>> {
        if n == 0 {
            return Ok(None);
        }
        let k = (64 - n.leading_zeros()) as usize;
        if c >= self.min_c[k] {
            let first = rng.next_u32();
            if first != u32::MAX {
                return Ok(None);
            }
            let mut skipper = FiringSkipper::new(self.noise.scale(), c)?;
            return Ok(skipper.first_firing_from(rng, n, first));
        }
        if n <= SHORT_RUN {
            // Short runs near the threshold: plain draws are cheaper than brackets.
            for i in 1..=n {
                if self.noise.sample(rng)? > c {
                    return Ok(Some(i));
                }
            }
            return Ok(None);
        }
        Ok(FiringSkipper::new(self.noise.scale(), c)?.first_firing(rng, n))
    }

    /// [`TailTest::first_firing`] as a fixed function of a word `first` and
    /// the stream of the generator `rng()` (built only when needed) whatever
    /// `n`: calls with the same randomness and different `n` agree on the
    /// tests they share, so a keyed run of tests can be read in pieces (each
    /// call replays the run from its first test). Exact: the tests are
    /// independent, each fires with probability `P(Z > c)`.
    ///
    /// If `c` is far enough from the threshold that the fast path holds for
    /// every `n ≤ 32`, one uniform `V` whose first 32 bits are `first` decides
    /// the whole run (as [`TailTest::first_firing_coupled`]). Otherwise the
    /// first 32 tests are drawn one by one from the generator, in order (each
    /// a 32-bit word if one test's firing is below `2^{-33}`, completed
    /// exactly by [`FiringSkipper`] when the word is all ones; else one draw
    /// of `Z`), and if none fires, the coupled uniform that follows in the
    /// stream decides the rest. Fails only if a draw of `Z` overflows `i64`
    /// (probability below `e^{-64}`).
    pub fn first_firing_replayable(
        &self,
        first: u32,
        rng: impl FnOnce() -> Rng,
        c: i64,
        n: u64,
    ) -> Result<Option<u64>> {
        if n == 0 {
            return Ok(None);
        }
        if c >= self.min_c[SHORT_RUN_BITS] {
            if self.silent(c, n, first) {
                return Ok(None);
            }
            let mut skipper = FiringSkipper::new(self.noise.scale(), c)?;
            return Ok(skipper.first_firing_from(&mut rng(), n, first));
        }
        let mut rng = rng();
        for i in 1..=n.min(SHORT_RUN) {
            let fires = if c >= self.min_c[1] {
                self.first_firing_coupled(&mut rng, c, 1)?.is_some()
            } else {
                self.noise.sample(&mut rng)? > c
            };
            if fires {
                return Ok(Some(i));
            }
        }
        if n <= SHORT_RUN {
            return Ok(None);
        }
        let rest = self.first_firing_coupled(&mut rng, c, n - SHORT_RUN)?;
        Ok(rest.map(|g| g + SHORT_RUN))
    }

    /// The fast path: whether a uniform `V` whose first 32 bits are `first`
    /// decides that none of `n ≥ 1` tests fires (`n·p ≤ 2^{-32}`, `first` not
    /// all ones).
    fn silent(&self, c: i64, n: u64, first: u32) -> bool {
        let k = (64 - n.leading_zeros()) as usize;
        c >= self.min_c[k] && first != u32::MAX
    }

    /// [`TailTest::first_firing`] decided by one uniform `V` whatever `n`
    /// (the fast path, or [`FiringSkipper`], never test-by-test draws): the
    /// first firing test is a function `G(V)`, and the answer is `Some(G)` if
    /// `G ≤ n`, else `None`. So calls with the same generator state and
    /// different `n` agree on the tests they share, which lets a keyed run of
    /// tests be read in pieces. Exact; `n = 0` draws nothing.
    pub fn first_firing_coupled(&self, rng: &mut Rng, c: i64, n: u64) -> Result<Option<u64>> {
        if n == 0 {
            return Ok(None);
        }
        let first = rng.next_u32();
        if self.silent(c, n, first) {
            return Ok(None);
        }
        let mut skipper = FiringSkipper::new(self.noise.scale(), c)?;
        Ok(skipper.first_firing_from(rng, n, first))
    }
}

/// Brackets of `q = 1 − p` on dyadic grids, cached per grid, and of its powers.
struct Thresholds {
    /// `1/s = x_num / x_den`.
    x_num: BigUint,
    x_den: BigUint,
    /// `ρ^k` is the tail term: `k = c + 1` for `c ≥ 0`, `k = |c|` for `c < 0`.
    k: BigUint,
    c_nonneg: bool,
    cache: Vec<(u64, BigUint, BigUint)>,
}

impl Thresholds {
    fn new(scale: &Rational, c: i64) -> Self {
        let (c_nonneg, k) = if c >= 0 {
            (true, BigUint::from(c as u64) + 1u32)
        } else {
            (false, BigUint::from(c.unsigned_abs()))
        };
        Self {
            x_num: scale.denom().clone(),
            x_den: scale.numer().clone(),
            k,
            c_nonneg,
            cache: Vec::new(),
        }
    }

    /// `(lo, hi)` with `lo/2^w ≤ 1 − p ≤ hi/2^w`.
    fn q_bracket(&mut self, w: u64) -> (BigUint, BigUint) {
        if let Some((_, lo, hi)) = self.cache.iter().find(|(cw, _, _)| *cw == w) {
            return (lo.clone(), hi.clone());
        }
        let bracket = q_bracket(&self.x_num, &self.x_den, &self.k, self.c_nonneg, w);
        self.cache.push((w, bracket.0.clone(), bracket.1.clone()));
        bracket
    }

    /// `(lo, hi, 2^w)` bracketing `(1 − p)^g`, with `w` chosen from the number
    /// of bits of `V` already known so that the bracket is usually finer
    /// than `V`'s prefix interval.
    fn power_bracket(&mut self, g: u64, bits: u64) -> (BigUint, BigUint, BigUint) {
        let log_g = u64::from(64 - g.leading_zeros());
        let w = (bits + 2 * log_g + 24).div_ceil(32) * 32;
        let (lo, hi) = self.q_bracket(w);
        let (lo, hi) = pow_bracket(&lo, &hi, &BigUint::from(g), w);
        (lo, hi, BigUint::one() << w)
    }
}

/// `floor(a · b / 2^w)`.
fn mul_down(a: &BigUint, b: &BigUint, w: u64) -> BigUint {
    (a * b) >> w
}

/// `ceil(a · b / 2^w)`.
fn mul_up(a: &BigUint, b: &BigUint, w: u64) -> BigUint {
    ((a * b) + ((BigUint::one() << w) - 1u32)) >> w
}

/// `ceil(a / b)` for `b > 0`.
fn div_up(a: &BigUint, b: &BigUint) -> BigUint {
    (a + b - 1u32) / b
}

/// `(lo, hi)` with `lo/2^w ≤ y^e ≤ hi/2^w` given `lo/2^w ≤ y ≤ hi/2^w`,
/// `0 ≤ lo ≤ hi ≤ 2^w`: exponentiation by squaring, rounding every lower
/// product down and every upper product up (products of non-negative
/// numbers are monotone, so the bracket stays rigorous and on the grid).
fn pow_bracket(lo: &BigUint, hi: &BigUint, e: &BigUint, w: u64) -> (BigUint, BigUint) {
    let one = BigUint::one() << w;
    let (mut r_lo, mut r_hi) = (one.clone(), one);
    let (mut b_lo, mut b_hi) = (lo.clone(), hi.clone());
    let bits = e.bits();
    for i in 0..bits {
        if e.bit(i) {
            r_lo = mul_down(&r_lo, &b_lo, w);
            r_hi = mul_up(&r_hi, &b_hi, w);
        }
        if i + 1 < bits {
            b_lo = mul_down(&b_lo, &b_lo, w);
            b_hi = mul_up(&b_hi, &b_hi, w);
        }
    }
    (r_lo, r_hi)
}

/// `(lo, hi)` with `lo/2^w ≤ e^{-a/b} ≤ hi/2^w` for `0 ≤ a ≤ b`, `b > 0`.
///
/// The series `Σ (−f)^k/k!` with `f = a/b ≤ 1` has non-increasing terms
/// `t_k = f^k/k!` (`t_{k+1}/t_k = f/(k+1) ≤ 1`) tending to zero, so the limit
/// lies within `t_k` of the partial sum `S_{k−1}`. Terms are carried as
/// lower and upper grid values (rounded down and up), and the sum's bounds
/// take the matching sides.
fn exp_neg_frac(a: &BigUint, b: &BigUint, w: u64) -> (BigUint, BigUint) {
    debug_assert!(a <= b && !b.is_zero());
    let unit = BigUint::one() << w;
    if a.is_zero() {
        return (unit.clone(), unit);
    }
    let (mut t_lo, mut t_hi) = (unit.clone(), unit.clone());
    // Even-indexed terms add, odd-indexed terms subtract.
    let (mut plus_lo, mut plus_hi) = (unit.clone(), unit.clone());
    let (mut minus_lo, mut minus_hi) = (BigUint::zero(), BigUint::zero());
    let mut k = 1u64;
    loop {
        let d = b * k;
        t_lo = (&t_lo * a) / &d;
        t_hi = div_up(&(&t_hi * a), &d);
        if t_hi <= BigUint::one() {
            // |e^{-f} − S_{k−1}| ≤ t_k ≤ t_hi.
            let neg = &minus_hi + &t_hi;
            let lo = if plus_lo > neg {
                plus_lo - neg
            } else {
                BigUint::zero()
            };
            let hi = (plus_hi + &t_hi)
                .checked_sub(&minus_lo)
                .unwrap_or_default()
                .min(unit);
            return (lo, hi);
        }
        if k % 2 == 0 {
            plus_lo += &t_lo;
            plus_hi += &t_hi;
        } else {
            minus_lo += &t_lo;
            minus_hi += &t_hi;
        }
        k += 1;
    }
}

/// `(lo, hi)` with `lo/2^w ≤ e^{-num/den} ≤ hi/2^w` for `den > 0`:
/// `e^{-x} = (e^{-1})^{floor(x)} · e^{-frac(x)}`.
fn exp_neg(num: &BigUint, den: &BigUint, w: u64) -> (BigUint, BigUint) {
    let q = num / den;
    let f = num % den;
    let (f_lo, f_hi) = exp_neg_frac(&f, den, w);
    if q.is_zero() {
        return (f_lo, f_hi);
    }
    let one = BigUint::one();
    let (e_lo, e_hi) = exp_neg_frac(&one, &one, w);
    let (i_lo, i_hi) = pow_bracket(&e_lo, &e_hi, &q, w);
    (mul_down(&i_lo, &f_lo, w), mul_up(&i_hi, &f_hi, w))
}

/// `(lo, hi)` with `lo/2^w ≤ 1 − p ≤ hi/2^w`, where `ρ = e^{-x_num/x_den}`,
/// `u = ρ^k/(1+ρ)`, and `1 − p = 1 − u` for `c ≥ 0`, `1 − p = u` for `c < 0`.
fn q_bracket(
    x_num: &BigUint,
    x_den: &BigUint,
    k: &BigUint,
    c_nonneg: bool,
    w: u64,
) -> (BigUint, BigUint) {
    let unit = BigUint::one() << w;
    let (r_lo, r_hi) = exp_neg(x_num, x_den, w);
    let (a_lo, a_hi) = exp_neg(&(x_num * k), x_den, w);
    // u increases with ρ^k and decreases with ρ.
    let u_lo = (&a_lo << w) / (&unit + &r_hi);
    let u_hi = div_up(&(&a_hi << w), &(&unit + &r_lo));
    if c_nonneg {
        let lo = unit.checked_sub(&u_hi).unwrap_or_default();
        let hi = unit.checked_sub(&u_lo).unwrap_or_default();
        (lo, hi)
    } else {
        (u_lo, u_hi.min(unit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::test_support::chi2_critical;
    use num_traits::ToPrimitive;

    fn to_f64(x: &BigUint, w: u64) -> f64 {
        // Keep the top 64 bits so the conversion never overflows.
        let shift = x.bits().saturating_sub(64);
        (x >> shift).to_f64().unwrap() * 2f64.powi(shift as i32 - w as i32)
    }

    fn big(x: u64) -> BigUint {
        BigUint::from(x)
    }

    /// p in f64, for the reference pmf only.
    fn p_f64(scale: f64, c: i64) -> f64 {
        let rho = (-1.0 / scale).exp();
        if c >= 0 {
            rho.powi(c as i32 + 1) / (1.0 + rho)
        } else {
            1.0 - rho.powi((-c) as i32) / (1.0 + rho)
        }
    }

    /// e^{-1} to 50 decimal places (published constant; independent check).
    const EXP_NEG_ONE_50: &str = "36787944117144232159552377016146086744581113103176";

    #[test]
    fn exp_brackets_contain_the_truth_and_shrink() {
        let cases = [
            (0u64, 1u64),
            (3, 10),
            (1, 1),
            (3, 2),
            (7, 3),
            (31, 1),
            (401, 4),
            (999, 1000),
        ];
        for &(num, den) in &cases {
            let truth = (-(num as f64) / den as f64).exp();
            let mut prev_width = f64::INFINITY;
            for w in [40u64, 64, 128, 256] {
                let (lo, hi) = exp_neg(&big(num), &big(den), w);
                assert!(lo <= hi);
                if num > 0 {
                    assert!(lo < hi, "{num}/{den} at {w}");
                }
                let (l, h) = (to_f64(&lo, w), to_f64(&hi, w));
                let tol = 1e-12 * truth + 2f64.powi(-(w as i32) + 8);
                assert!(l <= truth + tol && h >= truth - tol, "{num}/{den} at {w}");
                assert!(h - l <= 2f64.powi(-(w as i32) + 16), "{num}/{den} at {w}");
                let width = to_f64(&(&hi - &lo), w);
                if num > 0 {
                    assert!(width < prev_width, "{num}/{den} at {w}");
                }
                prev_width = width;
            }
        }
        // e^{-1} against 50 published digits at 150 bits.
        let e = BigUint::parse_bytes(EXP_NEG_ONE_50.as_bytes(), 10).unwrap();
        let ten50 = BigUint::from(10u32).pow(50);
        let (lo, hi) = exp_neg(&big(1), &big(1), 150);
        // e ∈ [d, d + 1]/10^50 for the truncated decimal d.
        assert!(&lo * &ten50 <= (&e + 1u32) << 150u32);
        assert!(&hi * &ten50 >= &e << 150u32);
        assert!(&hi - &lo < big(1 << 10));
    }

    #[test]
    fn q_and_power_brackets_contain_the_truth() {
        for &(sn, sd, c) in &[
            (2u64, 1u64, 0i64),
            (1, 2, 1),
            (2, 1, -1),
            (1, 1, 30),
            (3, 7, -4),
        ] {
            let scale = Rational::new(sn, sd).unwrap();
            let p = p_f64(sn as f64 / sd as f64, c);
            let mut t = Thresholds::new(&scale, c);
            for g in [1u64, 2, 7, 20, 1000, 1_000_000] {
                let truth = (1.0 - p).powf(g as f64);
                for bits in [32u64, 100, 300] {
                    let (lo, hi, den) = t.power_bracket(g, bits);
                    let w = den.bits() - 1;
                    let (l, h) = (to_f64(&lo, w), to_f64(&hi, w));
                    let tol = 1e-9 * truth + 1e-300;
                    assert!(lo < hi);
                    assert!(
                        l <= truth + tol && h >= truth - tol,
                        "s={sn}/{sd} c={c} g={g}"
                    );
                    // Finer than the prefix interval of V at `bits` bits.
                    assert!(
                        (&hi - &lo) << bits < den,
                        "s={sn}/{sd} c={c} g={g} bits={bits}"
                    );
                }
            }
        }
    }

    /// Chi-square over outcomes {1..n, None} against the exact geometric pmf,
    /// trailing bins merged until each holds at least 50 expected draws.
    fn check_distribution(sn: u64, sd: u64, c: i64, n: u64, draws: usize, seed: u64) {
        let scale = Rational::new(sn, sd).unwrap();
        let p = p_f64(sn as f64 / sd as f64, c);
        let mut rng = Rng::seed_from_u64(seed);
        let mut counts = vec![0f64; n as usize + 1]; // index g−1, last = None
        let mut skipper = FiringSkipper::new(&scale, c).unwrap();
        for i in 0..draws {
            // Mostly through one skipper (cached brackets); every 16th draw
            // through the free function, which must agree in law.
            let outcome = if i % 16 == 0 {
                first_firing(&mut rng, &scale, c, n).unwrap()
            } else {
                skipper.first_firing(&mut rng, n)
            };
            match outcome {
                Some(g) => {
                    assert!((1..=n).contains(&g));
                    counts[g as usize - 1] += 1.0;
                }
                None => counts[n as usize] += 1.0,
            }
        }
        assert_geometric(counts, p, n, draws, &format!("s={sn}/{sd} c={c}"));
    }

    /// Chi-square of the outcome counts `counts` (index g−1, last = None) of
    /// `draws` runs of `n` tests against the geometric law of parameter `p`.
    fn assert_geometric(mut counts: Vec<f64>, p: f64, n: u64, draws: usize, what: &str) {
        let mut probs: Vec<f64> = (1..=n).map(|g| (1.0 - p).powi(g as i32 - 1) * p).collect();
        probs.push((1.0 - p).powi(n as i32));
        let total = draws as f64;
        while probs.len() > 2 && probs[probs.len() - 1] * total < 50.0 {
            let (p_last, c_last) = (probs.pop().unwrap(), counts.pop().unwrap());
            *probs.last_mut().unwrap() += p_last;
            *counts.last_mut().unwrap() += c_last;
        }
        let stat: f64 = counts
            .iter()
            .zip(&probs)
            .map(|(o, p)| (o - total * p).powi(2) / (total * p))
            .sum();
        let crit = chi2_critical((probs.len() - 1) as f64);
        assert!(
            stat < crit,
            "{what} p={p}: chi2 {stat:.1} >= {crit:.1} ({} bins)",
            probs.len()
        );
    }

    /// A replayable run is the same fixed function of its randomness whatever
    /// `n` (so any grouping of calls agrees), and its first firing test has
    /// the geometric law of independent tests, near the threshold (tests one
    /// by one, then the coupled uniform past 32) and far from it.
    #[test]
    fn replayable_runs_agree_across_n_and_follow_the_law() {
        let t = TailTest::new(&Rational::new(2u32, 1u32).unwrap()).unwrap();
        let run = |seed: u64, c: i64, n: u64| {
            let first = Rng::seed_from_u64(seed).next_u32();
            t.first_firing_replayable(first, || Rng::seed_from_u64(seed + (1 << 40)), c, n)
                .unwrap()
        };
        let n = 80u64;
        // p ≈ 0.084 (P(G > 32) ≈ 0.06) and p ≈ 0.62.
        for (c, draws) in [(3i64, 40_000usize), (-1, 20_000)] {
            let mut counts = vec![0f64; n as usize + 1];
            for seed in 0..draws as u64 {
                let g = run(seed, c, n);
                if seed % 8 == 0 {
                    for m in [1, 5, 31, 32, 33, 60] {
                        assert_eq!(run(seed, c, m), g.filter(|&g| g <= m), "c={c} seed {seed}");
                    }
                }
                counts[g.map_or(n as usize, |g| g as usize - 1)] += 1.0;
            }
            assert_geometric(
                counts,
                p_f64(2.0, c),
                n,
                draws,
                &format!("replayable c={c}"),
            );
        }
        // Far from the threshold (per test, then per run of 32): nothing fires,
        // except through an all-ones word, decided exactly.
        for c in [t.min_c[1], t.min_c[SHORT_RUN_BITS]] {
            for seed in 0..2000 {
                assert_eq!(run(seed, c, 1000), None);
            }
            let never = t.first_firing_replayable(u32::MAX, || Rng::seed_from_u64(1), c, 1000);
            assert!(matches!(never, Ok(None | Some(1..=1000))));
        }
    }

    #[test]
    fn distribution_matches_geometric() {
        check_distribution(2, 1, 0, 20, 200_000, 1); // p ≈ 0.38
        check_distribution(1, 2, 1, 20, 200_000, 2); // p ≈ 0.016
        check_distribution(2, 1, -1, 20, 200_000, 3); // p ≈ 0.62
        check_distribution(3, 7, -4, 20, 100_000, 4); // p ≈ 1 − 9e-5
        check_distribution(5, 1, 2, 20, 200_000, 5); // p ≈ 0.3
        check_distribution(5, 1, 2, 1, 200_000, 6); // n = 1: Bernoulli(p)
    }

    #[test]
    fn small_p_skips_a_million_steps() {
        // Speed is measured in benches, never asserted here; this checks the
        // outcome of a long skip with a tiny firing probability.
        let scale = Rational::new(1u32, 1u32).unwrap();
        let mut rng = Rng::seed_from_u64(7);
        let runs = 1000;
        let nones = (0..runs)
            .filter(|_| {
                first_firing(&mut rng, &scale, 30, 1_000_000)
                    .unwrap()
                    .is_none()
            })
            .count();
        // P(Some) = 1 − (1−p)^{10^6} ≈ 2.5e-8 per run.
        assert!(nones >= runs * 99 / 100, "{nones} of {runs}");
    }

    #[test]
    fn results_are_consistent_across_n() {
        let scale = Rational::new(2u32, 1u32).unwrap();
        let (small, large) = (10u64, 1_000_000_000u64);
        let mut fired_small = 0;
        let mut skipper = FiringSkipper::new(&scale, 3).unwrap();
        for seed in 0..3000u64 {
            let mut a = Rng::seed_from_u64(seed);
            let mut b = Rng::seed_from_u64(seed);
            let g_large = first_firing(&mut a, &scale, 3, large).unwrap();
            let g_small = first_firing(&mut b, &scale, 3, small).unwrap();
            // A skipper reused across calls gives the same results.
            let mut d = Rng::seed_from_u64(seed);
            assert_eq!(skipper.first_firing(&mut d, large), g_large, "seed {seed}");
            let g = g_large.expect("p ≈ 0.08 fires within 10^9 steps");
            if let Some(gs) = g_small {
                assert_eq!(gs, g, "seed {seed}");
                fired_small += 1;
            } else {
                assert!(g > small, "seed {seed}: {g}");
            }
        }
        // P(G ≤ 10) ≈ 0.58: both branches are exercised.
        assert!((1000..2500).contains(&fired_small), "{fired_small}");
    }

    #[test]
    fn extreme_thresholds_and_edges() {
        let mut rng = Rng::seed_from_u64(11);
        let one = Rational::new(1u32, 1u32).unwrap();
        for _ in 0..100 {
            // p = 1 − e^{-huge}: the first step fires.
            assert_eq!(
                first_firing(&mut rng, &one, i64::MIN, u64::MAX).unwrap(),
                Some(1)
            );
            // p = e^{-huge}: nothing fires.
            assert_eq!(
                first_firing(&mut rng, &one, i64::MAX, u64::MAX).unwrap(),
                None
            );
        }
        // Tiny and huge scales stay exact and fast.
        let tiny = Rational::from_f64(1e-300, "scale").unwrap();
        assert_eq!(first_firing(&mut rng, &tiny, 0, 1000).unwrap(), None);
        assert_eq!(first_firing(&mut rng, &tiny, -1, 1000).unwrap(), Some(1));
        let huge = Rational::new(BigUint::from(10u32).pow(60), 1u32).unwrap();
        assert!(first_firing(&mut rng, &huge, 0, 1000).unwrap().is_some()); // p ≈ 1/2
                                                                            // n = 0 draws nothing.
        let mut a = Rng::seed_from_u64(3);
        let mut b = Rng::seed_from_u64(3);
        assert_eq!(first_firing(&mut a, &one, 0, 0).unwrap(), None);
        assert_eq!(a.next_u64(), b.next_u64());
    }

    #[test]
    fn zero_scale_is_an_error() {
        let mut rng = Rng::seed_from_u64(0);
        let zero = Rational::new(0u32, 5u32).unwrap();
        assert!(first_firing(&mut rng, &zero, 0, 10).is_err());
        assert!(first_firing(&mut rng, &zero, 0, 0).is_err());
        assert!(FiringSkipper::new(&zero, 3).is_err());
    }
}

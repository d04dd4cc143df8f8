//! Exact Bernoulli draws: with a rational probability, and with probability
//! `exp(-γ)` for a rational `γ ≥ 0` (Canonne, Kamath, Steinke 2020, Algorithm 1,
//! with the standard extension to `γ > 1`).
//!
//! Only integer comparisons of exactly uniform integers decide an outcome.

use super::nat::Nat;
use crate::rng::Rng;
use num_bigint::BigUint;
use num_traits::{One, Zero};
use std::sync::OnceLock;

/// `Bernoulli(num / den)`; `num >= den` gives `true`, `num == 0` gives
/// `false`, both without drawing.
#[inline]
pub(crate) fn bernoulli_ratio<N: Nat>(rng: &mut Rng, num: &N, den: &N) -> bool {
    if num.is_zero() {
        return false;
    }
    if num >= den {
        return true;
    }
    den.uniform_below(rng) < *num
}

/// `Bernoulli(exp(-1))`, exactly, from one 32-bit word almost always.
///
/// The coin is `U < e^{-1}` for a uniform `U ∈ [0, 1)` whose first 32 bits
/// are `u`. With `T_1 = floor(e^{-1} · 2^32)` (computed once, exactly, from
/// the alternating series), `u < T_1` already implies `U < e^{-1}` and
/// `u > T_1` implies `U > e^{-1}`. Only `u == T_1` (probability 2^-32) needs
/// more bits, which [`LazyUniform::below_exp_neg`] draws against exact bounds.
#[inline]
pub(crate) fn bernoulli_exp_neg_one(rng: &mut Rng) -> bool {
    let t = exp_neg_thresholds()[0];
    let u = rng.next_u32();
    if u != t {
        return u < t;
    }
    LazyUniform::new(u).below_exp_neg(rng, 1)
}

/// `V` with `P(V >= v) = e^{-v}` (geometric with ratio `e^{-1}`), exactly,
/// by inversion of one uniform `U`: `V = max{v : U < e^{-v}}`.
///
/// Equivalent in distribution to counting successes of
/// [`bernoulli_exp_neg_one`] until the first failure, but one 32-bit word
/// decides it unless `U`'s first 32 bits tie with a threshold.
#[inline]
pub(crate) fn geometric_exp_neg_one(rng: &mut Rng) -> u64 {
    let table = exp_neg_thresholds();
    let u = rng.next_u32();
    for (i, &t) in table.iter().enumerate() {
        // Invariant: U < e^{-i} is known (vacuous for i = 0).
        if u > t {
            return i as u64;
        }
        if u == t {
            // U ∈ [t, t+1)/2^32; and U > e^{-(i+2)} because T_{i+2} < t.
            return i as u64 + u64::from(LazyUniform::new(u).below_exp_neg(rng, i as u64 + 1));
        }
    }
    // u < T_J for every tabulated J: only u = 0 reaches here (probability 2^-32).
    let mut lazy = LazyUniform::new(u);
    let mut v = table.len() as u64;
    while lazy.below_exp_neg(rng, v + 1) {
        v += 1;
    }
    v
}

/// `T_j = floor(e^{-j} · 2^32)` for `j = 1, 2, ...` while positive, exact.
fn exp_neg_thresholds() -> &'static [u32] {
    static TABLE: OnceLock<Vec<u32>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut table = Vec::new();
        for j in 1u64.. {
            let mut precision = 48;
            let t = loop {
                let (lo, hi, den) = exp_neg_bracket(j, precision);
                let floor_lo = (lo << 32u32) / &den;
                let floor_hi = (hi << 32u32) / &den;
                if floor_lo == floor_hi {
                    // e^{-j} < 1, so the floor fits in 32 bits.
                    break floor_lo.to_u32_digits().first().copied().unwrap_or(0);
                }
                precision += 32;
            };
            if t == 0 {
                break;
            }
            table.push(t);
        }
        table
    })
}

/// A uniform `U ∈ [0, 1)` revealed bit by bit: `U ∈ [r/2^n, (r+1)/2^n)`.
/// Comparisons against irrational thresholds draw bits only until decided,
/// and later comparisons reuse the bits already drawn. Every bit comes from
/// the generator in stream order, so `U` is the same number whatever
/// comparisons are asked of it.
pub(crate) struct LazyUniform {
    r: BigUint,
    n: u64,
}

impl LazyUniform {
    /// A uniform whose first 32 bits are `u`.
    pub(crate) fn new(u: u32) -> Self {
        Self {
            r: BigUint::from(u),
            n: 32,
        }
    }

    /// Whether `U < e^{-j}`, exactly. Terminates with probability one
    /// because `e^{-j}` is irrational.
    pub(crate) fn below_exp_neg(&mut self, rng: &mut Rng, j: u64) -> bool {
        self.below(rng, |bits| exp_neg_bracket(j, bits + 8))
    }

    /// Whether `U < t`, exactly, for a threshold `t` known through brackets:
    /// `bracket(bits)` returns `(lo, hi, den)` with `lo/den ≤ t ≤ hi/den`
    /// (it is told how many bits of `U` are known, to choose its precision).
    /// Draws bits of `U` until the prefix interval lies on one side; this
    /// terminates with probability one when `t` is irrational and the
    /// brackets shrink to `t` as the precision grows.
    pub(crate) fn below(
        &mut self,
        rng: &mut Rng,
        mut bracket: impl FnMut(u64) -> (BigUint, BigUint, BigUint),
    ) -> bool {
        loop {
            let (lo, hi, den) = bracket(self.n);
            // U < (r+1)/2^n ≤ lo/den ≤ t.
            if (&self.r + 1u32) * &den <= &lo << self.n {
                return true;
            }
            // U ≥ r/2^n ≥ hi/den ≥ t.
            if &self.r * &den >= &hi << self.n {
                return false;
            }
            self.r = (&self.r << 1u32) + u32::from(rng.bit());
            self.n += 1;
        }
    }
}

/// `(lo, hi, den)` with `lo/den < e^{-j} < hi/den` and `(hi − lo)/den < 2^-precision`,
/// from the `j`-th powers of a bracket of `e^{-1}` (all terms lie in `(0, 1]`,
/// so powering widens the bracket at most `j` times).
fn exp_neg_bracket(j: u64, precision: u64) -> (BigUint, BigUint, BigUint) {
    let extra = 64 - j.leading_zeros() as u64; // >= log2(j)
    let (lo, hi, den) = exp_neg_one_bracket(precision + extra + 1);
    if j == 1 {
        return (lo, hi, den);
    }
    let j = u32::try_from(j).unwrap_or(u32::MAX);
    (lo.pow(j), hi.pow(j), den.pow(j))
}

/// `(lo, hi, den)` with `lo/den < e^{-1} < hi/den` and `(hi − lo)/den < 2^-precision`:
/// two consecutive partial sums of `Σ (−1)^j / j!`, which bracket the limit.
fn exp_neg_one_bracket(precision: u64) -> (BigUint, BigUint, BigUint) {
    // den = k! with k! > 2^precision; the partial sums S_{k−1} and S_k differ by 1/k!.
    let mut den = BigUint::one();
    let mut k = 0u64;
    while k < 2 || den.bits() <= precision {
        k += 1;
        den *= k;
    }
    // S_{k−1} · k! = Σ_{j<k} (−1)^j k!/j!, accumulated as positive and negative parts.
    let (mut plus, mut minus) = (BigUint::zero(), BigUint::zero());
    let mut term = den.clone(); // k!/j! for j = 0
    for j in 0..k {
        if j % 2 == 0 {
            plus += &term;
        } else {
            minus += &term;
        }
        term /= j + 1;
    }
    let s_prev = plus - minus; // positive for k >= 2
    let s_next_up = k % 2 == 0; // S_k = S_{k−1} + (−1)^k / k!
    if s_next_up {
        (s_prev.clone(), s_prev + 1u32, den)
    } else {
        (&s_prev - 1u32, s_prev, den)
    }
}

/// `Bernoulli(exp(-num / den))` for `num >= 0`, `den > 0`.
#[inline]
pub(crate) fn bernoulli_exp_neg<N: Nat>(rng: &mut Rng, num: &N, den: &N) -> bool {
    // exp(-γ) = exp(-1)^floor(γ) · exp(-frac(γ)); stop at the first failure,
    // so a huge γ costs a geometric (mean < 1.6) number of rounds.
    let mut rem = num.clone();
    while rem >= *den {
        if !bernoulli_exp_neg_one(rng) {
            return false;
        }
        rem = rem.sub_le(den);
    }
    if rem.is_zero() {
        return true;
    }
    let mut k = 1u64;
    loop {
        // A_k ~ Bernoulli(γ / k) with γ = rem / den.
        let success = match den.checked_mul(&N::from_u64(k)) {
            Some(dk) => bernoulli_ratio(rng, &rem, &dk),
            None => bernoulli_ratio(rng, &rem.to_big(), &(den.to_big() * k)),
        };
        if !success {
            return k % 2 == 1;
        }
        k += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::test_support::binomial_within;

    fn check_exp(num: u64, den: u64, draws: u64) {
        let mut rng = Rng::seed_from_u64(num * 1000 + den);
        let p = (-(num as f64) / den as f64).exp();
        let hits = (0..draws)
            .filter(|_| bernoulli_exp_neg(&mut rng, &(num as u128), &(den as u128)))
            .count() as u64;
        binomial_within(hits, draws, p, &format!("exp(-{num}/{den})"));
        // The same parameters through the BigUint path.
        let hits = (0..draws)
            .filter(|_| bernoulli_exp_neg(&mut rng, &BigUint::from(num), &BigUint::from(den)))
            .count() as u64;
        binomial_within(hits, draws, p, &format!("big exp(-{num}/{den})"));
    }

    #[test]
    fn exp_neg_matches_probability() {
        for &(n, d) in &[(0, 1), (1, 1), (1, 3), (2, 3), (5, 2), (7, 1), (999, 1000)] {
            check_exp(n, d, 200_000);
        }
    }

    #[test]
    fn exp_neg_one_matches() {
        let mut rng = Rng::seed_from_u64(5);
        let draws = 400_000;
        let hits = (0..draws)
            .filter(|_| bernoulli_exp_neg_one(&mut rng))
            .count() as u64;
        binomial_within(hits, draws, (-1f64).exp(), "exp(-1)");
    }

    /// e^{-1} to 50 decimal places (a published constant, used only to check
    /// the series computation independently).
    const EXP_NEG_ONE_50: &str = "36787944117144232159552377016146086744581113103176";

    fn exp_neg_one_scaled(shift: u32) -> BigUint {
        // floor(e^{-1} · 2^shift) from the decimal expansion (valid for shift <= 150).
        (BigUint::parse_bytes(EXP_NEG_ONE_50.as_bytes(), 10).unwrap() << shift)
            / BigUint::from(10u32).pow(50)
    }

    fn exp_neg_scaled(j: u32, shift: u32) -> BigUint {
        // floor(e^{-j} · 2^shift) from the decimal expansion, for small j and shift.
        let e = BigUint::parse_bytes(EXP_NEG_ONE_50.as_bytes(), 10).unwrap();
        (e.pow(j) << shift) / BigUint::from(10u32).pow(50 * j)
    }

    #[test]
    fn thresholds_are_floors_of_exp_neg_j() {
        let table = exp_neg_thresholds();
        assert_eq!(table.len(), 22); // e^{-22} 2^32 ≈ 1.19, e^{-23} 2^32 ≈ 0.44
        for (i, &t) in table.iter().enumerate() {
            assert_eq!(
                BigUint::from(t),
                exp_neg_scaled(i as u32 + 1, 32),
                "T_{}",
                i + 1
            );
        }
        for precision in [10, 64, 100, 200] {
            let (lo, hi, den) = exp_neg_one_bracket(precision);
            assert!(lo < hi && (&hi - &lo) * (BigUint::one() << precision) < den);
            let x = exp_neg_one_scaled(150);
            // lo/den <= x/2^150 + 2^-150 and hi/den >= x/2^150.
            assert!(&lo << 150u32 <= (&x + 1u32) * &den);
            assert!(&hi << 150u32 >= &x * &den);
        }
    }

    #[test]
    fn lazy_comparison_resolves_ties_with_the_right_probability() {
        // Given the 32-bit prefix T_j, P(U < e^{-j}) = frac(2^32 e^{-j}).
        for j in [1u32, 2, 5] {
            let t = exp_neg_thresholds()[j as usize - 1];
            let fine = exp_neg_scaled(j, 88);
            let frac =
                (&fine - (BigUint::from(t) << 56u32)).to_u64_digits()[0] as f64 / 2f64.powi(56);
            let mut rng = Rng::seed_from_u64(8 + u64::from(j));
            let draws = 100_000;
            let hits = (0..draws)
                .filter(|_| LazyUniform::new(t).below_exp_neg(&mut rng, u64::from(j)))
                .count() as u64;
            binomial_within(hits, draws, frac, &format!("tie at T_{j}"));
        }
        // A prefix far from the threshold decides without drawing.
        let mut rng = Rng::seed_from_u64(1);
        let mut fresh = Rng::seed_from_u64(1);
        assert!(LazyUniform::new(0).below_exp_neg(&mut rng, 3));
        assert!(!LazyUniform::new(u32::MAX).below_exp_neg(&mut rng, 1));
        assert_eq!(rng.next_u64(), fresh.next_u64());
    }

    #[test]
    fn geometric_matches_pmf() {
        let mut rng = Rng::seed_from_u64(12);
        let draws = 400_000usize;
        let mut counts = [0usize; 12]; // 0..=10 and a tail bin
        for _ in 0..draws {
            let v = geometric_exp_neg_one(&mut rng) as usize;
            counts[v.min(11)] += 1;
        }
        let q = (-1f64).exp();
        let mut stat = 0.0;
        for (v, &c) in counts.iter().enumerate() {
            let p = if v < 11 {
                (1.0 - q) * q.powi(v as i32)
            } else {
                q.powi(11)
            };
            let e = draws as f64 * p;
            stat += (c as f64 - e).powi(2) / e;
        }
        assert!(
            stat < crate::noise::test_support::chi2_critical(11.0),
            "chi2 {stat}"
        );
    }

    #[test]
    fn geometric_slow_paths_are_exact() {
        // u = T_j ties, and u = 0 exhausts the table: both finish with valid values.
        let mut rng = Rng::seed_from_u64(3);
        let mut lazy = LazyUniform::new(0);
        // U < 2^-32 < e^{-22}: V >= 22, and V = 22 + (further comparisons).
        assert!(lazy.below_exp_neg(&mut rng, 22));
        let mut v = 22;
        while lazy.below_exp_neg(&mut rng, v + 1) {
            v += 1;
        }
        assert!((22..40).contains(&v));
    }

    #[test]
    fn ratio_edges_do_not_draw() {
        let mut a = Rng::seed_from_u64(9);
        let mut b = Rng::seed_from_u64(9);
        assert!(!bernoulli_ratio(&mut a, &0u128, &5u128));
        assert!(bernoulli_ratio(&mut a, &5u128, &5u128));
        assert_eq!(a.next_u64(), b.next_u64());
        let draws = 300_000;
        let hits = (0..draws)
            .filter(|_| bernoulli_ratio(&mut a, &3u128, &7u128))
            .count() as u64;
        binomial_within(hits, draws, 3.0 / 7.0, "3/7");
    }

    #[test]
    fn huge_gamma_is_cheap_and_false() {
        let mut rng = Rng::seed_from_u64(4);
        let big = BigUint::from(10u32).pow(40);
        let hits = (0..10_000)
            .filter(|_| bernoulli_exp_neg(&mut rng, &big, &BigUint::from(1u32)))
            .count();
        assert_eq!(hits, 0);
    }
}

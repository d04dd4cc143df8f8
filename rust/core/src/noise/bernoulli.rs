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

/// `Bernoulli(exp(-1))`, exactly, from one 64-bit word almost always.
///
/// The coin is `U < e^{-1}` for a uniform `U ∈ [0, 1)` whose first 64 bits
/// are `u`. With `T = floor(e^{-1} · 2^64)` (computed once, exactly, from the
/// alternating series), `u < T` already implies `U < e^{-1}` and `u > T`
/// implies `U > e^{-1}`. Only `u == T` (probability 2^-64) needs more bits,
/// which [`exp_neg_one_refine`] draws against exact rational bounds.
#[inline]
pub(crate) fn bernoulli_exp_neg_one(rng: &mut Rng) -> bool {
    let t = exp_neg_one_threshold();
    let u = rng.next_u64();
    if u != t {
        return u < t;
    }
    exp_neg_one_refine(rng, BigUint::from(u), 64)
}

/// `floor(e^{-1} · 2^64)`, exact.
fn exp_neg_one_threshold() -> u64 {
    static THRESHOLD: OnceLock<u64> = OnceLock::new();
    *THRESHOLD.get_or_init(|| {
        let mut precision = 72;
        loop {
            let (lo, hi, den) = exp_neg_one_bracket(precision);
            let floor_lo = (lo << 64u32) / &den;
            let floor_hi = (hi << 64u32) / &den;
            if floor_lo == floor_hi {
                // e^{-1} < 1, so the floor fits in 64 bits.
                return floor_lo.to_u64_digits().first().copied().unwrap_or(0);
            }
            precision += 32;
        }
    })
}

/// Decide `U < e^{-1}` for a uniform `U` whose first `n` bits are `prefix`,
/// drawing further bits until `U`'s interval lies on one side of `e^{-1}`.
/// Terminates with probability one because `e^{-1}` is irrational.
pub(crate) fn exp_neg_one_refine(rng: &mut Rng, prefix: BigUint, n: u64) -> bool {
    let (mut r, mut n) = (prefix, n);
    loop {
        let (lo, hi, den) = exp_neg_one_bracket(n + 8);
        // U ∈ [r/2^n, (r+1)/2^n) against lo/den ≤ e^{-1} ≤ hi/den.
        if (&r + 1u32) * &den <= &lo << n {
            return true;
        }
        if &r * &den >= &hi << n {
            return false;
        }
        r = (r << 1u32) + u32::from(rng.bit());
        n += 1;
    }
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

    #[test]
    fn threshold_is_floor_of_exp_neg_one() {
        assert_eq!(
            BigUint::from(exp_neg_one_threshold()),
            exp_neg_one_scaled(64)
        );
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
    fn refinement_resolves_the_tie_with_the_right_probability() {
        // Given the 64-bit prefix T, P(U < e^{-1}) = frac(2^64 e^{-1}).
        let t = exp_neg_one_threshold();
        let fine = exp_neg_one_scaled(120); // floor(e^{-1} 2^120)
        let frac = (&fine - (BigUint::from(t) << 56u32)).to_u64_digits()[0] as f64 / 2f64.powi(56);
        let mut rng = Rng::seed_from_u64(8);
        let draws = 200_000;
        let hits = (0..draws)
            .filter(|_| exp_neg_one_refine(&mut rng, BigUint::from(t), 64))
            .count() as u64;
        binomial_within(hits, draws, frac, "refine at T");
        // Prefixes clearly below or above e^{-1} decide without error.
        assert!(exp_neg_one_refine(&mut rng, BigUint::from(0u32), 2)); // U in [0, 1/4)
        assert!(!exp_neg_one_refine(&mut rng, BigUint::from(2u32), 2)); // U in [1/2, 3/4)
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

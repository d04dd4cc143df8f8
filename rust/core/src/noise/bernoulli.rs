//! Exact Bernoulli draws: with a rational probability, and with probability
//! `exp(-γ)` for a rational `γ ≥ 0` (Canonne, Kamath, Steinke 2020, Algorithm 1,
//! with the standard extension to `γ > 1`).
//!
//! Only integer comparisons of exactly uniform integers decide an outcome.

use super::nat::Nat;
use crate::rng::Rng;

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

/// `Bernoulli(exp(-1))`.
#[inline]
pub(crate) fn bernoulli_exp_neg_one(rng: &mut Rng) -> bool {
    // Algorithm 1 with γ = 1: A_k ~ Bernoulli(1/k); A_1 always succeeds, so
    // the loop starts at k = 2. The result is "the first failing k is odd".
    let mut k = 2u64;
    loop {
        let success = rng.below_u64(k) == 0;
        if !success {
            return k % 2 == 1;
        }
        k += 1;
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
    use num_bigint::BigUint;

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
        let hits = (0..draws).filter(|_| bernoulli_exp_neg_one(&mut rng)).count() as u64;
        binomial_within(hits, draws, (-1f64).exp(), "exp(-1)");
    }

    #[test]
    fn ratio_edges_do_not_draw() {
        let mut a = Rng::seed_from_u64(9);
        let mut b = Rng::seed_from_u64(9);
        assert!(!bernoulli_ratio(&mut a, &0u128, &5u128));
        assert!(bernoulli_ratio(&mut a, &5u128, &5u128));
        assert_eq!(a.next_u64(), b.next_u64());
        let draws = 300_000;
        let hits = (0..draws).filter(|_| bernoulli_ratio(&mut a, &3u128, &7u128)).count() as u64;
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

//! Permute-and-flip selection (McKenna and Sheldon 2020), exact.
//!
//! Given scores `q_1..q_m` of ℓ∞-sensitivity Δ (each score changes by at most
//! Δ between neighbouring data sets), visit the candidates in a uniformly
//! random order and stop at candidate `r` with probability
//! `exp(ε (q_r − q*) / (2Δ))`, where `q*` is the maximum score.
//!
//! Privacy: ε-DP under the neighbouring relation of the scores; never worse in
//! expected score than the exponential mechanism at the same ε. The scores'
//! length, ε and Δ are public. Scores are taken as the exact dyadic rationals
//! their `f64` values are, and every coin is an exact Bernoulli(exp(−γ)).

use super::bernoulli::bernoulli_exp_neg;
use crate::error::{invalid, Result};
use crate::rational::{decode_f64, Rational};
use crate::rng::Rng;
use num_bigint::{BigInt, BigUint};

/// Index selected by permute-and-flip from `scores`.
///
/// Fails if `scores` is empty or holds a non-finite value, or if `epsilon`
/// or `sensitivity` is not positive.
pub fn permute_and_flip(
    rng: &mut Rng,
    scores: &[f64],
    epsilon: &Rational,
    sensitivity: &Rational,
) -> Result<usize> {
    if scores.is_empty() {
        return Err(invalid!("scores must not be empty"));
    }
    if let Some(i) = scores.iter().position(|s| !s.is_finite()) {
        return Err(invalid!(
            "scores must be finite; scores[{i}] = {}",
            scores[i]
        ));
    }
    if epsilon.is_zero() {
        return Err(invalid!("epsilon must be positive, got 0"));
    }
    if sensitivity.is_zero() {
        return Err(invalid!("sensitivity must be positive, got 0"));
    }
    let grid = ScoreGrid::new(scores);
    // γ_r = gap_r · 2^shift · ε / (2Δ) = gap_r · coef_num / coef_den.
    let mut coef_num = epsilon.numer() * sensitivity.denom();
    let mut coef_den = epsilon.denom() * sensitivity.numer() * 2u32;
    if grid.shift >= 0 {
        coef_num <<= grid.shift as usize;
    } else {
        coef_den <<= (-grid.shift) as usize;
    }
    let mut order: Vec<usize> = (0..scores.len()).collect();
    for i in 0..order.len() {
        let j = i + rng.below_u64((order.len() - i) as u64) as usize;
        order.swap(i, j);
        let r = order[i];
        let gamma_num = grid.gap(r) * &coef_num;
        if bernoulli_exp_neg(rng, &gamma_num, &coef_den) {
            return Ok(r);
        }
    }
    // The maximum has γ = 0 and is always accepted, so the loop returns.
    Err(invalid!(
        "permute-and-flip visited every candidate without accepting"
    ))
}

/// Scores as integers on the common grid `2^shift`.
struct ScoreGrid {
    ints: Vec<BigInt>,
    max: BigInt,
    shift: i32,
}

impl ScoreGrid {
    fn new(scores: &[f64]) -> Self {
        let decoded: Vec<(i64, i32)> = scores.iter().map(|&s| decode_f64(s)).collect();
        let shift = decoded
            .iter()
            .filter(|(m, _)| *m != 0)
            .map(|&(_, e)| e)
            .min()
            .unwrap_or(0);
        let ints: Vec<BigInt> = decoded
            .iter()
            .map(|&(m, e)| {
                if m == 0 {
                    BigInt::from(0)
                } else {
                    BigInt::from(m) << (e - shift) as usize
                }
            })
            .collect();
        let max = ints.iter().max().cloned().unwrap_or_default();
        Self { ints, max, shift }
    }

    /// `(q* − q_r) / 2^shift`, a non-negative integer.
    fn gap(&self, r: usize) -> BigUint {
        // `max` is the maximum of `ints`, so the difference is never negative.
        (&self.max - &self.ints[r]).to_biguint().unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::test_support::chi2_critical;

    fn pf_probabilities(scores: &[f64], eps: f64) -> Vec<f64> {
        // The exact output distribution, averaged over all m! visiting orders.
        let m = scores.len();
        let qmax = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let p: Vec<f64> = scores
            .iter()
            .map(|q| (eps * (q - qmax) / 2.0).exp())
            .collect();
        let mut probs = vec![0.0; m];
        let mut perm: Vec<usize> = (0..m).collect();
        let mut count = 0.0;
        permutations(&mut perm, 0, &mut |order| {
            count += 1.0;
            let mut reach = 1.0;
            for &r in order {
                probs[r] += reach * p[r];
                reach *= 1.0 - p[r];
            }
        });
        probs.iter().map(|x| x / count).collect()
    }

    fn permutations(v: &mut Vec<usize>, k: usize, f: &mut impl FnMut(&[usize])) {
        if k == v.len() {
            f(v);
            return;
        }
        for i in k..v.len() {
            v.swap(k, i);
            permutations(v, k + 1, f);
            v.swap(k, i);
        }
    }

    #[test]
    fn distribution_matches_enumeration() {
        let scores = [0.0, 1.0, 2.5, -1.0, 2.0];
        let eps = 1.0;
        let expect = pf_probabilities(&scores, eps);
        let one = Rational::new(1u32, 1u32).unwrap();
        let mut rng = Rng::seed_from_u64(21);
        let n = 200_000usize;
        let mut counts = vec![0usize; scores.len()];
        for _ in 0..n {
            counts[permute_and_flip(&mut rng, &scores, &one, &one).unwrap()] += 1;
        }
        let stat: f64 = counts
            .iter()
            .zip(&expect)
            .map(|(&o, &p)| (o as f64 - n as f64 * p).powi(2) / (n as f64 * p))
            .sum();
        assert!(
            stat < chi2_critical(4.0),
            "chi2 {stat}, counts {counts:?}, expect {expect:?}"
        );
    }

    #[test]
    fn single_and_tied_scores() {
        let one = Rational::new(1u32, 1u32).unwrap();
        let mut rng = Rng::seed_from_u64(1);
        assert_eq!(permute_and_flip(&mut rng, &[3.0], &one, &one).unwrap(), 0);
        let mut seen = [0usize; 3];
        for _ in 0..3000 {
            seen[permute_and_flip(&mut rng, &[1.0, 1.0, 1.0], &one, &one).unwrap()] += 1;
        }
        assert!(seen.iter().all(|&c| c > 800), "{seen:?}");
    }

    #[test]
    fn extreme_scores_stay_exact_and_fast() {
        let one = Rational::new(1u32, 1u32).unwrap();
        let mut rng = Rng::seed_from_u64(2);
        let scores = [1e300, -1e300, 5e-324, 0.0];
        for _ in 0..100 {
            assert_eq!(permute_and_flip(&mut rng, &scores, &one, &one).unwrap(), 0);
        }
    }

    #[test]
    fn bad_arguments_are_refused() {
        let one = Rational::new(1u32, 1u32).unwrap();
        let zero = Rational::new(0u32, 1u32).unwrap();
        let mut rng = Rng::seed_from_u64(2);
        assert!(permute_and_flip(&mut rng, &[], &one, &one).is_err());
        assert!(permute_and_flip(&mut rng, &[1.0, f64::NAN], &one, &one).is_err());
        assert!(permute_and_flip(&mut rng, &[1.0], &zero, &one).is_err());
        assert!(permute_and_flip(&mut rng, &[1.0], &one, &zero).is_err());
    }
}

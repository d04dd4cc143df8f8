//! Exact discrete Gaussian noise (Canonne, Kamath, Steinke 2020, Algorithm 3).
//!
//! `P(Z = z) ∝ exp(-z² / (2σ²))` on the integers, for any positive rational σ.
//!
//! Privacy: adding `DiscreteGaussian(σ)` to an integer query of ℓ2-sensitivity
//! Δ is ρ-zCDP with ρ = Δ²/(2σ²) (CKS20, Theorem 14); σ is public.

use super::bernoulli::bernoulli_exp_neg;
use super::laplace::{check_scale, fill_with, sample_laplace};
use super::nat::Nat;
use crate::error::{Error, Result};
use crate::rational::Rational;
use crate::rng::Rng;
use num_bigint::BigUint;
use num_integer::Roots;

/// Sampler of the discrete Gaussian with a fixed rational σ.
#[derive(Clone, Debug)]
pub struct DiscreteGaussian {
    sigma: Rational,
    params: Params,
}

/// `σ² = a / b`, and `t = floor(σ) + 1`, the scale of the Laplace proposal.
#[derive(Clone, Debug)]
enum Params {
    Fast { a: u128, b: u128, t: u64 },
    Big { a: BigUint, b: BigUint, t: BigUint },
}

impl DiscreteGaussian {
    /// A sampler with parameter `0 < sigma <= 2^56`.
    pub fn new(sigma: &Rational) -> Result<Self> {
        check_scale(sigma, "sigma")?;
        let variance = sigma.mul(sigma);
        let (a, b) = (variance.numer().clone(), variance.denom().clone());
        // floor(sqrt(a/b)) = floor(sqrt(floor(a/b))).
        let t: BigUint = Roots::sqrt(&(&a / &b)) + 1u32;
        let params = match (a.to_u64(), b.to_u64(), t.to_u64()) {
            (Some(a), Some(b), Some(t)) => Params::Fast {
                a: u128::from(a),
                b: u128::from(b),
                t,
            },
            _ => Params::Big { a, b, t },
        };
        Ok(Self {
            sigma: sigma.clone(),
            params,
        })
    }

    /// The exact σ.
    pub fn sigma(&self) -> &Rational {
        &self.sigma
    }

    /// One draw.
    pub fn sample(&self, rng: &mut Rng) -> Result<i64> {
        match &self.params {
            Params::Fast { a, b, t } => sample_gaussian(rng, a, b, t),
            Params::Big { a, b, t } => sample_gaussian(rng, a, b, t),
        }
    }

    /// Fill `out` with independent draws. On error `rng` is left as it was.
    pub fn fill(&self, rng: &mut Rng, out: &mut [i64]) -> Result<()> {
        match &self.params {
            Params::Fast { a, b, t } => fill_with(rng, out, |r| sample_gaussian(r, a, b, t)),
            Params::Big { a, b, t } => fill_with(rng, out, |r| sample_gaussian(r, a, b, t)),
        }
    }
}

/// CKS20 Algorithm 3: a discrete Laplace proposal with integer scale `t`
/// (type `L`), accepted with probability `exp(-(|y| − σ²/t)² / (2σ²))`
/// computed in type `N` (or `BigUint` where `N` would overflow).
fn sample_gaussian<N: Nat, L: Nat>(rng: &mut Rng, a: &N, b: &N, t: &L) -> Result<i64> {
    let one = L::from_u64(1);
    let t_n = N::from_big(&t.to_big());
    loop {
        let y = sample_laplace(rng, t, &one)?;
        let abs_y = N::from_u64(y.unsigned_abs());
        let fast = t_n
            .as_ref()
            .and_then(|t_n| rejection_exponent(&abs_y, a, b, t_n));
        let accept = match fast {
            Some((num, den)) => bernoulli_exp_neg(rng, &num, &den),
            None => {
                let (num, den) =
                    rejection_exponent(&abs_y.to_big(), &a.to_big(), &b.to_big(), &t.to_big())
                        .ok_or_else(|| Error::Overflow("discrete Gaussian exponent".into()))?;
                bernoulli_exp_neg(rng, &num, &den)
            }
        };
        if accept {
            return Ok(y);
        }
    }
}

/// `(|y| - σ²/t)² / (2σ²)` as `(num, den)` with `σ² = a/b`:
/// `(|y|·t·b − a)² / (2·a·t²·b)`. `None` if it does not fit `N`.
fn rejection_exponent<N: Nat>(abs_y: &N, a: &N, b: &N, t: &N) -> Option<(N, N)> {
    let diff = abs_y.checked_mul(t)?.checked_mul(b)?.abs_diff(a);
    let num = diff.checked_mul(&diff)?;
    let den = N::from_u64(2)
        .checked_mul(a)?
        .checked_mul(t)?
        .checked_mul(t)?
        .checked_mul(b)?;
    Some((num, den))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::test_support::{check_fill, gaussian_pmf, issue_scales};

    fn check_sigma(sigma: Rational, draws: usize, seed: u64) {
        let d = DiscreteGaussian::new(&sigma).unwrap();
        let s = sigma.to_f64_lossy();
        let label = format!("gaussian sigma {sigma}");
        check_fill(
            |r, xs| d.fill(r, xs),
            draws,
            seed,
            |z| gaussian_pmf(s, z),
            &label,
        );
    }

    #[test]
    fn chi_square_at_issue_scales() {
        let mut sigmas = issue_scales();
        sigmas.push(Rational::new(7u32, 3u32).unwrap());
        for (i, s) in sigmas.into_iter().enumerate() {
            check_sigma(s, 200_000, 200 + i as u64);
        }
    }

    #[test]
    fn float_sigma_uses_exact_big_path() {
        let sigma = Rational::from_f64(2.3, "sigma").unwrap();
        let d = DiscreteGaussian::new(&sigma).unwrap();
        assert!(matches!(d.params, Params::Big { .. }));
        check_sigma(sigma, 30_000, 9);
    }

    #[test]
    fn huge_sigma_promotes_without_error() {
        // σ = 2^56, the largest accepted: the exponent needs more than 128 bits.
        let sigma = Rational::new(1u64 << 56, 1u32).unwrap();
        let d = DiscreteGaussian::new(&sigma).unwrap();
        let mut rng = Rng::seed_from_u64(2);
        for _ in 0..200 {
            d.sample(&mut rng).unwrap();
        }
    }

    #[test]
    fn zero_sigma_is_refused() {
        assert!(DiscreteGaussian::new(&Rational::new(0u32, 1u32).unwrap()).is_err());
    }
}

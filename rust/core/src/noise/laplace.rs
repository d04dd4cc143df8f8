//! Exact discrete Laplace noise (Canonne, Kamath, Steinke 2020, Algorithm 2).
//!
//! `P(Z = z) = (1 - p) / (1 + p) · p^|z|` with `p = exp(-1/scale)`, for any
//! positive rational `scale = t/s`.
//!
//! Privacy: adding `DiscreteLaplace(Δ/ε)` to an integer-valued query of
//! ℓ1-sensitivity Δ is ε-DP (the neighbouring relation is the query's).
//! The scale is public.

use super::bernoulli::{bernoulli_exp_neg, geometric_exp_neg_one};
use super::nat::Nat;
use crate::error::{invalid, Error, Result};
use crate::rational::Rational;
use crate::rng::Rng;
use num_bigint::BigUint;

/// Sampler of the discrete Laplace distribution with a fixed rational scale.
#[derive(Clone, Debug)]
pub struct DiscreteLaplace {
    scale: Rational,
    params: Params,
}

#[derive(Clone, Debug)]
enum Params {
    /// `scale = t / s` with both at most `u64::MAX`: the usual case, in 64-bit
    /// arithmetic (a rare intermediate that overflows is redone with `BigUint`).
    Fast {
        t: u64,
        s: u64,
    },
    Big {
        t: BigUint,
        s: BigUint,
    },
}

impl DiscreteLaplace {
    /// A sampler with `P(z) ∝ exp(-|z| / scale)`. Fails unless
    /// `0 < scale <= 2^56` (see [`MAX_SCALE_LOG2`]).
    pub fn new(scale: &Rational) -> Result<Self> {
        check_scale(scale, "scale")?;
        let (t, s) = (scale.numer(), scale.denom());
        let params = match (t.to_u64(), s.to_u64()) {
            (Some(t), Some(s)) => Params::Fast { t, s },
            _ => Params::Big {
                t: t.clone(),
                s: s.clone(),
            },
        };
        Ok(Self {
            scale: scale.clone(),
            params,
        })
    }

    /// The exact scale.
    pub fn scale(&self) -> &Rational {
        &self.scale
    }

    /// One draw.
    #[inline]
    pub fn sample(&self, rng: &mut Rng) -> Result<i64> {
        match &self.params {
            Params::Fast { t, s } => sample_laplace(rng, t, s),
            Params::Big { t, s } => sample_laplace(rng, t, s),
        }
    }

    /// Fill `out` with independent draws. On error `rng` is left as it was.
    pub fn fill(&self, rng: &mut Rng, out: &mut [i64]) -> Result<()> {
        match &self.params {
            Params::Fast { t, s } => fill_with(rng, out, |r| sample_laplace(r, t, s)),
            Params::Big { t, s } => fill_with(rng, out, |r| sample_laplace(r, t, s)),
        }
    }

    /// Add an independent draw to each value (the Laplace mechanism on an
    /// integer vector). On overflow nothing is changed and an error is returned.
    pub fn add_noise(&self, rng: &mut Rng, values: &mut [i64]) -> Result<()> {
        let mut noise = vec![0i64; values.len()];
        self.fill(rng, &mut noise)?;
        let noisy: Option<Vec<i64>> = values
            .iter()
            .zip(&noise)
            .map(|(v, z)| v.checked_add(*z))
            .collect();
        let noisy =
            noisy.ok_or_else(|| Error::Overflow("noisy value exceeds the int64 range".into()))?;
        values.copy_from_slice(&noisy);
        Ok(())
    }
}

/// Largest accepted scale (and σ), as a power of two: draws then exceed the
/// int64 range with probability below `exp(-128)`, so an overflow error is a
/// practical impossibility rather than a failure mode users must handle.
pub const MAX_SCALE_LOG2: u32 = 56;

/// Refuse a zero or too large scale-like parameter named `what`.
pub(crate) fn check_scale(value: &Rational, what: &str) -> Result<()> {
    if value.is_zero() {
        return Err(invalid!("{what} must be positive, got 0"));
    }
    if *value.numer() > value.denom() << MAX_SCALE_LOG2 {
        return Err(invalid!(
            "{what} must be at most 2^{MAX_SCALE_LOG2} (about 7.2e16) so that int64 draws \
             cannot overflow, got {}",
            value.to_f64_lossy()
        ));
    }
    Ok(())
}

/// Fill `out` with draws; on error restore `rng`, so that a failed call
/// leaves the generator exactly as before.
pub(crate) fn fill_with(
    rng: &mut Rng,
    out: &mut [i64],
    mut draw: impl FnMut(&mut Rng) -> Result<i64>,
) -> Result<()> {
    let saved = rng.clone();
    for o in out.iter_mut() {
        match draw(rng) {
            Ok(z) => *o = z,
            Err(e) => {
                *rng = saved;
                return Err(e);
            }
        }
    }
    Ok(())
}

/// One discrete Laplace draw with scale `t / s` (Algorithm 2 of CKS20).
#[inline]
pub(crate) fn sample_laplace<N: Nat>(rng: &mut Rng, t: &N, s: &N) -> Result<i64> {
    loop {
        // U uniform on {0..t-1}, kept with probability exp(-U/t): U is then a
        // geometric variable truncated to one period of length t.
        let u = t.uniform_below(rng);
        if !bernoulli_exp_neg(rng, &u, t) {
            continue;
        }
        // V ~ Geometric(1 - exp(-1)): number of whole periods.
        let v = geometric_exp_neg_one(rng);
        // X = U + t·V is geometric with ratio exp(-1/t); Y = floor(X / s)
        // is geometric with ratio exp(-s/t).
        let y: Option<u64> = match t
            .checked_mul(&N::from_u64(v))
            .and_then(|tv| tv.checked_add(&u))
        {
            Some(x) if s.is_one() => x.to_u64(),
            Some(x) => x.div_floor(s).to_u64(),
            None => Nat::to_u64(&((t.to_big() * v + u.to_big()) / s.to_big())),
        };
        // A random sign; (negative, 0) is rejected so that zero is not counted twice.
        let negative = rng.bit();
        if negative && y == Some(0) {
            continue;
        }
        let magnitude = y.and_then(|m| i64::try_from(m).ok()).ok_or_else(|| {
            Error::Overflow("discrete Laplace draw exceeds the int64 range".into())
        })?;
        return Ok(if negative { -magnitude } else { magnitude });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::test_support::{check_fill, issue_scales, laplace_pmf};

    fn check_scale(scale: Rational, draws: usize, seed: u64) {
        let d = DiscreteLaplace::new(&scale).unwrap();
        let b = scale.to_f64_lossy();
        let label = format!("laplace scale {scale}");
        check_fill(
            |r, xs| d.fill(r, xs),
            draws,
            seed,
            |z| laplace_pmf(b, z),
            &label,
        );
    }

    #[test]
    fn chi_square_at_issue_scales() {
        let mut scales = issue_scales();
        scales.push(Rational::from_f64(0.1, "scale").unwrap());
        scales.push(Rational::new(7u32, 3u32).unwrap());
        for (i, s) in scales.into_iter().enumerate() {
            check_scale(s, 300_000, 100 + i as u64);
        }
    }

    #[test]
    fn big_path_matches_distribution() {
        // 3 / 2^70 · 2^70 / 1 ... a scale whose parts exceed u64: (3·2^70)/(2^70) = 3
        // is reduced, so build one that is not: (2^70 + 1) / 2^69 ≈ 2.
        let t = (BigUint::from(1u32) << 70) + 1u32;
        let s = BigUint::from(1u32) << 69;
        let scale = Rational::new(t, s).unwrap();
        let d = DiscreteLaplace::new(&scale).unwrap();
        assert!(matches!(d.params, Params::Big { .. }));
        check_scale(scale, 100_000, 77);
    }

    #[test]
    fn zero_and_huge_scales_are_refused() {
        assert!(DiscreteLaplace::new(&Rational::new(0u32, 1u32).unwrap()).is_err());
        let max = Rational::new(1u64 << MAX_SCALE_LOG2, 1u32).unwrap();
        assert!(DiscreteLaplace::new(&max).is_ok());
        let over = Rational::new((1u64 << MAX_SCALE_LOG2) + 1, 1u32).unwrap();
        let err = DiscreteLaplace::new(&over).unwrap_err().to_string();
        assert!(err.contains("scale must be at most"), "{err}");
    }

    #[test]
    fn failed_fill_restores_the_generator() {
        let mut rng = Rng::seed_from_u64(5);
        let mut fresh = Rng::seed_from_u64(5);
        let mut out = [0i64; 8];
        let mut calls = 0;
        let result = fill_with(&mut rng, &mut out, |r| {
            calls += 1;
            r.next_u64();
            if calls == 5 {
                Err(Error::Overflow("planted".into()))
            } else {
                Ok(1)
            }
        });
        assert!(result.is_err());
        assert_eq!(rng.next_u64(), fresh.next_u64());
    }

    #[test]
    fn add_noise_is_all_or_nothing() {
        let d = DiscreteLaplace::new(&Rational::new(1_000u32, 1u32).unwrap()).unwrap();
        let mut rng = Rng::seed_from_u64(1);
        let mut v = vec![i64::MAX; 64];
        let before = v.clone();
        // With 64 draws at scale 1000, some draw is positive with overwhelming probability.
        assert!(d.add_noise(&mut rng, &mut v).is_err());
        assert_eq!(v, before);
        let mut w = vec![5i64; 4];
        d.add_noise(&mut rng, &mut w).unwrap();
        assert_ne!(w, vec![5i64; 4]);
    }

    #[test]
    fn seeded_draws_repeat() {
        let d = DiscreteLaplace::new(&Rational::new(10u32, 1u32).unwrap()).unwrap();
        let (mut a, mut b) = (Rng::seed_from_u64(3), Rng::seed_from_u64(3));
        let xa: Vec<i64> = (0..100).map(|_| d.sample(&mut a).unwrap()).collect();
        let xb: Vec<i64> = (0..100).map(|_| d.sample(&mut b).unwrap()).collect();
        assert_eq!(xa, xb);
    }
}

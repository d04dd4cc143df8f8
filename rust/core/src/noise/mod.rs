//! Exact integer privacy noise and selection.
//!
//! * [`DiscreteLaplace`]: ε-DP for integer queries of ℓ1-sensitivity Δ at scale Δ/ε.
//! * [`DiscreteGaussian`]: ρ-zCDP with ρ = Δ²/(2σ²) for ℓ2-sensitivity Δ.
//! * [`permute_and_flip`]: ε-DP selection of an index by score.
//!
//! All are exact (Canonne–Kamath–Steinke 2020) and draw from [`crate::rng::Rng`].

mod bernoulli;
mod gaussian;
mod geometric_skip;
mod laplace;
mod nat;
mod permute_and_flip;

pub use gaussian::DiscreteGaussian;
pub use geometric_skip::{first_firing, FiringSkipper, TailTest};
pub use laplace::{DiscreteLaplace, MAX_SCALE_LOG2};
pub use permute_and_flip::permute_and_flip;

/// `Bernoulli(exp(-num/den))`, exact, for callers outside this module
/// (selection rules and counters that need an exact coin).
pub fn bernoulli_exp_neg(
    rng: &mut crate::rng::Rng,
    num: &num_bigint::BigUint,
    den: &num_bigint::BigUint,
) -> crate::error::Result<bool> {
    use num_traits::Zero;
    if den.is_zero() {
        return Err(crate::error::invalid!(
            "denominator must be positive, got 0"
        ));
    }
    Ok(bernoulli::bernoulli_exp_neg(rng, num, den))
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Statistical checks at a fixed false-alarm rate of 1e-6 per check.
    //! Seeds are fixed, so a passing test passes every time.
    use statrs::distribution::{ChiSquared, ContinuousCDF, Normal};

    /// Per-check false-alarm rate.
    pub const ALPHA: f64 = 1e-6;

    pub fn chi2_critical(df: f64) -> f64 {
        ChiSquared::new(df).unwrap().inverse_cdf(1.0 - ALPHA)
    }

    /// Two-sided normal-approximation check of a binomial count.
    pub fn binomial_within(hits: u64, n: u64, p: f64, label: &str) {
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        if sd == 0.0 {
            assert_eq!(hits as f64, mean, "{label}");
            return;
        }
        let z = Normal::new(0.0, 1.0)
            .unwrap()
            .inverse_cdf(1.0 - ALPHA / 2.0);
        assert!(
            (hits as f64 - mean).abs() <= z * sd + 1.0,
            "{label}: {hits} hits of {n}, expected {mean:.1} ± {:.1}",
            z * sd
        );
    }

    pub fn laplace_pmf(scale: f64, z: i64) -> f64 {
        (0.5 / scale).tanh() * (-(z.unsigned_abs() as f64) / scale).exp()
    }

    pub fn gaussian_pmf(sigma: f64, z: i64) -> f64 {
        let s2 = sigma * sigma;
        let norm = if sigma >= 4.0 {
            // Poisson summation: Σ_k exp(-k²/2σ²) = σ√(2π)(1 + 2e^{-2π²σ²} + …).
            sigma * (2.0 * std::f64::consts::PI).sqrt()
        } else {
            let r = (40.0 * sigma) as i64 + 10;
            (-r..=r)
                .map(|k| (-((k * k) as f64) / (2.0 * s2)).exp())
                .sum()
        };
        (-((z as f64).powi(2)) / (2.0 * s2)).exp() / norm
    }

    /// The scales (Laplace) or σ (Gaussian) the issue pins: 1/2, 1, 3, 10,
    /// 1000 and 10^6.
    pub fn issue_scales() -> Vec<crate::rational::Rational> {
        [
            (1u32, 2u32),
            (1, 1),
            (3, 1),
            (10, 1),
            (1000, 1),
            (1_000_000, 1),
        ]
        .into_iter()
        .map(|(n, d)| crate::rational::Rational::new(n, d).unwrap())
        .collect()
    }

    /// `draws` samples written by `fill` from the generator seeded with
    /// `seed`, checked by [`chi_square_against`] `pmf`.
    pub fn check_fill(
        fill: impl FnOnce(&mut crate::rng::Rng, &mut [i64]) -> crate::error::Result<()>,
        draws: usize,
        seed: u64,
        pmf: impl Fn(i64) -> f64,
        label: &str,
    ) {
        let mut rng = crate::rng::Rng::seed_from_u64(seed);
        let mut xs = vec![0i64; draws];
        fill(&mut rng, &mut xs).unwrap();
        chi_square_against(&xs, pmf, label);
    }

    /// Chi-square goodness of fit of integer samples against a symmetric pmf.
    /// Bins are runs of consecutive integers on `[-L, L]` holding at least
    /// `max(50, n/400)` expected draws, plus the two tails beyond ±L.
    pub fn chi_square_against(xs: &[i64], pmf: impl Fn(i64) -> f64, label: &str) {
        let n = xs.len() as f64;
        let min_mass = (n / 400.0).max(50.0) / n;
        // L: the smallest point with one-sided tail mass below 2·min_mass.
        let mut tail = (1.0 - pmf(0)) / 2.0;
        let mut l = 0i64;
        while tail >= 2.0 * min_mass {
            l += 1;
            tail -= pmf(l);
        }
        // Bin starts over [-L, L]; bin i is [starts[i], starts[i+1]).
        let mut starts = vec![-l];
        let mut masses = vec![];
        let mut acc = 0.0;
        for z in -l..=l {
            acc += pmf(z);
            if acc >= min_mass && z < l {
                starts.push(z + 1);
                masses.push(acc);
                acc = 0.0;
            }
        }
        if acc >= min_mass || masses.is_empty() {
            masses.push(acc);
        } else {
            // Merge a short last run into the bin before it.
            starts.pop();
            *masses.last_mut().unwrap() += acc;
        }
        let k = masses.len();
        let mut expected = vec![tail];
        expected.extend(masses);
        expected.push(tail);
        let mut observed = vec![0f64; k + 2];
        for &x in xs {
            let idx = if x < -l {
                0
            } else if x > l {
                k + 1
            } else {
                starts.partition_point(|&s| s <= x)
            };
            observed[idx] += 1.0;
        }
        let stat: f64 = observed
            .iter()
            .zip(&expected)
            .map(|(o, p)| (o - n * p).powi(2) / (n * p))
            .sum();
        let df = (expected.len() - 1) as f64;
        let crit = chi2_critical(df);
        assert!(
            stat < crit,
            "{label}: chi2 = {stat:.1} >= {crit:.1} (df {df})"
        );
    }
}

//! The privacy schedule `ε_{j,r}` of the online synthesizer (He, Vershynin,
//! Zhu, Algorithm 1): the one place where its ε is split.
//!
//! A cell `θ` of depth `j = |θ| ≥ 1` of the online binary partition counts
//! its points with an inhomogeneous sparse counter
//! ([`crate::counters::InhomogeneousSparseCounter`], Algorithm 3) whose time
//! level `r` runs with privacy parameter `ε_{j,r}`. By Lemma 3.3 a point that
//! arrives at level `s` costs at most `ε_{j,s}` in the counter of the one
//! depth-`j` cell that contains it, and by Proposition 4.1 the synthesizer is
//! ε-DP (one point per time step, event level) whenever
//!
//! ```text
//! sup_s Σ_{j=1}^{s} ε_{j,s} ≤ ε/2.
//! ```
//!
//! The schedule of the paper:
//!
//! * (4.1), `d ≥ 2`: `ε_{j,r} = C_1 · ε · 2^{(j−r)(1−1/d)/2}` with
//!   `C_1 = (1 − 2^{−(1−1/d)/2})/2`, for levels `r ≥ j` (a depth-`j` cell
//!   starts at level `r_0 = j`). With `α = 2^{(1−1/d)/2}`, (4.2) gives
//!   `Σ_{j=1}^{s} ε_{j,s} = (1 − α^{−s})·ε/2 < ε/2`.
//! * (5.1), `d = 1`: `ε_{j,r} = 3/π² · ε/(j+1)²` for every level (here
//!   `r_0 = 0`), and `Σ_{j≥1} ε_{j,r} = (1/2 − 3/π²)·ε < ε/2`.
//!
//! # Exact, rounded-down values
//!
//! The factors `2^{(1−1/d)/2}` and `π²` are irrational. [`online_epsilon`]
//! returns an exact [`Rational`] that is a rigorous **lower** bound of the
//! formula (so every sum of returned values is at most the sum of the
//! formula's values, and the bound above holds for them), within relative
//! distance `2^{−31}` of it:
//!
//! * No floating point is used. `2^{(j−r)(d−1)/(2d)}` is split exactly into
//!   `2^{n} · 2^{k/(2d)}` with integers `n` and `0 ≤ k < 2d`. The root
//!   `y = 2^{k/(2d)} ∈ [1, 2)` is bounded below by `m/2^56` with the largest
//!   integer `m` such that `m^{2d} ≤ 2^k · 2^{56·2d}` (binary search in exact
//!   integer arithmetic); likewise `2^{−(d−1)/(2d)}` is bounded *above* by the
//!   smallest `m'/2^56` with `m'^{2d} · 2^{d−1} ≥ 2^{56·2d}`, so
//!   `C_1 ≥ (1 − m'/2^56)/2` exactly.
//! * `π < 3.14159265358979323847` (the decimal expansion of π is
//!   3.14159265358979323846264…), so `3/π² > 3 / 3.14159265358979323847²`.
//! * The product with ε, a rational, is then rounded **down** to 32
//!   significant bits: `ε_{j,r} = q / 2^e` with `2^31 ≤ q < 2^32`, within
//!   relative distance `2^{−31}` of the formula. Small numerators and
//!   denominators keep every noise scale derived from it (`2/ε_{j,r}`,
//!   `4/ε_{j,r}`, …) in 64-bit integers, the samplers' fast path.

use crate::error::{invalid, Result};
use crate::rational::Rational;
use num_bigint::BigUint;
use num_traits::{One, Zero};

/// Bits of the fixed-point roots `m / 2^ROOT_BITS`.
const ROOT_BITS: u32 = 56;
/// Significant bits kept by the final rounding down: enough to lose nothing
/// that matters (relative `2^{-31}`), few enough that the noise scales
/// `2^s / q` of the counters fit 64-bit integers (their fast sampling path)
/// whatever ε the caller gave.
const KEEP_BITS: u64 = 32;
/// Largest dimension accepted (the roots are `2d`-th roots).
pub const MAX_ONLINE_DIM: u32 = 4096;

/// `ε_{j,r}` of the online synthesizer on `[0,1]^dim` for a cell of depth
/// `j ≥ 1` at time level `r`: (4.1) for `dim ≥ 2` (requires `r ≥ j`) and
/// (5.1) for `dim = 1` (any `r`), rounded down to an exact rational; see the
/// [module docs](self). Only public values enter.
pub fn online_epsilon(epsilon: &Rational, dim: u32, j: u32, r: u32) -> Result<Rational> {
    if epsilon.is_zero() {
        return Err(invalid!("epsilon must be positive, got 0"));
    }
    if dim == 0 || dim > MAX_ONLINE_DIM {
        return Err(invalid!(
            "dim must be between 1 and {MAX_ONLINE_DIM}, got {dim}"
        ));
    }
    if j == 0 {
        return Err(invalid!(
            "depth j must be at least 1 (the schedule covers the cells of depth 1, 2, ...)"
        ));
    }
    let (num, den) = if dim == 1 {
        // 3/π² / (j+1)² ≥ 3·10^40 / (π_hi_num² · (j+1)²) with π_hi = π_hi_num / 10^20.
        let pi_hi = BigUint::parse_bytes(b"314159265358979323847", 10)
            .ok_or_else(|| invalid!("bad constant"))?;
        let j1 = BigUint::from(j) + 1u32;
        (
            BigUint::from(3u32) * BigUint::from(10u32).pow(40),
            &pi_hi * &pi_hi * &j1 * &j1,
        )
    } else {
        if r < j {
            return Err(invalid!(
                "for dim >= 2 a cell of depth {j} starts at level {j}; got level r = {r}"
            ));
        }
        let two_d = 2 * u64::from(dim);
        // Exponent (j − r)(d − 1)/(2d) = −e/(2d) with e = (r − j)(d − 1) ≥ 0:
        // 2^{−e/(2d)} = 2^{−n−1} · 2^{k/(2d)} with n = ⌊e/(2d)⌋, k = 2d − e mod 2d
        // (or 2^{−n} when e mod 2d = 0).
        let e = u64::from(r - j) * u64::from(dim - 1);
        let (n, k) = match e % two_d {
            0 => (e / two_d, 0),
            rem => (e / two_d + 1, two_d - rem),
        };
        let y_lo = root_below(k, two_d); // ≤ 2^{k/(2d)} · 2^ROOT_BITS
        let u_hi = root_above_neg(u64::from(dim - 1), two_d); // ≥ 2^{−(d−1)/(2d)} · 2^ROOT_BITS
        let one = BigUint::one() << ROOT_BITS;
        if u_hi >= one {
            return Err(invalid!("internal: the bound of C_1 is not positive"));
        }
        // C_1 · 2^{k/(2d)} · 2^{−n} ≥ (2^B − u_hi) · y_lo / 2^{2B + 1 + n}.
        let num = (one - u_hi) * y_lo;
        let shift = usize::try_from(2 * u64::from(ROOT_BITS) + 1 + n)
            .map_err(|_| invalid!("level difference too large"))?;
        (num, BigUint::one() << shift)
    };
    floor_dyadic(&(num * epsilon.numer()), &(den * epsilon.denom()))
}

/// Largest `m` with `m^{2d} ≤ 2^{k + B·2d}`: `m / 2^B ≤ 2^{k/(2d)}`, `0 ≤ k < 2d`.
fn root_below(k: u64, two_d: u64) -> BigUint {
    let target = BigUint::one() << (k + u64::from(ROOT_BITS) * two_d);
    let pow = |m: u128| BigUint::from(m).pow(two_d as u32);
    // m ∈ [2^B, 2^{B+1}): invariant lo^{2d} ≤ target < hi^{2d}, checked exactly;
    // a floating-point guess only narrows the start of the search.
    let (mut lo, mut hi) = (1u128 << ROOT_BITS, 1u128 << (ROOT_BITS + 1));
    let g = ((k as f64 / two_d as f64).exp2() * (1u64 << ROOT_BITS) as f64) as u128;
    let (glo, ghi) = (g.saturating_sub(1 << 12).max(lo), (g + (1 << 12)).min(hi));
    if pow(glo) <= target && pow(ghi) > target {
        (lo, hi) = (glo, ghi);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if pow(mid) <= target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    BigUint::from(lo)
}

/// Smallest `m` with `m^{2d} · 2^{c} ≥ 2^{B·2d}`: `m / 2^B ≥ 2^{−c/(2d)}`, `0 ≤ c < 2d`.
fn root_above_neg(c: u64, two_d: u64) -> BigUint {
    let target = BigUint::one() << (u64::from(ROOT_BITS) * two_d);
    let pow = |m: u128| BigUint::from(m).pow(two_d as u32) << c;
    // m ∈ (2^{B−1}, 2^B]: invariant lo^{2d}·2^c < target ≤ hi^{2d}·2^c, checked
    // exactly; a floating-point guess only narrows the start of the search.
    let (mut lo, mut hi) = (1u128 << (ROOT_BITS - 1), 1u128 << ROOT_BITS);
    let g = ((-(c as f64) / two_d as f64).exp2() * (1u64 << ROOT_BITS) as f64) as u128;
    let (glo, ghi) = (g.saturating_sub(1 << 12).max(lo), (g + (1 << 12)).min(hi));
    if pow(glo) < target && pow(ghi) >= target {
        (lo, hi) = (glo, ghi);
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if pow(mid) >= target {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    BigUint::from(hi)
}

/// `num/den` rounded down to a dyadic rational with `KEEP_BITS` significant bits.
fn floor_dyadic(num: &BigUint, den: &BigUint) -> Result<Rational> {
    if num.is_zero() {
        return Err(invalid!("internal: zero privacy parameter"));
    }
    // q = ⌊num · 2^s / den⌋ has about KEEP_BITS bits.
    let s = (KEEP_BITS + den.bits()).saturating_sub(num.bits());
    let q = (num << s) / den;
    Rational::new(q, BigUint::one() << s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigUint;

    /// Exact sum of rationals, as (numerator, denominator).
    fn add(acc: (BigUint, BigUint), x: &Rational) -> (BigUint, BigUint) {
        let (n, d) = acc;
        let r = Rational::new(n * x.denom() + x.numer() * &d, d * x.denom()).unwrap();
        (r.numer().clone(), r.denom().clone())
    }

    fn at_most_half_of(sum: &(BigUint, BigUint), eps: &Rational) -> bool {
        // sum_n / sum_d ≤ eps_n / (2 eps_d)
        &sum.0 * eps.denom() * 2u32 <= eps.numer() * &sum.1
    }

    fn epsilons() -> Vec<Rational> {
        vec![
            Rational::new(1u32, 1u32).unwrap(),
            Rational::new(1u32, 3u32).unwrap(),
            Rational::from_f64(0.1, "e").unwrap(),
            Rational::new(7u32, 2u32).unwrap(),
        ]
    }

    fn formula(eps: f64, d: u32, j: u32, r: u32) -> f64 {
        if d == 1 {
            3.0 / std::f64::consts::PI.powi(2) * eps / f64::from(j + 1).powi(2)
        } else {
            let a = 1.0 - 1.0 / f64::from(d);
            let c1 = (1.0 - (-a / 2.0).exp2()) / 2.0;
            c1 * eps * ((f64::from(j) - f64::from(r)) * a / 2.0).exp2()
        }
    }

    #[test]
    fn sums_over_depths_never_exceed_half_epsilon() {
        for eps in epsilons() {
            for d in [1u32, 2, 3, 5] {
                for s in 1..=200u32 {
                    let mut acc = (BigUint::from(0u32), BigUint::from(1u32));
                    for j in 1..=s {
                        acc = add(acc, &online_epsilon(&eps, d, j, s).unwrap());
                    }
                    assert!(at_most_half_of(&acc, &eps), "d = {d}, s = {s}, ε = {eps}");
                }
            }
        }
    }

    #[test]
    fn values_are_below_and_close_to_the_formula() {
        for eps in epsilons() {
            let e = eps.to_f64_lossy();
            for d in [1u32, 2, 3, 5, 64] {
                for j in [1u32, 2, 7, 30] {
                    for r in [j, j + 1, j + 5, j + 100, j + 1000] {
                        let v = online_epsilon(&eps, d, j, r).unwrap();
                        let exact = formula(e, d, j, r);
                        let got = v.to_f64_lossy();
                        let rel = (got - exact) / exact;
                        // Rounded down to 32 bits; the f64 formula is good to ~1e-14.
                        assert!(
                            rel <= 1e-13 && rel > -1e-9,
                            "d={d} j={j} r={r}: {got} vs {exact}"
                        );
                        assert!(v.numer().bits() <= 33);
                        if r <= j + 5 {
                            assert!(v.denom().bits() <= 48, "{v}");
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn roots_are_tight_rigorous_bounds() {
        for two_d in [4u64, 6, 10, 128] {
            for k in 0..two_d.min(9) {
                let m = root_below(k, two_d);
                let tgt = BigUint::one() << (k + u64::from(ROOT_BITS) * two_d);
                assert!(m.pow(two_d as u32) <= tgt);
                assert!((&m + 1u32).pow(two_d as u32) > tgt);
            }
            let c = two_d / 2 - 1;
            let m = root_above_neg(c, two_d);
            let tgt = BigUint::one() << (u64::from(ROOT_BITS) * two_d);
            assert!(m.pow(two_d as u32) << c >= tgt);
            assert!((&m - 1u32).pow(two_d as u32) << c < tgt);
        }
    }

    #[test]
    fn d1_is_constant_in_r_and_sums_to_below_the_series() {
        let eps = Rational::new(1u32, 1u32).unwrap();
        assert_eq!(
            online_epsilon(&eps, 1, 3, 0).unwrap(),
            online_epsilon(&eps, 1, 3, 99).unwrap()
        );
        // Σ_{j ≥ 1} 3/π²/(j+1)² = 1/2 − 3/π² ≈ 0.196.
        let total: f64 = (1..5000)
            .map(|j| online_epsilon(&eps, 1, j, 0).unwrap().to_f64_lossy())
            .sum();
        let limit = 0.5 - 3.0 / std::f64::consts::PI.powi(2);
        assert!(total < limit && total > limit - 1e-3, "{total}");
    }

    #[test]
    fn bad_arguments_are_refused() {
        let eps = Rational::new(1u32, 1u32).unwrap();
        assert!(online_epsilon(&Rational::new(0u32, 1u32).unwrap(), 2, 1, 1).is_err());
        assert!(online_epsilon(&eps, 0, 1, 1).is_err());
        assert!(online_epsilon(&eps, 2, 0, 1).is_err());
        assert!(online_epsilon(&eps, 2, 3, 2).is_err());
        assert!(online_epsilon(&eps, MAX_ONLINE_DIM + 1, 1, 1).is_err());
    }
}

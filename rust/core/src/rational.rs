//! Exact non-negative rationals for privacy parameters (ε, scales, σ).
//!
//! A floating-point parameter is taken as the exact dyadic rational it
//! stores, so `0.1` means 3602879701896397 / 2^55, not one tenth. Callers that
//! mean one tenth pass `Rational::new(1, 10)` (in Python, `Fraction(1, 10)`).

use crate::error::{invalid, Result};
use num_bigint::BigUint;
use num_integer::Integer;
use num_traits::{One, ToPrimitive, Zero};

/// A reduced fraction `num / den` with `den > 0`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Rational {
    num: BigUint,
    den: BigUint,
}

impl Rational {
    /// `num / den`, reduced. Fails when `den == 0`.
    pub fn new(num: impl Into<BigUint>, den: impl Into<BigUint>) -> Result<Self> {
        let (num, den) = (num.into(), den.into());
        if den.is_zero() {
            return Err(invalid!("denominator must be positive, got 0"));
        }
        let g = num.gcd(&den);
        if g.is_zero() || g.is_one() {
            Ok(Self { num, den })
        } else {
            Ok(Self {
                num: num / &g,
                den: den / g,
            })
        }
    }

    /// The exact value of a finite, non-negative `f64` (`what` names it in errors).
    pub fn from_f64(x: f64, what: &str) -> Result<Self> {
        if !x.is_finite() {
            return Err(invalid!("{what} must be finite, got {x}"));
        }
        if x < 0.0 {
            return Err(invalid!("{what} must be non-negative, got {x}"));
        }
        let (mantissa, exp) = decode_f64(x);
        let m = BigUint::from(mantissa.unsigned_abs());
        if exp >= 0 {
            Self::new(m << exp as usize, 1u32)
        } else {
            Self::new(m, BigUint::one() << (-exp) as usize)
        }
    }

    /// The reduced numerator.
    pub fn numer(&self) -> &BigUint {
        &self.num
    }

    /// The reduced denominator (always positive).
    pub fn denom(&self) -> &BigUint {
        &self.den
    }

    /// Whether the value is zero.
    pub fn is_zero(&self) -> bool {
        self.num.is_zero()
    }

    /// `self * other`, exact.
    pub fn mul(&self, other: &Self) -> Self {
        Self::new(&self.num * &other.num, &self.den * &other.den)
            .expect("product of positive denominators is positive")
    }

    /// `self + other`, exact.
    pub fn add(&self, other: &Self) -> Self {
        Self::new(
            &self.num * &other.den + &other.num * &self.den,
            &self.den * &other.den,
        )
        .expect("product of positive denominators is positive")
    }

    /// The exact sum of `values` (0 for none).
    pub fn sum<'a>(values: impl IntoIterator<Item = &'a Rational>) -> Self {
        values.into_iter().fold(Self::zero(), |acc, x| acc.add(x))
    }

    /// Zero.
    pub fn zero() -> Self {
        Self {
            num: BigUint::zero(),
            den: BigUint::one(),
        }
    }

    /// `self / other`, exact. Fails when `other` is zero.
    pub fn div(&self, other: &Self) -> Result<Self> {
        if other.is_zero() {
            return Err(invalid!("division by zero"));
        }
        Self::new(&self.num * &other.den, &self.den * &other.num)
    }

    /// A nearby `f64`, for display and error messages only.
    pub fn to_f64_lossy(&self) -> f64 {
        let n = self.num.to_f64().unwrap_or(f64::INFINITY);
        let d = self.den.to_f64().unwrap_or(f64::INFINITY);
        if n.is_finite() && d.is_finite() {
            n / d
        } else {
            // Scale both down by the same power of two to stay in range.
            let shift = self.num.bits().max(self.den.bits()).saturating_sub(1000);
            let n = (&self.num >> shift).to_f64().unwrap_or(f64::INFINITY);
            let d = (&self.den >> shift).to_f64().unwrap_or(f64::INFINITY);
            n / d
        }
    }
}

impl PartialOrd for Rational {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Rational {
    /// Exact comparison by cross-multiplication (denominators are positive).
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (&self.num * &other.den).cmp(&(&other.num * &self.den))
    }
}

impl std::fmt::Display for Rational {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.den.is_one() {
            write!(f, "{}", self.num)
        } else {
            write!(f, "{}/{}", self.num, self.den)
        }
    }
}

/// Split a finite `f64` into `(mantissa, exponent)` with `x = mantissa * 2^exponent`
/// exactly, reading the IEEE-754 bits (no floating-point arithmetic).
pub fn decode_f64(x: f64) -> (i64, i32) {
    let bits = x.to_bits();
    let sign = if bits >> 63 == 1 { -1i64 } else { 1 };
    let exp_field = ((bits >> 52) & 0x7ff) as i32;
    let frac = (bits & ((1u64 << 52) - 1)) as i64;
    if exp_field == 0 {
        // Zero or subnormal: no implicit leading one.
        (sign * frac, -1074)
    } else {
        (sign * (frac | (1i64 << 52)), exp_field - 1075)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_taken_exactly() {
        let r = Rational::from_f64(0.1, "x").unwrap();
        assert_eq!(r.numer(), &BigUint::from(3602879701896397u64));
        assert_eq!(r.denom(), &(BigUint::one() << 55));
        let r = Rational::from_f64(1e6, "x").unwrap();
        assert_eq!(r, Rational::new(1_000_000u32, 1u32).unwrap());
        let r = Rational::from_f64(0.5, "x").unwrap();
        assert_eq!(r, Rational::new(1u32, 2u32).unwrap());
        let tiny = Rational::from_f64(f64::from_bits(1), "x").unwrap();
        assert_eq!(tiny.denom(), &(BigUint::one() << 1074));
        assert!(Rational::from_f64(0.0, "x").unwrap().is_zero());
    }

    #[test]
    fn bad_floats_are_refused() {
        assert!(Rational::from_f64(f64::NAN, "scale").is_err());
        assert!(Rational::from_f64(f64::INFINITY, "scale").is_err());
        let e = Rational::from_f64(-1.0, "scale").unwrap_err();
        assert!(e.to_string().contains("scale"));
        assert!(Rational::new(1u32, 0u32).is_err());
    }

    #[test]
    fn decode_round_trips() {
        for &x in &[1.0, -2.5, 3.0e-310, 1.7e308, 0.1, -0.0] {
            let (m, e) = decode_f64(x);
            assert_eq!((m as f64) * 2f64.powi(e), x);
        }
    }

    #[test]
    fn sums_and_order_are_exact() {
        let third = Rational::new(1u32, 3u32).unwrap();
        let sixth = Rational::new(1u32, 6u32).unwrap();
        assert_eq!(third.add(&sixth), Rational::new(1u32, 2u32).unwrap());
        assert_eq!(
            Rational::sum([&third, &third, &third]),
            Rational::new(1u32, 1u32).unwrap()
        );
        assert_eq!(Rational::sum(std::iter::empty()), Rational::zero());
        assert!(sixth < third);
        assert_eq!(third.cmp(&sixth), std::cmp::Ordering::Greater);
        assert!(Rational::from_f64(0.1, "x").unwrap() > Rational::new(1u32, 10u32).unwrap());
    }

    #[test]
    fn arithmetic_reduces() {
        let a = Rational::new(2u32, 6u32).unwrap();
        assert_eq!(a.to_string(), "1/3");
        let b = a.mul(&Rational::new(3u32, 1u32).unwrap());
        assert_eq!(b.to_string(), "1");
        assert!(a.div(&Rational::new(0u32, 1u32).unwrap()).is_err());
        assert!((a.to_f64_lossy() - 1.0 / 3.0).abs() < 1e-15);
    }
}

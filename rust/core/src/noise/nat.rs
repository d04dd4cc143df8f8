//! Exact natural numbers for the samplers: `u64` and `u128` on the fast
//! paths and `BigUint` for parameters that do not fit.
//!
//! The samplers are written once, generically over [`Nat`]. Which type runs
//! a draw changes only speed, never the output distribution: every operation
//! here is exact, `uniform_below` is exactly uniform, and an operation that
//! would overflow `u128` reports it (`checked_*`) so that the caller redoes
//! that step with `BigUint` instead of wrapping or saturating.

use crate::rng::Rng;
use num_bigint::BigUint;
use num_traits::{One, ToPrimitive, Zero};

/// Exact unsigned integer arithmetic used by the samplers.
pub(crate) trait Nat: Clone + Ord + std::fmt::Debug {
    fn from_u64(v: u64) -> Self;
    fn is_zero(&self) -> bool;
    fn is_one(&self) -> bool;
    fn to_u64(&self) -> Option<u64>;
    fn to_big(&self) -> BigUint;
    /// `Some` if the value fits `Self`.
    fn from_big(v: &BigUint) -> Option<Self>;
    fn checked_add(&self, other: &Self) -> Option<Self>;
    fn checked_mul(&self, other: &Self) -> Option<Self>;
    /// `self - other`; callers guarantee `self >= other`.
    fn sub_le(&self, other: &Self) -> Self;
    /// `|self - other|`.
    fn abs_diff(&self, other: &Self) -> Self;
    /// `floor(self / other)`; callers guarantee `other > 0`.
    fn div_floor(&self, other: &Self) -> Self;
    /// Exactly uniform in `0..self`; `self` must be positive (0 and 1 give 0
    /// without consuming randomness).
    fn uniform_below(&self, rng: &mut Rng) -> Self;
}

/// The methods that read the same for every primitive unsigned type.
macro_rules! primitive_nat_common {
    ($t:ty) => {
        #[inline]
        fn is_zero(&self) -> bool {
            *self == 0
        }
        #[inline]
        fn is_one(&self) -> bool {
            *self == 1
        }
        fn to_big(&self) -> BigUint {
            BigUint::from(*self)
        }
        #[inline]
        fn checked_add(&self, other: &Self) -> Option<Self> {
            <$t>::checked_add(*self, *other)
        }
        #[inline]
        fn sub_le(&self, other: &Self) -> Self {
            self - other
        }
        #[inline]
        fn abs_diff(&self, other: &Self) -> Self {
            <$t>::abs_diff(*self, *other)
        }
        #[inline]
        fn div_floor(&self, other: &Self) -> Self {
            self / other
        }
    };
}

impl Nat for u64 {
    primitive_nat_common!(u64);

    #[inline]
    fn from_u64(v: u64) -> Self {
        v
    }
    #[inline]
    fn to_u64(&self) -> Option<u64> {
        Some(*self)
    }
    fn from_big(v: &BigUint) -> Option<Self> {
        ToPrimitive::to_u64(v)
    }
    #[inline]
    fn checked_mul(&self, other: &Self) -> Option<Self> {
        u64::checked_mul(*self, *other)
    }
    #[inline]
    fn uniform_below(&self, rng: &mut Rng) -> Self {
        rng.below_u64(*self)
    }
}

impl Nat for u128 {
    primitive_nat_common!(u128);

    #[inline]
    fn from_u64(v: u64) -> Self {
        u128::from(v)
    }
    #[inline]
    fn to_u64(&self) -> Option<u64> {
        u64::try_from(*self).ok()
    }
    fn from_big(v: &BigUint) -> Option<Self> {
        ToPrimitive::to_u128(v)
    }
    #[inline]
    fn checked_mul(&self, other: &Self) -> Option<Self> {
        // Two factors below 2^64 cannot overflow: skip the slow 128-bit check.
        if (*self | *other) >> 64 == 0 {
            Some(self * other)
        } else {
            u128::checked_mul(*self, *other)
        }
    }
    #[inline]
    fn uniform_below(&self, rng: &mut Rng) -> Self {
        match u64::try_from(*self) {
            Ok(n) => u128::from(rng.below_u64(n)),
            Err(_) => {
                // Rejection from the smallest enclosing power of two: exact,
                // and accepts with probability above one half.
                let bits = 128 - (self - 1).leading_zeros();
                let mask = if bits == 128 {
                    u128::MAX
                } else {
                    (1u128 << bits) - 1
                };
                loop {
                    let x =
                        ((u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())) & mask;
                    if x < *self {
                        return x;
                    }
                }
            }
        }
    }
}

impl Nat for BigUint {
    fn from_u64(v: u64) -> Self {
        BigUint::from(v)
    }
    fn is_zero(&self) -> bool {
        Zero::is_zero(self)
    }
    fn is_one(&self) -> bool {
        One::is_one(self)
    }
    fn to_u64(&self) -> Option<u64> {
        ToPrimitive::to_u64(self)
    }
    fn to_big(&self) -> BigUint {
        self.clone()
    }
    fn from_big(v: &BigUint) -> Option<Self> {
        Some(v.clone())
    }
    fn checked_add(&self, other: &Self) -> Option<Self> {
        Some(self + other)
    }
    fn checked_mul(&self, other: &Self) -> Option<Self> {
        Some(self * other)
    }
    fn sub_le(&self, other: &Self) -> Self {
        self - other
    }
    fn abs_diff(&self, other: &Self) -> Self {
        if self >= other {
            self - other
        } else {
            other - self
        }
    }
    fn div_floor(&self, other: &Self) -> Self {
        self / other
    }
    fn uniform_below(&self, rng: &mut Rng) -> Self {
        if *self <= BigUint::one() {
            return BigUint::zero();
        }
        let bits = (self - 1u32).bits();
        let words = bits.div_ceil(64) as usize;
        let top_bits = bits - 64 * (words as u64 - 1);
        let top_mask = if top_bits == 64 {
            u64::MAX
        } else {
            (1u64 << top_bits) - 1
        };
        let mut digits = vec![0u64; words];
        loop {
            for d in digits.iter_mut() {
                *d = rng.next_u64();
            }
            digits[words - 1] &= top_mask;
            // BigUint::from_slice takes u32 digits; build from little-endian bytes.
            let bytes: Vec<u8> = digits.iter().flat_map(|d| d.to_le_bytes()).collect();
            let x = BigUint::from_bytes_le(&bytes);
            if x < *self {
                return x;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chi_square_uniform<N: Nat>(n: N, k: usize, draws: usize, to_idx: impl Fn(&N) -> usize) {
        let mut rng = Rng::seed_from_u64(11);
        let mut counts = vec![0u64; k];
        for _ in 0..draws {
            let x = n.uniform_below(&mut rng);
            assert!(x < n);
            counts[to_idx(&x)] += 1;
        }
        let e = draws as f64 / k as f64;
        let stat: f64 = counts.iter().map(|&c| (c as f64 - e).powi(2) / e).sum();
        let crit = crate::noise::test_support::chi2_critical((k - 1) as f64);
        assert!(stat < crit, "chi2 {stat} >= {crit}");
    }

    #[test]
    fn u64_uniform() {
        chi_square_uniform(10u64, 10, 100_000, |x| *x as usize);
        assert_eq!(Nat::checked_mul(&u64::MAX, &2), None);
    }

    #[test]
    fn u128_uniform_small_and_wide() {
        chi_square_uniform(10u128, 10, 100_000, |x| *x as usize);
        // Above 2^64: bucket by the top bits of a range of 3 * 2^100.
        let n: u128 = 3 << 100;
        chi_square_uniform(n, 3, 30_000, |x| (*x >> 100) as usize);
    }

    #[test]
    fn big_uniform_matches_range() {
        chi_square_uniform(BigUint::from(10u32), 10, 100_000, |x| {
            Nat::to_u64(x).unwrap() as usize
        });
        let n = BigUint::from(5u32) << 200;
        let shift = BigUint::one() << 200;
        chi_square_uniform(n, 5, 50_000, |x| {
            Nat::to_u64(&(x / &shift)).unwrap() as usize
        });
        let mut rng = Rng::seed_from_u64(3);
        assert!(Nat::is_zero(&BigUint::one().uniform_below(&mut rng)));
    }

    #[test]
    fn checked_ops_report_overflow() {
        assert_eq!(Nat::checked_mul(&u128::MAX, &2), None);
        assert_eq!(Nat::checked_add(&u128::MAX, &1), None);
        assert_eq!(Nat::abs_diff(&3u128, &5), 2);
        assert_eq!(
            Nat::abs_diff(&BigUint::from(3u32), &BigUint::from(5u32)),
            BigUint::from(2u32)
        );
    }
}

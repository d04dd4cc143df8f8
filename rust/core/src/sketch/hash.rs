//! Pairwise-independent hashing of `u64` keys to buckets and signs.
//!
//! `h(x)` = the top 64 bits of `(a·x + b) mod 2^128` for uniform 128-bit `a`,
//! `b` (Dietzfelbinger's multiply-add-shift): for distinct keys `x ≠ y` the
//! pair `(h(x), h(y))` is uniform on `[2^64]²` (strongly universal, because
//! `128 >= 64 + 64 − 1`). A bucket in `0..width` is `(h·width) >> 64`
//! (Lemire's multiply-shift range reduction, no division): buckets get
//! `⌊2^64/width⌋` or `⌈2^64/width⌉` hash values, so two distinct keys collide
//! with probability at most `1/width + width/2^128`. A second independent pair
//! `(a', b')` gives the sign `±1` of the count sketch from the top bit.
//!
//! The parameters come from the CSPRNG but are **not secret**: the sketch's
//! privacy holds for every fixed choice of hashes, and they are serialized
//! with it ([`RowHash::parts`], [`RowHash::from_parts`]).

use crate::rng::Rng;

/// The bucket hash and sign hash of one sketch row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowHash {
    a: u128,
    b: u128,
    sa: u128,
    sb: u128,
}

impl RowHash {
    /// Independent uniform parameters from `rng`.
    pub fn random(rng: &mut Rng) -> Self {
        let mut word = || (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
        let (a, b, sa, sb) = (word(), word(), word(), word());
        Self { a, b, sa, sb }
    }

    /// The hash with parameters `(a, b)` (bucket) and `(sa, sb)` (sign). Every
    /// value is valid.
    pub fn from_parts(a: u128, b: u128, sa: u128, sb: u128) -> Self {
        Self { a, b, sa, sb }
    }

    /// The parameters `(a, b, sa, sb)`.
    pub fn parts(&self) -> (u128, u128, u128, u128) {
        (self.a, self.b, self.sa, self.sb)
    }

    /// The 64-bit hash: top half of `(a·key + b) mod 2^128`.
    #[inline(always)]
    pub fn hash64(&self, key: u64) -> u64 {
        (self.a.wrapping_mul(u128::from(key)).wrapping_add(self.b) >> 64) as u64
    }

    /// Bucket of `key` in `0..width` (`width >= 1`; `width == 0` gives 0).
    #[inline(always)]
    pub fn bucket(&self, key: u64, width: usize) -> usize {
        ((u128::from(self.hash64(key)) * width as u128) >> 64) as usize
    }

    /// Sign of `key` for the count sketch: `+1` or `−1`.
    #[inline(always)]
    pub fn sign(&self, key: u64) -> i64 {
        let top = (self.sa.wrapping_mul(u128::from(key)).wrapping_add(self.sb) >> 127) as i64;
        1 - 2 * top
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::test_support::{binomial_within, chi2_critical};

    #[test]
    fn parts_round_trip_and_known_values() {
        let mut rng = Rng::seed_from_u64(31);
        let h = RowHash::random(&mut rng);
        let (a, b, sa, sb) = h.parts();
        assert_eq!(RowHash::from_parts(a, b, sa, sb), h);
        assert_ne!(RowHash::random(&mut rng), h);
        // a = 2^64 + 3, b = 5·2^64: a·x + b = (x + 5)·2^64 + 3x.
        let h = RowHash::from_parts((1 << 64) + 3, 5 << 64, 1 << 127, 0);
        assert_eq!(h.hash64(7), 12);
        // x = 2^64 − 1: (x + 5 + 3)·2^64 − 3 ≡ 7·2^64 − 3 (mod 2^128), top half 6.
        assert_eq!(h.hash64(u64::MAX), 6);
        assert_eq!(h.bucket(7, 1), 0);
        assert_eq!(h.bucket(7, 0), 0);
        // sa = 2^127: the top bit is the low bit of x.
        assert_eq!((h.sign(2), h.sign(3)), (1, -1));
    }

    #[test]
    fn buckets_stay_in_range() {
        let mut rng = Rng::seed_from_u64(32);
        for width in [1usize, 2, 3, 7, 1000, (1 << 30) - 1, 1 << 30] {
            for _ in 0..200 {
                let h = RowHash::random(&mut rng);
                for key in [0, 1, u64::MAX, rng.next_u64()] {
                    assert!(h.bucket(key, width) < width);
                    assert!(h.sign(key) == 1 || h.sign(key) == -1);
                }
            }
        }
    }

    /// Key pairs that a weak hash might map together: neighbours, powers of
    /// two apart, extremes, random.
    fn key_pairs(rng: &mut Rng) -> Vec<(u64, u64)> {
        let r = rng.next_u64();
        vec![
            (0, 1),
            (r, r ^ 1),
            (r, r.wrapping_add(1 << 32)),
            (0, 1 << 63),
            (0, u64::MAX),
            (12345, 12345 + 4096),
            (rng.next_u64(), rng.next_u64()),
        ]
    }

    #[test]
    fn pairwise_collisions_are_one_over_width() {
        let mut rng = Rng::seed_from_u64(33);
        let draws = 200_000u64;
        for width in [2usize, 3, 10, 97] {
            for (x, y) in key_pairs(&mut rng) {
                let mut same_bucket = 0;
                let mut same_sign = 0;
                for _ in 0..draws {
                    let h = RowHash::random(&mut rng);
                    same_bucket += u64::from(h.bucket(x, width) == h.bucket(y, width));
                    same_sign += u64::from(h.sign(x) == h.sign(y));
                }
                let label = format!("width {width}, keys {x}, {y}");
                binomial_within(same_bucket, draws, 1.0 / width as f64, &label);
                binomial_within(same_sign, draws, 0.5, &format!("signs of {label}"));
            }
        }
    }

    #[test]
    fn buckets_and_signs_are_uniform_and_independent() {
        // Joint distribution of (bucket, sign) of one key over hash draws:
        // chi-square against uniform on width × 2 cells.
        let mut rng = Rng::seed_from_u64(34);
        let width = 13;
        let draws = 260_000;
        for key in [0u64, 1, 1 << 40, u64::MAX] {
            let mut counts = vec![0f64; 2 * width];
            for _ in 0..draws {
                let h = RowHash::random(&mut rng);
                let s = usize::from(h.sign(key) > 0);
                counts[2 * h.bucket(key, width) + s] += 1.0;
            }
            let e = draws as f64 / (2 * width) as f64;
            let stat: f64 = counts.iter().map(|o| (o - e).powi(2) / e).sum();
            let crit = chi2_critical((2 * width - 1) as f64);
            assert!(stat < crit, "key {key}: chi2 {stat:.1} >= {crit:.1}");
        }
    }
}

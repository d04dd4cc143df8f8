//! The cryptographically secure generator behind every noise draw.
//!
//! ChaCha12 (the `rand_chacha` implementation; the same generator as `rand`'s
//! `StdRng`, with a wide security margin: the best known attacks reach 7
//! rounds) keyed with 256 bits from the
//! operating system. A generator built from a caller's seed is reproducible,
//! which is what tests and experiments need, and therefore gives **no
//! privacy**: [`Rng::is_seeded`] reports it so that every wrapper can say so.

use crate::error::{Error, Result};
use rand_chacha::ChaCha12Rng;
use rand_core::{RngCore, SeedableRng, TryRngCore};

/// ChaCha12 CSPRNG with exact uniform-integer and bit helpers.
#[derive(Clone)]
pub struct Rng {
    inner: ChaCha12Rng,
    seeded: bool,
    bits: u64,
    nbits: u32,
}

impl std::fmt::Debug for Rng {
    // The key and stream position are secret for an OS-seeded generator.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.seeded {
            f.write_str("Rng(seeded: NOT PRIVATE)")
        } else {
            f.write_str("Rng(os-seeded)")
        }
    }
}

impl Rng {
    /// A generator keyed with 256 bits of operating-system entropy. Private.
    pub fn from_os() -> Result<Self> {
        let mut key = [0u8; 32];
        rand_core::OsRng
            .try_fill_bytes(&mut key)
            .map_err(|e| Error::Entropy(e.to_string()))?;
        Ok(Self::build(ChaCha12Rng::from_seed(key), false))
    }

    /// A reproducible generator from a 256-bit seed. **Not private**: anyone
    /// who knows the seed knows every noise value.
    pub fn from_seed(seed: [u8; 32]) -> Self {
        Self::build(ChaCha12Rng::from_seed(seed), true)
    }

    /// A reproducible generator from a 64-bit seed (the seed is the low
    /// bytes of the 256-bit key). **Not private**.
    pub fn seed_from_u64(seed: u64) -> Self {
        let mut key = [0u8; 32];
        key[..8].copy_from_slice(&seed.to_le_bytes());
        Self::from_seed(key)
    }

    fn build(inner: ChaCha12Rng, seeded: bool) -> Self {
        Self {
            inner,
            seeded,
            bits: 0,
            nbits: 0,
        }
    }

    /// A new generator keyed with 256 bits drawn from this one: reproducible
    /// (and not private) exactly when this one is seeded.
    pub fn derive(&mut self) -> Self {
        let mut key = [0u8; 32];
        self.inner.fill_bytes(&mut key);
        Self::build(ChaCha12Rng::from_seed(key), self.seeded)
    }

    /// A fresh 256-bit key drawn from this generator (for keyed noise streams).
    pub(crate) fn draw_key(&mut self) -> [u8; 32] {
        let mut key = [0u8; 32];
        self.inner.fill_bytes(&mut key);
        key
    }

    /// The generator of stream `stream` under `key`: independent streams of
    /// one key never overlap (ChaCha's 64-bit stream id). Reproducible from
    /// the key; `seeded` only labels it (true when the key came from a seeded
    /// generator).
    pub(crate) fn keyed_stream(key: [u8; 32], stream: u64, seeded: bool) -> Self {
        let mut inner = ChaCha12Rng::from_seed(key);
        inner.set_stream(stream);
        Self::build(inner, seeded)
    }

    /// The full state of a **seeded** generator (key, stream, position and
    /// buffered bits) for a checkpoint, or `None` for an OS-seeded one: its
    /// key is never written anywhere (with it, released noise could be
    /// recomputed and subtracted).
    pub fn seeded_state(&self) -> Option<([u8; 32], u64, u128, u64, u32)> {
        self.seeded.then(|| {
            (
                self.inner.get_seed(),
                self.inner.get_stream(),
                self.inner.get_word_pos(),
                self.bits,
                self.nbits,
            )
        })
    }

    /// A seeded generator from [`Rng::seeded_state`]; it continues exactly
    /// where the saved one stopped.
    pub fn from_seeded_state(state: ([u8; 32], u64, u128, u64, u32)) -> Result<Self> {
        let (key, stream, pos, bits, nbits) = state;
        if nbits > 64 || (nbits < 64 && bits >> nbits != 0) {
            return Err(Error::InvalidParameter(
                "invalid generator state (buffered bits)".into(),
            ));
        }
        let mut inner = ChaCha12Rng::from_seed(key);
        inner.set_stream(stream);
        inner.set_word_pos(pos);
        Ok(Self {
            inner,
            seeded: true,
            bits,
            nbits,
        })
    }

    /// Whether this generator was built from a caller's seed (not private).
    pub fn is_seeded(&self) -> bool {
        self.seeded
    }

    /// 64 uniform bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.inner.next_u64()
    }

    /// 32 uniform bits (the generator's native word: half the cost of [`Rng::next_u64`]).
    #[inline]
    pub fn next_u32(&mut self) -> u32 {
        self.inner.next_u32()
    }

    /// One uniform bit, taken from a buffered word.
    #[inline]
    pub fn bit(&mut self) -> bool {
        if self.nbits == 0 {
            self.bits = self.inner.next_u64();
            self.nbits = 64;
        }
        let b = self.bits & 1 == 1;
        self.bits >>= 1;
        self.nbits -= 1;
        b
    }

    /// Exactly uniform integer in `0..n` (Lemire's multiply-and-reject).
    /// `n <= 1` returns 0 without drawing. Ranges below 2^32 spend one 32-bit
    /// word: the samplers' ranges almost always are, and the generator's
    /// output is then the larger part of their cost.
    #[inline(always)]
    pub fn below_u64(&mut self, n: u64) -> u64 {
        if n <= u64::from(u32::MAX) {
            if n <= 1 {
                return 0;
            }
            let n = n as u32;
            let m = u64::from(self.next_u32()) * u64::from(n);
            if (m as u32) < n {
                return u64::from(self.below_u32_slow(n, m));
            }
            m >> 32
        } else {
            self.below_u64_wide(n)
        }
    }

    /// The rejection step of the 32-bit path: `m` is the first product, whose
    /// low half fell in the region where bias is possible.
    #[cold]
    #[inline(never)]
    fn below_u32_slow(&mut self, n: u32, mut m: u64) -> u32 {
        // 2^32 mod n: the size of the biased region that must be rejected.
        let threshold = n.wrapping_neg() % n;
        while (m as u32) < threshold {
            m = u64::from(self.next_u32()) * u64::from(n);
        }
        (m >> 32) as u32
    }

    /// The 64-bit path, for ranges of 2^32 and above.
    #[inline(never)]
    fn below_u64_wide(&mut self, n: u64) -> u64 {
        let mut m = u128::from(self.next_u64()) * u128::from(n);
        if (m as u64) < n {
            let threshold = n.wrapping_neg() % n;
            while (m as u64) < threshold {
                m = u128::from(self.next_u64()) * u128::from(n);
            }
        }
        (m >> 64) as u64
    }

    /// Fill `dest` with uniform bytes.
    pub fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.inner.fill_bytes(dest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeded_streams_repeat_and_differ_by_seed() {
        let mut a = Rng::seed_from_u64(7);
        let mut b = Rng::seed_from_u64(7);
        let mut c = Rng::seed_from_u64(8);
        let xa: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert!(a.is_seeded());
    }

    #[test]
    fn os_generators_differ_and_are_private() {
        let mut a = Rng::from_os().unwrap();
        let mut b = Rng::from_os().unwrap();
        assert!(!a.is_seeded());
        assert_ne!(a.next_u64(), b.next_u64());
        assert_eq!(format!("{a:?}"), "Rng(os-seeded)");
    }

    #[test]
    fn below_is_in_range_and_covers_it() {
        let mut r = Rng::seed_from_u64(1);
        let mut seen = [false; 7];
        for _ in 0..10_000 {
            let x = r.below_u64(7);
            assert!(x < 7);
            seen[x as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.below_u64(1), 0);
        assert_eq!(r.below_u64(0), 0);
        for big in [u64::MAX - 3, (1u64 << 32) + 1, u64::from(u32::MAX)] {
            for _ in 0..1000 {
                assert!(r.below_u64(big) < big);
            }
        }
        // Both word sizes reach the top of their range.
        let top = (0..10_000).map(|_| r.below_u64(3)).max();
        assert_eq!(top, Some(2));
        let n = 3u64 << 40;
        assert!((0..100).any(|_| r.below_u64(n) >= 2u64 << 40));
    }

    #[test]
    fn bits_are_balanced() {
        let mut r = Rng::seed_from_u64(2);
        let ones = (0..64_000).filter(|_| r.bit()).count();
        // Binomial(64000, 1/2): sd = 126.5; 6 sd is a false-alarm rate of ~2e-9.
        assert!((ones as i64 - 32_000).abs() < 760, "ones = {ones}");
    }
}

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

/// Domain tags of [`derive_key`] inputs (one per kind of derived key).
pub(crate) mod tag {
    /// The evaluation points of a [`super::KeyedDigest`].
    pub const DIGEST: u64 = 1;
    /// A block of the default online synthesizer.
    pub const EPOCH_BLOCK: u64 = 2;
    /// A released block of continual PrivHP (`for_memory`).
    pub const CONTINUAL_BLOCK: u64 = 3;
    /// The noise of one step of a continual counter.
    pub const COUNTER_STEP: u64 = 4;
    /// The sampling generator of a loaded checkpoint.
    pub const LOADED_SAMPLER: u64 = 5;
    /// A master key for a version-1 checkpoint, from its saved block keys.
    pub const LEGACY_MASTER: u64 = 6;
    /// A generator of a [`crate::keys::KeyRing`].
    pub const KEY_RING: u64 = 7;
    /// A run of tests of a sparse counter.
    pub const SPARSE_RUN: u64 = 8;
}

/// A 256-bit key derived from a secret `master` key and public or digested
/// `words`: a pseudorandom function of `words` (the cascade construction with
/// ChaCha12 as the PRF: each word selects the ChaCha stream whose first 32
/// bytes key the next step). The input is made prefix-free by its length, so
/// distinct `words` give independent-looking keys, and equal `words` the same
/// key: the noise keyed by it is then a fixed function of the master key, the
/// position and the digested contents.
pub(crate) fn derive_key(master: &[u8; 32], words: &[u64]) -> [u8; 32] {
    let mut key = chacha12_first_bytes(master, words.len() as u64);
    for &w in words {
        key = chacha12_first_bytes(&key, w);
    }
    key
}

/// The first 32 bytes of ChaCha12 stream `stream` under `key` (block 0): what
/// `ChaCha12Rng` seeded with `key`, set to `stream`, outputs first (a test
/// checks it), with one block computed instead of the generator's four.
fn chacha12_first_bytes(key: &[u8; 32], stream: u64) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(&chacha12_block(key, 0, stream)[..32]);
    out
}

/// Block `counter` of ChaCha12 stream `stream` under `key`: what
/// `ChaCha12Rng` seeded with `key`, set to `stream` and to word `16·counter`,
/// outputs next (a test checks it). Under a secret key, a pseudorandom
/// function of the 128-bit input `(counter, stream)`.
pub(crate) fn chacha12_block(key: &[u8; 32], counter: u64, stream: u64) -> [u8; 64] {
    // The state as four rows of four words: a round works on whole rows (the
    // compiler maps them to vector registers), the diagonal round on rows
    // rotated by 1, 2 and 3 words.
    type Row = [u32; 4];
    #[inline(always)]
    fn add(a: Row, b: Row) -> Row {
        [0, 1, 2, 3].map(|i| a[i].wrapping_add(b[i]))
    }
    #[inline(always)]
    fn xor_rotate(a: Row, b: Row, r: u32) -> Row {
        [0, 1, 2, 3].map(|i| (a[i] ^ b[i]).rotate_left(r))
    }
    #[inline(always)]
    fn quarter_rounds(x: &mut [Row; 4]) {
        let [mut a, mut b, mut c, mut d] = *x;
        a = add(a, b);
        d = xor_rotate(d, a, 16);
        c = add(c, d);
        b = xor_rotate(b, c, 12);
        a = add(a, b);
        d = xor_rotate(d, a, 8);
        c = add(c, d);
        b = xor_rotate(b, c, 7);
        *x = [a, b, c, d];
    }
    #[inline(always)]
    fn rotate(r: Row, k: usize) -> Row {
        [0, 1, 2, 3].map(|i| r[(i + k) % 4])
    }
    let word =
        |i: usize| u32::from_le_bytes([key[4 * i], key[4 * i + 1], key[4 * i + 2], key[4 * i + 3]]);
    let state: [Row; 4] = [
        [0x6170_7865, 0x3320_646e, 0x7962_2d32, 0x6b20_6574],
        [word(0), word(1), word(2), word(3)],
        [word(4), word(5), word(6), word(7)],
        // The 64-bit block counter, then the stream.
        [
            counter as u32,
            (counter >> 32) as u32,
            stream as u32,
            (stream >> 32) as u32,
        ],
    ];
    let mut x = state;
    for _ in 0..6 {
        // Columns (0, 4, 8, 12), …, then diagonals (0, 5, 10, 15), ….
        quarter_rounds(&mut x);
        x = [x[0], rotate(x[1], 1), rotate(x[2], 2), rotate(x[3], 3)];
        quarter_rounds(&mut x);
        x = [x[0], rotate(x[1], 3), rotate(x[2], 2), rotate(x[3], 1)];
    }
    let mut out = [0u8; 64];
    for (r, (row, init)) in x.iter().zip(&state).enumerate() {
        for (i, (v, v0)) in row.iter().zip(init).enumerate() {
            let at = 16 * r + 4 * i;
            out[at..at + 4].copy_from_slice(&v.wrapping_add(*v0).to_le_bytes());
        }
    }
    out
}

/// The Mersenne prime `2^61 − 1` of [`KeyedDigest`].
const DIGEST_PRIME: u64 = (1 << 61) - 1;

fn mul_mod(a: u64, b: u64) -> u64 {
    let z = u128::from(a) * u128::from(b);
    let s = (z as u64 & DIGEST_PRIME) + (z >> 61) as u64;
    if s >= DIGEST_PRIME {
        s - DIGEST_PRIME
    } else {
        s
    }
}

/// Most words [`KeyedDigest::append`] takes at once.
pub(crate) const APPEND_WORDS: usize = 9;

/// The powers `x^0..=x^{2·APPEND_WORDS}` of a [`KeyedDigest`]'s two points
/// (secret, as the points).
#[derive(Clone, Copy)]
pub(crate) struct DigestPowers([[u64; 2]; 2 * APPEND_WORDS + 1]);

/// A keyed digest of a sequence of 64-bit words: two polynomial hashes modulo
/// `2^61 − 1` at secret points derived from a master key (a universal hash:
/// two different sequences of at most `n` words collide with probability at
/// most `(2n/2^61)^2` over the key, whatever their contents). Its value is
/// fed to [`derive_key`], never released.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyedDigest {
    points: [u64; 2],
    state: [u64; 2],
}

impl KeyedDigest {
    /// An empty digest under `master` (the leading coefficient 1 makes
    /// sequences of different lengths different polynomials).
    pub(crate) fn new(master: &[u8; 32]) -> Self {
        Self::resume(master, [1, 1])
    }

    /// A digest under `master` that continues from a saved [`Self::state`].
    pub(crate) fn resume(master: &[u8; 32], state: [u64; 2]) -> Self {
        let k = derive_key(master, &[tag::DIGEST]);
        let point = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&k[8 * i..8 * i + 8]);
            (u64::from_le_bytes(b) % (DIGEST_PRIME - 2)) + 2
        };
        Self {
            points: [point(0), point(1)],
            state: [state[0] % DIGEST_PRIME, state[1] % DIGEST_PRIME],
        }
    }

    /// A digest under the same key that continues from `state`.
    pub(crate) fn at(&self, state: [u64; 2]) -> Self {
        Self {
            points: self.points,
            state: [state[0] % DIGEST_PRIME, state[1] % DIGEST_PRIME],
        }
    }

    /// Append one word (as two 32-bit coefficients).
    #[inline]
    pub(crate) fn word(&mut self, w: u64) {
        for c in [w & 0xffff_ffff, w >> 32] {
            for i in 0..2 {
                self.state[i] = mul_mod(self.state[i], self.points[i]) + c;
                if self.state[i] >= DIGEST_PRIME {
                    self.state[i] -= DIGEST_PRIME;
                }
            }
        }
    }

    /// Append words.
    pub(crate) fn words(&mut self, ws: &[u64]) {
        for &w in ws {
            self.word(w);
        }
    }

    /// The powers of the points for [`KeyedDigest::append`].
    pub(crate) fn powers(&self) -> DigestPowers {
        let mut pw = [[1u64; 2]; 2 * APPEND_WORDS + 1];
        for k in 1..pw.len() {
            pw[k] = [0, 1].map(|i| mul_mod(pw[k - 1][i], self.points[i]));
        }
        DigestPowers(pw)
    }

    /// [`KeyedDigest::words`] for at most [`APPEND_WORDS`] words, the same
    /// value computed from the points' powers `pw` (of this digest's key) by
    /// independent products instead of Horner's chain: several times faster.
    pub(crate) fn append(&mut self, ws: &[u64], pw: &DigestPowers) {
        assert!(ws.len() <= APPEND_WORDS, "too many words to append");
        let m = 2 * ws.len();
        // Per point: state·x^m + Σ_k c_k·x^{m−1−k} < 2^122 + 2^98 (the
        // coefficients are 32-bit), reduced with 2^61 ≡ 1; the two points'
        // sums side by side.
        let mut z = [0, 1].map(|i| u128::from(self.state[i]) * u128::from(pw.0[m][i]));
        for (j, &w) in ws.iter().enumerate() {
            let (lo, hi) = (u128::from(w & 0xffff_ffff), u128::from(w >> 32));
            let (x1, x2) = (pw.0[m - 2 * j - 1], pw.0[m - 2 * j - 2]);
            for i in 0..2 {
                z[i] += lo * u128::from(x1[i]) + hi * u128::from(x2[i]);
            }
        }
        for (state, z) in self.state.iter_mut().zip(z) {
            let s = (z as u64 & DIGEST_PRIME) as u128 + (z >> 61);
            let s = (s as u64 & DIGEST_PRIME) + (s >> 61) as u64;
            *state = if s >= DIGEST_PRIME {
                s - DIGEST_PRIME
            } else {
                s
            };
        }
    }

    /// The digest so far (also the state that [`Self::resume`] continues).
    pub(crate) fn state(&self) -> [u64; 2] {
        self.state
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

    #[test]
    fn the_one_block_prf_is_chacha12() {
        let mut seed = Rng::seed_from_u64(5);
        for stream in [0u64, 1, 7, u64::MAX, 1 << 40] {
            let key = seed.draw_key();
            let mut reference = ChaCha12Rng::from_seed(key);
            reference.set_stream(stream);
            let mut want = [0u8; 32];
            reference.fill_bytes(&mut want);
            assert_eq!(chacha12_first_bytes(&key, stream), want);
            for counter in [1u64, 5, (1 << 61) - 2] {
                reference.set_word_pos(u128::from(counter) * 16);
                let mut want = [0u8; 64];
                reference.fill_bytes(&mut want);
                assert_eq!(chacha12_block(&key, counter, stream), want);
            }
        }
    }

    #[test]
    fn derived_keys_depend_on_every_word_and_the_length() {
        let m = [7u8; 32];
        let a = derive_key(&m, &[1, 2, 3]);
        assert_eq!(a, derive_key(&m, &[1, 2, 3]));
        assert_ne!(a, derive_key(&m, &[1, 2, 4]));
        assert_ne!(a, derive_key(&m, &[1, 2]));
        assert_ne!(a, derive_key(&m, &[1, 2, 3, 0]));
        assert_ne!(a, derive_key(&[8u8; 32], &[1, 2, 3]));
    }

    #[test]
    fn keyed_digests_separate_contents_and_lengths() {
        let m = [3u8; 32];
        let digest = |ws: &[u64]| {
            let mut d = KeyedDigest::new(&m);
            d.words(ws);
            d.state()
        };
        assert_eq!(digest(&[5, 6]), digest(&[5, 6]));
        assert_ne!(digest(&[5, 6]), digest(&[6, 5]));
        assert_ne!(digest(&[0, 5]), digest(&[5]));
        assert_ne!(digest(&[u64::MAX]), digest(&[u64::MAX - 1]));
        // Resuming from a state continues the same digest.
        let mut d = KeyedDigest::new(&m);
        d.word(5);
        let mut e = KeyedDigest::resume(&m, d.state());
        e.word(6);
        assert_eq!(e.state(), digest(&[5, 6]));
        // Appending with the powers is the same digest.
        let pw = d.powers();
        for ws in [
            &[][..],
            &[5],
            &[u64::MAX, 0, 1 << 32, 7, 8, 9, 10, 11, u64::MAX - 1],
        ] {
            let mut a = d;
            a.append(ws, &pw);
            let mut b = d;
            b.words(ws);
            assert_eq!(a.state(), b.state());
        }
        // Another master key: another digest.
        let mut f = KeyedDigest::new(&[4u8; 32]);
        f.words(&[5, 6]);
        assert_ne!(f.state(), digest(&[5, 6]));
    }
}

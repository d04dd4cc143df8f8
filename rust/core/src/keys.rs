//! A secret master key and a running keyed digest: the generators of a
//! checkpointed stream whose noise is drawn outside the core (the tabular
//! stream's steps).
//!
//! The generator of a position is keyed by a pseudorandom function of the
//! master key, the position and a keyed digest of every content absorbed so
//! far. A checkpoint holding the ring, loaded any number of times and fed the
//! same contents, gives the same generators (the same noise, byte for byte);
//! other contents give independent ones. A checkpoint supports one
//! continuation.

use crate::error::{Error, Result};
use crate::rng::{derive_key, tag, KeyedDigest, Rng};

/// Bytes of [`KeyRing::to_bytes`]: the master key, the digest and the seeded flag.
pub const KEY_RING_BYTES: usize = 32 + 16 + 1;

/// A secret master key with a running keyed digest of absorbed contents.
#[derive(Clone)]
pub struct KeyRing {
    master: [u8; 32],
    digest: [u64; 2],
    seeded: bool,
}

impl std::fmt::Debug for KeyRing {
    // The master key is secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.seeded {
            "KeyRing(seeded: NOT PRIVATE)"
        } else {
            "KeyRing"
        })
    }
}

impl KeyRing {
    /// A ring whose master key is drawn from `rng` (seeded, and then not
    /// private, exactly when `rng` is), with nothing absorbed.
    pub fn new(rng: &mut Rng) -> Self {
        Self {
            master: rng.draw_key(),
            digest: [1, 1],
            seeded: rng.is_seeded(),
        }
    }

    /// Append `contents` (prefixed by its length) to the running digest.
    pub fn absorb(&mut self, contents: &[i64]) {
        let mut d = KeyedDigest::resume(&self.master, self.digest);
        d.word(contents.len() as u64);
        for &v in contents {
            d.word(v as u64);
        }
        self.digest = d.state();
    }

    /// The generator of `position` (public words) after the contents absorbed
    /// so far: a fixed function of the master key, `position` and the digest.
    pub fn generator(&self, position: &[u64]) -> Rng {
        let mut words = Vec::with_capacity(position.len() + 3);
        words.push(tag::KEY_RING);
        words.extend_from_slice(&self.digest);
        words.extend_from_slice(position);
        Rng::keyed_stream(derive_key(&self.master, &words), 0, self.seeded)
    }

    /// Whether the master key came from a seeded generator (not private).
    pub fn is_seeded(&self) -> bool {
        self.seeded
    }

    /// The ring for a checkpoint. **Secret**: with it, every noise value it
    /// keyed can be recomputed.
    pub fn to_bytes(&self) -> [u8; KEY_RING_BYTES] {
        let mut out = [0u8; KEY_RING_BYTES];
        out[..32].copy_from_slice(&self.master);
        out[32..40].copy_from_slice(&self.digest[0].to_le_bytes());
        out[40..48].copy_from_slice(&self.digest[1].to_le_bytes());
        out[48] = u8::from(self.seeded);
        out
    }

    /// A ring from [`KeyRing::to_bytes`].
    pub fn from_bytes(data: &[u8]) -> Result<Self> {
        let bad = || Error::InvalidParameter("invalid key ring bytes".into());
        if data.len() != KEY_RING_BYTES || data[48] > 1 {
            return Err(bad());
        }
        let word = |a: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&data[a..a + 8]);
            u64::from_le_bytes(b)
        };
        let mut master = [0u8; 32];
        master.copy_from_slice(&data[..32]);
        Ok(Self {
            master,
            digest: [word(32), word(40)],
            seeded: data[48] == 1,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn draws(mut r: Rng) -> [u64; 4] {
        [r.next_u64(), r.next_u64(), r.next_u64(), r.next_u64()]
    }

    #[test]
    fn same_contents_same_generators_other_contents_others() {
        let mut ring = KeyRing::new(&mut Rng::from_os().unwrap());
        ring.absorb(&[3, 4]);
        let saved = ring.to_bytes();
        let continue_with = |contents: &[i64]| {
            let mut r = KeyRing::from_bytes(&saved).unwrap();
            r.absorb(contents);
            draws(r.generator(&[7]))
        };
        let first = continue_with(&[5, 6]);
        for _ in 0..20 {
            assert_eq!(continue_with(&[5, 6]), first);
        }
        assert_ne!(continue_with(&[5, 7]), first);
        assert_ne!(continue_with(&[5, 6, 0]), first);
        let mut r = KeyRing::from_bytes(&saved).unwrap();
        r.absorb(&[5, 6]);
        assert_ne!(draws(r.generator(&[8])), first);
        assert!(!r.generator(&[7]).is_seeded());
    }

    #[test]
    fn absorbing_is_prefix_free_and_the_master_key_matters() {
        let seeded = |s| KeyRing::new(&mut Rng::seed_from_u64(s));
        let (mut a, mut b) = (seeded(1), seeded(1));
        a.absorb(&[1, 2]);
        b.absorb(&[1]);
        b.absorb(&[2]);
        assert_ne!(draws(a.generator(&[])), draws(b.generator(&[])));
        let mut c = seeded(2);
        c.absorb(&[1, 2]);
        assert_ne!(draws(a.generator(&[])), draws(c.generator(&[])));
        assert!(a.is_seeded() && a.generator(&[]).is_seeded());
    }

    #[test]
    fn bytes_round_trip_and_refuse_bad_input() {
        let mut ring = KeyRing::new(&mut Rng::seed_from_u64(9));
        ring.absorb(&[-1, i64::MAX]);
        let back = KeyRing::from_bytes(&ring.to_bytes()).unwrap();
        assert_eq!(back.to_bytes(), ring.to_bytes());
        assert!(KeyRing::from_bytes(&[0u8; 48]).is_err());
        let mut bad = ring.to_bytes();
        bad[48] = 2;
        assert!(KeyRing::from_bytes(&bad).is_err());
        assert_eq!(format!("{ring:?}"), "KeyRing(seeded: NOT PRIVATE)");
    }
}

//! Helpers shared by the fuzz targets of `dpstream-core`.
//!
//! Every state target reads its input as `mode byte ++ bytes`:
//! * `mode` even: `bytes` is a whole encoded file (header, payload,
//!   checksum), so the header checks themselves are fuzzed;
//! * `mode` odd: `bytes` is a payload, wrapped here in a valid header and
//!   checksum of the target's kind, so that mutations reach the payload
//!   decoder instead of stopping at the CRC.
//!
//! After a successful decode, each target exercises the object with a
//! generator seeded from a hash of the input (deterministic per input), so
//! that semantically corrupt state that passes validation is caught too.

use dpstream_core::state::{self, Kind};
use dpstream_core::{Rational, Rng};

/// The state bytes that the input `data` stands for (see the crate docs).
pub fn state_bytes(data: &[u8], kind: Kind) -> Option<Vec<u8>> {
    let (&mode, rest) = data.split_first()?;
    Some(if mode & 1 == 0 {
        rest.to_vec()
    } else {
        state::encode(kind, rest)
    })
}

/// A seeded generator derived from the whole input (FNV-1a).
pub fn op_rng(data: &[u8]) -> Rng {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in data {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    Rng::seed_from_u64(h)
}

/// A small positive ε picked by `rng` (from 1/1000 to 8).
pub fn some_epsilon(rng: &mut Rng) -> Rational {
    const CHOICES: [(u32, u32); 6] = [(1, 1), (1, 2), (1, 10), (1, 1000), (3, 1), (8, 1)];
    let (n, d) = CHOICES[rng.below_u64(CHOICES.len() as u64) as usize];
    Rational::new(n, d).expect("valid constant")
}

/// An `f64` that is usually in `[0, 1]` and sometimes hostile (NaN, ±inf,
/// out of range, subnormal, -0.0, 1.0 exactly).
pub fn some_coordinate(rng: &mut Rng, hostile: bool) -> f64 {
    let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
    if !hostile {
        return u;
    }
    match rng.below_u64(12) {
        0 => f64::NAN,
        1 => f64::INFINITY,
        2 => f64::NEG_INFINITY,
        3 => 1.0 + f64::EPSILON,
        4 => -f64::MIN_POSITIVE,
        5 => -0.0,
        6 => 1.0,
        7 => f64::from_bits(1),
        8 => f64::from_bits(rng.next_u64()),
        _ => u,
    }
}

/// `n` rows of `dim` coordinates; with `hostile`, some entries are bad.
pub fn some_points(rng: &mut Rng, n: usize, dim: usize, hostile: bool) -> Vec<f64> {
    (0..n * dim)
        .map(|_| {
            let bad = hostile && rng.below_u64(8) == 0;
            some_coordinate(rng, bad)
        })
        .collect()
}

/// Whether every value is a valid coordinate.
pub fn all_in_unit(points: &[f64]) -> bool {
    points.iter().all(|x| (0.0..=1.0).contains(x))
}

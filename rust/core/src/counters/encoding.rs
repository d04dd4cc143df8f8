//! Checkpoints of the counters: [`Counter`], [`SparseCounter`] and
//! [`InhomogeneousSparseCounter`] encode to and decode from the versioned,
//! checksummed format of [`crate::state`] (kinds [`Kind::Counter`],
//! [`Kind::SparseCounter`] and [`Kind::InhomogeneousSparseCounter`]).
//!
//! * **Sensitive**: an encoded counter holds the *exact* running sums and
//!   the noise of the current release (and, for the sparse counters, the
//!   exact segment counts and noisy thresholds). Anyone who reads it learns
//!   the raw sums: protect it like the raw data, never publish it.
//! * **Master key** (version 3): a counter does not own its generator, but
//!   its step noise is keyed by a secret master key (drawn from the caller's
//!   [`crate::Rng`] at the first step), the time and a keyed digest of the
//!   increments; the key and the digest are stored. A decoded counter fed
//!   the same increments gives exactly the releases the original would have
//!   given, however many times the bytes are loaded. A version-1 or -2
//!   encoding (no key) draws a new master key at its next step. The sparse
//!   counters (version 3) store theirs too, after the exact total (`u8` 0 or
//!   1 and the key), and each sparse state starts with the first test of its
//!   current run and its digest (3 × `u64`); every run of tests is keyed by
//!   them ([`super::sparse`]).
//! * **Seeded flag**: the caller, who knows its generator, says whether the
//!   noise came from a seeded one (reproducible, **not private**); the flag
//!   is stored and decoded with the counter, so a loaded counter stays
//!   marked. Version-1 encodings (before the flag) decode as not seeded.
//!   All three counters store it: the payloads of [`SparseCounter`] and
//!   [`InhomogeneousSparseCounter`] (version 2) start with the same flags
//!   byte as a [`Counter`]'s, and their version-1 payloads are the rest.
//! * **Validation**: decoding checks the header and checksum
//!   ([`crate::state::decode`]), then every field: the kind, ε, lengths
//!   against `dim` and the tree levels, the time against the horizon, and
//!   the noise held against the noise of the release. It never panics, and
//!   it allocates only after checking that the payload holds the values
//!   ([`Reader::count`]).
//!
//! Payload of a [`Counter`], version 3 (all integers little-endian;
//! version 2 is the same without the last row, version 1 also without the
//! flags byte):
//!
//! | field | encoding |
//! |---|---|
//! | flags | `u8`: bit 0 the noise came from a seeded generator; other bits 0 |
//! | kind | `u8`: 0 simple, 1 block, 2 unbounded block, 3 binary tree, 4 hybrid |
//! | horizon | `u64`, only for block and binary tree |
//! | ε | numerator and denominator, each a `u64` length and little-endian bytes |
//! | `dim`, time | `u64`, `u64` |
//! | exact sum, noise of the release | `dim` × `i64` each (the release is their sum) |
//! | block | noise of the finished block sums, `dim` × `i64` (the schedule follows from time) |
//! | binary tree | p-sums: items, `u64` count and `i64` noise values |
//! | hybrid | logarithmic noise `dim` × `i64`, then the current epoch's p-sums |
//! | master key | `u8` 0 (no step yet), or 1, the 32-byte key and the digest state (2 × `u64`) |

use super::vector::add_into;
use super::{Counter, CounterKind};
use crate::error::{invalid, Error, Result};
use crate::rational::Rational;
use crate::state::{self, Kind, Reader, Writer};

/// An error for a well-formed but invalid payload.
pub(crate) fn bad(what: impl std::fmt::Display) -> Error {
    invalid!("invalid dpstream state: {what}")
}

/// Append an exact rational ([`Writer::rational`]).
pub(crate) fn write_rational(w: &mut Writer, x: &Rational) {
    w.rational(x);
}

/// Read [`write_rational`] output.
pub(crate) fn read_rational(r: &mut Reader<'_>) -> Result<Rational> {
    r.rational()
}

impl Counter {
    /// Encode the whole counter for a checkpoint ([`Kind::Counter`]), with
    /// `seeded`: whether its noise came from a seeded generator (the counter
    /// does not own its generator, so the caller says; it is stored so that
    /// a loaded counter is still marked not private).
    ///
    /// **Sensitive**: the bytes hold the exact running sums (protect them
    /// like the raw data). No generator state is stored: the counter has
    /// none.
    pub fn to_bytes(&self, seeded: bool) -> Vec<u8> {
        let mut w = Writer::new();
        state::write_seeded_flag(&mut w, seeded);
        let (code, horizon) = match self.kind {
            CounterKind::Simple => (0u8, None),
            CounterKind::Block { horizon } => (1, Some(horizon)),
            CounterKind::UnboundedBlock => (2, None),
            CounterKind::BinaryTree { horizon } => (3, Some(horizon)),
            CounterKind::Hybrid => (4, None),
        };
        w.u8(code);
        if let Some(h) = horizon {
            w.u64(h);
        }
        write_rational(&mut w, &self.epsilon);
        w.u64(self.dim as u64);
        w.u64(self.time);
        for v in self.sum.iter().chain(&self.noise) {
            w.i64(*v);
        }
        self.process.get().write_state(&mut w);
        match &self.master {
            None => w.u8(0),
            Some(m) => {
                w.u8(1);
                for b in m {
                    w.u8(*b);
                }
                w.u64(self.digest[0]);
                w.u64(self.digest[1]);
            }
        }
        state::encode(Kind::Counter, &w.finish())
    }

    /// Decode [`Counter::to_bytes`] output: the counter and its seeded flag
    /// (`false` for a version-1 encoding, which did not record it). Fails
    /// with a clear error on truncated, corrupted or foreign bytes and on a
    /// payload that no counter can reach.
    pub fn from_bytes(bytes: &[u8]) -> Result<(Self, bool)> {
        let (version, payload) = state::decode_versioned(bytes, Kind::Counter)?;
        let mut r = Reader::new(payload);
        let seeded = state::read_seeded_flag(&mut r, version, "counter")?;
        let kind = match r.u8()? {
            0 => CounterKind::Simple,
            1 => CounterKind::Block { horizon: r.u64()? },
            2 => CounterKind::UnboundedBlock,
            3 => CounterKind::BinaryTree { horizon: r.u64()? },
            4 => CounterKind::Hybrid,
            code => return Err(bad(format!("unknown counter kind {code}"))),
        };
        let epsilon = read_rational(&mut r)?;
        // The payload holds `dim` sums and `dim` noise values (16 bytes per
        // coordinate), so a corrupt `dim` cannot make the buffers large.
        let dim = r.count(16)?;
        let time = r.u64()?;
        let mut c = Counter::new(kind, &epsilon, dim).map_err(bad)?;
        if time > kind.horizon().unwrap_or(u64::MAX) {
            return Err(bad(format!(
                "time {time} is past the counter's horizon of {} steps",
                kind.horizon().unwrap_or(u64::MAX)
            )));
        }
        for v in c.sum.iter_mut().chain(c.noise.iter_mut()) {
            *v = r.i64()?;
        }
        if time == 0 && c.sum.iter().chain(&c.noise).any(|v| *v != 0) {
            return Err(bad("a counter at time 0 holds non-zero sums"));
        }
        add_into(&c.sum, &c.noise, &mut c.release, "release")
            .map_err(|_| bad("the release exceeds the int64 range"))?;
        let Counter { process, noise, .. } = &mut c;
        process.get_mut().read_state(&mut r, time, noise)?;
        if version >= 3 {
            match r.u8()? {
                0 => {}
                1 => {
                    let mut m = [0u8; 32];
                    for b in m.iter_mut() {
                        *b = r.u8()?;
                    }
                    c.master = Some(m);
                    c.digest = [r.u64()?, r.u64()?];
                }
                _ => return Err(bad("the master key flag")),
            }
        }
        r.finish()?;
        c.time = time;
        Ok((c, seeded))
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        InhomogeneousSparseCounter, LevelSchedule, SparseCounter, MAX_SPARSE_COUNT,
    };
    use super::*;
    use crate::rng::Rng;
    use std::sync::Arc;

    fn q(n: u32, d: u32) -> Rational {
        Rational::new(n, d).unwrap()
    }

    const KINDS: [CounterKind; 5] = [
        CounterKind::Simple,
        CounterKind::Block { horizon: 60 },
        CounterKind::UnboundedBlock,
        CounterKind::BinaryTree { horizon: 60 },
        CounterKind::Hybrid,
    ];

    /// A deterministic increment for step `t`, coordinate `c`.
    fn inc(t: u64, c: usize) -> i64 {
        ((t * 7 + c as u64 * 3) % 5) as i64 - 2
    }

    fn step(c: &mut Counter, rng: &mut Rng) {
        let row: Vec<i64> = (0..c.dim()).map(|k| inc(c.time(), k)).collect();
        c.step(rng, &row).unwrap();
    }

    /// The payload of `bytes`, changed by `f`, in a valid envelope.
    fn reencode(bytes: &[u8], kind: Kind, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let mut payload = state::decode(bytes, kind).unwrap().to_vec();
        f(&mut payload);
        state::encode(kind, &payload)
    }

    #[test]
    fn every_counter_continues_exactly_after_save_and_load() {
        for kind in KINDS {
            for dim in [1usize, 3] {
                // Save at every time up to 40 (block ends, powers of two,
                // interval ends of the unbounded block counter) and continue.
                for at in 0..=40u64 {
                    let mut rng = Rng::seed_from_u64(at + 100 * dim as u64);
                    let mut c = Counter::new(kind, &q(1, 2), dim).unwrap();
                    for _ in 0..at {
                        step(&mut c, &mut rng);
                    }
                    let bytes = c.to_bytes(false);
                    let mut d = Counter::from_bytes(&bytes).unwrap().0;
                    assert_eq!(d.to_bytes(false), bytes, "{kind:?} at {at}");
                    assert_eq!(format!("{d:?}"), format!("{c:?}"));
                    assert_eq!(d.release(), c.release());
                    assert_eq!(d.memory_bytes(), c.memory_bytes(), "{kind:?} at {at}");
                    let mut rng2 = rng.clone();
                    for _ in at..60 {
                        step(&mut c, &mut rng);
                        step(&mut d, &mut rng2);
                        assert_eq!(d.release(), c.release(), "{kind:?} saved at {at}");
                    }
                    assert_eq!(d.to_bytes(false), c.to_bytes(false));
                    assert_eq!(rng.next_u64(), rng2.next_u64());
                }
            }
        }
    }

    #[test]
    fn unbounded_counters_continue_exactly_late_in_the_stream() {
        for kind in [CounterKind::UnboundedBlock, CounterKind::Hybrid] {
            for at in [127u64, 128, 129, 1000, 1015] {
                let mut rng = Rng::seed_from_u64(at);
                let mut c = Counter::new(kind, &q(1, 3), 2).unwrap();
                for _ in 0..at {
                    step(&mut c, &mut rng);
                }
                let mut d = Counter::from_bytes(&c.to_bytes(false)).unwrap().0;
                let mut rng2 = rng.clone();
                for _ in 0..300 {
                    step(&mut c, &mut rng);
                    step(&mut d, &mut rng2);
                    assert_eq!(d.release(), c.release(), "{kind:?} saved at {at}");
                }
                assert_eq!(d.memory_bytes(), c.memory_bytes());
            }
        }
    }

    #[test]
    fn a_full_bounded_counter_stays_full() {
        let mut rng = Rng::seed_from_u64(1);
        let mut c = Counter::new(CounterKind::BinaryTree { horizon: 7 }, &q(1, 1), 2).unwrap();
        for _ in 0..7 {
            step(&mut c, &mut rng);
        }
        let mut d = Counter::from_bytes(&c.to_bytes(false)).unwrap().0;
        assert_eq!(d.remaining(), 0);
        assert!(d.step(&mut rng, &[0, 0]).is_err());
    }

    #[test]
    fn corrupted_truncated_and_foreign_bytes_are_refused() {
        let mut rng = Rng::seed_from_u64(2);
        let mut c = Counter::new(CounterKind::Hybrid, &q(1, 1), 2).unwrap();
        for _ in 0..13 {
            step(&mut c, &mut rng);
        }
        let bytes = c.to_bytes(false);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            assert!(Counter::from_bytes(&bad).is_err(), "flip at {i}");
            assert!(Counter::from_bytes(&bytes[..i]).is_err(), "cut at {i}");
        }
        let sparse = SparseCounter::new(&q(1, 1), 10).unwrap().to_bytes(false);
        let err = Counter::from_bytes(&sparse).unwrap_err().to_string();
        assert!(
            err.contains("expected a Counter, found a SparseCounter"),
            "{err}"
        );
        assert!(SparseCounter::from_bytes(&bytes).is_err());
        assert!(InhomogeneousSparseCounter::from_bytes(&bytes).is_err());
        // Well-formed envelopes around invalid payloads.
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("trailing", reencode(&bytes, Kind::Counter, |p| p.push(0))),
            ("kind", reencode(&bytes, Kind::Counter, |p| p[1] = 9)),
            ("flags", reencode(&bytes, Kind::Counter, |p| p[0] = 2)),
            (
                "short",
                reencode(&bytes, Kind::Counter, |p| p.truncate(p.len() - 1)),
            ),
        ];
        for (what, b) in cases {
            let err = Counter::from_bytes(&b).unwrap_err().to_string();
            assert!(err.contains("invalid dpstream state"), "{what}: {err}");
        }
    }

    /// The payload fields of a `dim`-counter of `kind` at byte offsets.
    fn offsets(kind: CounterKind) -> (usize, usize) {
        // flags, kind, [horizon], ε = 1 (two 1-byte parts), dim, time.
        let head = 2 + if kind.horizon().is_some() { 8 } else { 0 } + 2 * 9;
        (head, head + 8)
    }

    #[test]
    fn inconsistent_payloads_are_refused() {
        for kind in KINDS {
            let mut rng = Rng::seed_from_u64(3);
            let mut c = Counter::new(kind, &q(1, 1), 2).unwrap();
            for _ in 0..16 {
                step(&mut c, &mut rng);
            }
            let bytes = c.to_bytes(false);
            let (dim_at, time_at) = offsets(kind);
            let set = |at: usize, v: u64| {
                reencode(&bytes, Kind::Counter, |p| {
                    p[at..at + 8].copy_from_slice(&v.to_le_bytes())
                })
            };
            // A huge dim cannot allocate; a different dim misreads the rest.
            for dim in [0, 1, 3, u64::MAX] {
                assert!(
                    Counter::from_bytes(&set(dim_at, dim)).is_err(),
                    "{kind:?} dim {dim}"
                );
            }
            if kind.horizon().is_some() {
                assert!(Counter::from_bytes(&set(time_at, 61)).is_err(), "{kind:?}");
            }
            assert!(Counter::from_bytes(&set(time_at, 0)).is_err(), "{kind:?}");
            // Changing one noise value of the release: the noise held by the
            // tree, hybrid and (at a block end) block processes disagrees.
            let noise_at = time_at + 8 + 2 * 8;
            let tweaked = reencode(&bytes, Kind::Counter, |p| p[noise_at] ^= 1);
            let loaded = Counter::from_bytes(&tweaked);
            match kind {
                CounterKind::BinaryTree { .. } | CounterKind::Hybrid => {
                    assert!(loaded.is_err(), "{kind:?}");
                }
                CounterKind::Block { .. } => assert!(loaded.is_err(), "block end at 16"),
                _ => {}
            }
            // A time that the tree's items contradict.
            if let CounterKind::BinaryTree { .. } | CounterKind::Hybrid = kind {
                assert!(Counter::from_bytes(&set(time_at, 11)).is_err(), "{kind:?}");
            }
        }
    }

    /// Flipping any payload byte under a valid checksum never panics, and a
    /// counter that still decodes still steps without panicking.
    #[test]
    fn no_payload_panics() {
        for kind in KINDS {
            let mut rng = Rng::seed_from_u64(4);
            let mut c = Counter::new(kind, &q(1, 1), 2).unwrap();
            for _ in 0..11 {
                step(&mut c, &mut rng);
            }
            let bytes = c.to_bytes(false);
            let n = state::decode(&bytes, Kind::Counter).unwrap().len();
            for i in 0..n {
                for x in [0x01u8, 0x80, 0xff] {
                    let b = reencode(&bytes, Kind::Counter, |p| p[i] ^= x);
                    if let Ok((mut d, _)) = Counter::from_bytes(&b) {
                        for _ in 0..20 {
                            let _ = d.step(&mut rng, &[1, -1]);
                        }
                    }
                }
            }
        }
    }

    /// The seeded flag is stored and decoded (issue 28: it was dropped).
    #[test]
    fn the_seeded_flag_survives_a_save() {
        for kind in KINDS {
            let mut rng = Rng::seed_from_u64(7);
            let mut c = Counter::new(kind, &q(1, 1), 2).unwrap();
            for _ in 0..5 {
                step(&mut c, &mut rng);
            }
            for seeded in [false, true] {
                let bytes = c.to_bytes(seeded);
                let (d, flag) = Counter::from_bytes(&bytes).unwrap();
                assert_eq!(flag, seeded, "{kind:?}");
                assert_eq!(d.to_bytes(flag), bytes);
            }
        }
    }

    /// A version-1 payload (no flags byte) still loads, as not seeded.
    #[test]
    fn a_version_1_counter_loads() {
        for kind in KINDS {
            let mut rng = Rng::seed_from_u64(8);
            let mut c = Counter::new(kind, &q(1, 3), 2).unwrap();
            for _ in 0..21 {
                step(&mut c, &mut rng);
            }
            let v3 = c.to_bytes(true);
            let payload = state::decode(&v3, Kind::Counter).unwrap();
            // Version 2: no master key (the last 1 + 32 + 16 bytes); version 1:
            // no flags byte either.
            let v2_payload = &payload[..payload.len() - 49];
            let v1 = state::encode_version(Kind::Counter, 1, &v2_payload[1..]);
            let v2 = state::encode_version(Kind::Counter, 2, v2_payload);
            for (old, seeded_flag) in [(v1, false), (v2, true)] {
                let (mut d, seeded) = Counter::from_bytes(&old).unwrap();
                assert_eq!(seeded, seeded_flag);
                assert_eq!(d.release(), c.release(), "{kind:?}");
                // Without a saved key the next step draws a new master key.
                let mut rng2 = rng.clone();
                step(&mut d, &mut rng2);
                assert_eq!(d.time(), c.time() + 1);
                let (e, _) = Counter::from_bytes(&d.to_bytes(true)).unwrap();
                assert_eq!(e.to_bytes(true), d.to_bytes(true));
            }
        }
    }

    #[test]
    fn sparse_counter_continues_exactly() {
        for at in [0u64, 1, 2, 5, 50, 137, 199, 200] {
            let mut rng = Rng::seed_from_u64(at);
            let mut c = SparseCounter::new(&q(1, 1), 200).unwrap();
            for t in 0..at {
                c.step(&mut rng, (t % 3 == 0).into()).unwrap();
            }
            let bytes = c.to_bytes(false);
            let mut d = SparseCounter::from_bytes(&bytes).unwrap().0;
            assert_eq!(d.to_bytes(false), bytes);
            assert_eq!(format!("{d:?}"), format!("{c:?}"));
            assert_eq!((d.release(), d.segments()), (c.release(), c.segments()));
            let mut rng2 = rng.clone();
            for t in at..200 {
                let v = (t % 3 == 0).into();
                c.step(&mut rng, v).unwrap();
                d.step(&mut rng2, v).unwrap();
                assert_eq!(d.release(), c.release(), "saved at {at}");
            }
            assert!(d.step(&mut rng2, 0).is_err());
            assert_eq!(d.to_bytes(false), c.to_bytes(false));
        }
        // Skipped zeros and the running-count check survive a reload.
        let mut rng = Rng::seed_from_u64(9);
        let mut c = SparseCounter::new(&q(1, 1), 1000).unwrap();
        c.step(&mut rng, MAX_SPARSE_COUNT - 1).unwrap();
        c.skip(&mut rng, 500).unwrap();
        let mut d = SparseCounter::from_bytes(&c.to_bytes(false)).unwrap().0;
        assert!(d.step(&mut rng, 2).is_err());
        d.step(&mut rng, 1).unwrap();
    }

    #[test]
    fn sparse_counter_refuses_bad_bytes() {
        let mut rng = Rng::seed_from_u64(5);
        let mut c = SparseCounter::new(&q(1, 2), 300).unwrap();
        for _ in 0..250 {
            c.step(&mut rng, 1).unwrap();
        }
        assert!(c.segments() > 1);
        let bytes = c.to_bytes(false);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x04;
            assert!(SparseCounter::from_bytes(&bad).is_err(), "flip at {i}");
            assert!(
                SparseCounter::from_bytes(&bytes[..i]).is_err(),
                "cut at {i}"
            );
        }
        // Flags, ε = 1/2 (two 1-byte parts), horizon, total, master key, the
        // state's run start and digest, then its time.
        let total_at = 1 + 2 * 9 + 8;
        let time_at = total_at + 8 + 33 + 24;
        let set = |at: usize, v: i64| {
            reencode(&bytes, Kind::SparseCounter, |p| {
                p[at..at + 8].copy_from_slice(&v.to_le_bytes())
            })
        };
        for (what, at, v) in [
            ("horizon", total_at - 8, 10),
            ("horizon 0", total_at - 8, 0),
            ("total", total_at, 249),
            ("total", total_at, -1),
            ("time", time_at, 301),
            ("time 0", time_at, 0),
            ("run start", time_at - 24, 400),
            ("run start 0", time_at - 24, 0),
            ("open count", time_at + 9, -5),
            ("sub noise", time_at + 9 + 24, 12345),
        ] {
            let err = SparseCounter::from_bytes(&set(at, v)).map(|_| ());
            assert!(err.is_err(), "{what}");
        }
        let n = state::decode(&bytes, Kind::SparseCounter).unwrap().len();
        for i in 0..n {
            for x in [0x01u8, 0x80] {
                let b = reencode(&bytes, Kind::SparseCounter, |p| p[i] ^= x);
                if let Ok((mut d, _)) = SparseCounter::from_bytes(&b) {
                    let _ = d.skip(&mut rng, d.remaining());
                }
            }
        }
    }

    fn table() -> LevelSchedule {
        LevelSchedule::Table(vec![q(1, 1), q(1, 2), q(2, 3), q(1, 1), q(1, 1), q(1, 1)])
    }

    fn online() -> LevelSchedule {
        LevelSchedule::Online {
            epsilon: q(1, 1),
            dim: 2,
            depth: 1,
        }
    }

    #[test]
    fn inhomogeneous_counter_continues_exactly() {
        for schedule in [table(), online()] {
            // ε_time = 1/2: levels start at 2, 4, 8, 16, 32, 64, 128; r_0 = 1.
            let make = || InhomogeneousSparseCounter::new(&q(1, 2), 1, schedule.clone()).unwrap();
            for at in [0u64, 1, 3, 4, 7, 8, 31, 32, 33, 100] {
                let mut rng = Rng::seed_from_u64(at);
                let mut c = make();
                for t in 0..at {
                    c.step(&mut rng, i64::from(t % 2 == 1)).unwrap();
                }
                let bytes = c.to_bytes(false).unwrap();
                let mut d = InhomogeneousSparseCounter::from_bytes(&bytes).unwrap().0;
                assert_eq!(d.to_bytes(false).unwrap(), bytes);
                assert_eq!(format!("{d:?}"), format!("{c:?}"));
                assert_eq!(d.release(), c.release());
                let mut rng2 = rng.clone();
                for t in at..127 {
                    let v = i64::from(t % 2 == 1);
                    c.step(&mut rng, v).unwrap();
                    d.step(&mut rng2, v).unwrap();
                    assert_eq!(d.release(), c.release(), "saved at {at}");
                }
                assert_eq!(d.to_bytes(false).unwrap(), c.to_bytes(false).unwrap());
            }
        }
    }

    #[test]
    fn inhomogeneous_counter_refuses_functions_and_bad_bytes() {
        let f = LevelSchedule::Function(Arc::new(|_| Rational::new(1u32, 1u32)));
        let c = InhomogeneousSparseCounter::new(&q(1, 1), 0, f).unwrap();
        let err = c.to_bytes(false).unwrap_err().to_string();
        assert!(err.contains("LevelSchedule::Function"), "{err}");

        let mut rng = Rng::seed_from_u64(6);
        let mut c = InhomogeneousSparseCounter::new(&q(1, 2), 1, table()).unwrap();
        for _ in 0..40 {
            c.step(&mut rng, 1).unwrap();
        }
        let bytes = c.to_bytes(false).unwrap();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x02;
            assert!(
                InhomogeneousSparseCounter::from_bytes(&bad).is_err(),
                "flip at {i}"
            );
            let cut = &bytes[..i];
            assert!(
                InhomogeneousSparseCounter::from_bytes(cut).is_err(),
                "cut at {i}"
            );
        }
        // Flags, ε_time (two 1-byte parts), r_0, table tag, count, 6 rationals of 18 bytes.
        let start_at = 1 + 2 * 9;
        let time_at = start_at + 4 + 1 + 8 + 6 * 18;
        let level_at = time_at + 8 + 8 + 33 + 1;
        let kind = Kind::InhomogeneousSparseCounter;
        let put = |at: usize, v: &[u8]| {
            reencode(&bytes, kind, |p| p[at..at + v.len()].copy_from_slice(v))
        };
        for (what, b) in [
            ("start level", put(start_at, &u32::MAX.to_le_bytes())),
            (
                "start level after the time",
                put(start_at, &5u32.to_le_bytes()),
            ),
            ("time in another level", put(time_at, &70u64.to_le_bytes())),
            ("time before t_r0", put(time_at, &1u64.to_le_bytes())),
            ("level", put(level_at, &3u32.to_le_bytes())),
            ("level 5", put(level_at, &5u32.to_le_bytes())),
            ("level huge", put(level_at, &u32::MAX.to_le_bytes())),
            (
                "total below the level sum",
                put(time_at + 8, &5i64.to_le_bytes()),
            ),
            ("total negative", put(time_at + 8, &(-1i64).to_le_bytes())),
            ("schedule tag", put(start_at + 4, &[7])),
        ] {
            let r = InhomogeneousSparseCounter::from_bytes(&b).map(|_| ());
            assert!(r.is_err(), "{what}");
        }
        let n = state::decode(&bytes, kind).unwrap().len();
        for i in 0..n {
            for x in [0x01u8, 0x80] {
                let b = reencode(&bytes, kind, |p| p[i] ^= x);
                if let Ok((mut d, _)) = InhomogeneousSparseCounter::from_bytes(&b) {
                    for _ in 0..30 {
                        let _ = d.step(&mut rng, 1);
                    }
                }
            }
        }
    }

    /// The sparse counters store their seeded flag too (issue 28), and their
    /// version-1 payloads (no flags byte) still load, as not seeded, and
    /// continue exactly.
    #[test]
    fn the_sparse_counters_keep_the_seeded_flag_and_read_version_1() {
        let mut rng = Rng::seed_from_u64(12);
        let mut sparse = SparseCounter::new(&q(1, 2), 300).unwrap();
        let mut inhom = InhomogeneousSparseCounter::new(&q(1, 2), 1, table()).unwrap();
        for t in 0..60 {
            sparse.step(&mut rng, t % 2).unwrap();
            inhom.step(&mut rng, t % 3).unwrap();
        }
        for seeded in [false, true] {
            let bytes = sparse.to_bytes(seeded);
            let (d, flag) = SparseCounter::from_bytes(&bytes).unwrap();
            assert_eq!((flag, d.to_bytes(flag)), (seeded, bytes));
            let bytes = inhom.to_bytes(seeded).unwrap();
            let (d, flag) = InhomogeneousSparseCounter::from_bytes(&bytes).unwrap();
            assert_eq!((flag, d.to_bytes(flag).unwrap()), (seeded, bytes));
        }
        // A version-1 payload: the version-3 one without its flags byte, master
        // key (`u8` 1 and 32 bytes) and the state's run start and digest (24
        // bytes): `cuts` are their byte ranges.
        let v1 = |bytes: Vec<u8>, kind: Kind, cuts: [std::ops::Range<usize>; 2]| {
            let payload = state::decode(&bytes, kind).unwrap();
            let kept: Vec<u8> = (1..payload.len())
                .filter(|i| !cuts.iter().any(|c| c.contains(i)))
                .map(|i| payload[i])
                .collect();
            state::encode_version(kind, 1, &kept)
        };
        let master_at = 1 + 2 * 9 + 8 + 8;
        let cuts = [master_at..master_at + 33, master_at + 33..master_at + 57];
        let (mut d, seeded) =
            SparseCounter::from_bytes(&v1(sparse.to_bytes(true), Kind::SparseCounter, cuts))
                .unwrap();
        assert!(!seeded);
        assert_eq!((d.time(), d.release()), (sparse.time(), sparse.release()));
        let kind = Kind::InhomogeneousSparseCounter;
        // Flags, ε_time, r_0, table tag, count, 6 rationals, time, total.
        let master_at = 1 + 2 * 9 + 4 + 1 + 8 + 6 * 18 + 16;
        // After the key: the level flag and index, S̃ and the level sum.
        let run_at = master_at + 33 + 1 + 4 + 16;
        let old = v1(
            inhom.to_bytes(true).unwrap(),
            kind,
            [master_at..master_at + 33, run_at..run_at + 24],
        );
        let (mut e, seeded) = InhomogeneousSparseCounter::from_bytes(&old).unwrap();
        assert!(!seeded);
        assert_eq!((e.time(), e.release()), (inhom.time(), inhom.release()));
        // They continue (drawing new master keys).
        for t in 0..40 {
            d.step(&mut rng, t % 2).unwrap();
            e.step(&mut rng, 1).unwrap();
        }
        assert_eq!((d.time(), e.time()), (100, 100));
        // A flags byte other than 0 or 1 is refused.
        for (kind, bytes) in [
            (Kind::SparseCounter, sparse.to_bytes(false)),
            (kind, inhom.to_bytes(false).unwrap()),
        ] {
            let bad = reencode(&bytes, kind, |p| p[0] = 2);
            let err = match kind {
                Kind::SparseCounter => SparseCounter::from_bytes(&bad).map(|_| ()),
                _ => InhomogeneousSparseCounter::from_bytes(&bad).map(|_| ()),
            };
            assert!(err.unwrap_err().to_string().contains("flags 2"), "{kind:?}");
        }
    }
}

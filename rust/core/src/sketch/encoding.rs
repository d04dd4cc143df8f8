//! Binary encoding of a [`LinearSketch`] ([`crate::state`] format, kind `Sketch`).
//!
//! Payload, version 2 (all integers little-endian):
//!
//! | field | encoding |
//! |---|---|
//! | kind | `u8`: 0 count-min, 1 count sketch |
//! | flags | `u8`: bit 0 released (noise added), bit 1 the noise came from a seeded generator; other bits 0 |
//! | budget | `u8` 0 (no cap) or 1 followed by a rational (numerator and denominator, each a `u64` length and little-endian bytes) |
//! | spent | a rational, at most the budget |
//! | rows, width | `u64`, `u64` |
//! | hashes | `rows` × four `u128` |
//! | cells | `u64` count, then `i64` each |
//!
//! Version 1 (before the ε ledger was recorded) is the same without the
//! budget and spent fields, and with a flags byte that is only the released
//! flag. Such a sketch decodes with its ledger **exhausted** (budget 0,
//! nothing recorded as spent): how much of which budget it had spent is not
//! in the bytes, and any guess above zero could let a loaded sketch be
//! released past its budget. It can still be queried, saved and merged; a
//! merge passes the exhausted ledger on (see `dpstream.sketch`).

use super::{LinearSketch, RowHash, SketchKind};
use crate::error::{invalid, Result};
use crate::rational::Rational;
use crate::state::{self, Kind, Reader, Writer};

const RELEASED: u8 = 1;
const NOISE_SEEDED: u8 = 2;

/// What a sketch's encoding records besides the sketch: whether it is a
/// release, whether that release's noise was seeded, and its ε ledger.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SketchRecord {
    /// A private release (noise added): read-only, never released again.
    pub released: bool,
    /// The release's noise came from a seeded generator: reproducible and
    /// **not private**.
    pub noise_seeded: bool,
    /// The ε budget for releases made from this sketch (`None`: no cap).
    pub budget: Option<Rational>,
    /// ε spent by releases made from this sketch (a released copy: the ε of
    /// its own release). At most `budget`.
    pub spent: Rational,
}

impl SketchRecord {
    /// An exact (unreleased) sketch with nothing spent and no cap.
    pub fn exact() -> Self {
        Self {
            released: false,
            noise_seeded: false,
            budget: None,
            spent: Rational::zero(),
        }
    }
}

/// A decoded sketch ([`LinearSketch::from_bytes`]).
#[derive(Clone, Debug)]
pub struct DecodedSketch {
    /// The sketch.
    pub sketch: LinearSketch,
    /// Its release flags and ε ledger.
    pub record: SketchRecord,
    /// Decoded from a version-1 encoding, which did not record the ledger:
    /// `record` then has budget 0 and nothing spent (exhausted).
    pub legacy: bool,
}

impl LinearSketch {
    /// Encode the sketch with its hashes, its release flags and its ε ledger
    /// (`record`): an exact sketch is not private data to share.
    ///
    /// Refuses a record whose `spent` exceeds its `budget`.
    pub fn to_bytes(&self, record: &SketchRecord) -> Result<Vec<u8>> {
        if let Some(budget) = &record.budget {
            if record.spent > *budget {
                return Err(invalid!(
                    "the ledger's spent ε {} exceeds its budget {budget}",
                    record.spent
                ));
            }
        }
        let mut w = Writer::new();
        w.u8(match self.kind() {
            SketchKind::CountMin => 0,
            SketchKind::Count => 1,
        });
        let mut flags = 0;
        if record.released {
            flags |= RELEASED;
        }
        if record.noise_seeded {
            flags |= NOISE_SEEDED;
        }
        w.u8(flags);
        match &record.budget {
            None => w.u8(0),
            Some(b) => {
                w.u8(1);
                w.rational(b);
            }
        }
        w.rational(&record.spent);
        w.u64(self.rows() as u64);
        w.u64(self.width() as u64);
        for h in self.hashes() {
            let (a, b, sa, sb) = h.parts();
            for v in [a, b, sa, sb] {
                w.u128(v);
            }
        }
        w.u64(self.cells().len() as u64);
        for &c in self.cells() {
            w.i64(c);
        }
        Ok(state::encode(Kind::Sketch, &w.finish()))
    }

    /// Decode [`LinearSketch::to_bytes`] output (version 2), or a version-1
    /// encoding with its ledger exhausted (see the module docs).
    pub fn from_bytes(bytes: &[u8]) -> Result<DecodedSketch> {
        let (version, payload) = state::decode_versioned(bytes, Kind::Sketch)?;
        let legacy = version < 2;
        let mut r = Reader::new(payload);
        let kind = match r.u8()? {
            0 => SketchKind::CountMin,
            1 => SketchKind::Count,
            k => return Err(invalid!("invalid dpstream state: unknown sketch kind {k}")),
        };
        let flags = r.u8()?;
        let known = if legacy {
            RELEASED
        } else {
            RELEASED | NOISE_SEEDED
        };
        if flags & !known != 0 {
            return Err(invalid!("invalid dpstream state: bad sketch flags {flags}"));
        }
        let record = if legacy {
            SketchRecord {
                released: flags & RELEASED != 0,
                noise_seeded: false,
                budget: Some(Rational::zero()),
                spent: Rational::zero(),
            }
        } else {
            let budget = match r.u8()? {
                0 => None,
                1 => Some(r.rational()?),
                b => {
                    return Err(invalid!(
                        "invalid dpstream state: bad sketch budget tag {b}"
                    ))
                }
            };
            let spent = r.rational()?;
            if budget.as_ref().is_some_and(|b| spent > *b) {
                return Err(invalid!(
                    "invalid dpstream state: the sketch's spent ε exceeds its budget"
                ));
            }
            SketchRecord {
                released: flags & RELEASED != 0,
                noise_seeded: flags & NOISE_SEEDED != 0,
                budget,
                spent,
            }
        };
        let rows = r.u64()?;
        let width = r.u64()?;
        let mut hashes = Vec::new();
        for _ in 0..rows.min(super::MAX_ROWS as u64 + 1) {
            let (a, b, sa, sb) = (r.u128()?, r.u128()?, r.u128()?, r.u128()?);
            hashes.push(RowHash::from_parts(a, b, sa, sb));
        }
        let n = r.count(8)?;
        let cells = (0..n).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
        r.finish()?;
        let sketch = Self::from_parts(kind, rows as usize, width as usize, hashes, cells)
            .map_err(|e| invalid!("invalid dpstream state: {e}"))?;
        Ok(DecodedSketch {
            sketch,
            record,
            legacy,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    fn q(n: u32, d: u32) -> Rational {
        Rational::new(n, d).unwrap()
    }

    fn records() -> Vec<SketchRecord> {
        vec![
            SketchRecord::exact(),
            SketchRecord {
                released: false,
                noise_seeded: false,
                budget: Some(q(1, 1)),
                spent: q(1, 1),
            },
            SketchRecord {
                released: false,
                noise_seeded: false,
                budget: Some(q(3, 2)),
                spent: q(1, 3),
            },
            SketchRecord {
                released: true,
                noise_seeded: true,
                budget: Some(q(1, 2)),
                spent: q(1, 2),
            },
            SketchRecord {
                released: false,
                noise_seeded: false,
                budget: None,
                spent: q(7, 3),
            },
        ]
    }

    #[test]
    fn round_trip_and_corruption() {
        let mut rng = Rng::seed_from_u64(1);
        for kind in [SketchKind::CountMin, SketchKind::Count] {
            let mut s = LinearSketch::new(kind, 3, 16, &mut rng).unwrap();
            s.update_many(&[1, 2, 3, 99], &[5, 1, 7, 2]).unwrap();
            for record in records() {
                let bytes = s.to_bytes(&record).unwrap();
                let back = LinearSketch::from_bytes(&bytes).unwrap();
                assert_eq!(back.record, record);
                assert!(!back.legacy);
                assert_eq!(back.sketch, s);
                assert_eq!(back.sketch.to_bytes(&back.record).unwrap(), bytes);
                for i in 0..bytes.len() {
                    assert!(LinearSketch::from_bytes(&bytes[..i]).is_err());
                }
            }
        }
    }

    /// The ledger is in the bytes: a sketch whose budget is spent is still
    /// spent after a save and a load (issue 28).
    #[test]
    fn the_ledger_survives_a_save() {
        let mut rng = Rng::seed_from_u64(2);
        let s = LinearSketch::new(SketchKind::CountMin, 2, 8, &mut rng).unwrap();
        let spent = SketchRecord {
            budget: Some(q(1, 1)),
            spent: q(1, 1),
            ..SketchRecord::exact()
        };
        let back = LinearSketch::from_bytes(&s.to_bytes(&spent).unwrap()).unwrap();
        assert_eq!(back.record.budget, Some(q(1, 1)));
        assert_eq!(back.record.spent, q(1, 1));
    }

    #[test]
    fn inconsistent_records_are_refused() {
        let mut rng = Rng::seed_from_u64(3);
        let s = LinearSketch::new(SketchKind::Count, 2, 4, &mut rng).unwrap();
        let over = SketchRecord {
            budget: Some(q(1, 2)),
            spent: q(1, 1),
            ..SketchRecord::exact()
        };
        let err = s.to_bytes(&over).unwrap_err().to_string();
        assert!(err.contains("exceeds its budget"), "{err}");
        // The same ledger written by hand: refused on decoding.
        let good = s
            .to_bytes(&SketchRecord {
                budget: Some(q(1, 2)),
                spent: q(1, 3),
                ..SketchRecord::exact()
            })
            .unwrap();
        let mut payload = state::decode(&good, Kind::Sketch).unwrap().to_vec();
        // kind, flags, tag, budget (1 + 1 + 8 + 1 bytes of 1/2), spent's numerator length.
        let spent_num = 2 + 1 + 2 * 9 + 8;
        assert_eq!(payload[spent_num], 1);
        payload[spent_num] = 2; // spent 2/3 > 1/2
        let err = LinearSketch::from_bytes(&state::encode(Kind::Sketch, &payload))
            .unwrap_err()
            .to_string();
        assert!(err.contains("spent ε exceeds its budget"), "{err}");
        for (at, v, what) in [(1, 4u8, "bad sketch flags 4"), (2, 2, "budget tag 2")] {
            let mut p = state::decode(&good, Kind::Sketch).unwrap().to_vec();
            p[at] = v;
            let err = LinearSketch::from_bytes(&state::encode(Kind::Sketch, &p))
                .unwrap_err()
                .to_string();
            assert!(err.contains(what), "{err}");
        }
    }

    /// A version-1 payload: kind, released flag, rows, width, hashes, cells.
    fn legacy_bytes(s: &LinearSketch, released: bool) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(match s.kind() {
            SketchKind::CountMin => 0,
            SketchKind::Count => 1,
        });
        w.u8(u8::from(released));
        w.u64(s.rows() as u64);
        w.u64(s.width() as u64);
        for h in s.hashes() {
            let (a, b, sa, sb) = h.parts();
            for v in [a, b, sa, sb] {
                w.u128(v);
            }
        }
        w.u64(s.cells().len() as u64);
        for &c in s.cells() {
            w.i64(c);
        }
        state::encode_version(Kind::Sketch, 1, &w.finish())
    }

    #[test]
    fn a_version_1_sketch_loads_with_its_ledger_exhausted() {
        let mut rng = Rng::seed_from_u64(4);
        let mut s = LinearSketch::new(SketchKind::CountMin, 3, 10, &mut rng).unwrap();
        s.update_many(&[4, 5], &[2, 9]).unwrap();
        for released in [false, true] {
            let back = LinearSketch::from_bytes(&legacy_bytes(&s, released)).unwrap();
            assert!(back.legacy);
            assert_eq!(back.sketch, s);
            assert_eq!(
                back.record,
                SketchRecord {
                    released,
                    noise_seeded: false,
                    budget: Some(Rational::zero()),
                    spent: Rational::zero(),
                }
            );
            // Saved again, it is a version-2 sketch that stays exhausted.
            let again = back.sketch.to_bytes(&back.record).unwrap();
            let v2 = LinearSketch::from_bytes(&again).unwrap();
            assert!(!v2.legacy);
            assert_eq!(v2.record, back.record);
        }
        // In version 1 the seeded-noise bit did not exist.
        let mut bad = state::decode_versioned(&legacy_bytes(&s, true), Kind::Sketch)
            .unwrap()
            .1
            .to_vec();
        bad[1] = 3;
        let err = LinearSketch::from_bytes(&state::encode_version(Kind::Sketch, 1, &bad))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad sketch flags 3"), "{err}");
    }
}

//! Versioned, checksummed binary encoding of stateful objects.
//!
//! Layout of every encoded object (all integers little-endian):
//!
//! | bytes | field |
//! |---|---|
//! | 8 | magic `DPSTREAM` |
//! | 2 | format version of the kind's payload ([`Kind::version`]) |
//! | 2 | object kind ([`Kind`]) |
//! | 8 | payload length |
//! | n | payload |
//! | 4 | CRC-32 of everything before it |
//!
//! Decoding checks each field and reports truncation, corruption, a foreign
//! object kind or a newer format with a clear error; it never panics and
//! never allocates more than the input's own size.
//!
//! Versions are per kind: a kind whose payload layout changes gets a new
//! [`Kind::version`], and its decoder reads the older layouts it still
//! supports through [`decode_versioned`]; every other kind keeps version 1
//! (its files do not change). [`decode`] accepts only the current version.
//!
//! | kind | version | change |
//! |---|---|---|
//! | `Counter` | 2 | a flags byte: whether the noise came from a seeded generator |
//! | `Counter` | 3 | the secret master key and digest that key the noise of later steps |
//! | `Sketch` | 2 | flags (released, seeded noise) and the ε ledger (budget, spent) |
//! | `SparseCounter`, `InhomogeneousSparseCounter` | 2 | a flags byte: whether the noise came from a seeded generator |
//! | `TreeGenerator` | 2 | a flags byte: whether the release's noise came from a seeded generator |
//! | `EpochSynthesizer`, `ContinualPrivHP` | 2 | the secret master key that the noise keys of later blocks derive from |

use crate::error::{Error, Result};
use crate::rational::Rational;
use num_bigint::BigUint;

/// First bytes of every encoded object.
pub const MAGIC: &[u8; 8] = b"DPSTREAM";
/// Version of the envelope and of the payload of every kind not listed in
/// [`Kind::version`] (the oldest version any kind is read in).
pub const FORMAT_VERSION: u16 = 1;
const HEADER_LEN: usize = 8 + 2 + 2 + 8;
const CRC_LEN: usize = 4;

/// What an encoded payload holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum Kind {
    /// A released PrivHP generator ([`crate::synth::TreeGenerator`]).
    TreeGenerator = 1,
    /// A linear sketch ([`crate::sketch::LinearSketch`]).
    Sketch = 2,
    /// An online synthesizer ([`crate::synth::OnlineSynthesizer`]) in mid-stream.
    OnlineSynthesizer = 3,
    /// An unreleased PrivHP summary ([`crate::synth::PrivHP`]): exact counts.
    PrivHP = 4,
    /// A continual-release counter ([`crate::counters::Counter`]): exact sums.
    Counter = 5,
    /// A sparse counter ([`crate::counters::SparseCounter`]): exact counts.
    SparseCounter = 6,
    /// An inhomogeneous sparse counter
    /// ([`crate::counters::InhomogeneousSparseCounter`]): exact counts.
    InhomogeneousSparseCounter = 7,
    /// The default online synthesizer ([`crate::synth::EpochSynthesizer`]):
    /// exact point paths and the noise keys of its epoch blocks.
    EpochSynthesizer = 8,
    /// Continual-release PrivHP in fixed memory
    /// ([`crate::synth::ContinualPrivHP`]): exact block summaries and the
    /// released generators of the live blocks.
    ContinualPrivHP = 9,
    /// An online release drawn in chunks
    /// ([`crate::synth::ChunkedRelease`]): the released structure and its
    /// sampling key (public).
    OnlineRelease = 10,
}

impl Kind {
    /// Every kind, by code.
    pub const ALL: [Kind; 10] = [
        Self::TreeGenerator,
        Self::Sketch,
        Self::OnlineSynthesizer,
        Self::PrivHP,
        Self::Counter,
        Self::SparseCounter,
        Self::InhomogeneousSparseCounter,
        Self::EpochSynthesizer,
        Self::ContinualPrivHP,
        Self::OnlineRelease,
    ];

    /// The kind with code `code`, if known.
    pub fn from_code(code: u16) -> Option<Self> {
        Self::ALL.into_iter().find(|&k| k as u16 == code)
    }

    /// Version of this kind's payload layout written by this build (the
    /// header's version field). Older versions down to [`FORMAT_VERSION`] are
    /// read by the kind's own decoder ([`decode_versioned`]).
    pub fn version(self) -> u16 {
        match self {
            Self::Counter | Self::SparseCounter | Self::InhomogeneousSparseCounter => 3,
            Self::OnlineSynthesizer => 2,
            Self::Sketch | Self::TreeGenerator | Self::EpochSynthesizer | Self::ContinualPrivHP => {
                2
            }
            _ => FORMAT_VERSION,
        }
    }

    /// Human-readable name, for error messages.
    pub fn name(self) -> &'static str {
        match self {
            Self::TreeGenerator => "TreeGenerator",
            Self::Sketch => "Sketch",
            Self::OnlineSynthesizer => "OnlineSynthesizer",
            Self::PrivHP => "PrivHP",
            Self::Counter => "Counter",
            Self::SparseCounter => "SparseCounter",
            Self::InhomogeneousSparseCounter => "InhomogeneousSparseCounter",
            Self::EpochSynthesizer => "EpochSynthesizer",
            Self::ContinualPrivHP => "ContinualPrivHP",
            Self::OnlineRelease => "OnlineRelease",
        }
    }
}

fn corrupt(msg: impl std::fmt::Display) -> Error {
    Error::InvalidParameter(format!("invalid dpstream state: {msg}"))
}

/// Wrap `payload` in the header (with the kind's current [`Kind::version`])
/// and checksum.
pub fn encode(kind: Kind, payload: &[u8]) -> Vec<u8> {
    encode_version(kind, kind.version(), payload)
}

/// Wrap `payload` in a header of format `version` and the checksum: for tests
/// and tools that write an older layout. [`encode`] is the normal writer.
pub fn encode_version(kind: Kind, version: u16, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + payload.len() + CRC_LEN);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(&(kind as u16).to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The object kind of an encoded object, after checking magic, version,
/// length and checksum.
pub fn peek_kind(bytes: &[u8]) -> Result<Kind> {
    let (kind, _, _) = split(bytes)?;
    Ok(kind)
}

/// The payload of an encoded object of kind `expected`, in the kind's
/// current layout ([`Kind::version`]); an older layout is refused.
pub fn decode(bytes: &[u8], expected: Kind) -> Result<&[u8]> {
    let (version, payload) = decode_versioned(bytes, expected)?;
    if version != expected.version() {
        return Err(corrupt(format!(
            "format version {version} of a {} is not supported by this build (which reads \
             version {})",
            expected.name(),
            expected.version()
        )));
    }
    Ok(payload)
}

/// The format version and payload of an encoded object of kind `expected`,
/// for a decoder that reads older layouts of its kind: any version from
/// [`FORMAT_VERSION`] to [`Kind::version`].
pub fn decode_versioned(bytes: &[u8], expected: Kind) -> Result<(u16, &[u8])> {
    let (kind, version, payload) = split(bytes)?;
    if kind != expected {
        return Err(corrupt(format!(
            "expected a {}, found a {}",
            expected.name(),
            kind.name()
        )));
    }
    Ok((version, payload))
}

fn split(bytes: &[u8]) -> Result<(Kind, u16, &[u8])> {
    if bytes.len() < HEADER_LEN + CRC_LEN {
        return Err(corrupt(format!("truncated ({} bytes)", bytes.len())));
    }
    if &bytes[..8] != MAGIC {
        return Err(corrupt("not a dpstream file (bad magic bytes)"));
    }
    let version = u16::from_le_bytes([bytes[8], bytes[9]]);
    let code = u16::from_le_bytes([bytes[10], bytes[11]]);
    let kind = Kind::from_code(code).ok_or_else(|| {
        corrupt(format!(
            "unknown object kind {code} (format version {version}; a newer dpstream may \
             write it)"
        ))
    })?;
    if version > kind.version() {
        return Err(corrupt(format!(
            "written in a newer format (format version {version} of a {}) than this build \
             reads (version {}); upgrade dpstream to load it",
            kind.name(),
            kind.version()
        )));
    }
    if version < FORMAT_VERSION {
        let reads = if kind.version() == FORMAT_VERSION {
            format!("version {FORMAT_VERSION}")
        } else {
            format!("versions {FORMAT_VERSION} to {}", kind.version())
        };
        return Err(corrupt(format!(
            "format version {version} is not supported by this build (which reads {reads} \
             of a {})",
            kind.name()
        )));
    }
    let mut len_bytes = [0u8; 8];
    len_bytes.copy_from_slice(&bytes[12..20]);
    let len = u64::from_le_bytes(len_bytes);
    // Checked: a corrupt length near 2^64 must not wrap around.
    let expected_total = len.checked_add((HEADER_LEN + CRC_LEN) as u64);
    if expected_total != Some(bytes.len() as u64) {
        return Err(corrupt(format!(
            "length mismatch: header says a {len}-byte payload ({} bytes in all), got {} bytes",
            expected_total.map_or_else(|| "more than 2^64".to_string(), |t| t.to_string()),
            bytes.len()
        )));
    }
    let body_end = bytes.len() - CRC_LEN;
    let mut crc_bytes = [0u8; 4];
    crc_bytes.copy_from_slice(&bytes[body_end..]);
    if crc32fast::hash(&bytes[..body_end]) != u32::from_le_bytes(crc_bytes) {
        return Err(corrupt("checksum mismatch (the data is corrupted)"));
    }
    Ok((kind, version, &bytes[HEADER_LEN..body_end]))
}

/// Appends little-endian fields to a payload.
#[derive(Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty payload.
    pub fn new() -> Self {
        Self::default()
    }
    /// Append a `u8`.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Append a `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append a `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append a `u128`.
    pub fn u128(&mut self, v: u128) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append an `i64`.
    pub fn i64(&mut self, v: i64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Append an `f64` (its bits).
    pub fn f64(&mut self, v: f64) {
        self.buf.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    /// Append an exact rational: numerator, then denominator, each as a
    /// `u64` byte length and little-endian bytes.
    pub fn rational(&mut self, x: &Rational) {
        for part in [x.numer(), x.denom()] {
            let bytes = part.to_bytes_le();
            self.u64(bytes.len() as u64);
            self.buf.extend_from_slice(&bytes);
        }
    }
    /// The payload.
    pub fn finish(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads little-endian fields from a payload; every read is bounds-checked.
pub struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `data`.
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, pos: 0 }
    }

    fn take<const N: usize>(&mut self) -> Result<[u8; N]> {
        let end = self.pos.checked_add(N).filter(|&e| e <= self.data.len());
        let end = end.ok_or_else(|| corrupt("payload ends early"))?;
        let mut out = [0u8; N];
        out.copy_from_slice(&self.data[self.pos..end]);
        self.pos = end;
        Ok(out)
    }
    /// Read a `u8`.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take::<1>()?[0])
    }
    /// Read a `u32`.
    pub fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.take()?))
    }
    /// Read a `u64`.
    pub fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.take()?))
    }
    /// Read a `u128`.
    pub fn u128(&mut self) -> Result<u128> {
        Ok(u128::from_le_bytes(self.take()?))
    }
    /// Read an `i64`.
    pub fn i64(&mut self) -> Result<i64> {
        Ok(i64::from_le_bytes(self.take()?))
    }
    /// Read an `f64`.
    pub fn f64(&mut self) -> Result<f64> {
        Ok(f64::from_bits(self.u64()?))
    }
    /// Read a [`Writer::rational`]; a zero denominator is refused.
    pub fn rational(&mut self) -> Result<Rational> {
        let mut big = || -> Result<BigUint> {
            let n = self.count(1)?;
            let end = self.pos + n; // `count` checked that the payload holds `n` bytes
            let v = BigUint::from_bytes_le(&self.data[self.pos..end]);
            self.pos = end;
            Ok(v)
        };
        let (num, den) = (big()?, big()?);
        Rational::new(num, den).map_err(corrupt)
    }
    /// A count of items of `item_bytes` each that must still fit in the
    /// payload: guards allocations against corrupted lengths.
    pub fn count(&mut self, item_bytes: usize) -> Result<usize> {
        let n = self.u64()?;
        let remaining = (self.data.len() - self.pos) as u64;
        if n.saturating_mul(item_bytes.max(1) as u64) > remaining {
            return Err(corrupt(format!("item count {n} exceeds the payload")));
        }
        Ok(n as usize)
    }
    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }
    /// Fail unless the whole payload was read.
    pub fn finish(self) -> Result<()> {
        if self.pos != self.data.len() {
            return Err(corrupt("trailing bytes after the payload"));
        }
        Ok(())
    }
}

/// Write an exact rational (ε): numerator and denominator, each a `u64` byte
/// length and little-endian bytes.
pub fn write_rational(w: &mut Writer, q: &crate::rational::Rational) {
    for part in [q.numer().to_bytes_le(), q.denom().to_bytes_le()] {
        w.u64(part.len() as u64);
        for b in part {
            w.u8(b);
        }
    }
}

/// Read [`write_rational`] output (a zero denominator is an error).
pub fn read_rational(r: &mut Reader<'_>) -> Result<crate::rational::Rational> {
    let mut big = || -> Result<num_bigint::BigUint> {
        let n = r.count(1)?;
        let bytes = (0..n).map(|_| r.u8()).collect::<Result<Vec<u8>>>()?;
        Ok(num_bigint::BigUint::from_bytes_le(&bytes))
    };
    let (num, den) = (big()?, big()?);
    crate::rational::Rational::new(num, den)
}

/// Write the flags byte of a kind at version 2 that records whether its
/// noise came from a seeded generator: bit 0 set for seeded, other bits 0.
pub fn write_seeded_flag(w: &mut Writer, seeded: bool) {
    w.u8(u8::from(seeded));
}

/// Read [`write_seeded_flag`] output from a payload of format `version`:
/// `false` for a version-1 payload (written before the flag existed, so it
/// has no flags byte); a flags byte other than 0 or 1 is refused.
pub fn read_seeded_flag(r: &mut Reader<'_>, version: u16, what: &str) -> Result<bool> {
    if version < 2 {
        return Ok(false);
    }
    match r.u8()? {
        0 => Ok(false),
        1 => Ok(true),
        f => Err(corrupt(format!("bad {what} flags {f}"))),
    }
}

/// Write a generator for a checkpoint: `u8` 0 for an OS-seeded one (its key
/// is never written), or 1 and the seeded state (key, stream, position,
/// buffered bits), so a seeded object resumes exactly.
pub fn write_rng(w: &mut Writer, rng: &crate::rng::Rng) {
    match rng.seeded_state() {
        None => w.u8(0),
        Some((key, stream, pos, bits, nbits)) => {
            w.u8(1);
            for b in key {
                w.u8(b);
            }
            w.u64(stream);
            w.u128(pos);
            w.u64(bits);
            w.u32(nbits);
        }
    }
}

/// Read [`write_rng`] output: a fresh OS-seeded generator, or the seeded one.
pub fn read_rng(r: &mut Reader<'_>) -> Result<crate::rng::Rng> {
    match r.u8()? {
        0 => crate::rng::Rng::from_os(),
        1 => {
            let mut key = [0u8; 32];
            for b in key.iter_mut() {
                *b = r.u8()?;
            }
            crate::rng::Rng::from_seeded_state((key, r.u64()?, r.u128()?, r.u64()?, r.u32()?))
        }
        _ => Err(corrupt("bad generator flag")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(7);
        w.u32(11);
        w.u64(3);
        w.f64(0.5);
        w.i64(-4);
        w.u128(1 << 100);
        encode(Kind::Sketch, &w.finish())
    }

    #[test]
    fn round_trip() {
        let bytes = sample();
        assert_eq!(peek_kind(&bytes).unwrap(), Kind::Sketch);
        let payload = decode(&bytes, Kind::Sketch).unwrap();
        let mut r = Reader::new(payload);
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u32().unwrap(), 11);
        assert_eq!(r.u64().unwrap(), 3);
        assert_eq!(r.f64().unwrap(), 0.5);
        assert_eq!(r.i64().unwrap(), -4);
        assert_eq!(r.u128().unwrap(), 1 << 100);
        r.finish().unwrap();
    }

    #[test]
    fn every_corruption_is_reported() {
        let bytes = sample();
        // Every single-byte flip and every truncation is detected.
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(decode(&bad, Kind::Sketch).is_err(), "flip at {i}");
            assert!(
                decode(&bytes[..i], Kind::Sketch).is_err(),
                "truncated to {i}"
            );
        }
        let err = decode(&bytes, Kind::TreeGenerator).unwrap_err().to_string();
        assert!(err.contains("expected a TreeGenerator"), "{err}");
        let mut newer = bytes.clone();
        newer[8] = 3;
        let err = decode(&newer, Kind::Sketch).unwrap_err().to_string();
        assert!(
            err.contains("newer format (format version 3 of a Sketch)"),
            "{err}"
        );
        let mut older = bytes.clone();
        older[8] = 0;
        let err = decode(&older, Kind::Sketch).unwrap_err().to_string();
        assert!(
            err.ends_with("not supported by this build (which reads versions 1 to 2 of a Sketch)"),
            "{err}"
        );
        let summary = encode_version(Kind::PrivHP, 0, &[]);
        let err = peek_kind(&summary).unwrap_err().to_string();
        assert!(
            err.ends_with("(which reads version 1 of a PrivHP)"),
            "{err}"
        );
    }

    #[test]
    fn versions_are_per_kind() {
        let payload = [1u8, 2, 3];
        // A kind at version 1 is written and read at version 1 only.
        let summary = encode(Kind::PrivHP, &payload);
        assert_eq!(u16::from_le_bytes([summary[8], summary[9]]), 1);
        let v2 = encode_version(Kind::PrivHP, 2, &payload);
        let err = decode(&v2, Kind::PrivHP).unwrap_err().to_string();
        assert!(
            err.contains("newer format (format version 2 of a PrivHP)"),
            "{err}"
        );
        assert!(peek_kind(&v2).is_err());
        // A kind at version 2 reads version 1 through `decode_versioned` only.
        for kind in [
            Kind::Sketch,
            Kind::Counter,
            Kind::SparseCounter,
            Kind::InhomogeneousSparseCounter,
            Kind::TreeGenerator,
            Kind::EpochSynthesizer,
            Kind::ContinualPrivHP,
            Kind::OnlineSynthesizer,
        ] {
            let now = encode(kind, &payload);
            let v = match kind {
                Kind::Counter | Kind::SparseCounter | Kind::InhomogeneousSparseCounter => 3,
                _ => 2,
            };
            assert_eq!(decode_versioned(&now, kind).unwrap(), (v, &payload[..]));
            assert_eq!(decode(&now, kind).unwrap(), &payload[..]);
            let old = encode_version(kind, 1, &payload);
            assert_eq!(peek_kind(&old).unwrap(), kind);
            assert_eq!(decode_versioned(&old, kind).unwrap(), (1, &payload[..]));
            let err = decode(&old, kind).unwrap_err().to_string();
            assert!(err.contains("format version 1 of a"), "{err}");
            assert!(err.contains("is not supported by this build"), "{err}");
        }
    }

    #[test]
    fn reader_guards_lengths() {
        let mut w = Writer::new();
        w.u64(u64::MAX);
        let payload = w.finish();
        let mut r = Reader::new(&payload);
        assert!(r.count(8).is_err());
        let mut r = Reader::new(&payload[..3]);
        assert!(r.u64().is_err());
        let r = Reader::new(&payload);
        assert!(r.finish().is_err());
    }
}

//! Binary encoding of a [`LinearSketch`] ([`crate::state`] format, kind `Sketch`).

use super::{LinearSketch, RowHash, SketchKind};
use crate::error::{invalid, Result};
use crate::state::{self, Kind, Reader, Writer};

impl LinearSketch {
    /// Encode the sketch with its hashes and whether it is a private
    /// release (`released`): an exact sketch is not private data to share.
    pub fn to_bytes(&self, released: bool) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(match self.kind() {
            SketchKind::CountMin => 0,
            SketchKind::Count => 1,
        });
        w.u8(u8::from(released));
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
        state::encode(Kind::Sketch, &w.finish())
    }

    /// Decode [`LinearSketch::to_bytes`] output: the sketch and its released flag.
    pub fn from_bytes(bytes: &[u8]) -> Result<(Self, bool)> {
        let mut r = Reader::new(state::decode(bytes, Kind::Sketch)?);
        let kind = match r.u8()? {
            0 => SketchKind::CountMin,
            1 => SketchKind::Count,
            k => return Err(invalid!("invalid dpstream state: unknown sketch kind {k}")),
        };
        let released = match r.u8()? {
            0 => false,
            1 => true,
            f => return Err(invalid!("invalid dpstream state: bad released flag {f}")),
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
        Ok((sketch, released))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn round_trip_and_corruption() {
        let mut rng = Rng::seed_from_u64(1);
        for kind in [SketchKind::CountMin, SketchKind::Count] {
            let mut s = LinearSketch::new(kind, 3, 16, &mut rng).unwrap();
            s.update_many(&[1, 2, 3, 99], &[5, 1, 7, 2]).unwrap();
            let bytes = s.to_bytes(true);
            let (back, released) = LinearSketch::from_bytes(&bytes).unwrap();
            assert!(released);
            assert_eq!(back, s);
            for i in 0..bytes.len() {
                assert!(LinearSketch::from_bytes(&bytes[..i]).is_err());
            }
        }
    }
}

//! An online release's points in chunks of a public size, each chunk drawn
//! from its own generator, so that chunks drawn anywhere (one machine, the
//! workers of a cluster), in any order, and concatenated are the same points.
//!
//! A [`ChunkedRelease`] holds what the points are drawn from (the released
//! private structure: fitted trees with their counts, or the consistent
//! leaf counts), the number of rows `n`, the chunk size `c` and a 256-bit
//! sampling key drawn from the synthesizer's generator. Chunk `i` holds rows
//! `[i·c, min((i+1)·c, n))` and is drawn from ChaCha12 stream `i` of the key.
//!
//! Privacy: sampling from the released structure is post-processing; the
//! key drives the sampling only (no privacy noise), and `n` and `c` are
//! public.

use std::borrow::Cow;

use super::tree_generator::{CellSampler, TreeGenerator};
use crate::error::{invalid, Error, Result};
use crate::partition::path::MAX_DEPTH;
use crate::rng::Rng;
use crate::state::{self, Kind, Reader, Writer};
use crate::synth::online_budget::MAX_ONLINE_DIM;

/// Rows per chunk of a release by default (public; the last chunk is shorter).
pub const CHUNK_ROWS: u64 = 1 << 20;

/// What the rows are drawn from.
#[derive(Clone, Debug)]
enum Source<'a> {
    /// No row.
    Empty,
    /// Blocks `(n_j, g_j)`. Placed: the rows of block `j` follow those of
    /// the earlier blocks, its leaves (arena order) taking their counts
    /// scaled to `n_j` ([`TreeGenerator::scaled_leaf_counts`]), uniform
    /// points in each leaf. I.i.d.: a block with probability `n_j / Σ n`,
    /// then a point of its generator.
    Trees {
        parts: Vec<(u64, Cow<'a, TreeGenerator>)>,
        iid: bool,
        /// Placed: per block, the cumulative row counts of its leaves (arena
        /// order) within the block.
        placed: Vec<Vec<u64>>,
    },
    /// The `2^depth` cells of level `depth`, `ends` their cumulative counts.
    /// Placed: the cells' rows in path order, each chunk shuffled. I.i.d.:
    /// a cell with probability `count / Σ count`, a uniform point in it.
    Cells {
        depth: u32,
        ends: Vec<u64>,
        iid: bool,
    },
}

/// A release of `rows` points in `[0,1]^dim`, drawn chunk by chunk.
#[derive(Clone, Debug)]
pub struct ChunkedRelease<'a> {
    dim: usize,
    rows: u64,
    chunk_rows: u64,
    key: [u8; 32],
    seeded: bool,
    source: Source<'a>,
}

/// A `chunk_rows` of at least 1, or a clear error.
pub(crate) fn check_chunk_rows(chunk_rows: u64) -> Result<()> {
    if chunk_rows == 0 {
        return Err(invalid!("chunk_rows must be at least 1, got 0"));
    }
    Ok(())
}

/// `rows · dim` zeros, or an error (too many, or out of memory).
pub(crate) fn alloc_rows(rows: u64, dim: usize) -> Result<Vec<f64>> {
    let oom = || Error::OutOfMemory(format!("cannot allocate {rows} synthetic points"));
    let len = usize::try_from(rows)
        .ok()
        .and_then(|m| m.checked_mul(dim))
        .ok_or_else(oom)?;
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| oom())?;
    out.resize(len, 0.0);
    Ok(out)
}

/// Writes a synthesizer's inherent `release` (its docs given first) and
/// `release_chunked` from its `release_sampler`, `time()` and `dim()`
/// (`check`: a method run before anything else).
macro_rules! chunked_release {
    ($(#[$doc:meta])* $(check: $check:ident)?) => {
        $(#[$doc])*
        pub fn release(&mut self, size: Option<u64>) -> Result<Vec<f64>> {
            self.release_chunked(size, $crate::synth::CHUNK_ROWS)
        }

        /// [`Self::release`] drawn in chunks of `chunk_rows` rows (at least 1):
        /// the concatenated chunks of [`Self::release_sampler`].
        pub fn release_chunked(&mut self, size: Option<u64>, chunk_rows: u64) -> Result<Vec<f64>> {
            $(self.$check()?;)?
            let (time, dim) = (self.time(), self.dim());
            $crate::synth::release::draw_whole(time, dim, size, chunk_rows, || {
                self.release_sampler(size, chunk_rows)
            })
        }
    };
}
pub(crate) use chunked_release;

/// A whole release of a synthesizer at time `time`: `size.unwrap_or(time)`
/// rows allocated first (a refused size changes nothing), then filled with
/// the chunks of `sampler()`. Refused before the first point unless empty.
pub(crate) fn draw_whole<'a>(
    time: u64,
    dim: usize,
    size: Option<u64>,
    chunk_rows: u64,
    sampler: impl FnOnce() -> Result<ChunkedRelease<'a>>,
) -> Result<Vec<f64>> {
    check_chunk_rows(chunk_rows)?;
    let rows = size.unwrap_or(time);
    if rows > 0 && time == 0 {
        return Err(invalid!("no point has been seen yet: nothing to release"));
    }
    let mut out = alloc_rows(rows, dim)?;
    sampler()?.sample_into(&mut out)?;
    Ok(out)
}

fn cumulative(counts: impl IntoIterator<Item = u64>) -> Result<Vec<u64>> {
    let mut acc = 0u64;
    counts
        .into_iter()
        .map(|c| {
            acc = acc
                .checked_add(c)
                .ok_or_else(|| invalid!("counts overflow"))?;
            Ok(acc)
        })
        .collect()
}

impl<'a> ChunkedRelease<'a> {
    /// `Some` before the first point (`time = 0`): the empty release for
    /// `size` `None` or 0, else a refusal; `None` after it. Checks `chunk_rows`.
    pub(crate) fn unseen(
        time: u64,
        dim: usize,
        size: Option<u64>,
        chunk_rows: u64,
    ) -> Option<Result<Self>> {
        if let Err(e) = check_chunk_rows(chunk_rows) {
            return Some(Err(e));
        }
        match (time, size) {
            (0, None | Some(0)) => Some(Ok(Self::empty(dim, chunk_rows))),
            (0, Some(_)) => Some(Err(invalid!(
                "no point has been seen yet: nothing to release"
            ))),
            _ => None,
        }
    }

    fn empty(dim: usize, chunk_rows: u64) -> Self {
        Self {
            dim,
            rows: 0,
            chunk_rows,
            key: [0; 32],
            seeded: false,
            source: Source::Empty,
        }
    }

    /// The blocks `(n_j, g_j)`: `rows = Σ n_j` placed rows (`iid = None`) or
    /// `iid = Some(m)` i.i.d. rows of their mixture; the key is drawn from `rng`.
    pub(crate) fn trees(
        dim: usize,
        parts: Vec<(u64, Cow<'a, TreeGenerator>)>,
        iid: Option<u64>,
        rng: &mut Rng,
        chunk_rows: u64,
    ) -> Result<Self> {
        check_chunk_rows(chunk_rows)?;
        Self::with_trees(dim, parts, iid, rng.draw_key(), rng.is_seeded(), chunk_rows)
    }

    fn with_trees(
        dim: usize,
        parts: Vec<(u64, Cow<'a, TreeGenerator>)>,
        iid: Option<u64>,
        key: [u8; 32],
        seeded: bool,
        chunk_rows: u64,
    ) -> Result<Self> {
        let total = parts
            .iter()
            .try_fold(0u64, |a, p| a.checked_add(p.0))
            .ok_or_else(|| invalid!("block sizes overflow"))?;
        let rows = iid.unwrap_or(total);
        if rows > 0 && (total == 0 || parts.iter().any(|(_, g)| g.dim() != dim)) {
            return Err(invalid!("no block of dimension {dim} to draw from"));
        }
        let placed = match iid {
            Some(_) => Vec::new(),
            None => parts
                .iter()
                .map(|(n, g)| cumulative(g.scaled_leaf_counts(*n)))
                .collect::<Result<_>>()?,
        };
        Ok(Self {
            dim,
            rows,
            chunk_rows,
            key,
            seeded,
            source: Source::Trees {
                parts,
                iid: iid.is_some(),
                placed,
            },
        })
    }

    /// The `2^depth` cells of level `depth` with non-negative `counts`:
    /// `Σ counts` placed rows (shuffled in each chunk, `iid = None`) or
    /// `iid = Some(m)` i.i.d. rows; the key is drawn from `rng`.
    pub(crate) fn cells(
        dim: usize,
        depth: u32,
        counts: &[i64],
        iid: Option<u64>,
        rng: &mut Rng,
        chunk_rows: u64,
    ) -> Result<Self> {
        check_chunk_rows(chunk_rows)?;
        let ends = cumulative(counts.iter().map(|&c| c.max(0) as u64))?;
        let total = ends.last().copied().unwrap_or(0);
        if iid.is_some_and(|m| m > 0) && total == 0 {
            return Err(invalid!("no count to draw from"));
        }
        Ok(Self {
            dim,
            rows: iid.unwrap_or(total),
            chunk_rows,
            key: rng.draw_key(),
            seeded: rng.is_seeded(),
            source: Source::Cells {
                depth,
                ends,
                iid: iid.is_some(),
            },
        })
    }

    /// The same release owning its structure (copies borrowed generators).
    pub fn into_owned(self) -> ChunkedRelease<'static> {
        let source = match self.source {
            Source::Empty => Source::Empty,
            Source::Trees { parts, iid, placed } => Source::Trees {
                parts: parts
                    .into_iter()
                    .map(|(n, g)| (n, Cow::Owned(g.into_owned())))
                    .collect(),
                iid,
                placed,
            },
            Source::Cells { depth, ends, iid } => Source::Cells { depth, ends, iid },
        };
        ChunkedRelease {
            dim: self.dim,
            rows: self.rows,
            chunk_rows: self.chunk_rows,
            key: self.key,
            seeded: self.seeded,
            source,
        }
    }

    /// Dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Rows of the whole release (public).
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Rows per chunk (public).
    pub fn chunk_rows(&self) -> u64 {
        self.chunk_rows
    }

    /// Whether the release's noise came from a seeded generator (not private).
    pub fn is_seeded(&self) -> bool {
        self.seeded
    }

    /// Chunks of the release: `⌈rows / chunk_rows⌉`.
    pub fn n_chunks(&self) -> u64 {
        self.rows.div_ceil(self.chunk_rows)
    }

    /// The rows `[start, stop)` of chunk `i`; an error past the last chunk.
    pub fn chunk_bounds(&self, i: u64) -> Result<(u64, u64)> {
        if i >= self.n_chunks() {
            return Err(invalid!(
                "chunk {i} out of range: the release has {} chunks",
                self.n_chunks()
            ));
        }
        let start = i * self.chunk_rows;
        Ok((
            start,
            (start.saturating_add(self.chunk_rows)).min(self.rows),
        ))
    }

    /// Chunk `i`'s points, row-major.
    pub fn chunk(&self, i: u64) -> Result<Vec<f64>> {
        let (start, stop) = self.chunk_bounds(i)?;
        let mut out = alloc_rows(stop - start, self.dim)?;
        self.fill(i, start, &mut out)?;
        Ok(out)
    }

    /// The whole release into `out` (`rows · dim` values): the chunks in order.
    pub fn sample_into(&self, out: &mut [f64]) -> Result<()> {
        if out.len() as u64 != self.rows.saturating_mul(self.dim as u64) {
            return Err(invalid!("output length is not rows · dim"));
        }
        for i in 0..self.n_chunks() {
            let (start, stop) = self.chunk_bounds(i)?;
            let d = self.dim as u64;
            self.fill(
                i,
                start,
                &mut out[(start * d) as usize..(stop * d) as usize],
            )?;
        }
        Ok(())
    }

    /// The whole release, row-major: the chunks in order.
    pub fn sample(&self) -> Result<Vec<f64>> {
        let mut out = alloc_rows(self.rows, self.dim)?;
        self.sample_into(&mut out)?;
        Ok(out)
    }

    /// Chunk `i`, whose first row is row `start` of the release, into `out`.
    fn fill(&self, i: u64, start: u64, out: &mut [f64]) -> Result<()> {
        let mut rng = Rng::keyed_stream(self.key, i, self.seeded);
        let mut cell = CellSampler::new(self.dim);
        let rows = out.chunks_exact_mut(self.dim);
        match &self.source {
            Source::Empty => Ok(()),
            Source::Trees {
                parts, iid: true, ..
            } => {
                let total: u64 = parts.iter().map(|p| p.0).sum();
                for row in rows {
                    let mut pick = &parts[parts.len() - 1].1;
                    if parts.len() > 1 {
                        let mut u = rng.below_u64(total);
                        for (n, g) in parts {
                            if u < *n {
                                pick = g;
                                break;
                            }
                            u -= n;
                        }
                    }
                    pick.sample(&mut rng, row)?;
                }
                Ok(())
            }
            Source::Trees { parts, placed, .. } => {
                let mut rows = rows;
                let mut first = 0u64; // the first row of the block
                let mut at = start; // the next row to fill
                for ((n, g), ends) in parts.iter().zip(placed) {
                    let stop = first + n;
                    if at < stop {
                        let k = ends.partition_point(|&e| e <= at - first);
                        for (&end, (theta, level)) in ends[k..].iter().zip(g.leaves().skip(k)) {
                            cell.set_cell(theta, level);
                            while at - first < end {
                                match rows.next() {
                                    Some(p) => cell.sample_current(&mut rng, p),
                                    None => return Ok(()),
                                }
                                at += 1;
                            }
                        }
                    }
                    first = stop;
                }
                Ok(())
            }
            Source::Cells {
                depth, ends, iid, ..
            } => {
                let total = ends.last().copied().unwrap_or(0);
                if *iid {
                    for p in rows {
                        let u = rng.below_u64(total);
                        let theta = ends.partition_point(|&c| c <= u);
                        cell.sample(&mut rng, theta as u64, *depth, p);
                    }
                    return Ok(());
                }
                let mut rows = rows;
                let mut at = start;
                let mut theta = ends.partition_point(|&e| e <= at);
                'cells: while theta < ends.len() {
                    cell.set_cell(theta as u64, *depth);
                    while at < ends[theta] {
                        match rows.next() {
                            Some(p) => cell.sample_current(&mut rng, p),
                            None => break 'cells,
                        }
                        at += 1;
                    }
                    theta += 1;
                }
                // The rows come grouped by cell; a uniform shuffle of the chunk.
                shuffle_rows(&mut rng, out, self.dim)
            }
        }
    }

    /// The versioned, checksummed encoding ([`crate::state`], kind
    /// `OnlineRelease`): what a cluster's workers draw their chunks from.
    /// It holds the released structure and the sampling key (public: the
    /// points it draws are the release).
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        w.u8(u8::from(self.seeded));
        w.u32(u32::try_from(self.dim).map_err(|_| invalid!("dim too large"))?);
        w.u64(self.rows);
        w.u64(self.chunk_rows);
        for b in self.key {
            w.u8(b);
        }
        match &self.source {
            Source::Empty => w.u8(0),
            Source::Trees { parts, iid, .. } => {
                w.u8(1);
                w.u8(u8::from(*iid));
                w.u64(parts.len() as u64);
                for (n, g) in parts {
                    w.u64(*n);
                    let bytes = g.to_bytes();
                    w.u64(bytes.len() as u64);
                    for b in bytes {
                        w.u8(b);
                    }
                }
            }
            Source::Cells { depth, ends, iid } => {
                w.u8(2);
                w.u8(u8::from(*iid));
                w.u32(*depth);
                w.u64(ends.len() as u64);
                let mut prev = 0;
                for &e in ends {
                    w.u64(e - prev);
                    prev = e;
                }
            }
        }
        Ok(state::encode(Kind::OnlineRelease, &w.finish()))
    }

    /// Decode and validate [`Self::to_bytes`] output.
    pub fn from_bytes(bytes: &[u8]) -> Result<ChunkedRelease<'static>> {
        let payload = state::decode(bytes, Kind::OnlineRelease)?;
        let bad = |m: &str| invalid!("invalid dpstream state: {m}");
        let mut r = Reader::new(payload);
        let seeded = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(bad("bad release flags")),
        };
        let dim = r.u32()? as usize;
        let rows = r.u64()?;
        let chunk_rows = r.u64()?;
        let mut key = [0u8; 32];
        for b in &mut key {
            *b = r.u8()?;
        }
        if dim == 0 || dim > MAX_ONLINE_DIM as usize || chunk_rows == 0 {
            return Err(bad("a release's dim or chunk size out of range"));
        }
        let flag = |r: &mut Reader<'_>| match r.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(bad("bad release flags")),
        };
        let source = match r.u8()? {
            0 if rows == 0 => Source::Empty,
            1 => {
                let iid = flag(&mut r)?;
                let n = r.count(16)?;
                let mut parts = Vec::with_capacity(n);
                for _ in 0..n {
                    let size = r.u64()?;
                    let len = r.count(1)?;
                    let mut bytes = Vec::with_capacity(len);
                    for _ in 0..len {
                        bytes.push(r.u8()?);
                    }
                    let g = TreeGenerator::from_bytes(&bytes)?;
                    if g.dim() != dim {
                        return Err(bad("a generator of another dimension"));
                    }
                    parts.push((size, Cow::Owned(g)));
                }
                let total = parts.iter().map(|p| u128::from(p.0)).sum::<u128>();
                if !iid && total != u128::from(rows) {
                    return Err(bad("block sizes do not match the rows"));
                }
                let s = ChunkedRelease::<'static>::with_trees(
                    dim,
                    parts,
                    iid.then_some(rows),
                    key,
                    seeded,
                    chunk_rows,
                )
                .map_err(|e| bad(&e.to_string()))?;
                s.source
            }
            2 => {
                let iid = flag(&mut r)?;
                let depth = r.u32()?;
                let n = r.count(8)?;
                if depth > MAX_DEPTH || n as u64 != 1u64 << depth {
                    return Err(bad("cell counts of the wrong length"));
                }
                let mut counts = Vec::with_capacity(n);
                for _ in 0..n {
                    counts.push(r.u64()?);
                }
                let ends = cumulative(counts)?;
                let total = ends.last().copied().unwrap_or(0);
                if (iid && rows > 0 && total == 0) || (!iid && total != rows) {
                    return Err(bad("cell counts do not match the rows"));
                }
                Source::Cells { depth, ends, iid }
            }
            _ => return Err(bad("unknown release source")),
        };
        r.finish()?;
        Ok(ChunkedRelease {
            dim,
            rows,
            chunk_rows,
            key,
            seeded,
            source,
        })
    }
}

/// A uniformly random permutation of the rows (`dim` values each) of `data`,
/// in place.
///
/// Rao–Sandelius: every row draws an independent uniform bucket among 256,
/// rows are scattered to their buckets in order, and each bucket gets a
/// Fisher–Yates shuffle. Given the bucket sizes every arrangement is equally
/// likely, so the permutation is exactly uniform; the buckets fit in cache,
/// which makes this several times faster than one Fisher–Yates over a large
/// array.
pub(crate) fn shuffle_rows(rng: &mut Rng, data: &mut [f64], dim: usize) -> Result<()> {
    let n = data.len() / dim;
    let fisher_yates = |rng: &mut Rng, rows: &mut [f64]| {
        let n = rows.len() / dim;
        for i in (1..n).rev() {
            let k = rng.below_u64(i as u64 + 1) as usize;
            for c in 0..dim {
                rows.swap(i * dim + c, k * dim + c);
            }
        }
    };
    if n < 1 << 14 {
        fisher_yates(rng, data);
        return Ok(());
    }
    let mut labels = vec![0u8; n];
    rng.fill_bytes(&mut labels);
    let mut start = [0usize; 257];
    for &l in &labels {
        start[l as usize + 1] += 1;
    }
    for b in 0..256 {
        start[b + 1] += start[b];
    }
    let mut out = Vec::new();
    out.try_reserve_exact(data.len())
        .map_err(|_| Error::OutOfMemory("cannot allocate the shuffled rows".into()))?;
    out.resize(data.len(), 0.0);
    let mut next = start;
    for (row, &l) in data.chunks_exact(dim).zip(&labels) {
        let at = next[l as usize];
        out[at * dim..(at + 1) * dim].copy_from_slice(row);
        next[l as usize] += 1;
    }
    for b in 0..256 {
        fisher_yates(rng, &mut out[start[b] * dim..start[b + 1] * dim]);
    }
    data.copy_from_slice(&out);
    Ok(())
}

#[cfg(test)]
#[path = "release_tests.rs"]
mod tests;

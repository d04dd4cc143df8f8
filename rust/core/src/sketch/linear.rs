//! [`LinearSketch`]: the one implementation behind count-min and count
//! sketches (see the [module docs](super) for privacy and accuracy).

use super::hash::RowHash;
use crate::error::{invalid, Error, Result};
use crate::noise::DiscreteLaplace;
use crate::rational::Rational;
use crate::rng::Rng;

/// Most rows a sketch may have (the query keeps one value per row on the stack).
pub const MAX_ROWS: usize = 64;
/// Widest row a sketch may have.
pub const MAX_WIDTH: usize = 1 << 30;
/// Largest cell matrix, in bytes (16 GiB).
pub const MAX_CELL_BYTES: u64 = 1 << 34;

/// Which estimator a [`LinearSketch`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SketchKind {
    /// Count-min: unsigned updates, minimum over rows.
    CountMin,
    /// Count sketch: signed updates (`±1` per row), median over rows.
    Count,
}

/// A `rows × width` linear sketch of `u64` keys with `i64` cells: count-min
/// or count sketch. Allocated once at construction; updates, queries,
/// merges and noise never allocate.
#[derive(Clone, PartialEq)]
pub struct LinearSketch {
    kind: SketchKind,
    rows: usize,
    width: usize,
    hashes: Vec<RowHash>,
    /// Row-major `rows × width`.
    cells: Vec<i64>,
}

impl std::fmt::Debug for LinearSketch {
    // The cells are private data until noise is added: never print them.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinearSketch")
            .field("kind", &self.kind)
            .field("rows", &self.rows)
            .field("width", &self.width)
            .field("hashes", &self.hashes)
            .field(
                "cells",
                &format_args!("<{} cells, not shown>", self.cells.len()),
            )
            .finish()
    }
}

/// Refuse shapes outside `1..=MAX_ROWS × 1..=MAX_WIDTH` or above [`MAX_CELL_BYTES`].
fn check_shape(rows: usize, width: usize) -> Result<()> {
    if rows == 0 || rows > MAX_ROWS {
        return Err(invalid!("rows must be in 1..={MAX_ROWS}, got {rows}"));
    }
    if width == 0 || width > MAX_WIDTH {
        return Err(invalid!("width must be in 1..=2^30, got {width}"));
    }
    let bytes = rows as u64 * width as u64 * 8;
    if bytes > MAX_CELL_BYTES {
        return Err(invalid!(
            "a {rows} × {width} sketch needs {bytes} bytes ({:.1} GiB) of cells, more than the \
             limit of 2^34 bytes (16 GiB)",
            bytes as f64 / f64::from(1u32 << 30)
        ));
    }
    Ok(())
}

/// `x` rounded to the nearest `f64`, through `i64` when it fits (the
/// direct `i128` conversion is a slow library call).
#[inline(always)]
fn i128_to_f64(x: i128) -> f64 {
    match i64::try_from(x) {
        Ok(v) => v as f64,
        Err(_) => x as f64,
    }
}

/// `count · sign(key)` for a count sketch, `count` for count-min; `None` on overflow.
#[inline(always)]
fn checked_delta(kind: SketchKind, h: &RowHash, key: u64, count: i64) -> Option<i64> {
    match kind {
        SketchKind::CountMin => Some(count),
        SketchKind::Count => count.checked_mul(h.sign(key)),
    }
}

impl LinearSketch {
    /// Heap bytes of a `rows × width` sketch (cells and hashes; add
    /// `size_of::<LinearSketch>()` for the whole footprint). Computed from
    /// the shape alone, saturating for absurd shapes.
    pub fn footprint(rows: usize, width: usize) -> usize {
        rows.saturating_mul(width)
            .saturating_mul(std::mem::size_of::<i64>())
            .saturating_add(rows.saturating_mul(std::mem::size_of::<RowHash>()))
    }

    /// An empty sketch with fresh random hashes from `rng`. Requires
    /// `1 <= rows <= 64`, `1 <= width <= 2^30` and at most 2^34 bytes of
    /// cells; all memory is allocated (and zeroed) here.
    pub fn new(kind: SketchKind, rows: usize, width: usize, rng: &mut Rng) -> Result<Self> {
        check_shape(rows, width)?;
        let mut hashes = Vec::with_capacity(rows);
        hashes.extend((0..rows).map(|_| RowHash::random(rng)));
        let n = rows * width;
        let mut cells = Vec::new();
        cells.try_reserve_exact(n).map_err(|_| {
            Error::OutOfMemory(format!(
                "could not allocate {} bytes for a {rows} × {width} sketch",
                n * 8
            ))
        })?;
        cells.resize(n, 0);
        Self::from_parts(kind, rows, width, hashes, cells)
    }

    /// A sketch from its parts (e.g. decoded state), validated: the shape as
    /// in [`LinearSketch::new`], `hashes.len() == rows` and
    /// `cells.len() == rows * width` (row-major).
    pub fn from_parts(
        kind: SketchKind,
        rows: usize,
        width: usize,
        mut hashes: Vec<RowHash>,
        mut cells: Vec<i64>,
    ) -> Result<Self> {
        check_shape(rows, width)?;
        if hashes.len() != rows {
            return Err(invalid!(
                "a sketch with {rows} rows needs {rows} row hashes, got {}",
                hashes.len()
            ));
        }
        if cells.len() != rows * width {
            return Err(invalid!(
                "a {rows} × {width} sketch needs {} cells, got {}",
                rows * width,
                cells.len()
            ));
        }
        hashes.shrink_to_fit();
        cells.shrink_to_fit();
        Ok(Self {
            kind,
            rows,
            width,
            hashes,
            cells,
        })
    }

    /// Count-min or count sketch.
    pub fn kind(&self) -> SketchKind {
        self.kind
    }

    /// Number of rows (hash functions), `j` in the paper.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Number of cells per row, `w` in the paper.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The row hashes (public).
    pub fn hashes(&self) -> &[RowHash] {
        &self.hashes
    }

    /// The cells, row-major `rows × width`. Private unless noise was added.
    pub fn cells(&self) -> &[i64] {
        &self.cells
    }

    /// Add `count` occurrences of `key` (negative counts remove). The hot
    /// path: per row one bucket hash (and one sign hash for a count sketch),
    /// no allocation, no division. Saturates at the `i64` range (see the
    /// module docs: unreachable before 2^63 total absolute count).
    #[inline]
    pub fn update(&mut self, key: u64, count: i64) {
        let w = self.width;
        let rows = self.cells.chunks_exact_mut(w).zip(&self.hashes);
        match self.kind {
            SketchKind::CountMin => {
                for (row, h) in rows {
                    let c = &mut row[h.bucket(key, w)];
                    *c = c.saturating_add(count);
                }
            }
            SketchKind::Count => {
                for (row, h) in rows {
                    let c = &mut row[h.bucket(key, w)];
                    *c = c.saturating_add(count.saturating_mul(h.sign(key)));
                }
            }
        }
    }

    /// `update(keys[i], counts[i])` for every `i`, all or nothing: fails,
    /// changing nothing, if the lengths differ or any cell would leave the
    /// `i64` range (exact: a failed batch is undone in reverse order).
    pub fn update_many(&mut self, keys: &[u64], counts: &[i64]) -> Result<()> {
        if keys.len() != counts.len() {
            return Err(invalid!(
                "keys has {} entries but counts has {}",
                keys.len(),
                counts.len()
            ));
        }
        let w = self.width;
        let mut failed = None;
        'keys: for (k, (&key, &count)) in keys.iter().zip(counts).enumerate() {
            for (r, h) in self.hashes.iter().enumerate() {
                let cell = &mut self.cells[r * w + h.bucket(key, w)];
                match checked_delta(self.kind, h, key, count).and_then(|d| cell.checked_add(d)) {
                    Some(v) => *cell = v,
                    None => {
                        failed = Some((k, r));
                        break 'keys;
                    }
                }
            }
        }
        let Some((k, r)) = failed else {
            return Ok(());
        };
        // Undo in exact reverse order, so every intermediate value is one
        // the cell held before (no overflow possible).
        let undo = |cells: &mut [i64], hashes: &[RowHash], row: usize, key: u64, count: i64| {
            let h = &hashes[row];
            let d = match self.kind {
                SketchKind::CountMin => count,
                SketchKind::Count => count.wrapping_mul(h.sign(key)),
            };
            let cell = &mut cells[row * w + h.bucket(key, w)];
            *cell = cell.wrapping_sub(d);
        };
        let (hashes, cells) = (&self.hashes, &mut self.cells);
        for row in (0..r).rev() {
            undo(cells, hashes, row, keys[k], counts[k]);
        }
        for kk in (0..k).rev() {
            for row in (0..self.rows).rev() {
                undo(cells, hashes, row, keys[kk], counts[kk]);
            }
        }
        Err(Error::Overflow(format!(
            "counts[{k}] = {} for key {} would take a sketch cell outside the int64 range; \
             nothing was changed",
            counts[k], keys[k]
        )))
    }

    /// Estimated count of `key`: the minimum over rows (count-min) or the
    /// median over rows of `sign · cell` (count sketch; the mean of the two
    /// middle values for an even number of rows). Exact below 2^53 in
    /// magnitude, rounded to the nearest `f64` above.
    #[inline]
    pub fn query(&self, key: u64) -> f64 {
        let w = self.width;
        let rows = self.cells.chunks_exact(w).zip(&self.hashes);
        match self.kind {
            SketchKind::CountMin => rows
                .map(|(row, h)| row[h.bucket(key, w)])
                .min()
                .unwrap_or(0) as f64,
            SketchKind::Count => {
                let mut v = [0i128; MAX_ROWS];
                for (slot, (row, h)) in v.iter_mut().zip(rows) {
                    *slot = i128::from(h.sign(key)) * i128::from(row[h.bucket(key, w)]);
                }
                let v = &mut v[..self.rows];
                v.sort_unstable();
                let m = self.rows / 2;
                if self.rows % 2 == 1 {
                    i128_to_f64(v[m])
                } else {
                    i128_to_f64(v[m - 1] + v[m]) / 2.0
                }
            }
        }
    }

    /// `out[i] = query(keys[i])`; fails if the lengths differ.
    pub fn query_many(&self, keys: &[u64], out: &mut [f64]) -> Result<()> {
        if keys.len() != out.len() {
            return Err(invalid!(
                "keys has {} entries but out has {}",
                keys.len(),
                out.len()
            ));
        }
        for (o, &key) in out.iter_mut().zip(keys) {
            *o = self.query(key);
        }
        Ok(())
    }

    /// Add `other`'s cells to this sketch: afterwards it is the sketch of
    /// both inputs together (linearity). Both must have the same kind, shape
    /// and hashes; fails, changing nothing, otherwise or if a cell would
    /// leave the `i64` range. Merging noisy sketches adds their noise too.
    pub fn merge(&mut self, other: &Self) -> Result<()> {
        self.check_merge(other)?;
        for (a, b) in self.cells.iter_mut().zip(&other.cells) {
            *a = a.wrapping_add(*b); // checked above
        }
        Ok(())
    }

    /// The cells, for tests that plant extreme counts.
    #[cfg(test)]
    pub(crate) fn cells_mut(&mut self) -> &mut [i64] {
        &mut self.cells
    }

    /// The checks of [`LinearSketch::merge`], without changing anything: `Ok`
    /// exactly when `merge(other)` would succeed.
    pub fn check_merge(&self, other: &Self) -> Result<()> {
        if self.kind != other.kind {
            return Err(invalid!(
                "cannot merge a {:?} sketch into a {:?} sketch",
                other.kind,
                self.kind
            ));
        }
        if (self.rows, self.width) != (other.rows, other.width) {
            return Err(invalid!(
                "cannot merge sketches of different shapes: {} × {} and {} × {}",
                self.rows,
                self.width,
                other.rows,
                other.width
            ));
        }
        if let Some(r) = (0..self.rows).find(|&r| self.hashes[r] != other.hashes[r]) {
            return Err(invalid!(
                "cannot merge sketches with different hash functions (row {r} differs): \
                 merge only sketches built from the same hashes"
            ));
        }
        if let Some(i) = self
            .cells
            .iter()
            .zip(&other.cells)
            .position(|(a, b)| a.checked_add(*b).is_none())
        {
            return Err(Error::Overflow(format!(
                "merging would take cell (row {}, column {}) outside the int64 range; nothing \
                 was changed",
                i / self.width,
                i % self.width
            )));
        }
        Ok(())
    }

    /// The discrete Laplace scale [`LinearSketch::add_noise`] uses for
    /// `epsilon`: `rows / epsilon` (ℓ1-sensitivity `rows` over ε).
    pub fn noise_scale(&self, epsilon: &Rational) -> Result<Rational> {
        if epsilon.is_zero() {
            return Err(invalid!("epsilon must be positive, got 0"));
        }
        Rational::new(self.rows as u64, 1u32)?.div(epsilon)
    }

    /// The private release (Algorithm 1, Section 4.1 of PrivHP): add
    /// independent exact discrete Laplace noise of scale `rows/ε` to every
    /// cell. ε-DP for the cell matrix under adding or removing one
    /// `update(key, 1)`; kind, shape and hashes are public. Use an OS-seeded
    /// `rng`: seeded noise gives no privacy. Each call spends ε.
    ///
    /// All or nothing: if ε is 0, the scale exceeds 2^56, or a noisy cell
    /// would leave the `i64` range, nothing changes, `rng` included. Does
    /// not allocate (a failed call replays the generator to undo its noise).
    pub fn add_noise(&mut self, rng: &mut Rng, epsilon: &Rational) -> Result<()> {
        let laplace = DiscreteLaplace::new(&self.noise_scale(epsilon)?)?;
        let saved = rng.clone();
        let mut failed = None;
        for (i, cell) in self.cells.iter_mut().enumerate() {
            let noisy = laplace.sample(rng).and_then(|z| {
                cell.checked_add(z).ok_or_else(|| {
                    // The cell's exact count is private: the message names the cell only.
                    Error::Overflow(format!(
                        "noise would take sketch cell {i} outside the int64 range; nothing was \
                         changed"
                    ))
                })
            });
            match noisy {
                Ok(v) => *cell = v,
                Err(e) => {
                    failed = Some((i, e));
                    break;
                }
            }
        }
        let Some((i, err)) = failed else {
            return Ok(());
        };
        // The same generator state gives the same draws: subtract them again.
        let mut replay = saved.clone();
        for cell in &mut self.cells[..i] {
            if let Ok(z) = laplace.sample(&mut replay) {
                *cell = cell.wrapping_sub(z);
            }
        }
        *rng = saved;
        Err(err)
    }

    /// Set every cell to 0 (same hashes); does not allocate.
    pub(crate) fn clear(&mut self) {
        self.cells.fill(0);
    }

    /// Bytes held: the struct, the cells and the hashes. Constant from
    /// construction on (nothing ever reallocates).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.cells.capacity() * std::mem::size_of::<i64>()
            + self.hashes.capacity() * std::mem::size_of::<RowHash>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::noise::test_support::{chi_square_against, laplace_pmf, ALPHA};
    use statrs::distribution::{ContinuousCDF, Normal};
    use std::collections::HashMap;

    const KINDS: [SketchKind; 2] = [SketchKind::CountMin, SketchKind::Count];

    /// Two-sided z-test at false-alarm rate [`ALPHA`] that the samples' mean is `mu`.
    fn mean_within(samples: &[f64], mu: f64, label: &str) {
        let n = samples.len() as f64;
        let mean = samples.iter().sum::<f64>() / n;
        let var = samples.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let z = Normal::new(0.0, 1.0)
            .unwrap()
            .inverse_cdf(1.0 - ALPHA / 2.0);
        let bound = z * (var / n).sqrt();
        assert!(
            (mean - mu).abs() <= bound + 1e-12,
            "{label}: mean {mean:.5}, expected {mu:.5} ± {bound:.5}"
        );
    }

    fn seeded(seed: u64) -> Rng {
        Rng::seed_from_u64(seed)
    }

    /// A batch of keys from a universe of `universe` (sparse u64 values) with counts.
    fn batch(rng: &mut Rng, n: usize, universe: u64, signed: bool) -> (Vec<u64>, Vec<i64>) {
        let keys = (0..n)
            .map(|_| rng.below_u64(universe).wrapping_mul(0x9E37_79B9_7F4A_7C15))
            .collect();
        let counts = (0..n)
            .map(|_| {
                let c = rng.below_u64(10) as i64;
                if signed {
                    c - 4
                } else {
                    c
                }
            })
            .collect();
        (keys, counts)
    }

    #[test]
    fn shapes_are_validated() {
        let mut rng = seeded(41);
        for (rows, width) in [(0, 10), (65, 10), (1, 0), (1, (1 << 30) + 1)] {
            assert!(LinearSketch::new(SketchKind::CountMin, rows, width, &mut rng).is_err());
        }
        let err = LinearSketch::new(SketchKind::Count, 64, 1 << 30, &mut rng).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("512.0 GiB") && msg.contains("16 GiB"), "{msg}");
        // 2^34 bytes exactly is allowed by the check (not allocated here).
        assert!(check_shape(16, 1 << 27).is_ok());
        assert!(check_shape(17, 1 << 27).is_err());
        let s = LinearSketch::new(SketchKind::Count, 3, 5, &mut rng).unwrap();
        assert_eq!((s.kind(), s.rows(), s.width()), (SketchKind::Count, 3, 5));
        assert_eq!(s.cells(), &[0; 15]);
        assert_eq!(s.hashes().len(), 3);
        let hashes = s.hashes().to_vec();
        let back = LinearSketch::from_parts(SketchKind::Count, 3, 5, hashes.clone(), vec![0; 15]);
        assert_eq!(back.unwrap(), s);
        let bad =
            LinearSketch::from_parts(SketchKind::Count, 3, 5, hashes[..2].to_vec(), vec![0; 15]);
        assert!(bad.unwrap_err().to_string().contains("3 row hashes, got 2"));
        let bad = LinearSketch::from_parts(SketchKind::Count, 3, 5, hashes.clone(), vec![0; 14]);
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("needs 15 cells, got 14"));
        assert!(LinearSketch::from_parts(SketchKind::Count, 0, 5, vec![], vec![]).is_err());
        // Debug never shows the (private) cells.
        let dbg = format!("{s:?}");
        assert!(dbg.contains("<15 cells, not shown>"), "{dbg}");
    }

    #[test]
    fn queries_on_known_cells() {
        // Row hashes with a = 0, b = k·2^64·(2^64/width)…: simplest is a = 0, so
        // the bucket is b's top half scaled; pick b so row r uses bucket r.
        let width = 4usize;
        let bucket_b = |k: u128| (k << 126) + 1; // top 64 bits = k·2^62 → bucket k of 4
        let plus = (0u128, 0u128); // sign +1 everywhere
        let minus = (0u128, 1u128 << 127); // sign −1 everywhere
        let hashes = |signs: &[(u128, u128)]| {
            signs
                .iter()
                .enumerate()
                .map(|(r, &(sa, sb))| RowHash::from_parts(0, bucket_b(r as u128 % 4), sa, sb))
                .collect::<Vec<_>>()
        };
        let cells = vec![
            7, 0, 0, 0, //
            0, 3, 0, 0, //
            0, 0, 9, 0, //
            0, 0, 0, -2,
        ];
        let cm = LinearSketch::from_parts(
            SketchKind::CountMin,
            4,
            width,
            hashes(&[plus; 4]),
            cells.clone(),
        )
        .unwrap();
        assert_eq!(cm.query(12345), -2.0);
        // Count sketch, signs (+, −, +, +): values 7, −3, 9, −2 → median (−2 + 7)/2.
        let cs = LinearSketch::from_parts(
            SketchKind::Count,
            4,
            width,
            hashes(&[plus, minus, plus, plus]),
            cells.clone(),
        )
        .unwrap();
        assert_eq!(cs.query(1), 2.5);
        // Three rows: 7, −3, 9 → 7.
        let cs3 = LinearSketch::from_parts(
            SketchKind::Count,
            3,
            width,
            hashes(&[plus, minus, plus]),
            cells[..12].to_vec(),
        )
        .unwrap();
        assert_eq!(cs3.query(99), 7.0);
        // Extremes: sign · i64::MIN is computed without overflow.
        let ext = LinearSketch::from_parts(
            SketchKind::Count,
            2,
            1,
            vec![RowHash::from_parts(0, 0, 0, 1 << 127); 2],
            vec![i64::MIN, i64::MIN],
        )
        .unwrap();
        assert_eq!(ext.query(0), 2f64.powi(63));
        let mut out = [0.0; 2];
        cs.query_many(&[1, 2], &mut out).unwrap();
        assert_eq!(out, [2.5, 2.5]);
        assert!(cs.query_many(&[1, 2], &mut [0.0; 3]).is_err());
    }

    #[test]
    fn count_min_never_underestimates() {
        let mut rng = seeded(42);
        for rows in 1..=5 {
            for width in [1usize, 2, 16, 100] {
                let mut s = LinearSketch::new(SketchKind::CountMin, rows, width, &mut rng).unwrap();
                let (keys, counts) = batch(&mut rng, 2_000, 300, false);
                let mut truth: HashMap<u64, i64> = HashMap::new();
                for (&k, &c) in keys.iter().zip(&counts) {
                    s.update(k, c);
                    *truth.entry(k).or_default() += c;
                }
                let total: i64 = counts.iter().sum();
                for (&k, &c) in &truth {
                    let q = s.query(k);
                    assert!(
                        q >= c as f64 && q <= total as f64,
                        "rows {rows} width {width}: {q} < {c}"
                    );
                }
                for k in 0..100 {
                    assert!(s.query(k) >= 0.0);
                }
            }
        }
    }

    #[test]
    fn count_min_error_matches_lemma_4() {
        // One row: E[estimate − c] = (n − c)·P(collision) = (n − c)/w exactly (up to w/2^128).
        let mut rng = seeded(43);
        let keys: Vec<u64> = (0..40u64).map(|k| k * 1_000_003).collect();
        let counts: Vec<i64> = (0..40i64).map(|k| 1 + k % 7).collect();
        let n: i64 = counts.iter().sum();
        let width = 8;
        let trials = 100_000;
        let errors: Vec<f64> = (0..trials)
            .map(|_| {
                let mut s = LinearSketch::new(SketchKind::CountMin, 1, width, &mut rng).unwrap();
                s.update_many(&keys, &counts).unwrap();
                s.query(keys[0]) - counts[0] as f64
            })
            .collect();
        assert!(errors.iter().all(|&e| e >= 0.0));
        mean_within(
            &errors,
            (n - counts[0]) as f64 / width as f64,
            "count-min error",
        );
    }

    #[test]
    fn count_sketch_is_unbiased() {
        // Per row the estimate is c + Σ_y s(x)s(y)c_y·1[h(x) = h(y)], of mean c;
        // with two rows the median is the mean of both rows, also unbiased.
        let mut rng = seeded(44);
        let keys: Vec<u64> = (0..40u64)
            .map(|k| k.wrapping_mul(0xDEAD_BEEF_1234))
            .collect();
        let counts: Vec<i64> = (0..40i64).map(|k| (k % 11) - 3).collect();
        for rows in [1usize, 2] {
            for width in [2usize, 8] {
                let errors: Vec<f64> = (0..100_000)
                    .map(|_| {
                        let mut s =
                            LinearSketch::new(SketchKind::Count, rows, width, &mut rng).unwrap();
                        s.update_many(&keys, &counts).unwrap();
                        s.query(keys[5]) - counts[5] as f64
                    })
                    .collect();
                assert!(errors.iter().any(|&e| e != 0.0));
                mean_within(
                    &errors,
                    0.0,
                    &format!("count sketch rows {rows} width {width}"),
                );
            }
        }
    }

    #[test]
    fn sketches_are_linear_and_merge_exactly() {
        let mut rng = seeded(45);
        for kind in KINDS {
            for (rows, width) in [(1usize, 1usize), (3, 17), (5, 64)] {
                let empty = LinearSketch::new(kind, rows, width, &mut rng).unwrap();
                let (ka, ca) = batch(&mut rng, 3_000, 500, true);
                let (kb, cb) = batch(&mut rng, 2_000, 500, true);
                let mut a = empty.clone();
                for (&k, &c) in ka.iter().zip(&ca) {
                    a.update(k, c);
                }
                let mut b = empty.clone();
                b.update_many(&kb, &cb).unwrap();
                let mut union = empty.clone();
                union
                    .update_many(&[ka.clone(), kb].concat(), &[ca.clone(), cb].concat())
                    .unwrap();
                let mut merged = a.clone();
                merged.merge(&b).unwrap();
                assert_eq!(merged.cells(), union.cells(), "{kind:?} {rows} × {width}");
                assert_eq!(merged, union);
                // Removing A again (negated counts) gives B.
                let neg: Vec<i64> = ca.iter().map(|c| -c).collect();
                merged.update_many(&ka, &neg).unwrap();
                assert_eq!(merged, b);
                // Every update touches exactly one cell per row by ±count.
                let mut one = empty.clone();
                one.update(42, 5);
                for row in one.cells().chunks(width) {
                    assert_eq!(row.iter().map(|c| c.abs()).sum::<i64>(), 5);
                    assert_eq!(row.iter().filter(|&&c| c != 0).count(), 1);
                }
            }
        }
    }

    #[test]
    fn merge_refuses_different_sketches() {
        let mut rng = seeded(46);
        let mut a = LinearSketch::new(SketchKind::CountMin, 3, 10, &mut rng).unwrap();
        a.update(1, 1);
        let before = a.clone();
        let other_kind =
            LinearSketch::from_parts(SketchKind::Count, 3, 10, a.hashes().to_vec(), vec![0; 30])
                .unwrap();
        let err = a.merge(&other_kind).unwrap_err().to_string();
        assert_eq!(err, "cannot merge a Count sketch into a CountMin sketch");
        let wider = LinearSketch::new(SketchKind::CountMin, 3, 11, &mut rng).unwrap();
        let err = a.merge(&wider).unwrap_err().to_string();
        assert_eq!(
            err,
            "cannot merge sketches of different shapes: 3 × 10 and 3 × 11"
        );
        let fewer = LinearSketch::from_parts(
            SketchKind::CountMin,
            2,
            10,
            a.hashes()[..2].to_vec(),
            vec![0; 20],
        )
        .unwrap();
        assert!(a
            .merge(&fewer)
            .unwrap_err()
            .to_string()
            .contains("3 × 10 and 2 × 10"));
        let mut hashes = a.hashes().to_vec();
        hashes[2] = RowHash::random(&mut rng);
        let rehashed =
            LinearSketch::from_parts(SketchKind::CountMin, 3, 10, hashes, vec![0; 30]).unwrap();
        let err = a.merge(&rehashed).unwrap_err().to_string();
        assert!(
            err.contains("different hash functions (row 2 differs)"),
            "{err}"
        );
        assert_eq!(a, before);
    }

    #[test]
    fn update_many_and_merge_are_all_or_nothing() {
        let mut rng = seeded(47);
        for kind in KINDS {
            let mut s = LinearSketch::new(kind, 4, 8, &mut rng).unwrap();
            let (keys, counts) = batch(&mut rng, 500, 50, true);
            s.update_many(&keys, &counts).unwrap();
            let before = s.clone();
            // Length mismatch.
            assert!(s
                .update_many(&keys, &counts[1..])
                .unwrap_err()
                .to_string()
                .contains("500"));
            // A huge count late in a batch overflows after many cells changed.
            let mut bad_keys = keys.clone();
            let mut bad_counts = counts.clone();
            bad_keys.extend([7, 7, 7]);
            bad_counts.extend([i64::MAX, i64::MAX, i64::MAX]);
            let err = s.update_many(&bad_keys, &bad_counts).unwrap_err();
            assert!(matches!(err, Error::Overflow(_)), "{err}");
            assert!(err.to_string().contains("nothing was changed"));
            assert_eq!(s, before, "{kind:?}");
            // Failing on the last key of a batch undoes the others.
            let err = s.update_many(&[1, 2, 3, 8], &[1, 1, 1, i64::MIN]);
            if err.is_err() {
                assert_eq!(s, before, "{kind:?}");
            } else {
                s = before.clone();
            }
            // Merge overflow.
            let mut full =
                LinearSketch::from_parts(kind, 4, 8, before.hashes().to_vec(), vec![0; 32])
                    .unwrap();
            full.update_many(&[99, 5], &[i64::MAX - 10, 3]).unwrap();
            let mut twice = full.clone();
            let err = twice.merge(&full).unwrap_err();
            assert!(
                matches!(err, Error::Overflow(_)) && err.to_string().contains("row 0"),
                "{err}"
            );
            assert_eq!(twice, full);
        }
    }

    #[test]
    fn signed_minimum_count_is_refused_by_update_many() {
        // i64::MIN times the sign −1 overflows in the multiplication itself.
        let neg = RowHash::from_parts(0, 0, 0, 1 << 127);
        let mut s = LinearSketch::from_parts(SketchKind::Count, 1, 1, vec![neg], vec![0]).unwrap();
        assert!(matches!(
            s.update_many(&[1, 2], &[3, i64::MIN]),
            Err(Error::Overflow(_))
        ));
        assert_eq!(s.cells(), &[0]);
        s.update_many(&[1, 2], &[3, i64::MIN + 1]).unwrap();
        assert_eq!(s.cells(), &[i64::MAX - 3]);
    }

    #[test]
    fn update_saturates_instead_of_wrapping() {
        let mut rng = seeded(48);
        for kind in KINDS {
            let mut s = LinearSketch::new(kind, 2, 4, &mut rng).unwrap();
            s.update(5, i64::MAX);
            s.update(5, i64::MAX);
            assert_eq!(s.query(5), i64::MAX as f64);
            s.update(6, i64::MIN);
            s.update(6, i64::MIN);
            s.update(6, i64::MIN);
        }
    }

    #[test]
    fn noise_is_discrete_laplace_of_scale_rows_over_epsilon() {
        let mut rng = seeded(49);
        for (kind, rows, eps) in [
            (
                SketchKind::CountMin,
                3usize,
                Rational::new(3u32, 2u32).unwrap(),
            ),
            (SketchKind::Count, 5, Rational::new(1u32, 1u32).unwrap()),
        ] {
            let mut s = LinearSketch::new(kind, rows, 60_000, &mut rng).unwrap();
            let (keys, counts) = batch(&mut rng, 10_000, 1_000, true);
            s.update_many(&keys, &counts).unwrap();
            let exact = s.clone();
            let scale = s.noise_scale(&eps).unwrap();
            assert_eq!(
                scale,
                Rational::new(rows as u64, 1u32).unwrap().div(&eps).unwrap()
            );
            s.add_noise(&mut rng, &eps).unwrap();
            let noise: Vec<i64> = s
                .cells()
                .iter()
                .zip(exact.cells())
                .map(|(a, b)| a - b)
                .collect();
            let b = scale.to_f64_lossy();
            chi_square_against(&noise, |z| laplace_pmf(b, z), &format!("{kind:?} noise"));
            let as_f64: Vec<f64> = noise.iter().map(|&z| z as f64).collect();
            mean_within(&as_f64, 0.0, "noise mean");
            let p = (-1.0 / b).exp();
            let abs: Vec<f64> = as_f64.iter().map(|z| z.abs()).collect();
            mean_within(&abs, 2.0 * p / (1.0 - p * p), "mean |noise|");
            assert_eq!(s.hashes(), exact.hashes());
        }
    }

    #[test]
    fn failed_noise_changes_nothing() {
        let mut rng = seeded(50);
        let mut cells = vec![0i64; 1_000];
        cells.extend([i64::MAX; 100]);
        let hashes: Vec<RowHash> = (0..11).map(|_| RowHash::random(&mut rng)).collect();
        let mut s = LinearSketch::from_parts(SketchKind::CountMin, 11, 100, hashes, cells).unwrap();
        let before = s.clone();
        let mut twin = rng.clone();
        let eps = Rational::new(1u32, 100u32).unwrap(); // scale 1100
        let err = s.add_noise(&mut rng, &eps).unwrap_err();
        assert!(matches!(err, Error::Overflow(_)), "{err}");
        // The message names the cell, never its exact (private) count.
        assert!(!err.to_string().contains(&i64::MAX.to_string()), "{err}");
        assert_eq!(s, before);
        assert_eq!(rng.next_u64(), twin.next_u64(), "generator restored");
        // ε = 0 and a scale above 2^56 are refused before anything happens.
        let zero = Rational::new(0u32, 1u32).unwrap();
        assert_eq!(
            s.add_noise(&mut rng, &zero).unwrap_err().to_string(),
            "epsilon must be positive, got 0"
        );
        let tiny = Rational::new(1u32, 1u64 << 60).unwrap();
        assert!(s
            .add_noise(&mut rng, &tiny)
            .unwrap_err()
            .to_string()
            .contains("at most 2^56"));
        assert_eq!(s, before);
        assert_eq!(rng.next_u64(), twin.next_u64());
    }

    #[test]
    fn memory_is_fixed_at_construction() {
        let mut rng = seeded(51);
        for kind in KINDS {
            let mut s = LinearSketch::new(kind, 4, 1_000, &mut rng).unwrap();
            let m0 = s.memory_bytes();
            assert_eq!(
                m0,
                std::mem::size_of::<LinearSketch>() + LinearSketch::footprint(4, 1_000)
            );
            assert!(m0 >= 4 * 1_000 * 8);
            let other = s.clone();
            for i in 0..1_000_000u64 {
                s.update(i.wrapping_mul(0x9E37_79B9_7F4A_7C15), 1);
            }
            let (keys, counts) = batch(&mut rng, 100_000, 1 << 40, false);
            s.update_many(&keys, &counts).unwrap();
            s.merge(&other).unwrap();
            let mut out = vec![0.0; 1000];
            s.query_many(&keys[..1000], &mut out).unwrap();
            s.add_noise(&mut rng, &Rational::new(1u32, 1u32).unwrap())
                .unwrap();
            assert_eq!(s.memory_bytes(), m0);
        }
        assert_eq!(LinearSketch::footprint(usize::MAX, 3), usize::MAX);
    }
}

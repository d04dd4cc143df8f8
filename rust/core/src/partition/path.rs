//! Paths of points in the binary hierarchical partition of `[0,1]^d`.
//!
//! The root (level 0) is the whole cube. Level `l → l+1` cuts coordinate
//! `l mod d` through the middle of the current cell, so after `depth` levels
//! coordinate `j` has been cut [`cuts`]`(depth, d, j) = ⌈(depth − j)/d⌉`
//! times. A level-`l` cell is an `l`-bit integer θ whose most significant bit
//! is the first cut: θ_{l+1} = (θ_l << 1) | bit, where bit 0 is the lower half
//! and bit 1 the upper half. The level-`l` ancestor of a level-`r` path is
//! therefore `path >> (r - l)`.
//!
//! Cells are half-open `[a, b)` in every coordinate, except that `x = 1.0`
//! belongs to the top cell (all ones), so that the closed cube `[0,1]^d` is
//! covered. Equivalently, the `k`-th cut of a coordinate with value `x` takes
//! bit `⌊x·2^k⌋ mod 2` (for `x < 1`).
//!
//! Encoding is exact: `x · 2^K` (a power-of-two scaling of an `f64`) is exact,
//! and truncating a non-negative value below 2^63 to an integer is its floor,
//! so the `K` leading bits of every coordinate are computed without rounding.
//! Nothing here depends on the data beyond the point being encoded; `dim` and
//! `depth` are public parameters.

use crate::error::{invalid, Result};

/// Deepest supported level: paths are `u64` integers with `depth` bits.
pub const MAX_DEPTH: u32 = 63;

/// Number of times coordinate `coord` is cut in the first `depth` levels of a
/// `dim`-dimensional hierarchy: `⌈(depth − coord) / dim⌉`, or 0 when
/// `coord >= min(dim, depth)` (also 0 for `dim == 0`).
#[inline]
pub fn cuts(depth: u32, dim: usize, coord: usize) -> u32 {
    let depth = depth as usize;
    if dim == 0 || coord >= dim || coord >= depth {
        return 0;
    }
    ((depth - coord - 1) / dim + 1) as u32
}

/// `2^k` as an `f64`, exactly, for `-1022 <= k <= 1023`.
#[inline(always)]
fn pow2(k: i32) -> f64 {
    f64::from_bits(((1023 + k) as u64) << 52)
}

/// Check `dim` and `depth` (shared by the encoders).
fn check_shape(dim: usize, depth: u32) -> Result<()> {
    if dim == 0 {
        return Err(invalid!("dim must be at least 1, got 0"));
    }
    if depth > MAX_DEPTH {
        return Err(invalid!(
            "depth must be at most {MAX_DEPTH} (paths are 64-bit integers), got {depth}"
        ));
    }
    Ok(())
}

/// Whether `x` is a valid coordinate (a number in `[0, 1]`; NaN is not).
#[inline(always)]
fn in_unit(x: f64) -> bool {
    (0.0..=1.0).contains(&x)
}

/// The error for the invalid coordinate `x` called `name` (e.g. `points[3, 1]`).
fn bad_value(name: std::fmt::Arguments<'_>, x: f64) -> crate::error::Error {
    if x.is_nan() {
        invalid!("{name} is NaN")
    } else {
        invalid!("{name} = {x:?} is outside [0, 1]")
    }
}

/// Check that `points` can be a row-major `(n × dim)` array: `dim ≥ 1`
/// divides its length.
fn check_rows(points: &[f64], dim: usize) -> Result<()> {
    if dim == 0 {
        return Err(invalid!("dim must be at least 1, got 0"));
    }
    if points.len() % dim != 0 {
        return Err(invalid!(
            "points has {} values, which is not a multiple of dim = {dim}",
            points.len()
        ));
    }
    Ok(())
}

/// Check that `points` is a row-major `(n × dim)` array of numbers in
/// `[0, 1]` (finite, not NaN). The error names the first offending entry,
/// e.g. `points[3, 1] = 1.5 is outside [0, 1]` or `points[0, 0] is NaN`.
pub fn validate_points(points: &[f64], dim: usize) -> Result<()> {
    check_rows(points, dim)?;
    // Branch-free scan of fixed blocks (vectorizes); locate the culprit only on failure.
    let ok = points
        .chunks(256)
        .all(|block| block.iter().fold(true, |acc, &x| acc & in_unit(x)));
    if ok {
        return Ok(());
    }
    match points.iter().position(|&x| !in_unit(x)) {
        Some(i) => Err(bad_value(
            format_args!("points[{}, {}]", i / dim, i % dim),
            points[i],
        )),
        None => Ok(()),
    }
}

/// Clip a row-major `(n × dim)` array into `[0, 1]` in place (values below 0
/// become 0, above 1 become 1, infinities included). NaN is refused, naming
/// the first NaN entry; on error nothing is changed.
pub fn clip_points(points: &mut [f64], dim: usize) -> Result<()> {
    check_rows(points, dim)?;
    if let Some(i) = points.iter().position(|x| x.is_nan()) {
        return Err(invalid!("points[{}, {}] is NaN", i / dim, i % dim));
    }
    for x in points.iter_mut() {
        *x = x.clamp(0.0, 1.0);
    }
    Ok(())
}

/// Per-coordinate constants of an encoding at a given `(dim, depth)`. Only
/// the first `active = min(dim, depth) <= 63` coordinates are ever cut.
struct Layout {
    active: usize,
    /// Stride between consecutive bits of one coordinate in the path (`dim`,
    /// capped: a coordinate with two or more cuts has `dim <= 31`).
    stride: u32,
    /// `2^K_j`, exact.
    scale: [f64; MAX_DEPTH as usize],
    /// `2^K_j − 1`: the top cell, where `x = 1.0` goes.
    top: [u64; MAX_DEPTH as usize],
    /// `K_j`.
    bits: [u32; MAX_DEPTH as usize],
    /// Position in the path of the last (least significant) bit of coordinate `j`.
    shift: [u32; MAX_DEPTH as usize],
}

impl Layout {
    /// Constants for a valid `(dim, depth)` (checked by the caller).
    fn new(dim: usize, depth: u32) -> Self {
        let active = dim.min(depth as usize);
        let mut layout = Self {
            active,
            stride: dim.min(64) as u32,
            scale: [1.0; MAX_DEPTH as usize],
            top: [0; MAX_DEPTH as usize],
            bits: [0; MAX_DEPTH as usize],
            shift: [0; MAX_DEPTH as usize],
        };
        for j in 0..active {
            let k = cuts(depth, dim, j);
            layout.bits[j] = k;
            layout.scale[j] = pow2(k as i32);
            layout.top[j] = (1u64 << k) - 1;
            // k <= 63 here, so the shift above is fine. The last cut of coordinate j is cut number j + dim·(k − 1), at
            // path position depth − 1 − that; k >= 1 here.
            layout.shift[j] = (depth as usize - 1 - j - dim * (k as usize - 1)) as u32;
        }
        layout
    }

    /// `⌊x · 2^K_j⌋`, with `x = 1` in the top cell. `x` must be in `[0, 1]`:
    /// the product is then exact and below 2^63 + 1, and truncation is floor.
    #[inline(always)]
    fn quantize(&self, j: usize, x: f64) -> u64 {
        ((x * self.scale[j]) as u64).min(self.top[j])
    }

    /// The path of one validated row, for any `dim`.
    #[inline(always)]
    fn encode_generic(&self, row: &[f64]) -> u64 {
        let mut theta = 0u64;
        for (j, &x) in row.iter().enumerate().take(self.active) {
            let q = self.quantize(j, x);
            theta |= spread(q, self.stride, self.bits[j]) << self.shift[j];
        }
        theta
    }
}

/// Place bit `i` of `q` (for `i < bits`) at position `i · stride`. The caller
/// guarantees `(bits − 1) · stride < 64`.
#[inline(always)]
fn spread(q: u64, stride: u32, bits: u32) -> u64 {
    let mut out = 0u64;
    for i in 0..bits {
        out |= ((q >> i) & 1) << (i * stride);
    }
    out
}

/// `x = q & first`, then `x = (x | (x << shift)) & mask` for each step: a
/// bit spread in `log2(bits)` shift-and-mask rounds (unrolled when inlined).
#[inline(always)]
fn spread_rounds(q: u64, first: u64, rounds: &[(u32, u64)]) -> u64 {
    let mut x = q & first;
    for &(shift, mask) in rounds {
        x = (x | (x << shift)) & mask;
    }
    x
}

/// Place bit `i` of `q < 2^32` at position `2i`.
#[inline(always)]
fn spread2(q: u64) -> u64 {
    const ROUNDS: [(u32, u64); 5] = [
        (16, 0x0000_FFFF_0000_FFFF),
        (8, 0x00FF_00FF_00FF_00FF),
        (4, 0x0F0F_0F0F_0F0F_0F0F),
        (2, 0x3333_3333_3333_3333),
        (1, 0x5555_5555_5555_5555),
    ];
    spread_rounds(q, 0xFFFF_FFFF, &ROUNDS)
}

/// Place bit `i` of `q < 2^21` at position `3i`.
#[inline(always)]
fn spread3(q: u64) -> u64 {
    const ROUNDS: [(u32, u64); 5] = [
        (32, 0x001F_0000_0000_FFFF),
        (16, 0x001F_0000_FF00_00FF),
        (8, 0x100F_00F0_0F00_F00F),
        (4, 0x10C3_0C30_C30C_30C3),
        (2, 0x1249_2492_4924_9249),
    ];
    spread_rounds(q, 0x1F_FFFF, &ROUNDS)
}

/// Path of one point (`point.len() == dim >= 1`, every coordinate in
/// `[0, 1]`) at level `depth` (`0..=MAX_DEPTH`): a `depth`-bit integer.
/// Exact: bit `k` of coordinate `x` is `⌊x·2^k⌋ mod 2`.
pub fn encode_point(point: &[f64], depth: u32) -> Result<u64> {
    let dim = point.len();
    check_shape(dim, depth)?;
    if let Some(j) = point.iter().position(|&x| !in_unit(x)) {
        return Err(bad_value(format_args!("point[{j}]"), point[j]));
    }
    Ok(Layout::new(dim, depth).encode_generic(point))
}

/// Paths of row-major `(n × dim)` points at level `depth` into `out`
/// (`out.len() == n`). Everything is validated first (shape, then every
/// value finite and in `[0, 1]`, naming the row and column of the first bad
/// one); on error `out` is untouched.
///
/// Hot path of PrivHP updates: per point, one multiply by `2^K`, one
/// truncation and one clamp per coordinate, then a bit interleave (magic-mask
/// spreading for `dim` 2 and 3, a bit loop otherwise).
pub fn encode_points(points: &[f64], dim: usize, depth: u32, out: &mut [u64]) -> Result<()> {
    check_shape(dim, depth)?;
    validate_points(points, dim)?;
    let n = points.len() / dim;
    if out.len() != n {
        return Err(invalid!(
            "out has length {} but points holds {n} rows of dim {dim}",
            out.len()
        ));
    }
    let layout = Layout::new(dim, depth);
    let rows = points.chunks_exact(dim).zip(out.iter_mut());
    match (dim, layout.active) {
        (_, 0) => {
            for (_, o) in rows {
                *o = 0;
            }
        }
        (1, _) => {
            for (row, o) in rows {
                *o = layout.quantize(0, row[0]);
            }
        }
        (2, 2) => {
            // K_0 <= 32 and K_1 <= 31 at depth <= 63: spread2 applies.
            let (s0, s1) = (layout.shift[0], layout.shift[1]);
            for (row, o) in rows {
                let q0 = layout.quantize(0, row[0]);
                let q1 = layout.quantize(1, row[1]);
                *o = (spread2(q0) << s0) | (spread2(q1) << s1);
            }
        }
        (3, 3) => {
            // K_j <= 21 at depth <= 63: spread3 applies.
            let (s0, s1, s2) = (layout.shift[0], layout.shift[1], layout.shift[2]);
            for (row, o) in rows {
                let q0 = layout.quantize(0, row[0]);
                let q1 = layout.quantize(1, row[1]);
                let q2 = layout.quantize(2, row[2]);
                *o = (spread3(q0) << s0) | (spread3(q1) << s1) | (spread3(q2) << s2);
            }
        }
        _ => {
            for (row, o) in rows {
                *o = layout.encode_generic(row);
            }
        }
    }
    Ok(())
}

/// Check that `theta` names a cell at `level`: `level <= MAX_DEPTH` and
/// `theta < 2^level`. For paths read from untrusted input before
/// [`cell_bounds`].
pub fn validate_cell(theta: u64, level: u32) -> Result<()> {
    if level > MAX_DEPTH {
        return Err(invalid!("level must be at most {MAX_DEPTH}, got {level}"));
    }
    if theta >> level != 0 {
        return Err(invalid!(
            "cell {theta} does not exist at level {level} (paths there are below 2^{level})"
        ));
    }
    Ok(())
}

/// Lower and upper corners of cell `theta` at `level` in `[0,1]^dim`.
///
/// Coordinate `j` of the cell is `[q·2^-K, (q+1)·2^-K)` with `K` =
/// [`cuts`]`(level, dim, j)` and `q` its `K` bits of `theta`; uncut
/// coordinates are `[0, 1]`. The corners are exact when `K <= 53` (always
/// for `dim >= 2`, whose coordinates get at most 32 cuts); for `dim = 1` and
/// `level > 53` they are rounded to the nearest `f64` (ties to even), so a
/// corner may then coincide with a neighbouring cell's.
///
/// Writes `min(dim, lower.len(), upper.len())` coordinates. Never panics: an
/// invalid cell (`level > MAX_DEPTH` or `theta >= 2^level`, see
/// [`validate_cell`]) writes NaN corners, and `dim == 0` writes nothing.
pub fn cell_bounds(theta: u64, level: u32, dim: usize, lower: &mut [f64], upper: &mut [f64]) {
    let n = dim.min(lower.len()).min(upper.len());
    if dim == 0 {
        return;
    }
    if validate_cell(theta, level).is_err() {
        lower[..n].fill(f64::NAN);
        upper[..n].fill(f64::NAN);
        return;
    }
    // Each coordinate's bits, most significant (first cut) first.
    let mut q = [0u64; MAX_DEPTH as usize];
    for c in 0..level {
        let j = c as usize % dim;
        q[j] = (q[j] << 1) | ((theta >> (level - 1 - c)) & 1);
    }
    for (j, (lo, hi)) in lower[..n].iter_mut().zip(&mut upper[..n]).enumerate() {
        let k = cuts(level, dim, j);
        if k == 0 {
            *lo = 0.0;
            *hi = 1.0;
        } else {
            // u64 → f64 rounds to nearest (exact below 2^53); scaling by 2^-K is exact.
            let unit = pow2(-(k as i32));
            *lo = q[j] as f64 * unit;
            *hi = (q[j] + 1) as f64 * unit;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rational::decode_f64;
    use crate::rng::Rng;

    /// Bit `k >= 1` of `x` in `[0, 1)`: `⌊x·2^k⌋ mod 2`, in integer arithmetic
    /// from the exact mantissa and exponent (independent of the encoder).
    fn ref_bit(x: f64, k: u32) -> u64 {
        if x == 1.0 {
            return 1;
        }
        let (m, e) = decode_f64(x);
        let m = m.unsigned_abs() as u128;
        let shift = e + k as i32;
        let floor = if shift >= 0 {
            m << shift
        } else if -shift >= 128 {
            0
        } else {
            m >> (-shift)
        };
        (floor & 1) as u64
    }

    /// The path by the definition: cut `c` takes bit `c/dim + 1` of coordinate `c mod dim`.
    fn ref_path(point: &[f64], depth: u32) -> u64 {
        let dim = point.len();
        (0..depth).fold(0u64, |theta, c| {
            let x = point[c as usize % dim];
            (theta << 1) | ref_bit(x, c / dim as u32 + 1)
        })
    }

    fn uniform(rng: &mut Rng) -> f64 {
        (rng.next_u64() >> 11) as f64 * pow2(-53)
    }

    /// Random coordinates, with many dyadic boundaries and extremes mixed in.
    fn coordinate(rng: &mut Rng) -> f64 {
        match rng.below_u64(8) {
            0 => [
                0.0,
                1.0,
                -0.0,
                0.5,
                1.0 - pow2(-53),
                f64::from_bits(1),
                pow2(-63),
            ][rng.below_u64(7) as usize],
            1 => {
                let m = rng.below_u64(40) as i32;
                rng.below_u64((1u64 << m) + 1) as f64 * pow2(-m)
            }
            2 => uniform(rng) * pow2(-(rng.below_u64(200) as i32)),
            _ => uniform(rng),
        }
    }

    #[test]
    fn cuts_are_round_robin() {
        assert_eq!((0..2).map(|j| cuts(5, 2, j)).collect::<Vec<_>>(), [3, 2]);
        assert_eq!(
            (0..4).map(|j| cuts(2, 4, j)).collect::<Vec<_>>(),
            [1, 1, 0, 0]
        );
        assert_eq!(cuts(63, 1, 0), 63);
        assert_eq!(cuts(63, 2, 0), 32);
        assert_eq!(cuts(0, 3, 0), 0);
        assert_eq!(cuts(10, 0, 0), 0);
        for depth in 0..=MAX_DEPTH {
            for dim in 1..70 {
                let total: u32 = (0..dim).map(|j| cuts(depth, dim, j)).sum();
                assert_eq!(total, depth);
            }
        }
    }

    #[test]
    fn small_examples() {
        // d = 2, depth 3: cut 0 halves x0 (0.75 → 1), cut 1 halves x1 (0.25 → 0),
        // cut 2 halves x0 again (⌊3⌋ mod 2 = 1).
        assert_eq!(encode_point(&[0.75, 0.25], 3).unwrap(), 0b101);
        assert_eq!(encode_point(&[1.0, 1.0], 3).unwrap(), 0b111);
        assert_eq!(encode_point(&[0.0, 0.0], 3).unwrap(), 0);
        assert_eq!(encode_point(&[0.5, 0.5], 2).unwrap(), 0b11);
        assert_eq!(encode_point(&[0.3], 0).unwrap(), 0);
        assert_eq!(encode_point(&[1.0], 63).unwrap(), u64::MAX >> 1);
        assert_eq!(
            encode_point(&[0.5 - pow2(-53)], 63).unwrap(),
            (1u64 << 62) - 1 - 1023
        );
        let mut lo = [0.0; 2];
        let mut hi = [0.0; 2];
        cell_bounds(0b101, 3, 2, &mut lo, &mut hi);
        assert_eq!((lo, hi), ([0.75, 0.0], [1.0, 0.5]));
        cell_bounds(0, 0, 2, &mut lo, &mut hi);
        assert_eq!((lo, hi), ([0.0, 0.0], [1.0, 1.0]));
    }

    #[test]
    fn matches_the_definition_bit_by_bit() {
        let mut rng = Rng::seed_from_u64(11);
        let dims = [1usize, 2, 3, 4, 5, 7, 31, 32, 64, 100];
        for &dim in &dims {
            for depth in (0..=MAX_DEPTH).step_by(if dim > 5 { 7 } else { 1 }) {
                let n = 200;
                let points: Vec<f64> = (0..n * dim).map(|_| coordinate(&mut rng)).collect();
                let mut out = vec![0u64; n];
                encode_points(&points, dim, depth, &mut out).unwrap();
                for (row, &theta) in points.chunks_exact(dim).zip(&out) {
                    let want = ref_path(row, depth);
                    assert_eq!(theta, want, "dim {dim} depth {depth} point {row:?}");
                    assert_eq!(encode_point(row, depth).unwrap(), want);
                    assert_eq!(theta >> depth, 0);
                }
            }
        }
    }

    #[test]
    fn points_lie_in_their_cells_and_prefixes_are_ancestors() {
        let mut rng = Rng::seed_from_u64(12);
        let mut lo = vec![0.0; 8];
        let mut hi = vec![0.0; 8];
        for _ in 0..20_000 {
            let dim = 1 + rng.below_u64(6) as usize;
            let depth = rng.below_u64(u64::from(MAX_DEPTH) + 1) as u32;
            let point: Vec<f64> = (0..dim).map(|_| coordinate(&mut rng)).collect();
            let theta = encode_point(&point, depth).unwrap();
            cell_bounds(theta, depth, dim, &mut lo, &mut hi);
            for j in 0..dim {
                let k = cuts(depth, dim, j);
                let x = point[j];
                if k <= 53 {
                    assert!(lo[j] <= x, "{x} below {} (d {dim} depth {depth})", lo[j]);
                    assert!(x < hi[j] || (x == 1.0 && hi[j] == 1.0), "{x} >= {}", hi[j]);
                    assert_eq!(hi[j] - lo[j], pow2(-(k as i32)));
                } else {
                    // Rounding to nearest is monotone, so the rounded corners still enclose x.
                    assert!(
                        lo[j] <= x && x <= hi[j],
                        "{x} outside [{}, {}]",
                        lo[j],
                        hi[j]
                    );
                }
            }
            for l in 0..=depth {
                assert_eq!(encode_point(&point, l).unwrap(), theta >> (depth - l));
            }
        }
    }

    #[test]
    fn children_halve_the_parent_along_the_next_coordinate() {
        let mut rng = Rng::seed_from_u64(13);
        let (mut plo, mut phi) = ([0.0; 4], [0.0; 4]);
        let (mut alo, mut ahi) = ([0.0; 4], [0.0; 4]);
        let (mut blo, mut bhi) = ([0.0; 4], [0.0; 4]);
        for _ in 0..5_000 {
            let dim = 1 + rng.below_u64(4) as usize;
            let level = rng.below_u64(53) as u32;
            let theta = rng.next_u64() & ((1u64 << level) - 1);
            cell_bounds(theta, level, dim, &mut plo, &mut phi);
            cell_bounds(theta << 1, level + 1, dim, &mut alo, &mut ahi);
            cell_bounds((theta << 1) | 1, level + 1, dim, &mut blo, &mut bhi);
            let cut = level as usize % dim;
            for j in 0..dim {
                if j == cut {
                    let mid = (plo[j] + phi[j]) / 2.0;
                    assert_eq!((alo[j], ahi[j]), (plo[j], mid));
                    assert_eq!((blo[j], bhi[j]), (mid, phi[j]));
                } else {
                    assert_eq!((alo[j], ahi[j]), (plo[j], phi[j]));
                    assert_eq!((blo[j], bhi[j]), (plo[j], phi[j]));
                }
            }
        }
    }

    #[test]
    fn deep_corners_are_rounded_to_nearest() {
        let (mut lo, mut hi) = ([0.0], [0.0]);
        cell_bounds(1, 63, 1, &mut lo, &mut hi);
        assert_eq!((lo[0], hi[0]), (pow2(-63), pow2(-62)));
        // (2^63 − 1)·2^-63 = 1 − 2^-63 rounds to 1.0.
        cell_bounds(u64::MAX >> 1, 63, 1, &mut lo, &mut hi);
        assert_eq!((lo[0], hi[0]), (1.0, 1.0));
        // Exactly 53 cuts: exact.
        cell_bounds((1u64 << 53) - 1, 53, 1, &mut lo, &mut hi);
        assert_eq!((lo[0], hi[0]), (1.0 - pow2(-53), 1.0));
    }

    #[test]
    fn invalid_cells_give_nan_and_never_panic() {
        let (mut lo, mut hi) = ([0.0; 3], [0.0; 3]);
        cell_bounds(8, 3, 3, &mut lo, &mut hi);
        assert!(lo.iter().chain(&hi).all(|x| x.is_nan()));
        cell_bounds(0, 64, 3, &mut lo, &mut hi);
        assert!(lo.iter().chain(&hi).all(|x| x.is_nan()));
        // Short buffers: only what fits is written; dim 0 writes nothing.
        let (mut lo, mut hi) = ([5.0; 1], [5.0; 2]);
        cell_bounds(0b11, 2, 2, &mut lo, &mut hi);
        assert_eq!((lo, hi), ([0.5], [1.0, 5.0]));
        cell_bounds(0, 0, 0, &mut lo, &mut hi);
        assert!(validate_cell(7, 3).is_ok());
        assert!(validate_cell(0, 63).is_ok());
        assert!(validate_cell(u64::MAX >> 1, 63).is_ok());
        assert!(validate_cell(8, 3)
            .unwrap_err()
            .to_string()
            .contains("level 3"));
        assert!(validate_cell(0, 64).is_err());
    }

    #[test]
    fn bad_input_is_refused_with_a_named_entry() {
        let mut out = [7u64; 2];
        let err = |points: &[f64], dim: usize, depth: u32, out: &mut [u64]| {
            encode_points(points, dim, depth, out)
                .unwrap_err()
                .to_string()
        };
        let msg = err(&[0.1, 0.2, 0.3, 1.5], 2, 4, &mut out);
        assert_eq!(msg, "points[1, 1] = 1.5 is outside [0, 1]");
        let msg = err(&[f64::NAN, 0.2, 0.3, 0.5], 2, 4, &mut out);
        assert_eq!(msg, "points[0, 0] is NaN");
        let msg = err(&[0.1, 0.2, f64::NEG_INFINITY, 0.5], 2, 4, &mut out);
        assert_eq!(msg, "points[1, 0] = -inf is outside [0, 1]");
        let msg = err(&[0.1, -1e-300, 0.3, 0.5], 2, 4, &mut out);
        assert!(msg.starts_with("points[0, 1] = -"), "{msg}");
        assert!(err(&[0.1; 4], 0, 4, &mut out).contains("dim"));
        assert!(err(&[0.1; 4], 2, 64, &mut out).contains("depth"));
        assert!(err(&[0.1; 5], 2, 4, &mut out).contains("multiple of dim"));
        assert!(err(&[0.1; 6], 2, 4, &mut out).contains("out has length 2"));
        assert_eq!(out, [7, 7], "out untouched on error");
        assert!(encode_point(&[], 3).is_err());
        assert_eq!(
            encode_point(&[0.5, 2.0], 3).unwrap_err().to_string(),
            "point[1] = 2.0 is outside [0, 1]"
        );
        assert!(encode_point(&[0.5], 64).is_err());
        // The last row of a long batch is checked too.
        let mut big = vec![0.5; 3000];
        big[2999] = f64::INFINITY;
        assert_eq!(
            validate_points(&big, 3).unwrap_err().to_string(),
            "points[999, 2] = inf is outside [0, 1]"
        );
        assert!(validate_points(&[], 3).is_ok());
        encode_points(&[], 3, 10, &mut []).unwrap();
    }

    #[test]
    fn clipping() {
        let mut p = [-0.5, 0.25, 1.5, f64::INFINITY, f64::NEG_INFINITY, 1.0];
        clip_points(&mut p, 2).unwrap();
        assert_eq!(p, [0.0, 0.25, 1.0, 1.0, 0.0, 1.0]);
        let mut q = [2.0, 0.1, 0.2, f64::NAN];
        assert_eq!(
            clip_points(&mut q, 2).unwrap_err().to_string(),
            "points[1, 1] is NaN"
        );
        assert_eq!(q[0], 2.0, "nothing changed on error");
        assert!(clip_points(&mut q, 3).is_err());
        assert!(clip_points(&mut q, 0).is_err());
    }

    #[test]
    fn spreads_match_the_loop() {
        let mut rng = Rng::seed_from_u64(14);
        for _ in 0..10_000 {
            let q = rng.next_u64();
            assert_eq!(spread2(q & 0xFFFF_FFFF), spread(q, 2, 32));
            assert_eq!(spread3(q & 0x1F_FFFF), spread(q, 3, 21));
        }
    }
}

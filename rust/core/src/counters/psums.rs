//! The p-sums of the binary mechanism (Chan, Shi, Song 2011, Section 3.4),
//! shared by the [binary tree](super::CounterKind::BinaryTree) counter and the
//! epoch trees of the [hybrid](super::CounterKind::Hybrid) counter.
//!
//! Items are numbered `τ = 1, 2, …` within the tree. Item `τ` closes the
//! dyadic interval `(τ − 2^i, τ]` with `i` the number of trailing zeros of
//! `τ`, whose exact sum plus fresh noise is the noisy p-sum of level `i`. The
//! release at `τ` is the sum of the noisy p-sums of the binary decomposition
//! of `τ`: one interval of length `2^j` per set bit `j` of `τ`, and these
//! intervals partition `(0, τ]`.
//!
//! Because they partition `(0, τ]`, the sum of the noisy p-sums equals the
//! exact prefix sum plus the sum of their noise terms, exactly (integers).
//! The counter keeps the exact prefix sum once; this structure keeps only the
//! *noise* of the p-sums in the current decomposition, at most one
//! `dim`-vector per level: `O(dim · levels)` memory. When item `τ` arrives,
//! the p-sums of levels `0 … i−1` (the set bits of `τ − 1` below `i`) merge
//! into the new level-`i` p-sum: their noise is retired and the new noise
//! takes level `i`. The released values are the same random variables as in
//! the textbook mechanism, which stores every noisy p-sum.

use super::vector::{replace_into, zeros};
use crate::error::{invalid, Error, Result};
use crate::state::{Reader, Writer};

/// Noise of the p-sums in the binary decomposition of the local time.
#[derive(Clone, Debug)]
pub(crate) struct PSums {
    dim: usize,
    levels: u32,
    /// `levels × dim`, level-major: row `j` is the noise of the level-`j`
    /// p-sum when bit `j` of `local` is set, and zero otherwise.
    noise: Vec<i64>,
    /// Items seen by this tree.
    local: u64,
}

impl PSums {
    /// A tree with room for `levels` levels: items `1 … 2^levels − 1`.
    pub(crate) fn new(dim: usize, levels: u32) -> Result<Self> {
        let n = dim
            .checked_mul(levels as usize)
            .ok_or_else(|| invalid!("dim × levels is too large"))?;
        Ok(Self {
            dim,
            levels,
            noise: zeros(n, "the p-sum noise")?,
            local: 0,
        })
    }

    /// A tree of `levels` levels that allocates its noise only as items
    /// arrive (`O(dim · log items)` instead of `O(dim · levels)`): for the
    /// many small counters of the online synthesizer, most of which never
    /// see an item.
    pub(crate) fn growing(dim: usize, levels: u32) -> Self {
        Self {
            dim,
            levels,
            noise: Vec::new(),
            local: 0,
        }
    }

    /// Items seen.
    pub(crate) fn items(&self) -> u64 {
        self.local
    }

    /// Levels the tree has room for.
    pub(crate) fn levels(&self) -> u32 {
        self.levels
    }

    /// The level of the p-sum that the next item closes.
    pub(crate) fn next_level(&self) -> Result<u32> {
        let i = self.local.wrapping_add(1).trailing_zeros();
        if i >= self.levels {
            return Err(invalid!(
                "a tree of {} levels holds {} items; it is full",
                self.levels,
                (1u128 << self.levels) - 1
            ));
        }
        Ok(i)
    }

    /// The noise of the release after the next item: `prev + z` minus the
    /// noise of the p-sums that the new level-`i` p-sum replaces. Pure.
    pub(crate) fn stage(&self, z: &[i64], prev: &[i64], out: &mut [i64]) -> Result<()> {
        let i = self.next_level()? as usize;
        // Levels a growing tree has not reached hold no noise.
        let held = (i * self.dim).min(self.noise.len());
        replace_into(prev, z, &self.noise[..held], out)
    }

    /// Record the next item, whose level-`i` p-sum got noise `z`. Call only
    /// after a successful [`PSums::stage`].
    pub(crate) fn commit(&mut self, z: &[i64]) {
        let Ok(i) = self.next_level() else { return };
        let i = i as usize;
        if self.noise.len() < (i + 1) * self.dim {
            // Exact growth: the footprint is a function of the items, also after a reload.
            self.noise
                .reserve_exact((i + 1) * self.dim - self.noise.len());
            self.noise.resize((i + 1) * self.dim, 0);
        }
        self.noise[..i * self.dim].fill(0);
        self.noise[i * self.dim..(i + 1) * self.dim].copy_from_slice(z);
        self.local += 1;
    }

    /// Make sure that [`PSums::restart`] with `levels` will not allocate.
    pub(crate) fn reserve(&mut self, levels: u32) -> Result<()> {
        let n = self
            .dim
            .checked_mul(levels as usize)
            .ok_or_else(|| invalid!("dim × levels is too large"))?;
        self.noise
            .try_reserve_exact(n.saturating_sub(self.noise.len()))
            .map_err(|_| Error::OutOfMemory(format!("cannot allocate {n} p-sum noise values")))
    }

    /// Start a new, empty tree of `levels` levels (after [`PSums::reserve`]).
    pub(crate) fn restart(&mut self, levels: u32) {
        self.noise.clear();
        self.noise.resize(self.dim * levels as usize, 0);
        self.levels = levels;
        self.local = 0;
    }

    /// Encode the items and noise (the dimension and levels are public
    /// parameters the reader supplies).
    pub(crate) fn write(&self, w: &mut Writer) {
        w.u64(self.local);
        w.u64(self.noise.len() as u64);
        for z in &self.noise {
            w.i64(*z);
        }
    }

    /// Decode [`PSums::write`] output for a growing tree of `dim` × `levels`.
    pub(crate) fn read(r: &mut Reader<'_>, dim: usize, levels: u32) -> Result<Self> {
        let local = r.u64()?;
        let n = r.count(8)?;
        let full = dim.saturating_mul(levels as usize);
        if n > full || n % dim.max(1) != 0 || (levels < 64 && local >> levels != 0) {
            return Err(invalid!(
                "invalid dpstream state: p-sums do not fit their tree"
            ));
        }
        let mut noise = (0..n).map(|_| r.i64()).collect::<Result<Vec<_>>>()?;
        noise.shrink_to_fit(); // hold what the original held
        Ok(Self {
            dim,
            levels,
            noise,
            local,
        })
    }

    /// Check decoded p-sums: the rows held cover the set bits of the local
    /// time and the rows of unset bits are zero (what [`PSums::commit`] and
    /// [`PSums::restart`] keep); a `full` tree holds every level's row.
    pub(crate) fn validate(&self, full: bool) -> Result<()> {
        let dim = self.dim.max(1);
        let rows = self.noise.len() / dim;
        let covered = rows >= 64 || self.local >> rows == 0;
        let full_ok = !full || self.noise.len() == self.dim.saturating_mul(self.levels as usize);
        let zero_ok =
            self.noise.chunks_exact(dim).enumerate().all(|(j, row)| {
                (j < 64 && self.local >> j & 1 == 1) || row.iter().all(|z| *z == 0)
            });
        if !(covered && full_ok && zero_ok) {
            return Err(invalid!(
                "invalid dpstream state: p-sums do not match their item count"
            ));
        }
        Ok(())
    }

    /// `out = Σ` of the noise rows: the noise these p-sums put in a release
    /// (`out` has `dim` values). Fails when it exceeds the `i64` range.
    pub(crate) fn noise_total(&self, out: &mut [i64]) -> Result<()> {
        let dim = self.dim.max(1);
        for (c, o) in out.iter_mut().enumerate() {
            let acc: i128 = self
                .noise
                .chunks_exact(dim)
                .map(|row| i128::from(row[c]))
                .sum();
            *o = i64::try_from(acc)
                .map_err(|_| invalid!("invalid dpstream state: p-sum noise out of range"))?;
        }
        Ok(())
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.noise.capacity() * std::mem::size_of::<i64>()
    }

    /// Number of noise vectors in the current decomposition (set bits of the local time).
    #[cfg(test)]
    pub(crate) fn terms(&self) -> u32 {
        self.local.count_ones()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retires_exactly_the_merged_levels() {
        // Noise z_τ = τ·10^k per coordinate k makes every term identifiable.
        let dim = 2;
        let mut p = PSums::new(dim, 4).unwrap();
        let mut total = vec![0i64; dim];
        let mut out = vec![0i64; dim];
        for tau in 1..=15u64 {
            let z = [tau as i64, 100 * tau as i64];
            p.stage(&z, &total, &mut out).unwrap();
            p.commit(&z);
            total.copy_from_slice(&out);
            // Brute force: the noise terms of the decomposition of τ are the
            // items that closed each of its intervals, i.e. the ends of the
            // dyadic intervals (start, start + 2^j] for the set bits j of τ.
            let mut expect = 0i64;
            let mut start = 0u64;
            for j in (0..4).rev() {
                if tau >> j & 1 == 1 {
                    start += 1 << j;
                    expect += start as i64;
                }
            }
            assert_eq!(total, vec![expect, 100 * expect], "τ = {tau}");
            assert_eq!(p.terms(), tau.count_ones());
        }
        // Full at 2^4 − 1 items.
        assert!(p.next_level().is_err());
        assert!(p.stage(&[0, 0], &total, &mut out).is_err());
        p.reserve(6).unwrap();
        let cap = p.heap_bytes();
        p.restart(6);
        assert_eq!(p.heap_bytes(), cap);
        assert_eq!(p.next_level().unwrap(), 0);
    }
}

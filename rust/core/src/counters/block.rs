//! Block counters: Chan, Shi, Song 2011, "Two-Level Counting Mechanism", and
//! its unbounded extension, Algorithm 4 ("Unbounded Block Counter") of
//! Kumar, Strohmer, Vershynin.
//!
//! Time is cut into blocks. At a time `t` that ends a block, the block's exact
//! sum plus noise is added to the running total of noisy block sums, and the
//! release is that total. At any other time, the increment plus noise is
//! added to the noisy sum of the current block, and the release is the total
//! of the finished blocks plus the noisy sum of the current block so far.
//! Both kinds of noise are `DiscreteLaplace(2/ε)`: an increment enters at
//! most one block sum and at most one step value (exactly one when it ends a
//! block), so the counter is ε-DP (`ε/2` per family; see
//! [`super::split`]). The release at `t` carries one noise term per finished
//! block and one per step of the current block.
//!
//! * **Bounded** ([`super::CounterKind::Block`]): horizon `T`, blocks of
//!   `B = ⌈√T⌉` steps. The error has at most `T/B + B − 1 ≤ 2√T` noise
//!   terms: standard deviation `O(T^{1/4} / ε)`.
//! * **Unbounded** ([`super::CounterKind::UnboundedBlock`], Algorithm 4):
//!   intervals of `4, 9, 16, …` steps, cut into blocks of `2, 3, 4, …` steps
//!   (interval `B²` holds `B` blocks of size `B`; the schedule depends only
//!   on time). By time `t ≈ B³/3` about `B²/2` blocks have finished, so the
//!   error has `O(t^{2/3})` noise terms: standard deviation
//!   `O(t^{1/3} / ε)`, growing without a horizon.
//!
//! The counter keeps the exact running sum once, so the noisy block sums need
//! not be stored: only their noise total (one `dim`-vector). Memory `O(dim)`.

use super::split::Share;
use super::vector::add_into;
use super::NoiseProcess;
use crate::error::{invalid, Result};
use crate::noise::DiscreteLaplace;
use crate::state::{Reader, Writer};

/// Where blocks end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Schedule {
    /// Blocks of `size` steps from time 1 on.
    Fixed { size: u64 },
    /// Algorithm 4: blocks of `size` steps counted from `start` (the last
    /// time an interval ended); the interval ends after `size²` steps, and
    /// then `size` grows by one.
    Growing { size: u64, start: u64 },
}

impl Schedule {
    /// The block size of a bounded block counter with this horizon: `⌈√T⌉`.
    pub(crate) fn for_horizon(horizon: u64) -> Self {
        let r = horizon.isqrt();
        let size = if r * r == horizon { r } else { r + 1 };
        Self::Fixed { size: size.max(1) }
    }

    /// Algorithm 4's initial state: `B = 2`, `t_atPartition = 0`.
    pub(crate) fn unbounded() -> Self {
        Self::Growing { size: 2, start: 0 }
    }

    /// Whether time `t` ends a block (line 13: `δ = k·B`).
    pub(crate) fn ends_block(&self, t: u64) -> bool {
        match *self {
            Self::Fixed { size } => t % size == 0,
            Self::Growing { size, start } => (t - start) % size == 0,
        }
    }

    /// The schedule after `t` steps of a counter that started with `self`
    /// (as if [`Schedule::advance`] had run at `1, …, t`). `O(t^{1/3})`
    /// iterations for the unbounded schedule: at most about `4·10^6`.
    pub(crate) fn after(self, t: u64) -> Self {
        match self {
            Self::Fixed { .. } => self,
            Self::Growing {
                mut size,
                mut start,
            } => {
                // An interval that starts at `start` ends at `start + size²`.
                while let Some(end) = size
                    .checked_mul(size)
                    .and_then(|len| start.checked_add(len))
                    .filter(|end| *end <= t)
                {
                    start = end;
                    size += 1;
                }
                Self::Growing { size, start }
            }
        }
    }

    /// Move past time `t` (lines 17–19: at `δ = T = B²`, a new interval).
    pub(crate) fn advance(&mut self, t: u64) {
        if let Self::Growing { size, start } = self {
            if t - *start == size.saturating_mul(*size) {
                *start = t;
                *size += 1;
            }
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Block {
    schedule: Schedule,
    block: DiscreteLaplace,
    step: DiscreteLaplace,
    /// Sum of the noise of every finished block sum.
    blocks_noise: Vec<i64>,
}

impl Block {
    pub(crate) fn new(shares: &[Share], schedule: Schedule, dim: usize) -> Result<Self> {
        Ok(Self {
            schedule,
            block: DiscreteLaplace::new(&shares[0].scale(0)?)?,
            step: DiscreteLaplace::new(&shares[1].scale(0)?)?,
            blocks_noise: super::vector::zeros(dim, "the block noise")?,
        })
    }

    #[cfg(test)]
    pub(crate) fn schedule(&self) -> Schedule {
        self.schedule
    }
}

impl NoiseProcess for Block {
    /// Encode the noise of the finished blocks (the schedule follows from time).
    fn write_state(&self, w: &mut Writer) {
        for z in &self.blocks_noise {
            w.i64(*z);
        }
    }

    fn read_state(&mut self, r: &mut Reader<'_>, time: u64, noise: &[i64]) -> Result<()> {
        for z in self.blocks_noise.iter_mut() {
            *z = r.i64()?;
        }
        let start = self.schedule;
        self.schedule = start.after(time);
        // A step that ends a block leaves exactly the block sums' noise.
        let consistent = match time {
            0 => self.blocks_noise.iter().all(|z| *z == 0),
            t => !start.after(t - 1).ends_block(t) || self.blocks_noise == noise,
        };
        if !consistent {
            return Err(invalid!(
                "invalid dpstream state: the block noise does not match the release"
            ));
        }
        Ok(())
    }

    fn sampler(&self, t: u64) -> Result<&DiscreteLaplace> {
        Ok(if self.schedule.ends_block(t) {
            &self.block
        } else {
            &self.step
        })
    }

    fn stage(&self, t: u64, z: &[i64], prev: &[i64], out: &mut [i64]) -> Result<()> {
        if self.schedule.ends_block(t) {
            // The step values of the block are replaced by its block sum.
            add_into(&self.blocks_noise, z, out, "noise of the running sum")
        } else {
            add_into(prev, z, out, "noise of the running sum")
        }
    }

    fn commit(&mut self, t: u64, _z: &[i64], noise: &[i64]) {
        if self.schedule.ends_block(t) {
            self.blocks_noise.copy_from_slice(noise);
        }
        self.schedule.advance(t);
    }

    fn heap_bytes(&self) -> usize {
        self.blocks_noise.capacity() * std::mem::size_of::<i64>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_4_schedule() {
        // Intervals of 4, 9, 16, 25 steps with blocks of 2, 3, 4, 5.
        let mut s = Schedule::unbounded();
        let mut ends = vec![];
        for t in 1..=54u64 {
            if s.ends_block(t) {
                ends.push(t);
            }
            s.advance(t);
        }
        let mut expect = vec![];
        let mut start = 0;
        for b in 2..=5u64 {
            for k in 1..=b {
                expect.push(start + k * b);
            }
            start += b * b;
        }
        assert_eq!(start, 54);
        assert_eq!(ends, expect);
        assert_eq!(s, Schedule::Growing { size: 6, start: 54 });
    }

    #[test]
    fn after_equals_advancing_step_by_step() {
        let mut s = Schedule::unbounded();
        for t in 0..3000u64 {
            assert_eq!(Schedule::unbounded().after(t), s, "t = {t}");
            s.advance(t + 1);
        }
        let fixed = Schedule::for_horizon(10);
        assert_eq!(fixed.after(7), fixed);
        // The largest time stays cheap and exact: intervals up to 2^64 steps.
        let Schedule::Growing { size, start } = Schedule::unbounded().after(u64::MAX) else {
            panic!("growing")
        };
        assert!(u64::MAX - start < size * size);
    }

    #[test]
    fn bounded_block_size_is_ceil_sqrt() {
        for (t, b) in [
            (1u64, 1u64),
            (2, 2),
            (4, 2),
            (5, 3),
            (9, 3),
            (10, 4),
            (1000, 32),
        ] {
            assert_eq!(
                Schedule::for_horizon(t),
                Schedule::Fixed { size: b },
                "T = {t}"
            );
        }
        assert_eq!(
            Schedule::for_horizon(u64::MAX),
            Schedule::Fixed { size: 1 << 32 }
        );
    }
}

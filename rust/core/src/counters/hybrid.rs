//! Hybrid counter: Chan, Shi, Song 2011, "Hybrid Mechanism", for streams
//! without a horizon.
//!
//! * **Logarithmic part** (`ε/2`): at every power of two `t = 2^k`, the exact
//!   sum of the increments since the previous power of two plus
//!   `DiscreteLaplace(2/ε)` is added to a running noisy total, which is the
//!   release at `t`. Each increment enters one such value.
//! * **Epoch trees** (`ε/2`): the times strictly between `2^k` and `2^(k+1)`
//!   (`2^k − 1` of them, `k ≥ 1`) form epoch `k`, run through a binary tree
//!   counter of horizon `2^k − 1`, hence `k` levels and noise
//!   `DiscreteLaplace(2k/ε)` per p-sum (the p-sum logic is shared with the
//!   binary tree counter, [`super::psums`]). The release at such a `t` is the
//!   logarithmic total at `2^k` plus the tree's release at `t − 2^k`. An
//!   increment enters at most `k` p-sums of its own epoch's tree and none of
//!   any other.
//!
//! Chan et al. give epoch `k`'s tree the horizon `2^k`; here its last item,
//! `t = 2^(k+1)`, is released by the logarithmic part and never enters the
//! tree, so the tree needs only `k` levels (one fewer, hence slightly less
//! noise) for the same guarantee.
//!
//! The privacy loss of one increment is at most `ε/2 + k · ε/(2k) = ε`. The
//! error at `t` has `⌊log2 t⌋ + 1` terms of scale `2/ε` and
//! `popcount(t − 2^k)` terms of scale `2k/ε`: standard deviation
//! `O(log^{1.5}(t) / ε)` at every `t`, with no horizon. Memory
//! `O(dim · log t)`: the current epoch's tree has `k = ⌊log2 t⌋` levels, and
//! the storage only grows at powers of two.

use super::psums::PSums;
use super::split::Share;
use super::vector::{add_into, zeros};
use super::NoiseProcess;
use crate::error::{invalid, Result};
use crate::noise::DiscreteLaplace;
use crate::state::{Reader, Writer};

#[derive(Clone, Debug)]
pub(crate) struct Hybrid {
    tree_share: Share,
    log: DiscreteLaplace,
    /// Noise of the logarithmic part's running total.
    log_noise: Vec<i64>,
    /// Sampler of the current epoch's p-sums (none in epoch 0, which is empty).
    epoch: Option<DiscreteLaplace>,
    /// Sampler of the epoch that the next power of two starts.
    pending: Option<DiscreteLaplace>,
    psums: PSums,
}

impl Hybrid {
    pub(crate) fn new(shares: &[Share], dim: usize) -> Result<Self> {
        let tree_share = shares[1].clone();
        // Refuse now, not at t = 2^63, an ε whose last epoch's scale is too large.
        DiscreteLaplace::new(&tree_share.scale(u64::BITS - 1)?)?;
        Ok(Self {
            tree_share,
            log: DiscreteLaplace::new(&shares[0].scale(0)?)?,
            log_noise: zeros(dim, "the logarithmic noise")?,
            epoch: None,
            pending: None,
            psums: PSums::new(dim, 0)?,
        })
    }
}

impl NoiseProcess for Hybrid {
    /// Encode the logarithmic noise and the current epoch's p-sums (the
    /// epoch and its samplers follow from time).
    fn write_state(&self, w: &mut Writer) {
        for z in &self.log_noise {
            w.i64(*z);
        }
        self.psums.write(w);
    }

    fn read_state(&mut self, r: &mut Reader<'_>, time: u64, noise: &[i64]) -> Result<()> {
        let bad = || {
            invalid!(
                "invalid dpstream state: the hybrid noise does not match the time or the release"
            )
        };
        for z in self.log_noise.iter_mut() {
            *z = r.i64()?;
        }
        // After step t, the current epoch is k = ⌊log2 t⌋ with a tree of k
        // levels holding the t − 2^k items since 2^k (none before t = 1).
        let k = time.checked_ilog2().unwrap_or(0);
        let items = time.saturating_sub(1 << k);
        let psums = PSums::read(r, noise.len(), k)?;
        psums.validate(true)?;
        let mut total = zeros(noise.len(), "the hybrid noise")?;
        psums.noise_total(&mut total)?;
        let mut expect = zeros(noise.len(), "the hybrid noise")?;
        add_into(&self.log_noise, &total, &mut expect, "the hybrid noise").map_err(|_| bad())?;
        if psums.items() != items || expect != noise {
            return Err(bad());
        }
        self.epoch = if k >= 1 {
            Some(DiscreteLaplace::new(&self.tree_share.scale(k)?)?)
        } else {
            None
        };
        self.pending = None;
        self.psums = psums;
        Ok(())
    }

    fn prepare(&mut self, t: u64) -> Result<()> {
        if t.is_power_of_two() {
            let k = t.trailing_zeros();
            self.pending = if k >= 1 {
                self.psums.reserve(k)?;
                Some(DiscreteLaplace::new(&self.tree_share.scale(k)?)?)
            } else {
                None
            };
        }
        Ok(())
    }

    fn sampler(&self, t: u64) -> Result<&DiscreteLaplace> {
        if t.is_power_of_two() {
            Ok(&self.log)
        } else {
            self.epoch
                .as_ref()
                .ok_or_else(|| invalid!("internal: no epoch tree at time {t}"))
        }
    }

    fn stage(&self, t: u64, z: &[i64], prev: &[i64], out: &mut [i64]) -> Result<()> {
        if t.is_power_of_two() {
            // The finished epoch's p-sums are replaced by one logarithmic increment.
            add_into(&self.log_noise, z, out, "noise of the running sum")
        } else {
            self.psums.stage(z, prev, out)
        }
    }

    fn commit(&mut self, t: u64, z: &[i64], noise: &[i64]) {
        if t.is_power_of_two() {
            self.log_noise.copy_from_slice(noise);
            self.epoch = self.pending.take();
            self.psums.restart(t.trailing_zeros());
        } else {
            self.psums.commit(z);
        }
    }

    fn heap_bytes(&self) -> usize {
        (self.log_noise.capacity()) * std::mem::size_of::<i64>() + self.psums.heap_bytes()
    }
}

//! Binary tree counter: Chan, Shi, Song 2011, "Binary Mechanism", for a
//! public horizon `T`.
//!
//! Every item closes one dyadic p-sum (see [`super::psums`]); the release at
//! `t` is the sum of the noisy p-sums of the binary decomposition of `t`. An
//! item lies in at most `L = ⌈log2(T + 1)⌉` p-sums that are ever formed (one
//! per level `j` with `2^j ≤ T`), so noise `DiscreteLaplace(L/ε)` on each
//! p-sum is ε-DP. The error at `t` has `popcount(t) ≤ L` noise terms:
//! standard deviation `O(log^{1.5}(T) / ε)`. Memory `O(dim · L)`, allocated
//! at construction.

use super::psums::PSums;
use super::split::{tree_levels, Share};
use super::NoiseProcess;
use crate::error::{invalid, Result};
use crate::noise::DiscreteLaplace;
use crate::state::{Reader, Writer};

#[derive(Clone, Debug)]
pub(crate) struct Tree {
    psum: DiscreteLaplace,
    psums: PSums,
}

impl Tree {
    pub(crate) fn new(shares: &[Share], horizon: u64, dim: usize) -> Result<Self> {
        Ok(Self {
            psum: DiscreteLaplace::new(&shares[0].scale(0)?)?,
            psums: PSums::new(dim, tree_levels(horizon))?,
        })
    }

    /// Noise vectors in the current release.
    #[cfg(test)]
    pub(crate) fn psums_terms(&self) -> u32 {
        self.psums.terms()
    }
}

impl NoiseProcess for Tree {
    /// Encode the p-sums (the levels follow from the public horizon).
    fn write_state(&self, w: &mut Writer) {
        self.psums.write(w);
    }

    fn read_state(&mut self, r: &mut Reader<'_>, time: u64, noise: &[i64]) -> Result<()> {
        let dim = noise.len();
        let psums = PSums::read(r, dim, self.psums.levels())?;
        psums.validate(true)?;
        let mut total = vec![0i64; dim];
        psums.noise_total(&mut total)?;
        if psums.items() != time || total != noise {
            return Err(invalid!(
                "invalid dpstream state: the p-sums do not match the time or the release"
            ));
        }
        self.psums = psums;
        Ok(())
    }

    fn sampler(&self, _t: u64) -> Result<&DiscreteLaplace> {
        Ok(&self.psum)
    }

    fn stage(&self, _t: u64, z: &[i64], prev: &[i64], out: &mut [i64]) -> Result<()> {
        self.psums.stage(z, prev, out)
    }

    fn commit(&mut self, _t: u64, z: &[i64], _noise: &[i64]) {
        self.psums.commit(z);
    }

    fn heap_bytes(&self) -> usize {
        self.psums.heap_bytes()
    }
}

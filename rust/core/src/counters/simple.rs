//! Simple counter: Chan, Shi, Song 2011, "Simple Counting Mechanism II".
//!
//! Every increment gets its own noise: the release at `t` is
//! `Σ_{s ≤ t} (x_s + Z_s)` with `Z_s ~ DiscreteLaplace(1/ε)`. One increment
//! enters one noisy value, so the counter is ε-DP; the error at `t` is a
//! sum of `t` independent noise terms (standard deviation `O(√t / ε)`).
//! Memory `O(dim)`.

use super::split::Share;
use super::vector::add_into;
use super::NoiseProcess;
use crate::error::Result;
use crate::noise::DiscreteLaplace;

#[derive(Clone, Debug)]
pub(crate) struct Simple {
    step: DiscreteLaplace,
}

impl Simple {
    pub(crate) fn new(shares: &[Share]) -> Result<Self> {
        Ok(Self {
            step: DiscreteLaplace::new(&shares[0].scale(0)?)?,
        })
    }
}

impl NoiseProcess for Simple {
    fn sampler(&self, _t: u64) -> Result<&DiscreteLaplace> {
        Ok(&self.step)
    }

    fn stage(&self, _t: u64, z: &[i64], prev: &[i64], out: &mut [i64]) -> Result<()> {
        add_into(prev, z, out, "noise of the running sum")
    }

    fn commit(&mut self, _t: u64, _z: &[i64], _noise: &[i64]) {}

    fn heap_bytes(&self) -> usize {
        0
    }
}

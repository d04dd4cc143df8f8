//! Continual-release counters: a noisy running sum after every step, ε-DP for
//! the whole stream (Chan, Shi, Song 2011, "Private and continual release of
//! statistics"; Algorithm 4 of Kumar, Strohmer, Vershynin).
//!
//! A [`Counter`] takes one integer increment vector of fixed length `dim` per
//! time step `t = 1, 2, …` (negative entries are deletions) and after each
//! step releases a vector of noisy running sums `Σ_{s ≤ t} x_s + N_t`. A
//! scalar counter is `dim = 1`.
//!
//! | kind | paper | noise scale | error terms at `t` | memory |
//! |---|---|---|---|---|
//! | [`Simple`](CounterKind::Simple) | Simple II | `1/ε` | `t` | `O(dim)` |
//! | [`Block`](CounterKind::Block) `{T}` | Two-Level, `B = ⌈√T⌉` | `2/ε` | `≤ T/B + B − 1` | `O(dim)` |
//! | [`UnboundedBlock`](CounterKind::UnboundedBlock) | KSV Algorithm 4 | `2/ε` | `O(t^{2/3})` | `O(dim)` |
//! | [`BinaryTree`](CounterKind::BinaryTree) `{T}` | Binary | `L/ε`, `L = ⌈log2(T+1)⌉` | `popcount(t) ≤ L` | `O(dim · log T)` |
//! | [`Hybrid`](CounterKind::Hybrid) | Hybrid | `2/ε`; `2k/ε` in epoch `k` | `O(log t)` | `O(dim · log t)` |
//!
//! [`SparseCounter`] (Algorithm 2 of He, Vershynin, Zhu: sparse counting
//! with a finite horizon on top of the binary tree) and
//! [`InhomogeneousSparseCounter`] (their Algorithm 3) are separate types with
//! their own documentation: they count non-negative values, and their error
//! is small when the stream is sparse.
//!
//! The standard deviation of the error is `√(terms)·scale`: `O(√t/ε)`,
//! `O(T^{1/4}/ε)`, `O(t^{1/3}/ε)`, `O(log^{1.5} T/ε)` and `O(log^{1.5} t/ε)`.
//!
//! ```
//! use dpstream_core::counters::{Counter, CounterKind};
//! use dpstream_core::{Rational, Rng};
//!
//! let eps = Rational::new(1u32, 2u32)?;
//! let mut counter = Counter::new(CounterKind::Hybrid, &eps, 3)?;
//! let mut rng = Rng::from_os()?;
//! counter.step(&mut rng, &[1, 0, -1])?; // one record in, one out
//! let noisy: &[i64] = counter.release(); // ε-DP running sums
//! assert_eq!((noisy.len(), counter.time()), (3, 1));
//! # Ok::<(), dpstream_core::Error>(())
//! ```
//!
//! # Privacy
//!
//! * **Neighbouring relation** (event level): two streams are neighbours if
//!   they differ in the increment of *one* step by a vector of ℓ1 norm at
//!   most 1 — one record added to or removed from one step's histogram change
//!   (for `dim = 1`: one increment changed by ±1). Streams may be infinite.
//! * **Guarantee**: the whole sequence of releases, at every time, is ε-DP.
//! * **Mechanism**: each step closes one noisy value (a step value, a block
//!   sum, a p-sum, or a power-of-two increment) and the releases are sums of
//!   such values. A vector increment enters each noisy value it belongs to
//!   by its own ℓ1 norm, so for the vector of all noisy values one changed
//!   step moves the ℓ1 norm by at most the number of values it enters: the
//!   ℓ1-sensitivity of a scalar counter. The same per-coordinate scale as the
//!   scalar counter (independent discrete Laplace noise on every coordinate)
//!   is therefore ε-DP for vectors too. The split of ε between the families
//!   of noisy values, and their scales, are computed in one place,
//!   [`split::epsilon_split`].
//! * **Noise**: exact discrete Laplace ([`crate::noise::DiscreteLaplace`])
//!   from the caller's [`Rng`]; all arithmetic is on integers.
//! * **Public**: the kind, ε, `dim`, the horizon `T` of a bounded counter,
//!   and the time `t` (the number of steps so far). Block sizes, levels and
//!   epochs depend only on these.
//! * **Secret state**: the counter keeps the exact running sum; it is never
//!   released, and [`Counter`]'s `Debug` output omits it. The release equals
//!   the exact sum plus the noise of the noisy values in use, which is the
//!   textbook mechanism's output exactly (the noisy values partition the
//!   prefix), so keeping the noise instead of the noisy values changes no
//!   released bit.
//!
//! # Checkpoints
//!
//! [`Counter::to_bytes`] / [`Counter::from_bytes`] (and the same methods of
//! the sparse counters) save and restore a counter exactly, in the
//! versioned, checksummed format of [`crate::state`]. The bytes hold the
//! exact running sums: **protect them like the raw data**. A counter owns no
//! generator, so none is stored; a restored counter stepped with the same
//! generator continues exactly as the original would have.
//!
//! # Errors and atomicity
//!
//! [`Counter::step`] refuses an increment of the wrong length, a step past a
//! bounded horizon, and a running sum (exact or noisy) beyond the `i64`
//! range; a refused step changes nothing, the generator included. The range
//! check depends on the data: keep running sums far inside `±2^62` so that
//! it never triggers.

mod block;
mod encoding;
mod hybrid;
mod inhomogeneous;
mod psums;
mod simple;
mod sparse;
pub mod split;
mod tree;
mod vector;

use crate::error::{invalid, Result};
use crate::noise::DiscreteLaplace;
use crate::rational::Rational;
use crate::rng::Rng;
use crate::state::{Reader, Writer};
use block::{Block, Schedule};
use hybrid::Hybrid;
pub use inhomogeneous::{level_start, InhomogeneousSparseCounter, LevelFn, LevelSchedule};
pub(crate) use inhomogeneous::{level_sum_noise, nonempty_level, LevelParams, LevelState};
use simple::Simple;
pub(crate) use sparse::{read_master, write_master, Draw, RunKeys};
pub use sparse::{sparse_threshold, SparseCounter, MAX_SPARSE_COUNT};
pub use split::{epsilon_split, Sensitivity, Share};
use tree::Tree;
use vector::{add_into, zeros};

/// Which continual-release mechanism a [`Counter`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterKind {
    /// Simple II: noise `1/ε` on every increment. Error `O(√t/ε)`.
    Simple,
    /// Two-Level (block) counter for `horizon` steps, blocks of `⌈√T⌉`.
    /// Error `O(T^{1/4}/ε)`.
    Block {
        /// The public number of steps the counter accepts.
        horizon: u64,
    },
    /// Algorithm 4 of Kumar, Strohmer, Vershynin: block counters on
    /// intervals of `4, 9, 16, …` steps with blocks of `2, 3, 4, …`.
    /// No horizon; error `O(t^{1/3}/ε)`.
    UnboundedBlock,
    /// Binary mechanism for `horizon` steps. Error `O(log^{1.5}(T)/ε)`.
    BinaryTree {
        /// The public number of steps the counter accepts.
        horizon: u64,
    },
    /// Hybrid mechanism: logarithmic part plus one binary tree per epoch
    /// `(2^k, 2^(k+1))`. No horizon; error `O(log^{1.5}(t)/ε)`.
    Hybrid,
}

impl CounterKind {
    /// The public horizon of a bounded counter.
    pub fn horizon(&self) -> Option<u64> {
        match *self {
            Self::Block { horizon } | Self::BinaryTree { horizon } => Some(horizon),
            _ => None,
        }
    }
}

/// One step of a counter's noise: which noisy value closes at time `t`, and
/// which noise terms the release carries afterwards. The noise `N_t` of the
/// release depends only on time and on the draws, never on the data.
trait NoiseProcess {
    /// Fallible preparation for step `t` that changes no released state
    /// (allocation, building a sampler). Idempotent.
    fn prepare(&mut self, _t: u64) -> Result<()> {
        Ok(())
    }
    /// The sampler of the one noise vector drawn at step `t`.
    fn sampler(&self, t: u64) -> Result<&DiscreteLaplace>;
    /// `out = N_t` from `prev = N_{t−1}` and the fresh noise `z`. Pure.
    fn stage(&self, t: u64, z: &[i64], prev: &[i64], out: &mut [i64]) -> Result<()>;
    /// Record step `t` (infallible) after a successful [`Self::stage`].
    fn commit(&mut self, t: u64, z: &[i64], noise: &[i64]);
    /// Heap bytes held.
    fn heap_bytes(&self) -> usize;
    /// Encode what a checkpoint needs beyond the sums and the release's
    /// noise (what does not follow from the public time); nothing by default.
    fn write_state(&self, _w: &mut Writer) {}
    /// Decode [`Self::write_state`] output into a new counter's process that
    /// is at `time`, whose release carries the noise `noise`.
    fn read_state(&mut self, _r: &mut Reader<'_>, _time: u64, _noise: &[i64]) -> Result<()> {
        Ok(())
    }
}

#[derive(Clone, Debug)]
enum Process {
    Simple(Simple),
    Block(Block),
    Tree(Tree),
    Hybrid(Hybrid),
}

impl Process {
    fn get(&self) -> &dyn NoiseProcess {
        match self {
            Self::Simple(p) => p,
            Self::Block(p) => p,
            Self::Tree(p) => p,
            Self::Hybrid(p) => p,
        }
    }

    fn get_mut(&mut self) -> &mut dyn NoiseProcess {
        match self {
            Self::Simple(p) => p,
            Self::Block(p) => p,
            Self::Tree(p) => p,
            Self::Hybrid(p) => p,
        }
    }
}

/// Buffers a step writes before it commits, so that a refused step changes nothing.
#[derive(Clone)]
struct Scratch {
    z: Vec<i64>,
    sum: Vec<i64>,
    noise: Vec<i64>,
    release: Vec<i64>,
}

/// A continual-release counter of integer vectors; see the [module docs](self).
#[derive(Clone)]
pub struct Counter {
    kind: CounterKind,
    epsilon: Rational,
    dim: usize,
    time: u64,
    /// Exact running sum. Secret.
    sum: Vec<i64>,
    /// Noise of the current release, `N_t`. Secret.
    noise: Vec<i64>,
    /// `sum + noise`: the private release.
    release: Vec<i64>,
    scratch: Scratch,
    process: Process,
    /// Secret master key, drawn from the caller's generator at the first
    /// step: the noise of step `t` is drawn from a generator keyed by it, `t`
    /// and a keyed digest of every increment so far ([`Counter::step`]).
    master: Option<[u8; 32]>,
    /// The keyed digest of the increments so far (its state).
    digest: [u64; 2],
}

impl std::fmt::Debug for Counter {
    // The exact sum and the noise are secret; only public values are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Counter")
            .field("kind", &self.kind)
            .field("epsilon", &self.epsilon.to_string())
            .field("dim", &self.dim)
            .field("time", &self.time)
            .finish_non_exhaustive()
    }
}

impl Counter {
    /// An ε-DP counter of `dim`-vectors (`dim ≥ 1`). Fails on `ε = 0`, a zero
    /// horizon, a noise scale above `2^56` (ε too small), or a `dim` whose
    /// buffers cannot be allocated. Everything but the hybrid counter's
    /// epoch trees is allocated here.
    pub fn new(kind: CounterKind, epsilon: &Rational, dim: usize) -> Result<Self> {
        if dim == 0 {
            return Err(invalid!("dim must be at least 1"));
        }
        let shares = epsilon_split(kind, epsilon)?;
        let process = match kind {
            CounterKind::Simple => Process::Simple(Simple::new(&shares)?),
            CounterKind::Block { horizon } => {
                Process::Block(Block::new(&shares, Schedule::for_horizon(horizon), dim)?)
            }
            CounterKind::UnboundedBlock => {
                Process::Block(Block::new(&shares, Schedule::unbounded(), dim)?)
            }
            CounterKind::BinaryTree { horizon } => Process::Tree(Tree::new(&shares, horizon, dim)?),
            CounterKind::Hybrid => Process::Hybrid(Hybrid::new(&shares, dim)?),
        };
        let buf = || zeros(dim, "a counter buffer");
        Ok(Self {
            kind,
            epsilon: epsilon.clone(),
            dim,
            time: 0,
            sum: buf()?,
            noise: buf()?,
            release: buf()?,
            scratch: Scratch {
                z: buf()?,
                sum: buf()?,
                noise: buf()?,
                release: buf()?,
            },
            process,
            master: None,
            digest: [1, 1],
        })
    }

    /// The mechanism.
    pub fn kind(&self) -> CounterKind {
        self.kind
    }

    /// The privacy parameter of the whole stream of releases.
    pub fn epsilon(&self) -> &Rational {
        &self.epsilon
    }

    /// How ε is split between the noisy values (see [`epsilon_split`]).
    pub fn epsilon_split(&self) -> Vec<Share> {
        epsilon_split(self.kind, &self.epsilon).unwrap_or_default()
    }

    /// Length of every increment and release.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Steps taken so far (public).
    pub fn time(&self) -> u64 {
        self.time
    }

    /// The public horizon of a bounded counter.
    pub fn horizon(&self) -> Option<u64> {
        self.kind.horizon()
    }

    /// Steps still accepted: `horizon − time`, or `u64::MAX − time` when unbounded.
    pub fn remaining(&self) -> u64 {
        self.horizon().unwrap_or(u64::MAX) - self.time
    }

    /// The noisy running sums after the last step (zeros before any step). ε-DP.
    pub fn release(&self) -> &[i64] {
        &self.release
    }

    /// Bytes held: `O(dim)` for simple and block counters, `O(dim · log T)`
    /// for the binary tree (fixed at construction) and `O(dim · log t)` for
    /// the hybrid counter.
    pub fn memory_bytes(&self) -> usize {
        let bufs = [
            &self.sum,
            &self.noise,
            &self.release,
            &self.scratch.z,
            &self.scratch.sum,
            &self.scratch.noise,
            &self.scratch.release,
        ];
        std::mem::size_of::<Self>()
            + bufs.iter().map(|b| b.capacity()).sum::<usize>() * std::mem::size_of::<i64>()
            + self.process.get().heap_bytes()
    }

    /// Feed the increment of the next time step and update the release.
    ///
    /// The step's noise (the noisy value it closes: a step value, block sum,
    /// p-sum or power-of-two increment) is drawn from a generator keyed by
    /// the counter's secret master key (drawn from `rng` at the first step),
    /// the time `t` and a keyed digest of every increment up to `t`. A
    /// counter loaded from a checkpoint any number of times and fed the same
    /// increments releases the same values (its later values cannot be
    /// averaged); other increments give independent noise. For one
    /// continuation the values are distinct inputs of a pseudorandom
    /// function, i.e. independent draws.
    ///
    /// All-or-nothing: on error (wrong length, horizon reached, a running sum
    /// beyond the `i64` range) the counter and `rng` are unchanged.
    pub fn step(&mut self, rng: &mut Rng, increment: &[i64]) -> Result<()> {
        if increment.len() != self.dim {
            return Err(invalid!(
                "increment must have length {}, got {}",
                self.dim,
                increment.len()
            ));
        }
        if self.remaining() == 0 {
            return Err(match self.horizon() {
                Some(h) => invalid!("the counter's horizon of {h} steps is reached"),
                None => invalid!("the counter has reached the largest time step"),
            });
        }
        let t = self.time + 1;
        let s = &mut self.scratch;
        add_into(&self.sum, increment, &mut s.sum, "running sum")?;
        let process = self.process.get_mut();
        process.prepare(t)?;
        let saved = rng.clone();
        let master = match self.master {
            Some(m) => m,
            None => rng.draw_key(),
        };
        let mut digest = self.digest;
        let key = step_key(&master, &mut digest, t, increment);
        let mut step_rng = Rng::keyed_stream(key, 0, rng.is_seeded());
        let staged = process
            .sampler(t)
            .and_then(|d| d.fill(&mut step_rng, &mut s.z))
            .and_then(|()| process.stage(t, &s.z, &self.noise, &mut s.noise))
            .and_then(|()| add_into(&s.sum, &s.noise, &mut s.release, "noisy running sum"));
        if let Err(e) = staged {
            *rng = saved;
            return Err(e);
        }
        process.commit(t, &s.z, &s.noise);
        self.master = Some(master);
        self.digest = digest;
        std::mem::swap(&mut self.sum, &mut s.sum);
        std::mem::swap(&mut self.noise, &mut s.noise);
        std::mem::swap(&mut self.release, &mut s.release);
        self.time = t;
        Ok(())
    }

    /// Feed `increments.len() / dim` steps (row-major) and write each step's
    /// release to the matching row of `out`.
    ///
    /// All-or-nothing: on error the counter and `rng` are as before the call
    /// (and `out` is unspecified).
    pub fn run(&mut self, rng: &mut Rng, increments: &[i64], out: &mut [i64]) -> Result<()> {
        if increments.len() % self.dim != 0 {
            return Err(invalid!(
                "increments must hold whole rows of {} values, got {}",
                self.dim,
                increments.len()
            ));
        }
        if out.len() != increments.len() {
            return Err(invalid!(
                "out must have {} values, got {}",
                increments.len(),
                out.len()
            ));
        }
        let steps = (increments.len() / self.dim) as u64;
        if steps > self.remaining() {
            return Err(invalid!(
                "{steps} steps would pass the counter's horizon of {} steps (time is {})",
                self.horizon().unwrap_or(u64::MAX),
                self.time
            ));
        }
        if steps == 0 {
            return Ok(());
        }
        let (saved, saved_rng) = (self.clone(), rng.clone());
        for (inc, row) in increments
            .chunks_exact(self.dim)
            .zip(out.chunks_exact_mut(self.dim))
        {
            if let Err(e) = self.step(rng, inc) {
                *self = saved;
                *rng = saved_rng;
                return Err(e);
            }
            row.copy_from_slice(&self.release);
        }
        Ok(())
    }
}

/// The key of the noise of step `t` of a [`Counter`] whose master key is
/// `master`, after the increments whose keyed digest is `digest` (`[1, 1]`
/// before the first step): the digest is advanced by `increment`, and the key
/// derived from the master key, `t` and the new digest. The step's noise is
/// drawn from stream 0 of this key (a seeded generator with this key as its
/// seed draws the same values). Exposed for reference implementations.
pub fn step_key(master: &[u8; 32], digest: &mut [u64; 2], t: u64, increment: &[i64]) -> [u8; 32] {
    let mut d = crate::rng::KeyedDigest::resume(master, *digest);
    for &v in increment {
        d.word(v as u64);
    }
    *digest = d.state();
    crate::rng::derive_key(
        master,
        &[crate::rng::tag::COUNTER_STEP, t, digest[0], digest[1]],
    )
}

#[cfg(test)]
mod tests;

/// Fail unless `out` has one slot per value.
pub(crate) fn check_run_lengths(values: &[i64], out: &[i64]) -> Result<()> {
    if out.len() != values.len() {
        return Err(invalid!(
            "out must have {} values, got {}",
            values.len(),
            out.len()
        ));
    }
    Ok(())
}

/// Feed non-negative scalar `values` one by one through `step` (which returns
/// the release), writing each release to `out`. All-or-nothing: on any error
/// the counter and the generator are restored to their state before the call.
pub(crate) fn run_scalar<C: Clone>(
    counter: &mut C,
    rng: &mut Rng,
    values: &[i64],
    out: &mut [i64],
    mut step: impl FnMut(&mut C, &mut Rng, i64) -> Result<i64>,
) -> Result<()> {
    if let Some(v) = values.iter().find(|v| **v < 0) {
        return Err(invalid!("values must be non-negative, got {v}"));
    }
    if values.is_empty() {
        return Ok(());
    }
    let (saved, saved_rng) = (counter.clone(), rng.clone());
    for (v, o) in values.iter().zip(out.iter_mut()) {
        match step(counter, rng, *v) {
            Ok(release) => *o = release,
            Err(e) => {
                *counter = saved;
                *rng = saved_rng;
                return Err(e);
            }
        }
    }
    Ok(())
}

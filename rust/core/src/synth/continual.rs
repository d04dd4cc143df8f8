//! Continual-release PrivHP in fixed memory (Holland et al., Appendix A):
//! the binary mechanism over release epochs applied to exact PrivHP
//! summaries.
//!
//! # Mechanism
//!
//! * **Epochs.** Points arrive one per time step. A release closes an
//!   *epoch*: the points that arrived since the previous release (a release
//!   with no new point closes none and gives the same generators again).
//!   Epochs are numbered `e = 1, 2, …, R`; `R` (`max_releases`) is a public
//!   cap fixed at construction, and a release that would close epoch `R + 1`
//!   is refused before anything changes.
//! * **Blocks.** `L = ⌊log2 R⌋ + 1` levels. The open epoch is counted into
//!   the summary `current`; `α_0 … α_{L−1}` hold the exact summaries of the
//!   dyadic blocks of closed epochs, `α_j` covering `2^j` epochs. When epoch
//!   `e` closes, with `j` = the number of trailing zeros of `e`: `α_0 …
//!   α_{j−1}` and `current` are merged into `α_j` (it then covers epochs
//!   `e − 2^j + 1 … e`), `α_0 … α_{j−1}` and `current` are emptied, and a
//!   copy of `α_j` is released by PrivHP (noise, pruning, consistency) into
//!   the generator `g_j`; `g_0 … g_{j−1}` are dropped. All summaries share
//!   one [`PrivHPConfig`] and one set of hash keys, so they merge exactly.
//! * **Release** at epoch `e`: the mixture of the generators `g_j` of the set
//!   bits `j` of `e` (they partition epochs `1 … e`), each weighted by its
//!   block's number of points `n_j` (public). `t` points: `n_j` from block
//!   `j`, placed by its leaf counts scaled to `n_j` and rounded; `m` points:
//!   i.i.d. draws, the block chosen with probability `n_j / t`.
//!
//! # Privacy
//!
//! * **Neighbouring relation**: two streams that differ in the point of one
//!   time step (one point replaced by another). `t` and the release times
//!   are public.
//! * **Public**: ε, `d`, `R`, `memory_bytes`, `expected_n` (a public guess of
//!   the stream length) and every structural parameter derived from them (the
//!   [`PrivHPConfig`], its hash keys); `t`, the release times, hence the
//!   epochs, the blocks and their sizes `n_j`.
//! * **Split** ([`continual_block_epsilon`], the one place it is computed;
//!   its test sums it): PrivHP at budget `ε_b` is `ε_b`-DP under add/remove
//!   one point, so `2·ε_b`-DP under replacement (remove, then add). Each
//!   block's release runs PrivHP at `ε_b = ε/(2L)`. A point of epoch `e` is in
//!   exactly one block per level it reaches (the dyadic run of `2^j` epochs
//!   containing `e`), so in at most `L` released blocks; a replaced point lies
//!   in the same epoch, hence the same blocks, in both streams. Each block's
//!   noise is independent, so all releases together cost at most
//!   `L · 2 · ε/(2L) = ε` by basic composition. The mixture weights are public
//!   and the sampling reads only the released generators: post-processing.
//! * **Noise**: exact discrete Laplace inside PrivHP, from the object's
//!   generator (OS-seeded unless the caller seeds it: seeded is **not
//!   private**).
//!
//! # Memory
//!
//! Everything that lives across calls is allocated at construction: `L + 1`
//! summaries and the `L` generator slots. A release makes transient copies
//! (the merged block and the copy it releases, one new generator of at most
//! [`PrivHPConfig::max_generator_nodes`] nodes); [`ContinualPrivHP::memory_bytes`]
//! reserves `L + 3` units of one summary plus one largest generator, a public
//! formula of `(ε, d, memory_bytes, expected_n, R)` that never changes and is
//! at most the requested `memory_bytes`. [`ContinualPrivHP::update`] never
//! allocates (it is a [`PrivHP::update`] of `current`).

use super::privhp::{PrivHP, PrivHPConfig};
use super::release::{chunked_release, ChunkedRelease};
use super::tree_generator::{Node, TreeGenerator};
use crate::error::{invalid, Result};
use crate::rational::Rational;
use crate::rng::Rng;
use crate::sketch::SketchKind;
use crate::state::{self, Kind, Reader, Writer};
use std::borrow::Cow;

/// Largest release cap `R` accepted (`L ≤ 33` levels).
pub const MAX_CONTINUAL_RELEASES: u64 = 1 << 32;

/// Summaries and generators reserved beyond the `L` blocks: `current` and
/// the two transient copies of a release.
const EXTRA_UNITS: usize = 3;

/// Sketch rows of every summary (count-min, one row: sensitivity 1 per level).
const ROWS: usize = 1;

/// `L = ⌊log2 R⌋ + 1`: the levels of the binary mechanism over `R ≥ 1` epochs
/// (a point is in at most `L` blocks).
pub fn continual_levels(max_releases: u64) -> u32 {
    64 - max_releases.max(1).leading_zeros()
}

/// The per-block budget `ε_b = ε / (2L)`: PrivHP at `ε_b` costs `2·ε_b` under
/// replacement of one point, and a point is in at most `L` blocks, so the
/// blocks together cost `ε`. The only place the split is computed.
pub fn continual_block_epsilon(epsilon: &Rational, levels: u32) -> Result<Rational> {
    if levels == 0 {
        return Err(invalid!("levels must be at least 1"));
    }
    epsilon.div(&Rational::new(2 * u64::from(levels), 1u32)?)
}

/// Bytes of one reserved unit: a summary and its largest generator.
fn unit_bytes(cfg: &PrivHPConfig) -> usize {
    cfg.footprint()
        .saturating_add(cfg.max_generator_nodes() * std::mem::size_of::<Node>())
        .saturating_add(std::mem::size_of::<Option<TreeGenerator>>())
}

/// Bytes that do not depend on the configuration.
fn fixed_bytes(levels: u32) -> usize {
    std::mem::size_of::<ContinualPrivHP>() + levels as usize * std::mem::size_of::<PrivHP>()
}

/// The public parameters `(ε, d, memory_bytes, expected_n, R)` and what
/// follows from them: `L` and the configuration every summary shares.
struct Params {
    epsilon: Rational,
    dim: usize,
    memory_budget: usize,
    expected_n: u64,
    max_releases: u64,
    levels: u32,
    cfg: PrivHPConfig,
}

impl Params {
    /// Checked as in [`ContinualPrivHP::config_for`].
    fn new(
        epsilon: &Rational,
        dim: usize,
        memory_bytes: usize,
        expected_n: u64,
        max_releases: u64,
    ) -> Result<Self> {
        let cfg =
            ContinualPrivHP::config_for(epsilon, dim, memory_bytes, expected_n, max_releases)?;
        Ok(Self {
            epsilon: epsilon.clone(),
            dim,
            memory_budget: memory_bytes,
            expected_n,
            max_releases,
            levels: continual_levels(max_releases),
            cfg,
        })
    }
}

/// Continual-release PrivHP in fixed memory; see the [module docs](self).
pub struct ContinualPrivHP {
    params: Params,
    rng: Rng,
    /// Secret master key: each released block's noise comes from a key
    /// derived from it, the block's position and a digest of its summary.
    master: [u8; 32],
    time: u64,
    epochs: u64,
    /// Exact summary of the open epoch.
    current: PrivHP,
    /// `α_j`: exact summary of the live block of `2^j` epochs (empty if bit `j` of `epochs` is 0).
    alphas: Vec<PrivHP>,
    /// `g_j`: the released generator of `α_j` (`Some` iff bit `j` of `epochs` is 1).
    gens: Vec<Option<TreeGenerator>>,
}

impl std::fmt::Debug for ContinualPrivHP {
    // Counts are secret; only public values are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ContinualPrivHP")
            .field("epsilon", &self.params.epsilon.to_string())
            .field("dim", &self.params.dim)
            .field("max_releases", &self.params.max_releases)
            .field("time", &self.time)
            .field("epochs", &self.epochs)
            .finish_non_exhaustive()
    }
}

impl ContinualPrivHP {
    /// The shared configuration for public `(ε, d, memory_bytes, expected_n, R)`:
    /// [`PrivHPConfig::for_memory`] at `ε_b` with the bytes left after the
    /// fixed part divided among `L + 3` units (count-min, one row).
    pub fn config_for(
        epsilon: &Rational,
        dim: usize,
        memory_bytes: usize,
        expected_n: u64,
        max_releases: u64,
    ) -> Result<PrivHPConfig> {
        if epsilon.is_zero() {
            return Err(invalid!("epsilon must be positive, got 0"));
        }
        if dim == 0 || dim > 1 << 16 {
            return Err(invalid!("dim must be in 1..=65536, got {dim}"));
        }
        if max_releases == 0 || max_releases > MAX_CONTINUAL_RELEASES {
            return Err(invalid!(
                "max_releases must be in 1..={MAX_CONTINUAL_RELEASES}, got {max_releases}"
            ));
        }
        if expected_n == 0 {
            return Err(invalid!("expected_n must be at least 1, got 0"));
        }
        let levels = continual_levels(max_releases);
        let eps_b = continual_block_epsilon(epsilon, levels)?;
        let units = levels as usize + EXTRA_UNITS;
        let per_unit = memory_bytes
            .checked_sub(fixed_bytes(levels))
            .map(|b| b / units)
            .and_then(|b| b.checked_sub(std::mem::size_of::<Option<TreeGenerator>>()))
            .ok_or_else(|| {
                invalid!("memory_bytes = {memory_bytes} is too small for {levels} levels")
            })?;
        PrivHPConfig::for_memory(eps_b, dim, expected_n, per_unit, SketchKind::CountMin, ROWS)
            .map_err(|e| {
                invalid!(
                    "memory_bytes = {memory_bytes} is too small for R = {max_releases} releases \
                 ({units} summaries of {per_unit} bytes each): {e}"
                )
            })
    }

    /// A synthesizer whose whole state fits in `memory_bytes` (see
    /// [`Self::memory_bytes`]); hash keys and noise come from `rng` (a seeded
    /// generator is reproducible and **not private**). `expected_n` is a
    /// public guess of the stream length (it sets the depth), `max_releases`
    /// the public cap `R` on epochs.
    pub fn new(
        epsilon: &Rational,
        dim: usize,
        memory_bytes: usize,
        expected_n: u64,
        max_releases: u64,
        mut rng: Rng,
    ) -> Result<Self> {
        let params = Params::new(epsilon, dim, memory_bytes, expected_n, max_releases)?;
        let current = PrivHP::new(params.cfg.clone(), &mut rng)?;
        let master = rng.draw_key();
        let levels = params.levels;
        let mut alphas = Vec::with_capacity(levels as usize);
        for _ in 0..levels {
            alphas.push(current.clone());
        }
        Ok(Self {
            params,
            rng,
            master,
            time: 0,
            epochs: 0,
            current,
            alphas,
            gens: vec![None; levels as usize],
        })
    }

    /// The ledger: what a point costs over the `L` blocks it can reach, each
    /// released by PrivHP at [`continual_block_epsilon`] (twice that under
    /// replacement): `2·L·ε_b`, ε itself for a correct split.
    pub fn epsilon_ledger(&self) -> Result<Rational> {
        let eps_b = continual_block_epsilon(&self.params.epsilon, self.params.levels)?;
        Ok(eps_b.mul(&Rational::new(2 * u64::from(self.params.levels), 1u32)?))
    }

    /// ε of the whole stream of releases.
    pub fn epsilon(&self) -> &Rational {
        &self.params.epsilon
    }
    /// Dimension of the points.
    pub fn dim(&self) -> usize {
        self.params.dim
    }
    /// Points seen (public).
    pub fn time(&self) -> u64 {
        self.time
    }
    /// Epochs closed (releases that had new points; public).
    pub fn epochs(&self) -> u64 {
        self.epochs
    }
    /// The public cap `R` on epochs.
    pub fn max_releases(&self) -> u64 {
        self.params.max_releases
    }
    /// The requested memory budget (bytes).
    pub fn memory_budget(&self) -> usize {
        self.params.memory_budget
    }
    /// The public guess of the stream length.
    pub fn expected_n(&self) -> u64 {
        self.params.expected_n
    }
    /// `L = ⌊log2 R⌋ + 1`.
    pub fn levels(&self) -> u32 {
        self.params.levels
    }
    /// The configuration every summary shares (its ε is the block budget `ε/(2L)`).
    pub fn config(&self) -> &PrivHPConfig {
        &self.params.cfg
    }
    /// Live blocks: the set bits of the epoch count (public).
    pub fn n_blocks(&self) -> usize {
        self.epochs.count_ones() as usize
    }
    /// Whether the generator is seeded (reproducible, **not private**).
    pub fn is_seeded(&self) -> bool {
        self.rng.is_seeded()
    }

    /// Bytes reserved, by a public formula of `(ε, d, memory_bytes,
    /// expected_n, R)`: the fixed part plus `L + 3` units of one summary
    /// ([`PrivHPConfig::footprint`]) and one largest generator. An upper bound
    /// on what the object holds at any time, including a release's transient
    /// copies; constant over the stream and at most `memory_budget`.
    pub fn memory_bytes(&self) -> usize {
        fixed_bytes(self.params.levels)
            + (self.params.levels as usize + EXTRA_UNITS) * unit_bytes(&self.params.cfg)
    }

    /// Feed `n` points (row-major `n × dim` in `[0,1]`), `n` time steps. All
    /// or nothing: on a bad value nothing changes. Never allocates.
    pub fn update(&mut self, points: &[f64]) -> Result<()> {
        self.current.update(points)?;
        self.time += (points.len() / self.params.dim) as u64;
        Ok(())
    }

    /// An empty summary with the configuration and hash keys every summary
    /// of this object shares (public: they are drawn independently of the
    /// data). Copies of it count partitions elsewhere (a cluster's workers);
    /// their merge is given to [`Self::merge_summary`]. Allocates one summary.
    pub fn template(&self) -> Result<PrivHP> {
        self.current.empty_copy()
    }

    /// Add an exact summary of points of the open epoch, counted by copies of
    /// [`Self::template`]: the state afterwards is the state [`Self::update`]
    /// gives on those points (counting is integer addition). All or nothing:
    /// a summary with another configuration or other hash keys, a released
    /// one, or a stream past `2^62` points changes nothing.
    pub fn merge_summary(&mut self, summary: &PrivHP) -> Result<()> {
        if !self.current.same_shape(summary) {
            return Err(invalid!(
                "the summary was not counted by a copy of this synthesizer's template \
                 (other parameters or hash keys)"
            ));
        }
        let n = summary.points_seen();
        self.current.merge(summary)?;
        self.time += n;
        Ok(())
    }

    /// Close the open epoch if it has points (refused past `R` epochs, with
    /// nothing changed).
    fn close_epoch(&mut self) -> Result<()> {
        if self.current.points_seen() == 0 {
            return Ok(());
        }
        if self.epochs >= self.params.max_releases {
            return Err(invalid!(
                "max_releases = {} epochs have been released: the {} points fed since the \
                 last release cannot be released under this budget (releases without new \
                 points still work; start a new synthesizer for more)",
                self.params.max_releases,
                self.current.points_seen()
            ));
        }
        let e = self.epochs + 1;
        let j = e.trailing_zeros() as usize;
        // Build everything first, so that an error leaves the state unchanged.
        let mut merged = self.current.clone();
        for alpha in &self.alphas[..j] {
            merged.merge(alpha)?;
        }
        // The block's noise: a generator keyed by the master key, the block's
        // epochs and a digest of its exact summary (the same on every load of a
        // checkpoint fed the same points, independent for other points).
        let len = 1u64 << j;
        let mut digest = crate::rng::KeyedDigest::new(&self.master);
        merged.digest_into(&mut digest);
        let [d0, d1] = digest.state();
        let key = crate::rng::derive_key(
            &self.master,
            &[crate::rng::tag::CONTINUAL_BLOCK, e + 1 - len, len, d0, d1],
        );
        let mut block_rng = Rng::keyed_stream(key, 0, self.rng.is_seeded());
        #[cfg(test)]
        tests::trace_release(e + 1 - len, len, key, merged.sigmas());
        let generator = merged.clone().into_release(&mut block_rng)?;
        for i in 0..j {
            self.alphas[i].clear()?;
            self.gens[i] = None;
        }
        self.current.clear()?;
        self.alphas[j] = merged;
        self.gens[j] = Some(generator);
        self.epochs = e;
        Ok(())
    }

    /// Close the open epoch and return the live blocks as `(n_j, g_j)`.
    pub fn release_generators(&mut self) -> Result<Vec<(u64, TreeGenerator)>> {
        self.close_epoch()?;
        Ok(self.blocks().map(|(n, g)| (n, g.clone())).collect())
    }

    fn blocks(&self) -> impl Iterator<Item = (u64, &TreeGenerator)> {
        self.alphas
            .iter()
            .zip(&self.gens)
            .filter_map(|(a, g)| g.as_ref().map(|g| (a.points_seen(), g)))
    }

    chunked_release! {
        /// `t` synthetic points (`size = None`: `n_j` from every block `j`, placed
        /// by its leaf counts scaled to `n_j`) or `size` i.i.d. draws from the
        /// mixture; row-major: the chunks of [`Self::release_sampler`] with
        /// [`CHUNK_ROWS`](crate::synth::CHUNK_ROWS) rows each. Closes the open epoch (refused past `R`).
    }

    /// The release of [`Self::release`] in chunks of `chunk_rows` rows (at
    /// least 1), with a sampling key drawn from the synthesizer's generator;
    /// it borrows the live blocks' generators. Closes the open epoch.
    pub fn release_sampler(
        &mut self,
        size: Option<u64>,
        chunk_rows: u64,
    ) -> Result<ChunkedRelease<'_>> {
        if let Some(r) = ChunkedRelease::unseen(self.time, self.params.dim, size, chunk_rows) {
            return r;
        }
        self.close_epoch()?;
        let Self {
            alphas, gens, rng, ..
        } = self;
        let parts = alphas
            .iter()
            .zip(gens.iter())
            .filter_map(|(a, g)| g.as_ref().map(|g| (a.points_seen(), Cow::Borrowed(g))))
            .collect();
        ChunkedRelease::trees(self.params.dim, parts, size, rng, chunk_rows)
    }

    /// `(lower, upper, counts)`: the leaves of every live block's generator
    /// (cells of different blocks may overlap), with the counts of block `j`
    /// scaled to `n_j` and rounded, so that they sum to `t`. Closes the open
    /// epoch like [`Self::release`].
    pub fn cells(&mut self) -> Result<(Vec<f64>, Vec<f64>, Vec<u64>)> {
        self.close_epoch()?;
        let (mut lower, mut upper, mut counts) = (Vec::new(), Vec::new(), Vec::new());
        for (n, g) in self.blocks() {
            let (lo, hi, _) = g.cells();
            lower.extend_from_slice(&lo);
            upper.extend_from_slice(&hi);
            counts.extend(g.scaled_leaf_counts(n));
        }
        Ok((lower, upper, counts))
    }

    /// Encode the state for a checkpoint. **Sensitive**: it holds the exact
    /// counts of every summary (protect it like the raw data), and the
    /// released generators of the live blocks, so that every load restores the
    /// same noisy generators, and the master key from which the noise of every
    /// later block is derived (with the block's epochs and a digest of its
    /// summary): loading a checkpoint any number of times and feeding the same
    /// points gives the same releases, byte for byte (a loaded OS-seeded copy
    /// samples from a generator derived from the master key and the public
    /// position; its own key is never written); other points give independent
    /// noise. A checkpoint supports one continuation.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        state::write_rational(&mut w, &self.params.epsilon);
        w.u64(self.params.dim as u64);
        w.u64(self.params.memory_budget as u64);
        w.u64(self.params.expected_n);
        w.u64(self.params.max_releases);
        w.u64(self.time);
        w.u64(self.epochs);
        state::write_rng(&mut w, &self.rng);
        for byte in self.master {
            w.u8(byte);
        }
        let blob = |w: &mut Writer, bytes: &[u8]| {
            w.u64(bytes.len() as u64);
            for &b in bytes {
                w.u8(b);
            }
        };
        blob(&mut w, &self.current.to_bytes()?);
        for (alpha, g) in self.alphas.iter().zip(&self.gens) {
            blob(&mut w, &alpha.to_bytes()?);
            match g {
                None => w.u8(0),
                Some(g) => {
                    w.u8(1);
                    blob(&mut w, &g.to_bytes());
                }
            }
        }
        Ok(state::encode(Kind::ContinualPrivHP, &w.finish()))
    }

    /// Decode [`Self::to_bytes`] output; a clear error on truncated,
    /// corrupted or foreign data, or on a state that breaks an invariant.
    /// A version-1 checkpoint (before the master key; it holds no secret
    /// key) loads with a fresh master key.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (version, payload) = state::decode_versioned(bytes, Kind::ContinualPrivHP)?;
        decode(payload, version).map_err(|e| {
            let msg = e.to_string();
            if msg.starts_with("invalid dpstream state") {
                invalid!("{msg}")
            } else {
                invalid!("invalid dpstream state: {msg}")
            }
        })
    }
}

fn decode(payload: &[u8], version: u16) -> Result<ContinualPrivHP> {
    let mut r = Reader::new(payload);
    let epsilon = state::read_rational(&mut r)?;
    let dim = usize::try_from(r.u64()?).map_err(|_| invalid!("dim out of range"))?;
    let memory_budget =
        usize::try_from(r.u64()?).map_err(|_| invalid!("memory_bytes out of range"))?;
    let expected_n = r.u64()?;
    let max_releases = r.u64()?;
    let time = r.u64()?;
    let epochs = r.u64()?;
    let params = Params::new(&epsilon, dim, memory_budget, expected_n, max_releases)?;
    let cfg = &params.cfg;
    if epochs > max_releases || epochs > time {
        return Err(invalid!("{epochs} epochs out of range"));
    }
    let mut rng = state::read_rng(&mut r)?;
    let master = if version >= 2 {
        let mut m = [0u8; 32];
        for b in m.iter_mut() {
            *b = r.u8()?;
        }
        m
    } else {
        rng.draw_key()
    };
    if !rng.is_seeded() {
        // The OS-seeded generator's key is never saved: a loaded copy samples
        // from one derived from the master key and the public position.
        let key = crate::rng::derive_key(&master, &[crate::rng::tag::LOADED_SAMPLER, time, epochs]);
        rng = Rng::keyed_stream(key, 0, false);
    }
    let blob = |r: &mut Reader<'_>| -> Result<Vec<u8>> {
        let n = r.count(1)?;
        (0..n).map(|_| r.u8()).collect()
    };
    let summary = |r: &mut Reader<'_>, current: Option<&PrivHP>| -> Result<PrivHP> {
        let p = PrivHP::from_bytes(&blob(r)?)?;
        if p.config() != cfg || current.is_some_and(|c| !c.same_shape(&p)) {
            return Err(invalid!(
                "a block summary does not match the shared configuration and hash keys"
            ));
        }
        Ok(p)
    };
    let current = summary(&mut r, None)?;
    let levels = params.levels;
    let mut alphas = Vec::with_capacity(levels as usize);
    let mut gens = Vec::with_capacity(levels as usize);
    let mut total = current.points_seen();
    for j in 0..levels {
        let alpha = summary(&mut r, Some(&current))?;
        let g = match r.u8()? {
            0 => None,
            1 => Some(TreeGenerator::from_bytes(&blob(&mut r)?)?),
            v => return Err(invalid!("unknown generator flag {v}")),
        };
        let live = epochs >> j & 1 == 1;
        if live != g.is_some() || live != (alpha.points_seen() > 0) {
            return Err(invalid!("block {j} does not match {epochs} epochs"));
        }
        if let Some(g) = &g {
            if g.dim() != dim || g.n_nodes() > cfg.max_generator_nodes() {
                return Err(invalid!("generator {j} does not fit the configuration"));
            }
        }
        total = total.saturating_add(alpha.points_seen());
        alphas.push(alpha);
        gens.push(g);
    }
    r.finish()?;
    if total != time {
        return Err(invalid!("the summaries count {total} points, not {time}"));
    }
    Ok(ContinualPrivHP {
        params,
        rng,
        master,
        time,
        epochs,
        current,
        alphas,
        gens,
    })
}

#[cfg(test)]
#[path = "continual_tests.rs"]
mod tests;

//! The default online synthesizer: noisy hierarchical histograms over
//! release epochs, combined by a tree mechanism, least squares and pruning.
//!
//! # Mechanism
//!
//! * **Epochs.** Points arrive one per time step. A release closes an
//!   *epoch*: the points that arrived since the previous release (a release
//!   with no new point closes none). Epochs are numbered `e = 1, 2, …`; their
//!   boundaries are the release times, which the caller fixes independently
//!   of the data, so every epoch's size is public.
//! * **Blocks** (a `b`-ary tree mechanism over epochs, restarted at every
//!   power of `b` = [`BRANCHING`]). Epochs `[b^k, b^{k+1})` form *super-block*
//!   `k`, cut into `b − 1` aligned runs of `b^k` epochs. When epoch `e`
//!   closes, block `[e, e]` is formed, and `b` adjacent blocks of equal
//!   length `b^h` that make up an aligned run of `b^{h+1}` epochs merge into a
//!   new block (at most `b^k` long, so blocks never cross super-blocks). A
//!   point of super-block `k` enters exactly `k + 1` blocks.
//! * **Measurements.** Every block `b` of super-block `k` with `n_b` points
//!   measures the exact counts of every cell of levels `1..=L_b` of the
//!   binary partition of `[0,1]^d` (the partition of [`crate::partition`]),
//!   each with independent discrete Laplace noise of scale
//!   `λ_b = 2·L_b·(k+1)/ε`. The depth `L_b` ([`block_depth`]) is a function
//!   of the public `n_b`, `k` and ε. Noise is drawn lazily: the noise of cell
//!   `θ` at level `l` in block `b` is the first draw of ChaCha12 stream
//!   `2^l + θ` under the block's 256-bit key, so it is fixed when the block is
//!   formed, whether or not it is ever looked at. The key is derived from the
//!   object's secret master key, the block's first epoch and length and a
//!   keyed digest of its points (`block_key`): distinct blocks get
//!   independent keys, and a checkpoint loaded again and fed the same points
//!   forms the same blocks with the same keys (nothing to average).
//! * **Release** at epoch `e` (after closing it): the live blocks partition
//!   epochs `1..=e` (the `b − 1` roots of each finished super-block and the
//!   base-`b` decomposition of the current one). The pooled measurement of a cell at
//!   level `l` is the sum of the measurements of the blocks with `L_b ≥ l`,
//!   scaled by `t / (their points)`. A tree is grown from the root (count `t`,
//!   public): a cell is split while its pooled measurement is at least
//!   [`EXPAND_SDS`] standard deviations of its children's. The counts of the
//!   tree are fitted by variance-weighted least squares (the root fixed at
//!   `t`), made non-negative top-down (a negative child gets 0, its sibling
//!   the parent's count), and rounded; synthetic points are uniform in the
//!   leaves.
//!
//! # Privacy
//!
//! * **Neighbouring relation**: two streams that differ in the point of one
//!   time step (one point replaced by another). The time `t` and the release
//!   times are public.
//! * **Guarantee**: all releases at all times, together, are ε-DP. A replaced
//!   point lies in the same epoch in both streams, hence in the same `k + 1`
//!   blocks (`k` = its super-block). In each block it changes the exact count
//!   of at most two cells per level, by one each: ℓ1-sensitivity `2·L_b` for
//!   the block's `L_b` levels, measured with noise `2·L_b·(k+1)/ε`, so each
//!   block costs `ε/(k+1)` and the `k + 1` blocks cost ε ([`block_epsilon`]
//!   is the split; its test sums it). Lazy noise is the eager noise drawn in
//!   another order: every (block, cell) noise value is a fixed independent
//!   draw. The tree growth, least squares, rounding and sampling read only
//!   the noisy measurements and public values: post-processing.
//! * **Public**: ε, `d`, `t`, the release times (hence the epochs, blocks,
//!   their sizes and depths).
//! * **Noise**: exact discrete Laplace; integer arithmetic for every value
//!   that touches the data.
//!
//! # Cost
//!
//! Memory is `8` bytes per point (the exact 63-bit path of every point, kept
//! sorted per block) plus a constant per block: [`EpochSynthesizer::memory_bytes`]
//! is this public formula. An update encodes and appends (`O(d)` per
//! point); a release sorts the new epoch, merges blocks (`O(t)` at worst,
//! amortised `O(log R)` per point) and grows the tree (one binary search and
//! at most one noise draw per block and tree cell).

use crate::error::{invalid, Error, Result};
use crate::noise::DiscreteLaplace;
use crate::partition::path::{encode_points, MAX_DEPTH};
use crate::rational::Rational;
use crate::rng::Rng;
use crate::state::{self, Kind, Reader, Writer};
use crate::synth::release::{chunked_release, ChunkedRelease};
use crate::synth::tree_generator::{Node, TreeGenerator};
use num_bigint::BigUint;
use std::borrow::Cow;

/// Deepest level any block measures.
pub const MAX_EPOCH_DEPTH: u32 = 48;

/// Largest number of steps (`2^62`): counts stay far inside `i64`.
const MAX_TIME: u64 = 1 << 62;

/// Paths are kept at the deepest encodable level; a level-`l` cell is `path >> (63 − l)`.
const PATH_BITS: u32 = MAX_DEPTH;

/// Depth rule ([`block_depth`]): the deepest level `L` with
/// `2^L · L ≤ DEPTH_FACTOR · n_b · ε_b / 2`, i.e. where a uniform spread of the
/// block's points would leave about `DEPTH_FACTOR` noise scales per cell.
/// Chosen on a tuning stream that is not in the benchmark (see
/// `benches/bench_online.py`); any value keeps the guarantee.
pub const DEPTH_FACTOR: u64 = 16;

/// A cell is split while its pooled measurement is at least this many
/// standard deviations of its children's pooled noise. Post-processing (any
/// value keeps the guarantee); chosen on the same tuning stream.
pub const EXPAND_SDS: f64 = 1.0;

/// Branching factor `b` of the blocks: epochs `b^k … b^(k+1) − 1` form
/// super-block `k`, split into `b`-ary trees of `b^k` epochs. A larger `b`
/// puts each point in fewer blocks (`k + 1`, with `k = ⌊log_b e⌋`) at the
/// cost of more blocks per release (up to `b − 1` per level). Public; chosen
/// on the tuning stream (see [`DEPTH_FACTOR`]).
pub const BRANCHING: u64 = 16;

/// Super-block of epoch `e ≥ 1`: `⌊log_b e⌋`.
pub fn super_block(epoch: u64) -> u32 {
    epoch.max(1).ilog(BRANCHING)
}

/// Hard cap on the cells of one release tree (a guard, far above the
/// expected size, which is `O(t)`).
const MAX_TREE_NODES: usize = 1 << 26;

/// ε of each block of super-block `k`: `ε / (k + 1)` (a point of super-block
/// `k` is in `k + 1` blocks).
/// (Through `planted::spend`: the identity, except in test builds
/// with the `planted-bugs` feature, where the audits plant a bug here.)
pub fn block_epsilon(epsilon: &Rational, k: u32) -> Result<Rational> {
    crate::planted::spend(epsilon.div(&Rational::new(k + 1, 1u32)?)?)
}

/// The split of ε for a point of super-block `k`: the ε of each of the `k + 1`
/// blocks it enters ([`block_epsilon`] each). The docs' split and the ledger
/// ([`EpochSynthesizer::epsilon_ledger`]) both come from here.
pub fn point_split(epsilon: &Rational, k: u32) -> Result<Vec<Rational>> {
    let per = block_epsilon(epsilon, k)?;
    Ok(vec![per; k as usize + 1])
}

/// Noise scale of a block of super-block `k` measuring `depth ≥ 1` levels:
/// `2·depth / block_epsilon` (ℓ1-sensitivity `2·depth` under replacement).
pub fn block_scale(epsilon: &Rational, k: u32, depth: u32) -> Result<Rational> {
    Rational::new(2 * u64::from(depth), 1u32)?.div(&block_epsilon(epsilon, k)?)
}

/// Levels measured by a block of `n` points in super-block `k` (public): the
/// largest `L ≤ MAX_EPOCH_DEPTH` with `2^L·L·2·(k+1) ≤ DEPTH_FACTOR·n·ε`,
/// in exact integer arithmetic; 0 if none.
pub fn block_depth(epsilon: &Rational, k: u32, n: u64) -> u32 {
    let rhs = BigUint::from(DEPTH_FACTOR) * BigUint::from(n) * epsilon.numer();
    let mut depth = 0;
    for l in 1..=MAX_EPOCH_DEPTH {
        let lhs = (BigUint::from(1u32) << l)
            * BigUint::from(l)
            * BigUint::from(2 * (u64::from(k) + 1))
            * epsilon.denom();
        if lhs > rhs {
            break;
        }
        depth = l;
    }
    depth
}

/// An aligned run of `b^h` epochs with its exact point paths and its noise key.
#[derive(Clone)]
struct Block {
    /// First epoch (1-based) and number of epochs (a power of two).
    first: u64,
    len: u64,
    /// Super-block: `first` lies in `[2^k, 2^{k+1})`.
    k: u32,
    /// Levels measured (`1..=depth`).
    depth: u32,
    /// Key of the block's noise streams. **Secret** (with it, the noise could be subtracted).
    key: [u8; 32],
    /// Sorted 63-bit paths of the block's points.
    paths: Vec<u64>,
    /// Noise sampler of scale [`block_scale`]; `None` when `depth == 0`.
    laplace: Option<DiscreteLaplace>,
}

impl Block {
    fn new(
        epsilon: &Rational,
        first: u64,
        len: u64,
        key: [u8; 32],
        paths: Vec<u64>,
    ) -> Result<Self> {
        let k = super_block(first);
        let depth = block_depth(epsilon, k, paths.len() as u64);
        let laplace = if depth == 0 {
            None
        } else {
            Some(DiscreteLaplace::new(&block_scale(epsilon, k, depth)?)?)
        };
        Ok(Self {
            first,
            len,
            k,
            depth,
            key,
            paths,
            laplace,
        })
    }

    /// Variance of one noise draw (`2p/(1−p)^2`, `p = e^{−1/λ}`), 0 if unmeasured.
    fn variance(&self) -> f64 {
        match &self.laplace {
            None => 0.0,
            Some(lap) => {
                let p = (-1.0 / lap.scale().to_f64_lossy()).exp();
                2.0 * p / ((1.0 - p) * (1.0 - p))
            }
        }
    }

    /// The noise of cell `theta` at `level` (`1..=depth`): a fixed function of the key.
    #[cfg(test)]
    fn noise(&self, level: u32, theta: u64, seeded: bool) -> Result<i64> {
        self.noise_read(level, theta, seeded, self.key)
    }

    /// The noise of a cell under `key` (the block's, or a planted bug's).
    fn noise_read(&self, level: u32, theta: u64, seeded: bool, key: [u8; 32]) -> Result<i64> {
        let lap = self
            .laplace
            .as_ref()
            .ok_or_else(|| invalid!("block measures no level"))?;
        #[cfg(test)]
        tests::trace_read(self, key, lap.scale());
        let stream = (1u64 << level) | theta;
        lap.sample(&mut Rng::keyed_stream(key, stream, seeded))
    }

    /// The keys of the noisy measurements of this block that release number
    /// `release` reads: the block's own key, unless a bug is planted
    /// (feature `planted-bugs`: a second, independent measurement of a merged
    /// block, or a key mixed with the release's index).
    fn measurement_keys(&self, release: u64) -> Vec<[u8; 32]> {
        use crate::planted::EpochsBug;
        match crate::planted::epochs_bug() {
            EpochsBug::None => vec![self.key],
            EpochsBug::ExtraBlock if self.len > 1 => {
                vec![self.key, crate::rng::derive_key(&self.key, &[u64::MAX])]
            }
            EpochsBug::ExtraBlock => vec![self.key],
            EpochsBug::RedrawEachRelease => {
                vec![crate::rng::derive_key(&self.key, &[release])]
            }
        }
    }
}

/// What every step of [`EpochSynthesizer::grow`] reads.
struct GrowContext<'a> {
    /// Per level: the scale factor `t / (points of the measuring blocks)`.
    scale: &'a [f64],
    /// Per level: the pooled variance.
    var: &'a [f64],
    /// Per block: the keys of its measurements this release reads.
    keys: &'a [Vec<[u8; 32]>],
    max_depth: u32,
    seeded: bool,
}

/// One cell of a release tree while it is fitted.
#[derive(Clone, Copy)]
struct FitNode {
    level: u32,
    theta: u64,
    /// Pooled measurement and its variance (the root: `t`, 0).
    y: f64,
    var: f64,
    /// Left child (the right one follows), or `u32::MAX`.
    left: u32,
    /// Subtree estimate and its variance (bottom-up), then the fit (top-down).
    z: f64,
    u: f64,
    x: f64,
}

/// The default ε-DP online synthesizer; see the [module docs](self).
pub struct EpochSynthesizer {
    epsilon: Rational,
    dim: usize,
    rng: Rng,
    /// Secret master key: every block's noise key is derived from it, the
    /// block's position and a digest of its points (`block_key`).
    master: [u8; 32],
    time: u64,
    /// Epochs closed so far.
    epochs: u64,
    /// Paths of the points of the open epoch, in arrival order.
    pending: Vec<u64>,
    /// Live blocks by first epoch: they partition epochs `1..=epochs`.
    blocks: Vec<Block>,
    /// Releases fitted by this object (a planted bug's input only).
    releases: u64,
}

impl std::fmt::Debug for EpochSynthesizer {
    // Counts, paths and keys are secret; only public values are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpochSynthesizer")
            .field("epsilon", &self.epsilon.to_string())
            .field("dim", &self.dim)
            .field("time", &self.time)
            .field("epochs", &self.epochs)
            .finish_non_exhaustive()
    }
}

/// Bytes of the fixed part of a block in [`EpochSynthesizer::memory_bytes`].
const BLOCK_BYTES: usize = std::mem::size_of::<Block>();

impl EpochSynthesizer {
    /// An ε-DP synthesizer on `[0,1]^dim` (`1 ≤ dim ≤ 4096`) drawing its block
    /// keys and sampling randomness from `rng` (a seeded generator is
    /// reproducible and **not private**). Fails on `ε = 0` or a bad `dim`.
    pub fn new(epsilon: &Rational, dim: usize, rng: Rng) -> Result<Self> {
        if epsilon.is_zero() {
            return Err(invalid!("epsilon must be positive, got 0"));
        }
        if dim == 0 || dim > crate::synth::MAX_ONLINE_DIM as usize {
            return Err(invalid!(
                "dim must be between 1 and {}, got {dim}",
                crate::synth::MAX_ONLINE_DIM
            ));
        }
        // The noise scale of the deepest, latest block must be representable.
        block_scale(epsilon, 62, MAX_EPOCH_DEPTH)?;
        let mut rng = rng;
        let master = rng.draw_key();
        Ok(Self {
            epsilon: epsilon.clone(),
            dim,
            rng,
            master,
            time: 0,
            epochs: 0,
            pending: Vec::new(),
            blocks: Vec::new(),
            releases: 0,
        })
    }

    /// ε of the whole stream of releases.
    pub fn epsilon(&self) -> &Rational {
        &self.epsilon
    }

    /// Dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Releases fitted so far by this object (not saved; only a planted bug
    /// reads it).
    fn next_release(&mut self) -> u64 {
        self.releases += 1;
        self.releases
    }

    /// Points seen (public).
    pub fn time(&self) -> u64 {
        self.time
    }

    /// Epochs closed, i.e. releases that had new points (public).
    pub fn epochs(&self) -> u64 {
        self.epochs
    }

    /// Live blocks (public: a function of the number of epochs).
    pub fn n_blocks(&self) -> usize {
        self.blocks.len()
    }

    /// Deepest level a release can reach now: the largest depth of the live
    /// blocks and of the block the open epoch would form (public).
    pub fn depth(&self) -> u32 {
        self.blocks.iter().map(|b| b.depth).max().unwrap_or(0)
    }

    /// The ledger: the largest ε a point of the stream so far costs, the sum
    /// of [`point_split`] over the super-blocks its epochs (and the open one)
    /// reach; ε itself for a correct split.
    pub fn epsilon_ledger(&self) -> Result<Rational> {
        let mut worst = Rational::new(0u32, 1u32)?;
        for k in 0..=super_block(self.epochs + 1) {
            let total = Rational::sum(&point_split(&self.epsilon, k)?);
            if total > worst {
                worst = total;
            }
        }
        Ok(worst)
    }

    /// Whether the generator is seeded (reproducible, **not private**).
    pub fn is_seeded(&self) -> bool {
        self.rng.is_seeded()
    }

    /// Bytes held, by a public formula: 8 bytes per point seen (their paths)
    /// plus a fixed size per live block and for the object. It does not
    /// depend on where the points fell. (The open epoch's buffer grows by
    /// doubling, so its allocation may exceed its 8 bytes per point by up to
    /// twice; the report counts the points.)
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + 8 * self.time as usize + BLOCK_BYTES * self.blocks.len()
    }

    /// Feed `n` points (row-major `n × dim` in `[0,1]`), `n` time steps. All
    /// or nothing: on a bad value nothing changes.
    pub fn update(&mut self, points: &[f64]) -> Result<()> {
        if points.len() % self.dim != 0 {
            return Err(invalid!(
                "points has {} values, which is not a multiple of dim = {}",
                points.len(),
                self.dim
            ));
        }
        let n = points.len() / self.dim;
        if self.time + n as u64 > MAX_TIME {
            return Err(invalid!("the stream would pass 2^62 points"));
        }
        // Amortised growth (many small batches stay linear); encoded in place, and
        // the tail is dropped again if a value is refused.
        self.pending
            .try_reserve(n)
            .map_err(|_| Error::OutOfMemory(format!("cannot hold {n} point paths")))?;
        let start = self.pending.len();
        self.pending.resize(start + n, 0);
        if let Err(e) = encode_points(points, self.dim, PATH_BITS, &mut self.pending[start..]) {
            self.pending.truncate(start);
            return Err(e);
        }
        self.time += n as u64;
        Ok(())
    }

    /// Feed the points of the open epoch as exact counts of their finest
    /// cells: `counts[i]` points whose 63-bit path ([`crate::partition::path`]
    /// at level 63) is `paths[i]`, `Σ counts` time steps. The state afterwards
    /// is the state [`Self::update`] gives on those points, in any order
    /// (the open epoch is a multiset: it is sorted when the epoch closes, and
    /// [`Self::to_bytes`] writes it sorted), so the releases are the same.
    /// For counts made elsewhere (a cluster counting its partitions). All or
    /// nothing: a path beyond 63 bits, mismatched lengths or a stream past
    /// `2^62` points changes nothing. Paths may repeat; a count may be 0.
    pub fn update_counts(&mut self, paths: &[u64], counts: &[u64]) -> Result<()> {
        if paths.len() != counts.len() {
            return Err(invalid!(
                "paths and counts must have the same length, got {} and {}",
                paths.len(),
                counts.len()
            ));
        }
        if let Some(p) = paths.iter().find(|&&p| p >> PATH_BITS != 0) {
            return Err(invalid!("path {p} does not fit in {PATH_BITS} bits"));
        }
        let n = counts
            .iter()
            .try_fold(0u64, |acc, &c| acc.checked_add(c))
            .filter(|&n| n <= MAX_TIME - self.time)
            .ok_or_else(|| invalid!("the stream would pass 2^62 points"))?;
        let n = usize::try_from(n)
            .map_err(|_| Error::OutOfMemory(format!("cannot hold {n} point paths")))?;
        self.pending
            .try_reserve(n)
            .map_err(|_| Error::OutOfMemory(format!("cannot hold {n} point paths")))?;
        if n == paths.len() && counts.iter().all(|&c| c == 1) {
            // Every cell once (distinct points): the paths as they are.
            self.pending.extend_from_slice(paths);
        } else {
            for (&p, &c) in paths.iter().zip(counts) {
                // `c <= n`, which fits in usize (checked above).
                self.pending
                    .extend(std::iter::repeat_n(p, usize::try_from(c).unwrap_or(0)));
            }
        }
        self.time += n as u64;
        Ok(())
    }

    /// A mark of the open epoch for [`Self::rollback_to`]: the epochs closed,
    /// the points of the open epoch and the time.
    pub fn mark(&self) -> (u64, u64, u64) {
        (self.epochs, self.pending.len() as u64, self.time)
    }

    /// Undo every update since `mark` (taken in the same open epoch): the
    /// state is then the state when the mark was taken, byte for byte. For
    /// feeds of several calls that must be all or nothing (a cluster's
    /// partitions). Refused, with nothing changed, for a mark of another epoch
    /// or one that does not match the updates since.
    pub fn rollback_to(&mut self, mark: (u64, u64, u64)) -> Result<()> {
        let (epochs, pending, time) = mark;
        let now = self.pending.len() as u64;
        if epochs != self.epochs
            || pending > now
            || time > self.time
            || self.time - time != now - pending
        {
            return Err(invalid!(
                "the mark does not belong to this synthesizer's open epoch"
            ));
        }
        self.pending.truncate(pending as usize);
        self.time = time;
        Ok(())
    }

    /// Close the open epoch if it has points: form its block and merge.
    fn close_epoch(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut paths = std::mem::take(&mut self.pending);
        paths.sort_unstable();
        let epoch = self.epochs + 1;
        let key = block_key(&self.master, epoch, 1, &paths);
        self.blocks
            .push(Block::new(&self.epsilon, epoch, 1, key, paths)?);
        self.epochs = epoch;
        // Merge the last b blocks while they are the b parts of an aligned run of
        // b^(h+1) epochs inside one super-block.
        let b = BRANCHING as usize;
        while self.blocks.len() >= b {
            let tail = &self.blocks[self.blocks.len() - b..];
            let (first, len, k) = (tail[0].first, tail[0].len, tail[0].k);
            let grown = len
                .checked_mul(BRANCHING)
                .filter(|&l| first % l == 0 && l <= BRANCHING.pow(k));
            let mergeable = grown.is_some()
                && tail
                    .iter()
                    .enumerate()
                    .all(|(i, x)| x.k == k && x.len == len && x.first == first + i as u64 * len);
            if !mergeable {
                break;
            }
            let parts: Vec<Block> = self.blocks.drain(self.blocks.len() - b..).collect();
            let merged = merge_all(&parts)?;
            let key = block_key(&self.master, first, len * BRANCHING, &merged);
            self.blocks.push(Block::new(
                &self.epsilon,
                first,
                len * BRANCHING,
                key,
                merged,
            )?);
        }
        Ok(())
    }

    /// Close the open epoch and fit the release tree: a generator whose leaf
    /// counts are non-negative, consistent and sum to `t`.
    pub fn release_tree(&mut self) -> Result<TreeGenerator> {
        self.close_epoch()?;
        let release = self.next_release();
        let nodes = self.fit(release)?;
        let counts = round_leaves(&nodes, self.time);
        let arena = nodes
            .iter()
            .zip(&counts)
            .map(|(n, &c)| Node {
                level: n.level,
                theta: n.theta,
                count: c,
                left: n.left,
            })
            .collect();
        TreeGenerator::from_nodes(self.dim, arena, self.rng.is_seeded())
    }

    chunked_release! {
        /// `t` synthetic points (`size = None`: the rounded leaf counts, uniform in
        /// each leaf) or `size` i.i.d. draws from the same tree; row-major: the
        /// chunks of [`Self::release_sampler`] with [`CHUNK_ROWS`](crate::synth::CHUNK_ROWS) rows each.
    }

    /// The release of [`Self::release`] in chunks of `chunk_rows` rows (at
    /// least 1), with a sampling key drawn from the synthesizer's generator:
    /// closes the open epoch and fits the release tree.
    pub fn release_sampler(
        &mut self,
        size: Option<u64>,
        chunk_rows: u64,
    ) -> Result<ChunkedRelease<'static>> {
        if let Some(r) = ChunkedRelease::unseen(self.time, self.dim, size, chunk_rows) {
            return r;
        }
        let tree = self.release_tree()?;
        let parts = vec![(self.time, Cow::Owned(tree))];
        ChunkedRelease::trees(self.dim, parts, size, &mut self.rng, chunk_rows)
    }

    /// The pooled measurement of the children of a cell, per block ranges.
    fn fit(&self, release: u64) -> Result<Vec<FitNode>> {
        let keys: Vec<Vec<[u8; 32]>> = self
            .blocks
            .iter()
            .map(|b| b.measurement_keys(release))
            .collect();
        let t = self.time as f64;
        let seeded = self.rng.is_seeded();
        let max_depth = self.depth();
        // Per level: scale factor t / (points of the measuring blocks) and the pooled variance.
        let mut scale = vec![0.0f64; max_depth as usize + 1];
        let mut var = vec![0.0f64; max_depth as usize + 1];
        for l in 1..=max_depth {
            let (mut pts, mut v) = (0u64, 0.0f64);
            for (b, k) in self.blocks.iter().zip(&keys).filter(|(b, _)| b.depth >= l) {
                pts += k.len() as u64 * b.paths.len() as u64;
                v += k.len() as f64 * b.variance();
            }
            let s = t / pts as f64;
            scale[l as usize] = s;
            var[l as usize] = s * s * v;
        }
        let root = FitNode {
            level: 0,
            theta: 0,
            y: t,
            var: 0.0,
            left: u32::MAX,
            z: t,
            u: 0.0,
            x: t,
        };
        let mut nodes = vec![root];
        let ranges: Vec<(usize, usize)> = self.blocks.iter().map(|b| (0, b.paths.len())).collect();
        let ctx = GrowContext {
            scale: &scale,
            var: &var,
            keys: &keys,
            max_depth,
            seeded,
        };
        self.grow(&mut nodes, 0, &ranges, &ctx)?;
        least_squares(&mut nodes, t);
        Ok(nodes)
    }

    /// Split node `i` (its blocks' path ranges `ranges`) if it carries enough
    /// mass, then recurse into the children.
    fn grow(
        &self,
        nodes: &mut Vec<FitNode>,
        i: usize,
        ranges: &[(usize, usize)],
        ctx: &GrowContext<'_>,
    ) -> Result<()> {
        let (scale, var, max_depth, seeded) = (ctx.scale, ctx.var, ctx.max_depth, ctx.seeded);
        let (level, theta, y) = (nodes[i].level, nodes[i].theta, nodes[i].y);
        if level >= max_depth || y < EXPAND_SDS * var[level as usize + 1].sqrt() {
            return Ok(());
        }
        if nodes.len() + 2 > MAX_TREE_NODES {
            return Err(invalid!(
                "the release tree would pass {MAX_TREE_NODES} cells"
            ));
        }
        let cl = level + 1;
        let split = (2 * theta + 1) << (PATH_BITS - cl);
        let mut left_ranges = Vec::with_capacity(ranges.len());
        let mut right_ranges = Vec::with_capacity(ranges.len());
        let (mut y0, mut y1) = (0i64, 0i64);
        for ((b, &(lo, hi)), keys) in self.blocks.iter().zip(ranges).zip(ctx.keys) {
            let mid = lo + b.paths[lo..hi].partition_point(|&p| p < split);
            left_ranges.push((lo, mid));
            right_ranges.push((mid, hi));
            if b.depth >= cl {
                for &key in keys {
                    y0 += (mid - lo) as i64 + b.noise_read(cl, 2 * theta, seeded, key)?;
                    y1 += (hi - mid) as i64 + b.noise_read(cl, 2 * theta + 1, seeded, key)?;
                }
            }
        }
        let s = scale[cl as usize];
        let left = nodes.len();
        for (th, yy) in [(2 * theta, y0), (2 * theta + 1, y1)] {
            nodes.push(FitNode {
                level: cl,
                theta: th,
                y: yy as f64 * s,
                var: var[cl as usize],
                left: u32::MAX,
                z: 0.0,
                u: 0.0,
                x: 0.0,
            });
        }
        nodes[i].left = left as u32;
        self.grow(nodes, left, &left_ranges, ctx)?;
        self.grow(nodes, left + 1, &right_ranges, ctx)
    }

    /// Encode the state for a checkpoint. **Sensitive**: it holds the exact
    /// point paths, the master key and the blocks' noise keys (protect it
    /// like the raw data). Every block formed after a load takes its key from
    /// the master key, its position and a digest of its points
    /// (`block_key`), so loading a checkpoint any number of times and
    /// feeding the same points gives the same releases, byte for byte (a
    /// loaded OS-seeded copy samples from a generator derived from the master
    /// key and the public position); other points give independent noise. A
    /// checkpoint supports one continuation: each continuation on other data
    /// is a separate use of the budget.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        state::write_rational(&mut w, &self.epsilon);
        w.u64(self.dim as u64);
        w.u64(self.time);
        w.u64(self.epochs);
        state::write_rng(&mut w, &self.rng);
        for byte in self.master {
            w.u8(byte);
        }
        // The open epoch is a multiset (sorted when it closes): written sorted, so
        // that equal multisets fed in any order or as counts encode equally.
        let mut pending = self.pending.clone();
        pending.sort_unstable();
        w.u64(pending.len() as u64);
        for p in &pending {
            w.u64(*p);
        }
        w.u64(self.blocks.len() as u64);
        for b in &self.blocks {
            w.u64(b.first);
            w.u64(b.len);
            for byte in b.key {
                w.u8(byte);
            }
            w.u64(b.paths.len() as u64);
            for p in &b.paths {
                w.u64(*p);
            }
        }
        state::encode(Kind::EpochSynthesizer, &w.finish())
    }

    /// Decode [`Self::to_bytes`] output; a clear error on truncated,
    /// corrupted or foreign data, or on a state that breaks an invariant.
    /// A version-1 checkpoint (before the master key) loads with a master key
    /// derived from its first block's saved key (so its continuations are
    /// tied in the same way), or a fresh one if no epoch had closed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (version, payload) = state::decode_versioned(bytes, Kind::EpochSynthesizer)?;
        let bad = |what: &str| invalid!("invalid dpstream state: {what}");
        let mut r = Reader::new(payload);
        let epsilon = state::read_rational(&mut r)?;
        let dim = usize::try_from(r.u64()?).map_err(|_| bad("dim"))?;
        let time = r.u64()?;
        let epochs = r.u64()?;
        if time > MAX_TIME || epochs > time {
            return Err(bad("time or epochs out of range"));
        }
        let mut rng = state::read_rng(&mut r)?;
        let mut s = Self::new(&epsilon, dim, Rng::seed_from_u64(0))?;
        let saved_master = if version >= 2 {
            let mut m = [0u8; 32];
            for b in m.iter_mut() {
                *b = r.u8()?;
            }
            Some(m)
        } else {
            None
        };
        let read_paths = |r: &mut Reader<'_>| -> Result<Vec<u64>> {
            let n = r.count(8)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let p = r.u64()?;
                if p >> PATH_BITS != 0 {
                    return Err(bad("path out of range"));
                }
                v.push(p);
            }
            Ok(v)
        };
        s.pending = read_paths(&mut r)?;
        let n_blocks = r.count(48)?;
        let mut next = 1u64;
        let mut total = s.pending.len() as u64;
        for _ in 0..n_blocks {
            let (first, len) = (r.u64()?, r.u64()?);
            let mut key = [0u8; 32];
            for b in key.iter_mut() {
                *b = r.u8()?;
            }
            let paths = read_paths(&mut r)?;
            if paths.is_empty() || paths.windows(2).any(|w| w[0] > w[1]) {
                return Err(bad("block paths empty or unsorted"));
            }
            // Blocks are contiguous aligned runs inside one super-block.
            let k = super_block(first);
            let aligned = first >= 1
                && len >= 1
                && len <= BRANCHING.pow(k)
                && BRANCHING.pow(len.ilog(BRANCHING)) == len
                && first == next
                && first % len == 0;
            if !aligned {
                return Err(bad("block layout"));
            }
            next = first.checked_add(len).ok_or_else(|| bad("block layout"))?;
            total += paths.len() as u64;
            s.blocks.push(Block::new(&epsilon, first, len, key, paths)?);
        }
        if next != epochs + 1 || total != time {
            return Err(bad("blocks do not cover the epochs and points"));
        }
        r.finish()?;
        s.master = match (saved_master, s.blocks.first()) {
            (Some(m), _) => m,
            (None, Some(b)) => crate::rng::derive_key(&b.key, &[crate::rng::tag::LEGACY_MASTER]),
            (None, None) => rng.draw_key(),
        };
        s.rng = rng;
        if !s.rng.is_seeded() {
            // The OS-seeded generator's key is never saved: a loaded copy samples
            // from one derived from the master key and the public position, so that
            // every load of this checkpoint releases the same points.
            let key =
                crate::rng::derive_key(&s.master, &[crate::rng::tag::LOADED_SAMPLER, time, epochs]);
            s.rng = Rng::keyed_stream(key, 0, false);
        }
        s.time = time;
        s.epochs = epochs;
        Ok(s)
    }
}

/// The noise key of the block of epochs `first .. first + len` holding the
/// sorted `paths`: derived from the master key, the block's position and a
/// keyed digest of its points. The same block (same epochs, same points)
/// gets the same key however often a checkpoint is loaded; a block with
/// other points gets an independent key.
fn block_key(master: &[u8; 32], first: u64, len: u64, paths: &[u64]) -> [u8; 32] {
    let mut digest = crate::rng::KeyedDigest::new(master);
    digest.words(paths);
    let [d0, d1] = digest.state();
    crate::rng::derive_key(
        master,
        &[
            crate::rng::tag::EPOCH_BLOCK,
            first,
            len,
            u64::from(super_block(first)),
            paths.len() as u64,
            d0,
            d1,
        ],
    )
}

/// The sorted union of the blocks' sorted paths.
fn merge_all(parts: &[Block]) -> Result<Vec<u64>> {
    let total = parts.iter().map(|p| p.paths.len()).sum();
    let mut out = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|_| Error::OutOfMemory("cannot merge blocks".into()))?;
    for p in parts {
        out.extend_from_slice(&p.paths);
    }
    out.sort_unstable();
    Ok(out)
}

/// Variance-weighted least squares over the tree (children follow their
/// parent in `nodes`), the root fixed at `t`; then non-negativity top-down.
fn least_squares(nodes: &mut [FitNode], t: f64) {
    for i in (0..nodes.len()).rev() {
        let n = nodes[i];
        if n.left == u32::MAX {
            nodes[i].z = n.y;
            nodes[i].u = n.var;
            continue;
        }
        let (a, b) = (nodes[n.left as usize], nodes[n.left as usize + 1]);
        let (s, us) = (a.z + b.z, a.u + b.u);
        if i == 0 || n.var <= 0.0 {
            nodes[i].z = if i == 0 { t } else { n.y };
            nodes[i].u = 0.0;
        } else if us <= 0.0 {
            nodes[i].z = s;
            nodes[i].u = 0.0;
        } else {
            let (wa, wb) = (1.0 / n.var, 1.0 / us);
            nodes[i].z = (n.y * wa + s * wb) / (wa + wb);
            nodes[i].u = 1.0 / (wa + wb);
        }
    }
    nodes[0].x = t;
    for i in 0..nodes.len() {
        let n = nodes[i];
        if n.left == u32::MAX {
            continue;
        }
        let l = n.left as usize;
        let (a, b) = (nodes[l], nodes[l + 1]);
        let us = a.u + b.u;
        let rest = n.x - (a.z + b.z);
        let (wa, wb) = if us > 0.0 {
            (a.u / us, b.u / us)
        } else {
            (0.5, 0.5)
        };
        let (mut xa, mut xb) = (a.z + rest * wa, b.z + rest * wb);
        if xa < 0.0 {
            xa = 0.0;
            xb = n.x;
        } else if xb < 0.0 {
            xb = 0.0;
            xa = n.x;
        }
        nodes[l].x = xa;
        nodes[l + 1].x = xb;
    }
}

/// Integer counts for every node: the leaves' fitted masses rounded by
/// largest remainder to sum to `t`, internal nodes the sums of their children.
fn round_leaves(nodes: &[FitNode], t: u64) -> Vec<f64> {
    let leaves: Vec<usize> = (0..nodes.len())
        .filter(|&i| nodes[i].left == u32::MAX)
        .collect();
    let total: f64 = leaves.iter().map(|&i| nodes[i].x).sum();
    let factor = if total > 0.0 { t as f64 / total } else { 0.0 };
    let mut counts = vec![0.0f64; nodes.len()];
    let mut floor_sum = 0u64;
    let mut rema: Vec<(f64, usize)> = Vec::with_capacity(leaves.len());
    for &i in &leaves {
        let v = nodes[i].x * factor;
        let f = v.floor().max(0.0);
        counts[i] = f;
        floor_sum += f as u64;
        rema.push((v - f, i));
    }
    let left = t.saturating_sub(floor_sum) as usize;
    rema.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
    // The remainders sum to `left` (< number of leaves) up to rounding error.
    if !rema.is_empty() {
        for j in 0..left {
            counts[rema[j % rema.len()].1] += 1.0;
        }
    }
    for i in (0..nodes.len()).rev() {
        let l = nodes[i].left;
        if l != u32::MAX {
            counts[i] = counts[l as usize] + counts[l as usize + 1];
        }
    }
    counts
}

#[cfg(test)]
#[path = "epochs_tests.rs"]
mod tests;

//! PrivHP: private synthetic data in small memory (Holland, Camtepe, Thapa,
//! Xue), Algorithms 2–4.
//!
//! ## Privacy
//! * Neighbouring relation: two streams that differ by adding or removing
//!   one point (add/remove neighbours).
//! * Public: the domain `[0,1]^dim`, every structural parameter (`k`,
//!   `width`, `rows`, `depth`, the sketch kind and its hash functions), and ε
//!   with its per-level split ([`privhp_budget`]). No structural parameter is
//!   derived from the data; the number of points is *not* released except
//!   through the noisy root count.
//! * Mechanism (Theorem 2): level `l ≤ L_k = ⌊log2 k⌋` of the exact tree gets
//!   independent discrete Laplace noise of scale `1/σ_l` on each count
//!   (sensitivity 1 per level); the sketch of level `l > L_k` gets scale
//!   `rows/σ_l` on each cell (sensitivity `rows`). With `Σ σ_l ≤ ε`, the
//!   noisy tree and sketches are ε-DP by basic composition, and the
//!   generator grown from them (pruning, consistency) is post-processing.
//! * Noise is drawn once, at [`PrivHP::release`]. Counting is linear, so this
//!   has the same output distribution as the paper's noise-at-initialisation;
//!   it also lets exact summaries be merged before release. After a release
//!   the object refuses further points: a second release of a grown stream
//!   would need a continual-release mechanism (Appendix A), not this one.
//! * [`PrivHP::to_bytes`] encodes an *unreleased* summary with its exact
//!   counts (for checkpoints and for merging summaries built on several
//!   machines): it is not private and must be protected like the raw data.
//!
//! ## Memory
//! Everything is allocated in [`PrivHP::new`]: the `2^{L_k+1} − 1` exact
//! counts, `depth − L_k` sketches of `rows × width` cells and a fixed path
//! buffer. [`PrivHP::memory_bytes`] equals [`PrivHPConfig::footprint`] and
//! never changes with the stream.

use super::budget::{privhp_budget, BudgetRule};
use super::tree_generator::{Node, TreeGenerator};
use crate::error::{invalid, Result};
use crate::noise::DiscreteLaplace;
use crate::partition::consistency::{enforce_consistency, enforce_tree};
use crate::partition::path::{encode_points, validate_points, MAX_DEPTH};
use crate::rational::Rational;
use crate::rng::Rng;
use crate::sketch::{LinearSketch, RowHash, SketchKind};
use crate::state::{self, Kind, Reader, Writer};

/// Points encoded per chunk during an update (each counting thread has a
/// path buffer of this many entries); small summaries use `SMALL_CHUNK`, so
/// that the buffers never dominate a small memory budget.
const CHUNK: usize = 4096;
const SMALL_CHUNK: usize = 256;
/// Summaries whose counters take less than this use `SMALL_CHUNK`.
const SMALL_SUMMARY_BYTES: usize = 512 << 10;
/// Batches smaller than this are counted on one thread (spawning costs more).
const PARALLEL_MIN_POINTS: usize = 8192;
/// Largest supported depth (sketch keys stay below 2^60).
pub const MAX_PRIVHP_DEPTH: u32 = 60;
const _: () = assert!(MAX_PRIVHP_DEPTH <= MAX_DEPTH);
/// Largest footprint a configuration may ask for.
const MAX_FOOTPRINT: usize = 1 << 34;
/// Streams longer than this are refused (counts stay far from i64 overflow).
const MAX_POINTS: u64 = 1 << 62;

/// Public parameters of a [`PrivHP`] instance.
#[derive(Clone, Debug, PartialEq)]
pub struct PrivHPConfig {
    /// Total privacy budget ε.
    pub epsilon: Rational,
    /// Dimension `d` of the domain `[0,1]^d`.
    pub dim: usize,
    /// Pruning parameter: hot cells kept per level.
    pub k: usize,
    /// Sketch width `w` (columns).
    pub width: usize,
    /// Sketch rows `j`.
    pub rows: usize,
    /// Depth `r` of the hierarchy.
    pub depth: u32,
    /// Count-min or count sketch.
    pub sketch: SketchKind,
    /// How ε is split across levels.
    pub budget: BudgetRule,
}

impl PrivHPConfig {
    /// `⌊log2 k⌋`, capped at `depth`: the levels kept exactly.
    pub fn exact_levels(&self) -> u32 {
        let l_k = usize::BITS - 1 - self.k.max(1).leading_zeros();
        l_k.min(self.depth)
    }

    /// Check every parameter; errors name the parameter.
    pub fn validate(&self) -> Result<()> {
        if self.epsilon.is_zero() {
            return Err(invalid!("epsilon must be positive, got 0"));
        }
        if self.dim == 0 || self.dim > 1 << 16 {
            return Err(invalid!("dim must be in 1..=65536, got {}", self.dim));
        }
        if self.depth == 0 || self.depth > MAX_PRIVHP_DEPTH {
            return Err(invalid!(
                "depth must be in 1..={MAX_PRIVHP_DEPTH}, got {}",
                self.depth
            ));
        }
        if self.k == 0 || self.k > 1 << 24 {
            return Err(invalid!("k must be in 1..=2^24, got {}", self.k));
        }
        if self.width == 0 || self.width > 1 << 30 {
            return Err(invalid!("width must be in 1..=2^30, got {}", self.width));
        }
        if self.rows == 0 || self.rows > 64 {
            return Err(invalid!("rows must be in 1..=64, got {}", self.rows));
        }
        let bytes = self.footprint();
        if bytes > MAX_FOOTPRINT {
            return Err(invalid!(
                "k = {}, width = {}, rows = {} and depth = {} need {bytes} bytes, \
                 more than the 16 GiB limit",
                self.k,
                self.width,
                self.rows,
                self.depth
            ));
        }
        Ok(())
    }

    /// Bytes a [`PrivHP`] with this configuration occupies (computed from the
    /// parameters alone; saturating for absurd ones).
    pub fn footprint(&self) -> usize {
        self.counter_bytes()
            .saturating_add(std::mem::size_of::<PrivHP>())
            .saturating_add((self.depth as usize + 1) * std::mem::size_of::<Rational>())
            .saturating_add(2 * self.chunk_len() * 8)
    }

    /// Bytes of the exact tree and the sketches.
    fn counter_bytes(&self) -> usize {
        let l_k = self.exact_levels();
        let tree = ((1usize << (l_k + 1)) - 1).saturating_mul(8);
        let sketch_levels = (self.depth - l_k) as usize;
        let per_sketch = LinearSketch::footprint(self.rows, self.width)
            .saturating_add(std::mem::size_of::<LinearSketch>());
        tree.saturating_add(sketch_levels.saturating_mul(per_sketch))
    }

    /// Points per encoding chunk (a function of the public parameters).
    fn chunk_len(&self) -> usize {
        if self.counter_bytes() < SMALL_SUMMARY_BYTES {
            SMALL_CHUNK
        } else {
            CHUNK
        }
    }

    /// Most nodes a released generator can hold: the exact tree plus two
    /// children for each of at most `k` hot cells on every sketched level.
    pub fn max_generator_nodes(&self) -> usize {
        let l_k = self.exact_levels();
        ((1usize << (l_k + 1)) - 1) + 2 * self.k * (self.depth - l_k) as usize
    }

    /// Parameters for a memory budget, from public values only.
    ///
    /// `depth = ⌈log2(ε · expected_n)⌉` (clamped to `1..=60`), as in the
    /// paper; then the largest power-of-two `k` with `width = 2k` whose
    /// footprint *plus* the largest generator it can release fits in
    /// `memory_bytes`. `expected_n` is a public guess of the stream length.
    pub fn for_memory(
        epsilon: Rational,
        dim: usize,
        expected_n: u64,
        memory_bytes: usize,
        sketch: SketchKind,
        rows: usize,
    ) -> Result<Self> {
        // ⌈log2(ε n)⌉ exactly: the smallest r with 2^r ≥ ε n, at least 1.
        let target = epsilon.numer() * num_bigint::BigUint::from(expected_n);
        let mut depth = 1u32;
        while depth < MAX_PRIVHP_DEPTH && (epsilon.denom() << depth as usize) < target {
            depth += 1;
        }
        let mut best = None;
        for log_k in 0..24 {
            let k = 1usize << log_k;
            let cfg = Self {
                epsilon: epsilon.clone(),
                dim,
                k,
                width: 2 * k,
                rows,
                depth,
                sketch,
                budget: BudgetRule::Optimal,
            };
            let total = cfg
                .footprint()
                .saturating_add(cfg.max_generator_nodes() * std::mem::size_of::<Node>());
            if total > memory_bytes {
                break;
            }
            best = Some(cfg);
        }
        let cfg = best.ok_or_else(|| {
            invalid!(
                "memory_bytes = {memory_bytes} is too small for any configuration at depth {depth}"
            )
        })?;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// The one-pass, fixed-memory PrivHP summary of a stream of points.
#[derive(Clone, Debug)]
pub struct PrivHP {
    cfg: PrivHPConfig,
    l_k: u32,
    sigmas: Vec<Rational>,
    /// Exact counts of levels `0..=l_k` in heap layout.
    tree: Vec<i64>,
    /// Sketches of levels `l_k+1..=depth`.
    sketches: Vec<LinearSketch>,
    paths: Vec<u64>,
    points: u64,
    released: Option<TreeGenerator>,
    threads: usize,
}

impl PrivHP {
    /// A new summary; hash functions are keyed from `rng`, every buffer is
    /// allocated here.
    pub fn new(cfg: PrivHPConfig, rng: &mut Rng) -> Result<Self> {
        cfg.validate()?;
        let l_k = cfg.exact_levels();
        let sigmas = checked_sigmas(&cfg)?;
        let mut sketches = (l_k + 1..=cfg.depth)
            .map(|_| LinearSketch::new(cfg.sketch, cfg.rows, cfg.width, rng))
            .collect::<Result<Vec<_>>>()?;
        sketches.shrink_to_fit();
        Ok(Self {
            tree: vec![0; (1usize << (l_k + 1)) - 1],
            sketches,
            paths: vec![0; 2 * cfg.chunk_len()],
            sigmas,
            l_k,
            cfg,
            points: 0,
            released: None,
            threads: default_threads(),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &PrivHPConfig {
        &self.cfg
    }

    /// `σ_0 … σ_depth`, the per-level budget (sums to at most ε).
    pub fn sigmas(&self) -> &[Rational] {
        &self.sigmas
    }

    /// Points counted so far. **Not private**: for the data holder only.
    pub fn points_seen(&self) -> u64 {
        self.points
    }

    /// Count on up to `threads` threads (1 or 2; the default is 2 where the
    /// machine has two cores). The sketched levels are split between the
    /// threads; the counts are identical either way.
    pub fn set_threads(&mut self, threads: usize) {
        self.threads = threads.clamp(1, 2);
    }

    /// Threads used by [`PrivHP::update`] (1 or 2).
    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Whether [`PrivHP::release`] has been called.
    pub fn is_released(&self) -> bool {
        self.released.is_some()
    }

    /// Bytes held, constant from construction on.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>()
            + self.tree.capacity() * 8
            + self.sketches.capacity() * std::mem::size_of::<LinearSketch>()
            + self
                .sketches
                .iter()
                .map(|s| s.memory_bytes() - std::mem::size_of::<LinearSketch>())
                .sum::<usize>()
            + self.sigmas.capacity() * std::mem::size_of::<Rational>()
            + self.paths.capacity() * 8
    }

    /// Count a batch of row-major `(n, dim)` points in `[0,1]^dim`. The
    /// batch is validated first: on error nothing is counted.
    pub fn update(&mut self, points: &[f64]) -> Result<()> {
        if self.released.is_some() {
            return Err(invalid!(
                "this PrivHP has been released; counting more points would need a second \
                 release, which its ε does not cover — start a new PrivHP"
            ));
        }
        validate_points(points, self.cfg.dim)?;
        let n = (points.len() / self.cfg.dim) as u64;
        if self.points.saturating_add(n) > MAX_POINTS {
            return Err(invalid!("stream longer than 2^62 points"));
        }
        let depth = self.cfg.depth;
        let dim = self.cfg.dim;
        let first_sketched = self.l_k + 1;
        let Self {
            tree,
            sketches,
            paths,
            l_k,
            threads,
            ..
        } = self;
        let half = paths.len() / 2;
        let (own, other) = paths.split_at_mut(half);
        let n_points = points.len() / dim;
        if *threads > 1 && n_points >= PARALLEL_MIN_POINTS && sketches.len() >= 2 {
            // The second thread streams the whole batch through the deeper
            // half of the sketches (encoding paths into its own buffer); this
            // thread counts the exact tree and the shallower half.
            let split = sketches.len() / 2;
            let (near, far) = sketches.split_at_mut(split);
            std::thread::scope(|scope| {
                let worker = scope.spawn(|| {
                    count_batch(points, dim, depth, other, |paths| {
                        count_sketches(far, paths, depth, first_sketched + split as u32)
                    })
                });
                let mine = count_batch(points, dim, depth, own, |paths| {
                    count_tree(tree, paths, depth, *l_k);
                    count_sketches(near, paths, depth, first_sketched);
                });
                let theirs = worker
                    .join()
                    .map_err(|_| invalid!("internal error: counting thread failed"));
                mine.and(theirs.and_then(|r| r))
            })?;
        } else {
            count_batch(points, dim, depth, own, |paths| {
                count_tree(tree, paths, depth, *l_k);
                count_sketches(sketches, paths, depth, first_sketched);
            })?;
        }
        self.points += n;
        Ok(())
    }

    /// An empty summary with this one's configuration and hash keys (public),
    /// to count partitions elsewhere and [`Self::merge`] them in. Refused after
    /// a release. Allocates one summary.
    pub fn empty_copy(&self) -> Result<PrivHP> {
        let mut copy = self.clone();
        copy.clear()?;
        Ok(copy)
    }

    /// Add the exact counts of `other` (same configuration and hashes), for
    /// summaries built on several machines. Refused after a release.
    pub fn merge(&mut self, other: &PrivHP) -> Result<()> {
        if self.released.is_some() || other.released.is_some() {
            return Err(invalid!("released summaries cannot be merged"));
        }
        if self.cfg != other.cfg {
            return Err(invalid!(
                "cannot merge PrivHP summaries with different parameters"
            ));
        }
        let points = self
            .points
            .checked_add(other.points)
            .filter(|&n| n <= MAX_POINTS)
            .ok_or_else(|| invalid!("the merged stream would be longer than 2^62 points"))?;
        // Check every pair first, then merge in place (no copy: feeding a
        // fixed-memory summary never allocates), so a failure changes nothing.
        for (a, b) in self.sketches.iter().zip(&other.sketches) {
            a.check_merge(b)?;
        }
        for (a, b) in self.sketches.iter_mut().zip(&other.sketches) {
            a.merge(b)?;
        }
        // Cannot overflow: every tree count is at most its summary's point count.
        for (a, b) in self.tree.iter_mut().zip(&other.tree) {
            *a += b;
        }
        self.points = points;
        Ok(())
    }

    /// The ε-DP release: add the noise, grow the pruned partition
    /// (Algorithm 3) with consistency (Algorithm 4) and return the
    /// generator. A second call returns the same generator without new noise.
    pub fn release(&mut self, rng: &mut Rng) -> Result<TreeGenerator> {
        if let Some(g) = &self.released {
            return Ok(g.clone());
        }
        // Draw all noise first, so that an error leaves the state unchanged.
        let mut tree = self.tree.clone();
        for l in 0..=self.l_k {
            let scale = Rational::new(1u32, 1u32)?.div(&self.sigmas[l as usize])?;
            let start = (1usize << l) - 1;
            DiscreteLaplace::new(&scale)?.add_noise(rng, &mut tree[start..2 * start + 1])?;
        }
        let mut sketches = self.sketches.clone();
        for (i, sketch) in sketches.iter_mut().enumerate() {
            let sigma = &self.sigmas[(self.l_k + 1) as usize + i];
            sketch.add_noise(rng, sigma)?;
        }
        let generator = grow_partition(&self.cfg, self.l_k, &tree, &sketches, rng.is_seeded())?;
        // The noisy state replaces the exact one: nothing exact is kept.
        self.tree = tree;
        self.sketches = sketches;
        self.released = Some(generator.clone());
        Ok(generator)
    }
}

/// Helpers for [`crate::synth::ContinualPrivHP`], which keeps several summaries
/// with one configuration and one set of hash keys.
impl PrivHP {
    /// Forget every count (an empty summary with the same configuration and
    /// hash keys). Does not allocate. Refused after a release.
    pub(crate) fn clear(&mut self) -> Result<()> {
        if self.released.is_some() {
            return Err(invalid!("a released PrivHP cannot be cleared"));
        }
        self.tree.fill(0);
        for sketch in &mut self.sketches {
            sketch.clear();
        }
        self.points = 0;
        Ok(())
    }

    /// Whether `other` has the same configuration and the same sketch hash keys.
    pub(crate) fn same_shape(&self, other: &PrivHP) -> bool {
        self.cfg == other.cfg
            && self
                .sketches
                .iter()
                .zip(&other.sketches)
                .all(|(a, b)| a.hashes() == b.hashes())
    }

    /// The ε-DP release of [`PrivHP::release`], consuming the summary: the
    /// noise is added to its own counts (no copy is made), then the pruned,
    /// consistent partition is grown. Same distribution as `release`.
    pub(crate) fn into_release(mut self, rng: &mut Rng) -> Result<TreeGenerator> {
        if let Some(g) = self.released.take() {
            return Ok(g);
        }
        for l in 0..=self.l_k {
            let scale = Rational::new(1u32, 1u32)?.div(&self.sigmas[l as usize])?;
            let start = (1usize << l) - 1;
            DiscreteLaplace::new(&scale)?.add_noise(rng, &mut self.tree[start..2 * start + 1])?;
        }
        for (i, sketch) in self.sketches.iter_mut().enumerate() {
            let sigma = &self.sigmas[(self.l_k + 1) as usize + i];
            sketch.add_noise(rng, sigma)?;
        }
        grow_partition(
            &self.cfg,
            self.l_k,
            &self.tree,
            &self.sketches,
            rng.is_seeded(),
        )
    }
}

/// # Encoding of an unreleased summary
///
/// [`PrivHP::to_bytes`] writes the [`crate::state`] format, kind
/// [`Kind::PrivHP`], for checkpoints and for shipping summaries between
/// machines (build on each, [`PrivHP::merge`], release once). Payload, all
/// integers little-endian:
///
/// | field | encoding |
/// |---|---|
/// | state | `u8`: 0 = exact, unreleased (the only one written) |
/// | ε numerator, denominator | each `u64` byte length + little-endian bytes |
/// | dim, k, width, rows | `u64` each |
/// | depth | `u32` |
/// | sketch kind, budget rule | `u8` each (count-min 0, count 1; optimal 0, uniform 1) |
/// | points seen | `u64` |
/// | exact tree | `u64` length `2^{L_k+1} − 1`, then `i64` counts in heap order |
/// | sketches | `u64` number `depth − L_k`; each: `rows` × 4 `u128` hash parameters, `u64` cell count `rows·width`, `i64` cells row-major |
///
/// **The encoding holds exact counts**: it is not a private release and must
/// be protected like the raw data (it reveals, for instance, the exact number
/// of points in every cell of the top `L_k` levels). Only
/// [`PrivHP::release`] output is private. A released summary is refused: its
/// exact counts are gone and its [`TreeGenerator`] is what to save.
impl PrivHP {
    /// The versioned, checksummed encoding of this unreleased summary:
    /// parameters, public hash keys and **exact** counts (sensitive: protect
    /// it like the raw data). Errors if the summary has been released. The
    /// thread setting is not encoded. Needs about twice the summary's size
    /// transiently.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        if self.released.is_some() {
            return Err(invalid!(
                "this PrivHP has been released: its exact counts were replaced by noisy ones; \
                 save the TreeGenerator that release() returned instead"
            ));
        }
        let cfg = &self.cfg;
        let mut w = Writer::new();
        w.u8(0);
        state::write_rational(&mut w, &cfg.epsilon);
        for v in [cfg.dim, cfg.k, cfg.width, cfg.rows] {
            w.u64(v as u64);
        }
        w.u32(cfg.depth);
        w.u8(match cfg.sketch {
            SketchKind::CountMin => 0,
            SketchKind::Count => 1,
        });
        w.u8(match cfg.budget {
            BudgetRule::Optimal => 0,
            BudgetRule::Uniform => 1,
        });
        w.u64(self.points);
        w.u64(self.tree.len() as u64);
        for &c in &self.tree {
            w.i64(c);
        }
        w.u64(self.sketches.len() as u64);
        for sketch in &self.sketches {
            for h in sketch.hashes() {
                let (a, b, sa, sb) = h.parts();
                for v in [a, b, sa, sb] {
                    w.u128(v);
                }
            }
            w.u64(sketch.cells().len() as u64);
            for &c in sketch.cells() {
                w.i64(c);
            }
        }
        Ok(state::encode(Kind::PrivHP, &w.finish()))
    }

    /// Feed the exact contents (points, tree counts, sketch cells) to a keyed
    /// digest, without allocating: the contents part of a derived noise key.
    pub(crate) fn digest_into(&self, digest: &mut crate::rng::KeyedDigest) {
        digest.word(self.points);
        digest.word(self.tree.len() as u64);
        for &c in &self.tree {
            digest.word(c as u64);
        }
        for sketch in &self.sketches {
            digest.word(sketch.cells().len() as u64);
            for &c in sketch.cells() {
                digest.word(c as u64);
            }
        }
    }

    /// Decode [`PrivHP::to_bytes`] output into an unreleased summary that
    /// continues exactly where the encoded one stopped (same parameters, hash
    /// keys and counts; it can be updated, merged and released).
    ///
    /// Everything is validated: header, checksum, the parameters
    /// ([`PrivHPConfig::validate`] and the noise range check of
    /// [`PrivHP::new`]), every length against the configuration, and the
    /// invariants of an exact summary (the root counts every point, each tree
    /// count is the sum of its children, count-min rows are non-negative and
    /// sum to the point count, count-sketch rows have `Σ|cell| ≤ points` with
    /// the parity of `points`). Corrupt or foreign input gives an error, never
    /// a panic, and nothing larger than the input is allocated.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let payload = state::decode(bytes, Kind::PrivHP)?;
        decode_summary(payload).map_err(|e| {
            let msg = e.to_string();
            if msg.starts_with("invalid dpstream state") {
                invalid!("{msg}")
            } else {
                invalid!("invalid dpstream state: {msg}")
            }
        })
    }
}

/// A `u64` field as a `usize` no larger than `max` (checked again by `validate`).
fn read_size(r: &mut Reader<'_>, name: &str, max: usize) -> Result<usize> {
    let v = r.u64()?;
    usize::try_from(v)
        .ok()
        .filter(|&v| v <= max)
        .ok_or_else(|| invalid!("{name} = {v} is out of range"))
}

fn decode_summary(payload: &[u8]) -> Result<PrivHP> {
    let mut r = Reader::new(payload);
    match r.u8()? {
        0 => {}
        s => {
            return Err(invalid!(
                "unknown PrivHP state {s} (only exact summaries are encoded)"
            ))
        }
    }
    let epsilon = state::read_rational(&mut r)?;
    let dim = read_size(&mut r, "dim", 1 << 16)?;
    let k = read_size(&mut r, "k", 1 << 24)?;
    let width = read_size(&mut r, "width", 1 << 30)?;
    let rows = read_size(&mut r, "rows", 64)?;
    let depth = r.u32()?;
    let sketch = match r.u8()? {
        0 => SketchKind::CountMin,
        1 => SketchKind::Count,
        v => return Err(invalid!("unknown sketch kind {v}")),
    };
    let budget = match r.u8()? {
        0 => BudgetRule::Optimal,
        1 => BudgetRule::Uniform,
        v => return Err(invalid!("unknown budget rule {v}")),
    };
    let cfg = PrivHPConfig {
        epsilon,
        dim,
        k,
        width,
        rows,
        depth,
        sketch,
        budget,
    };
    cfg.validate()?;
    let sigmas = checked_sigmas(&cfg)?;
    let l_k = cfg.exact_levels();
    let points = r.u64()?;
    if points > MAX_POINTS {
        return Err(invalid!("{points} points is more than the 2^62 limit"));
    }
    let total = i64::try_from(points).map_err(|_| invalid!("point count out of range"))?;

    // The exact tree: lengths are checked against the payload before allocating.
    let tree_len = (1usize << (l_k + 1)) - 1;
    let n = r.count(8)?;
    if n != tree_len {
        return Err(invalid!(
            "{n} tree counts where depth {l_k} needs {tree_len}"
        ));
    }
    let mut tree = Vec::with_capacity(tree_len);
    for _ in 0..tree_len {
        tree.push(r.i64()?);
    }
    if tree[0] != total {
        return Err(invalid!(
            "the root counts {} points but the summary has seen {points}",
            tree[0]
        ));
    }
    for (i, &c) in tree.iter().enumerate() {
        if c < 0 {
            return Err(invalid!("tree count {i} is negative"));
        }
        if 2 * i + 2 < tree_len && tree[2 * i + 1].checked_add(tree[2 * i + 2]) != Some(c) {
            return Err(invalid!("tree count {i} is not the sum of its children"));
        }
    }

    let levels = (cfg.depth - l_k) as usize;
    // Each encoded sketch takes at least its hashes and its cell count.
    let n = r.count(rows * 64 + 8)?;
    if n != levels {
        return Err(invalid!(
            "{n} sketches where depth {} needs {levels}",
            cfg.depth
        ));
    }
    let mut sketches = Vec::with_capacity(levels);
    for level in l_k + 1..=cfg.depth {
        let mut hashes = Vec::with_capacity(rows);
        for _ in 0..rows {
            let (a, b, sa, sb) = (r.u128()?, r.u128()?, r.u128()?, r.u128()?);
            hashes.push(RowHash::from_parts(a, b, sa, sb));
        }
        let n = r.count(8)?;
        if n != rows * width {
            return Err(invalid!(
                "level {level}: {n} sketch cells where {rows} × {width} are needed"
            ));
        }
        let mut cells = Vec::with_capacity(n);
        for _ in 0..n {
            cells.push(r.i64()?);
        }
        for (row, cells) in cells.chunks_exact(width).enumerate() {
            check_sketch_row(sketch, cells, points)
                .map_err(|e| invalid!("level {level}, sketch row {row}: {e}"))?;
        }
        sketches.push(LinearSketch::from_parts(
            sketch, rows, width, hashes, cells,
        )?);
    }
    r.finish()?;
    Ok(PrivHP {
        tree,
        sketches,
        paths: vec![0; 2 * cfg.chunk_len()],
        sigmas,
        l_k,
        cfg,
        points,
        released: None,
        threads: default_threads(),
    })
}

/// The invariants of one row of an exact sketch that has counted `points`
/// unit updates: count-min cells are non-negative and sum to `points`;
/// count-sketch cells (each update adds ±1) have `Σ|c| ≤ points` and
/// `Σ c ≡ points (mod 2)`.
fn check_sketch_row(kind: SketchKind, cells: &[i64], points: u64) -> Result<()> {
    let (sum, abs): (i128, i128) = cells.iter().fold((0, 0), |(s, a), &c| {
        (s + i128::from(c), a + i128::from(c).abs())
    });
    let n = i128::from(points);
    let ok = match kind {
        SketchKind::CountMin => cells.iter().all(|&c| c >= 0) && sum == n,
        SketchKind::Count => abs <= n && (sum - n).rem_euclid(2) == 0,
    };
    if ok {
        Ok(())
    } else {
        Err(invalid!("cells do not match {points} counted points"))
    }
}

/// `σ_0 … σ_depth` for a valid configuration, refusing a budget whose noise
/// scales are out of the sampler's range (at construction, not at release).
fn checked_sigmas(cfg: &PrivHPConfig) -> Result<Vec<Rational>> {
    let l_k = cfg.exact_levels();
    // Each level's σ_l through `planted::spend`: the identity outside test
    // builds with the `planted-bugs` feature (`crate::planted`).
    let mut sigmas = privhp_budget(&cfg.epsilon, cfg.dim, cfg.k, cfg.depth, cfg.budget)?
        .into_iter()
        .map(crate::planted::spend)
        .collect::<Result<Vec<_>>>()?;
    sigmas.shrink_to_fit();
    for (l, sigma) in sigmas.iter().enumerate() {
        let sensitivity = if l as u32 <= l_k {
            1u64
        } else {
            cfg.rows as u64
        };
        DiscreteLaplace::new(&Rational::new(sensitivity, 1u32)?.div(sigma)?)
            .map_err(|e| invalid!("epsilon is too small for depth {}: {e}", cfg.depth))?;
    }
    Ok(sigmas)
}

/// Counting threads by default: 2 where the machine has two cores, else 1.
fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get().min(2))
}

/// Encode `points` chunk by chunk into `buffer` and hand each chunk's paths to `count`.
fn count_batch(
    points: &[f64],
    dim: usize,
    depth: u32,
    buffer: &mut [u64],
    mut count: impl FnMut(&[u64]),
) -> Result<()> {
    for chunk in points.chunks(buffer.len() * dim) {
        let m = chunk.len() / dim;
        encode_points(chunk, dim, depth, &mut buffer[..m])?;
        count(&buffer[..m]);
    }
    Ok(())
}

/// Add the level-`l` prefixes of `paths` to the exact tree (heap layout),
/// level by level so that one level's counters stay in cache.
fn count_tree(tree: &mut [i64], paths: &[u64], depth: u32, l_k: u32) {
    for l in 0..=l_k {
        let level = &mut tree[(1usize << l) - 1..(1usize << (l + 1)) - 1];
        for &path in paths {
            level[(path >> (depth - l)) as usize] += 1;
        }
    }
}

/// Add the prefixes of `paths` to consecutive sketches, the first of which
/// counts level `first_level`.
fn count_sketches(sketches: &mut [LinearSketch], paths: &[u64], depth: u32, first_level: u32) {
    for (i, sketch) in sketches.iter_mut().enumerate() {
        let shift = depth - (first_level + i as u32);
        for &path in paths {
            sketch.update(path >> shift, 1);
        }
    }
}

/// Algorithm 3 with consistency (Algorithm 4): the complete tree to `L_k`
/// from the noisy exact counts, then level by level the two children of each
/// hot cell from the level's sketch, keeping the top `k` children as the next
/// hot cells (ties broken by cell index, so the result is deterministic).
/// `noise_seeded`: whether the noise came from a seeded generator (recorded
/// in the generator).
fn grow_partition(
    cfg: &PrivHPConfig,
    l_k: u32,
    tree: &[i64],
    sketches: &[LinearSketch],
    noise_seeded: bool,
) -> Result<TreeGenerator> {
    let mut counts: Vec<f64> = tree.iter().map(|&c| c as f64).collect();
    enforce_tree(&mut counts)?;
    // Arena in heap order for the complete part: node i has children 2i+1, 2i+2.
    let mut nodes: Vec<Node> = Vec::with_capacity(cfg.max_generator_nodes());
    for l in 0..=l_k {
        for theta in 0..(1u64 << l) {
            let i = (1usize << l) - 1 + theta as usize;
            let mut node = Node::new(l, theta, counts[i]);
            if l < l_k {
                node.left = (2 * i + 1) as u32;
            }
            nodes.push(node);
        }
    }
    let mut hot: Vec<usize> = (((1usize << l_k) - 1)..nodes.len()).collect();
    for (i, sketch) in sketches.iter().enumerate() {
        let level = l_k + 1 + i as u32;
        let mut children = Vec::with_capacity(2 * hot.len());
        for &p in &hot {
            let parent = nodes[p];
            let (t0, t1) = (parent.theta << 1, (parent.theta << 1) | 1);
            let (mut c0, mut c1) = (sketch.query(t0), sketch.query(t1));
            enforce_consistency(parent.count, &mut c0, &mut c1);
            nodes[p].left = nodes.len() as u32;
            children.push(nodes.len());
            nodes.push(Node::new(level, t0, c0));
            children.push(nodes.len());
            nodes.push(Node::new(level, t1, c1));
        }
        if children.len() > cfg.k {
            let key = |&i: &usize| (std::cmp::Reverse(OrdF64(nodes[i].count)), nodes[i].theta);
            children.select_nth_unstable_by_key(cfg.k - 1, key);
            children.truncate(cfg.k);
        }
        hot = children;
    }
    TreeGenerator::from_nodes(cfg.dim, nodes, noise_seeded)
}

/// Total order on the finite counts the tree holds.
#[derive(Clone, Copy)]
struct OrdF64(f64);
impl PartialEq for OrdF64 {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other).is_eq()
    }
}
impl Eq for OrdF64 {}
impl PartialOrd for OrdF64 {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for OrdF64 {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(dim: usize, k: usize, depth: u32) -> PrivHPConfig {
        PrivHPConfig {
            epsilon: Rational::new(1u32, 1u32).unwrap(),
            dim,
            k,
            width: 64,
            rows: 2,
            depth,
            sketch: SketchKind::CountMin,
            budget: BudgetRule::Optimal,
        }
    }

    fn uniform_points(rng: &mut Rng, n: usize, dim: usize) -> Vec<f64> {
        (0..n * dim)
            .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
            .collect()
    }

    #[test]
    fn memory_is_fixed_and_matches_the_footprint() {
        let c = cfg(2, 16, 12);
        let mut rng = Rng::seed_from_u64(1);
        let mut p = PrivHP::new(c.clone(), &mut rng).unwrap();
        let before = p.memory_bytes();
        assert_eq!(before, c.footprint());
        for _ in 0..5 {
            let pts = uniform_points(&mut rng, 3000, 2);
            p.update(&pts).unwrap();
        }
        assert_eq!(p.memory_bytes(), before);
        assert_eq!(p.points_seen(), 15_000);
    }

    #[test]
    fn exact_tree_counts_are_exact_before_noise() {
        let c = cfg(1, 4, 6); // L_k = 2
        let mut rng = Rng::seed_from_u64(2);
        let mut p = PrivHP::new(c, &mut rng).unwrap();
        p.update(&[0.1, 0.3, 0.6, 0.9, 0.95, 1.0]).unwrap();
        assert_eq!(p.tree, vec![6, 2, 4, 1, 1, 1, 3]);
    }

    #[test]
    fn release_is_consistent_and_pruned() {
        let c = cfg(2, 8, 10);
        let mut rng = Rng::seed_from_u64(3);
        let mut p = PrivHP::new(c.clone(), &mut rng).unwrap();
        p.update(&uniform_points(&mut rng, 20_000, 2)).unwrap();
        let g = p.release(&mut rng).unwrap();
        for node in g.nodes_for_test() {
            if node.left != u32::MAX {
                let l = node.left as usize;
                let sum = g.nodes_for_test()[l].count + g.nodes_for_test()[l + 1].count;
                assert!((sum - node.count).abs() <= 1e-9 * node.count.max(1.0));
            }
            assert!(node.count >= 0.0);
        }
        // At most k cells are expanded per sketched level.
        for level in c.exact_levels() + 1..=c.depth {
            let at = g
                .nodes_for_test()
                .iter()
                .filter(|n| n.level == level)
                .count();
            assert!(at <= 2 * c.k, "level {level}: {at}");
        }
        assert!(g.n_nodes() <= c.max_generator_nodes());
        // Released: no more points; a second release is the same generator.
        assert!(p.update(&[0.5, 0.5]).is_err());
        assert_eq!(p.release(&mut rng).unwrap(), g);
    }

    #[test]
    fn one_and_two_threads_count_the_same() {
        let c = cfg(2, 8, 14);
        let mut rng = Rng::seed_from_u64(11);
        let mut one = PrivHP::new(c, &mut rng).unwrap();
        let mut two = one.clone();
        one.set_threads(1);
        two.set_threads(2);
        let pts = uniform_points(&mut rng, PARALLEL_MIN_POINTS + 3 * CHUNK + 5, 2);
        one.update(&pts).unwrap();
        two.update(&pts).unwrap();
        assert_eq!(one.tree, two.tree);
        assert_eq!(one.sketches, two.sketches);
    }

    #[test]
    fn bad_batches_change_nothing() {
        let mut rng = Rng::seed_from_u64(4);
        let mut p = PrivHP::new(cfg(2, 4, 8), &mut rng).unwrap();
        p.update(&[0.2, 0.2]).unwrap();
        let (tree, n) = (p.tree.clone(), p.points_seen());
        assert!(p.update(&[0.1, 0.1, 0.5, 1.5]).is_err());
        assert!(p.update(&[0.1, f64::NAN]).is_err());
        assert!(p.update(&[0.1, 0.1, 0.2]).is_err());
        assert_eq!((p.tree.clone(), p.points_seen()), (tree, n));
    }

    #[test]
    fn a_budget_too_small_for_the_noise_range_is_refused_up_front() {
        let mut c = cfg(2, 4, 8);
        c.epsilon = Rational::new(1u32, 1u64 << 60).unwrap();
        let mut rng = Rng::seed_from_u64(9);
        let err = PrivHP::new(c, &mut rng).unwrap_err().to_string();
        assert!(err.contains("epsilon is too small"), "{err}");
    }

    #[test]
    fn configs_are_validated() {
        let mut c = cfg(2, 4, 8);
        c.depth = 61;
        assert!(c.validate().unwrap_err().to_string().contains("depth"));
        let mut c = cfg(2, 4, 8);
        c.width = 0;
        assert!(c.validate().unwrap_err().to_string().contains("width"));
        let mut c = cfg(2, 4, 8);
        c.width = 1 << 30;
        c.rows = 64;
        assert!(c.validate().unwrap_err().to_string().contains("bytes"));
        let mut c = cfg(0, 4, 8);
        c.dim = 0;
        assert!(c.validate().is_err());
    }

    #[test]
    fn for_memory_fits_the_budget() {
        let eps = Rational::new(1u32, 1u32).unwrap();
        for budget in [64 << 10, 1 << 20, 16 << 20] {
            let c = PrivHPConfig::for_memory(
                eps.clone(),
                2,
                1_000_000,
                budget,
                SketchKind::CountMin,
                1,
            )
            .unwrap();
            assert_eq!(c.depth, 20);
            let total = c.footprint() + c.max_generator_nodes() * std::mem::size_of::<Node>();
            assert!(total <= budget);
            let mut bigger = c.clone();
            bigger.k *= 2;
            bigger.width *= 2;
            let total =
                bigger.footprint() + bigger.max_generator_nodes() * std::mem::size_of::<Node>();
            assert!(total > budget);
        }
        assert!(PrivHPConfig::for_memory(eps, 2, 1_000_000, 10, SketchKind::CountMin, 1).is_err());
    }

    #[test]
    fn merged_summaries_equal_one_summary() {
        let c = cfg(2, 8, 10);
        let mut rng = Rng::seed_from_u64(6);
        let mut whole = PrivHP::new(c.clone(), &mut rng).unwrap();
        let mut a = whole.clone();
        let mut b = whole.clone();
        let pts = uniform_points(&mut rng, 2000, 2);
        whole.update(&pts).unwrap();
        a.update(&pts[..1000]).unwrap();
        b.update(&pts[1000..]).unwrap();
        a.merge(&b).unwrap();
        assert_eq!(a.tree, whole.tree);
        assert_eq!(a.sketches, whole.sketches);
        let other = PrivHP::new(c, &mut rng).unwrap(); // different hashes
        assert!(a.merge(&other).is_err());
        // A summary continued from an empty copy of a filled one: the same counts.
        let mut more = whole.empty_copy().unwrap();
        assert_eq!(more.points_seen(), 0);
        more.update(&pts[..500]).unwrap();
        let mut direct = whole.clone();
        direct.update(&pts[..500]).unwrap();
        whole.merge(&more).unwrap();
        assert_eq!(whole.to_bytes().unwrap(), direct.to_bytes().unwrap());
        whole.release(&mut rng).unwrap();
        assert!(whole.empty_copy().is_err());
    }

    #[test]
    fn a_merge_that_overflows_in_its_last_sketch_changes_nothing() {
        let c = cfg(2, 8, 10);
        let mut a = filled(&c, 6, 500);
        let mut b = a.empty_copy().unwrap();
        b.update(&[0.25, 0.75]).unwrap();
        let last = a.sketches.len() - 1;
        assert!(last > 0, "the test needs several sketches");
        for cell in a.sketches[last].cells_mut() {
            *cell = i64::MAX;
        }
        let before = a.clone();
        assert!(matches!(a.merge(&b), Err(crate::error::Error::Overflow(_))));
        assert_same_state(&a, &before);
        assert_eq!(a.points_seen(), before.points_seen());
    }

    /// A summary of `n` uniform points (hashes from seed `seed`).
    fn filled(c: &PrivHPConfig, seed: u64, n: usize) -> PrivHP {
        let mut rng = Rng::seed_from_u64(seed);
        let mut p = PrivHP::new(c.clone(), &mut rng).unwrap();
        p.update(&uniform_points(&mut rng, n, c.dim)).unwrap();
        p
    }

    fn assert_same_state(a: &PrivHP, b: &PrivHP) {
        assert_eq!(a.cfg, b.cfg);
        assert_eq!(a.sigmas, b.sigmas);
        assert_eq!(a.tree, b.tree);
        assert_eq!(a.sketches, b.sketches);
        assert_eq!(a.points, b.points);
        assert_eq!(a.memory_bytes(), b.memory_bytes());
    }

    #[test]
    fn summaries_round_trip_and_continue_exactly() {
        for (sketch, budget, rows) in [
            (SketchKind::CountMin, BudgetRule::Optimal, 2),
            (SketchKind::Count, BudgetRule::Uniform, 3),
        ] {
            let mut c = cfg(2, 8, 12);
            c.sketch = sketch;
            c.budget = budget;
            c.rows = rows;
            c.epsilon = Rational::new(3u32, 7u32).unwrap();
            for n in [0, 1, 5000] {
                let p = filled(&c, 21, n);
                let bytes = p.to_bytes().unwrap();
                assert_eq!(state::peek_kind(&bytes).unwrap(), Kind::PrivHP);
                let mut back = PrivHP::from_bytes(&bytes).unwrap();
                assert_same_state(&back, &p);
                assert_eq!(back.memory_bytes(), c.footprint());
                assert_eq!(back.to_bytes().unwrap(), bytes);
                // The decoded summary goes on exactly like the original.
                let mut orig = p.clone();
                let more = uniform_points(&mut Rng::seed_from_u64(22), 300, 2);
                orig.update(&more).unwrap();
                back.update(&more).unwrap();
                assert_same_state(&back, &orig);
                let g1 = orig.release(&mut Rng::seed_from_u64(23)).unwrap();
                let g2 = back.release(&mut Rng::seed_from_u64(23)).unwrap();
                assert_eq!(g1, g2);
            }
        }
    }

    #[test]
    fn merging_decoded_summaries_equals_merging_the_originals() {
        let c = cfg(2, 8, 11);
        let mut rng = Rng::seed_from_u64(30);
        let template = PrivHP::new(c, &mut rng).unwrap();
        let pts = uniform_points(&mut rng, 9000, 2);
        let parts: Vec<PrivHP> = pts
            .chunks(2 * 3000)
            .map(|chunk| {
                let mut p = PrivHP::from_bytes(&template.to_bytes().unwrap()).unwrap();
                p.update(chunk).unwrap();
                p
            })
            .collect();
        let mut direct = parts[0].clone();
        direct.merge(&parts[1]).unwrap();
        direct.merge(&parts[2]).unwrap();
        let mut shipped = PrivHP::from_bytes(&parts[0].to_bytes().unwrap()).unwrap();
        for p in &parts[1..] {
            shipped
                .merge(&PrivHP::from_bytes(&p.to_bytes().unwrap()).unwrap())
                .unwrap();
        }
        let mut whole = template.clone();
        whole.update(&pts).unwrap();
        assert_same_state(&shipped, &direct);
        assert_same_state(&shipped, &whole);
        assert_eq!(shipped.to_bytes().unwrap(), whole.to_bytes().unwrap());
    }

    #[test]
    fn released_summaries_are_not_encoded() {
        let mut p = filled(&cfg(2, 4, 8), 40, 100);
        p.release(&mut Rng::seed_from_u64(41)).unwrap();
        let err = p.to_bytes().unwrap_err().to_string();
        assert!(
            err.contains("released") && err.contains("TreeGenerator"),
            "{err}"
        );
    }

    #[test]
    fn merges_past_the_point_limit_are_refused() {
        let mut a = filled(&cfg(1, 2, 4), 42, 3);
        let mut b = a.clone();
        a.points = MAX_POINTS - 1;
        b.points = 2;
        let err = a.merge(&b).unwrap_err().to_string();
        assert!(err.contains("2^62"), "{err}");
        assert_eq!(a.points, MAX_POINTS - 1);
    }

    #[test]
    fn every_truncation_and_flip_is_refused() {
        let bytes = filled(&cfg(2, 4, 7), 50, 200).to_bytes().unwrap();
        for i in 0..bytes.len() {
            assert!(PrivHP::from_bytes(&bytes[..i]).is_err(), "truncated to {i}");
            let mut bad = bytes.clone();
            bad[i] ^= 0x10;
            let err = PrivHP::from_bytes(&bad).unwrap_err().to_string();
            assert!(
                err.starts_with("invalid dpstream state"),
                "flip at {i}: {err}"
            );
        }
        let generator = filled(&cfg(2, 4, 7), 50, 200)
            .release(&mut Rng::seed_from_u64(1))
            .unwrap()
            .to_bytes();
        let err = PrivHP::from_bytes(&generator).unwrap_err().to_string();
        assert!(
            err.contains("expected a PrivHP, found a TreeGenerator"),
            "{err}"
        );
    }

    /// An edit of an encoded payload.
    type Edit = Box<dyn Fn(&mut Vec<u8>)>;

    /// The payload of `p`'s encoding, edited by `edit`, under a valid checksum.
    fn reencoded(p: &PrivHP, edit: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
        let bytes = p.to_bytes().unwrap();
        let mut payload = state::decode(&bytes, Kind::PrivHP).unwrap().to_vec();
        edit(&mut payload);
        state::encode(Kind::PrivHP, &payload)
    }

    #[test]
    fn valid_checksums_over_bad_payloads_are_refused() {
        let c = cfg(2, 4, 7); // ε = 1: numerator and denominator are one byte each
        let p = filled(&c, 60, 500);
        let set_u64 = |payload: &mut Vec<u8>, at: usize, v: u64| {
            payload[at..at + 8].copy_from_slice(&v.to_le_bytes());
        };
        // Offsets: state 0, ε 1..19, dim 19, k 27, width 35, rows 43, depth 51,
        // sketch 55, budget 56, points 57, tree length 65, first count 73.
        let cases: Vec<(Edit, &str)> = vec![
            (Box::new(|b| b[0] = 1), "unknown PrivHP state"),
            (Box::new(|b| b[55] = 7), "unknown sketch kind"),
            (Box::new(|b| b[56] = 2), "unknown budget rule"),
            (Box::new(move |b| set_u64(b, 19, 0)), "dim"),
            (Box::new(move |b| set_u64(b, 43, 65)), "rows"),
            (Box::new(|b| b[51] = 61), "depth"),
            // A configuration asking for 5 GiB of cells in a small payload:
            // refused by the length check, before any allocation.
            (
                Box::new(move |b| set_u64(b, 35, 1 << 27)),
                "128 sketch cells where 2 × 134217728",
            ),
            (
                Box::new(move |b| {
                    set_u64(b, 35, 1 << 27);
                    set_u64(b, 73 + 7 * 8 + 8 + 2 * 64, 1 << 28);
                }),
                "exceeds the payload",
            ),
            (Box::new(move |b| set_u64(b, 57, 501)), "root counts 500"),
            (Box::new(move |b| set_u64(b, 57, u64::MAX)), "2^62"),
            (Box::new(move |b| set_u64(b, 65, 6)), "tree counts"),
            (Box::new(move |b| set_u64(b, 81, 0)), "sum of its children"),
            (
                Box::new(move |b| {
                    // First sketch cell after the tree (7 counts) and the sketch count.
                    let at = 73 + 7 * 8 + 8 + 2 * 64 + 8;
                    let v = i64::from_le_bytes(b[at..at + 8].try_into().unwrap());
                    b[at..at + 8].copy_from_slice(&(v + 1).to_le_bytes());
                }),
                "sketch row 0",
            ),
            (Box::new(|b| b.push(0)), "trailing bytes"),
        ];
        for (edit, message) in cases {
            let err = PrivHP::from_bytes(&reencoded(&p, edit))
                .unwrap_err()
                .to_string();
            assert!(err.starts_with("invalid dpstream state"), "{err}");
            assert!(err.contains(message), "{message}: {err}");
        }
        // Random edits under a valid checksum never panic; whatever decodes
        // satisfies the invariants and re-encodes to the same bytes.
        let mut rng = Rng::seed_from_u64(61);
        for sketch in [SketchKind::CountMin, SketchKind::Count] {
            let mut c = c.clone();
            c.sketch = sketch;
            let p = filled(&c, 62, 300);
            for _ in 0..2000 {
                let bytes = reencoded(&p, |b| {
                    for _ in 0..=rng.below_u64(3) {
                        let at = rng.below_u64(b.len() as u64) as usize;
                        b[at] = rng.next_u64() as u8;
                    }
                });
                if let Ok(q) = PrivHP::from_bytes(&bytes) {
                    assert_eq!(q.to_bytes().unwrap(), bytes);
                    assert_eq!(q.tree[0] as u64, q.points);
                }
            }
        }
    }
}

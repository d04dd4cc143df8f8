//! Online differentially private synthetic data on `[0,1]^d` with an
//! infinite time horizon: Algorithm 1 of He, Vershynin, Zhu ("Online
//! differentially private synthetic data generation").
//!
//! # Mechanism
//!
//! * Each input point is one time step `t = 1, 2, …`. Time levels start at
//!   `t_r = ⌈2^r/ε⌉`; at time `t` of level `r` (`t_r ≤ t < t_{r+1}`) the
//!   binary partition of `[0,1]^d` (coordinates split in turn, the partition
//!   of [`crate::partition`]) has depth `r`: the cells of depth `j` are
//!   created at `t_j`. Before `t_0` there is only the root.
//! * Every cell `θ` of depth `j ≥ 1` counts its points with an
//!   inhomogeneous sparse counter (Algorithm 3,
//!   [`crate::counters::InhomogeneousSparseCounter`]) on the Boolean stream
//!   `1{x_t ∈ Ω_θ}`, with per-level parameters `ε_{j,r}` of
//!   [`online_epsilon`] ((4.1) for `d ≥ 2`, (5.1) for `d = 1`) and starting
//!   level `r_0 = j` (`d ≥ 2`: points before the cell existed are ignored) or
//!   `r_0 = 0` (`d = 1`: the cell's history from `t_0` on is counted).
//! * A release at time `t` makes the noisy counts consistent and
//!   non-negative (Algorithm 4, integer version, with the root count `t`,
//!   which is public: one point per step) and outputs `m_θ` uniform points in
//!   every leaf cell `θ` of depth `r` — the paper's `Y_t`, `t` points in
//!   all — or `m` points drawn i.i.d. from the same counts.
//!
//! # Privacy (Proposition 4.1 / 5.1)
//!
//! * **Neighbouring relation** (event level): two streams that differ in
//!   the point of one time step.
//! * **Guarantee**: all releases at all times, together, are ε-DP. A point
//!   at a step of level `s` enters the counter of one cell per depth `j`
//!   (for both streams: two paths), and by Lemma 3.3 costs `ε_{j,s}` there;
//!   `Σ_j ε_{j,s} ≤ ε/2` for every `s` ([`online_epsilon`], exact rational
//!   lower bounds) and the two paths give ε. Consistency and sampling are
//!   post-processing; the sampling randomness is not privacy noise.
//! * **Public**: ε, `d`, the time `t` (hence the levels and the depth).
//! * **Noise**: exact discrete Laplace; integer arithmetic throughout. The
//!   counters' noise is keyed by a secret master key (drawn from the
//!   synthesizer's ChaCha12 generator, stored in its checkpoints), the cell,
//!   the level and the cell's values ([`crate::counters::SparseCounter`]'s
//!   keys): one continuation per checkpoint. The sampling of the released
//!   points draws from the generator.
//!
//! # Cost
//!
//! Counters are advanced lazily: a cell is touched only when a point falls
//! in it, and the zeros in between are skipped with exactly the law of
//! step-by-step processing ([`crate::counters::SparseCounter::skip`]), so an
//! update costs `O(depth)` per point whatever the number of cells. A level
//! change touches every cell once (amortised `O(1)` per step, as levels
//! double). A release brings every cell up to date and costs
//! `O(cells + t·d)`. Memory is `O(cells) = O(εt)` (plus the `d = 1`
//! history of point paths, `8` bytes per point).
//!
//! With a seeded generator the outputs are a deterministic function of the
//! seed, the points and the sequence of calls: batching does not matter, a
//! checkpoint resumes exactly, but a release draws the noise of the steps it
//! catches up and so changes the noise of later releases.

use crate::counters::{
    level_start, level_sum_noise, nonempty_level, read_master, write_master, Draw, LevelParams,
    LevelState, RunKeys,
};
use crate::error::{invalid, Error, Result};
use crate::partition::consistency::enforce_tree;
use crate::partition::path::{encode_points, MAX_DEPTH};
use crate::rational::Rational;
use crate::rng::{KeyedDigest, Rng};
use crate::state::{self, Kind, Reader, Writer};
use crate::synth::online_budget::{online_epsilon, MAX_ONLINE_DIM};
use crate::synth::release::{chunked_release, ChunkedRelease};

/// Deepest partition the synthesizer builds (`2^41` cells would be needed
/// beyond it, far past any memory).
pub const MAX_ONLINE_DEPTH: u32 = 40;

/// Largest number of steps (`2^62`): counts stay far inside `i64`.
const MAX_TIME: u64 = 1 << 62;

/// Largest memory the cell counters may take: 16 GiB, the limit of PrivHP
/// and of the sketches. The depth follows from ε and the time (public), so a
/// large ε reaches deep partitions after few points; this refuses them with
/// a clear error instead of exhausting the machine's memory.
pub const MAX_ONLINE_BYTES: u64 = 1 << 34;

/// Refuse a partition of depth `depth` (at most [`MAX_ONLINE_DEPTH`]) whose
/// `2^{depth+1} − 2` cell counters would pass [`MAX_ONLINE_BYTES`].
fn check_depth_memory(depth: u32) -> Result<()> {
    let cells = (1u64 << (depth + 1)) - 2;
    let bytes = cells.saturating_mul(std::mem::size_of::<LevelState>() as u64);
    if bytes > MAX_ONLINE_BYTES {
        return Err(invalid!(
            "the partition would reach depth {depth}: {cells} cell counters need {bytes} bytes \
             ({:.1} GiB), more than the 16 GiB limit (the depth grows as log2(epsilon × points))",
            bytes as f64 / f64::from(1u32 << 30)
        ));
    }
    Ok(())
}

/// The ε-DP online synthesizer; see the [module docs](self).
pub struct OnlineSynthesizer {
    epsilon: Rational,
    dim: usize,
    rng: Rng,
    /// Secret master key of the counters' noise (drawn from `rng` at
    /// construction, stored in checkpoints): cell `θ` of depth `j` in level
    /// `r` keys its noise by it, `(j, θ, r)` and its values.
    master: [u8; 32],
    /// The counters' keys under `master` (derived once).
    keys: RunKeys,
    time: u64,
    /// The level of `time`, `None` before `t_0`. The depth is the level.
    level: Option<u32>,
    /// `params[j − 1]`: the current level's parameters for the cells of depth `j`.
    params: Vec<LevelParams>,
    /// `cells[j − 1][θ]`: the counter of cell `θ` of depth `j`.
    cells: Vec<Vec<LevelState>>,
    /// `d = 1`: paths (depth [`MAX_DEPTH`]) of the points from `t_0` on.
    history: Vec<u64>,
    /// Set if a noise draw ever overflowed `i64` (probability below `e^-64`)
    /// in the middle of an update; the synthesizer then refuses all calls.
    poisoned: bool,
}

impl std::fmt::Debug for OnlineSynthesizer {
    // Counts and noise are secret; only public values are shown.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnlineSynthesizer")
            .field("epsilon", &self.epsilon.to_string())
            .field("dim", &self.dim)
            .field("time", &self.time)
            .field("depth", &self.depth())
            .finish_non_exhaustive()
    }
}

/// The level of time `t`: the largest `r` with `t_r ≤ t`, `None` if `t < t_0`.
fn level_of(epsilon: &Rational, t: u64) -> Result<Option<u32>> {
    if t < level_start(epsilon, 0)? {
        return Ok(None);
    }
    let mut r = 0u32;
    while level_start(epsilon, r + 1)? <= t {
        r += 1;
    }
    Ok(Some(r))
}

/// The parameters of every depth `1..=level` at `level` (each `ε_{j,r}`
/// through `planted::spend`: the identity outside test builds with
/// the `planted-bugs` feature).
fn level_params(epsilon: &Rational, dim: usize, level: u32) -> Result<Vec<LevelParams>> {
    (1..=level)
        .map(|j| {
            let eps = crate::planted::spend(online_epsilon(epsilon, dim as u32, j, level)?)?;
            LevelParams::new(epsilon, level, &eps)
        })
        .collect()
}

/// A state vector of `n` copies of `state`, or an error instead of an abort.
fn states(n: usize, state: LevelState) -> Result<Vec<LevelState>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Error::OutOfMemory(format!("cannot allocate {n} cell counters")))?;
    v.resize(n, state);
    Ok(v)
}

impl OnlineSynthesizer {
    /// An ε-DP synthesizer on `[0,1]^dim` (`1 ≤ dim ≤ 4096`) that draws all
    /// its noise from `rng` (a seeded generator is reproducible and **not
    /// private**). Fails on `ε = 0` or a bad `dim`.
    pub fn new(epsilon: &Rational, dim: usize, rng: Rng) -> Result<Self> {
        let mut rng = rng;
        let master = rng.draw_key();
        Self::build(epsilon, dim, rng, master)
    }

    /// [`Self::new`] with the counters' master key given.
    fn build(epsilon: &Rational, dim: usize, rng: Rng, master: [u8; 32]) -> Result<Self> {
        if epsilon.is_zero() {
            return Err(invalid!("epsilon must be positive, got 0"));
        }
        if dim == 0 || dim > MAX_ONLINE_DIM as usize {
            return Err(invalid!(
                "dim must be between 1 and {MAX_ONLINE_DIM}, got {dim}"
            ));
        }
        // t_0 must exist; a clear error for absurdly small ε.
        level_start(epsilon, 0)?;
        Ok(Self {
            epsilon: epsilon.clone(),
            dim,
            master,
            keys: RunKeys::new(&master, rng.is_seeded()),
            rng,
            time: 0,
            level: None,
            params: Vec::new(),
            cells: Vec::new(),
            history: Vec::new(),
            poisoned: false,
        })
    }

    /// The privacy parameter of the whole stream of releases.
    pub fn epsilon(&self) -> &Rational {
        &self.epsilon
    }

    /// Dimension `d`.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Points (time steps) seen: public.
    pub fn time(&self) -> u64 {
        self.time
    }

    /// Depth of the partition at the current time (0 before `t_0`).
    pub fn depth(&self) -> u32 {
        self.level.unwrap_or(0)
    }

    /// Number of cells with a counter (depths `1..=depth`).
    pub fn n_regions(&self) -> usize {
        self.cells.iter().map(Vec::len).sum()
    }

    /// Whether the noise generator is seeded (reproducible, **not private**).
    pub fn is_seeded(&self) -> bool {
        self.rng.is_seeded()
    }

    /// Bytes held, as a public upper bound: a function of (ε, d, t) only, so
    /// that it does not reveal where points fell. It counts the cells'
    /// counters, the per-depth parameters, the `d = 1` history (8 bytes per
    /// point) and, for every cell, the largest p-sum buffer its counter can
    /// hold before the next level starts (one `i64` per bit of the number of
    /// closed segments, which is below that time, in a buffer grown by
    /// doubling from 4). The
    /// buffers actually held grow only in the cells that points visit, so the
    /// live figure would depend on the data: it is never reported.
    pub fn memory_bytes(&self) -> usize {
        // Local times stay below the start of the next level (public), so the
        // bound is constant inside a level.
        let horizon = match self.level {
            Some(r) => level_start(&self.epsilon, r + 1).unwrap_or(u64::MAX),
            None => 0,
        };
        let words = (64 - horizon.leading_zeros())
            .max(1)
            .next_power_of_two()
            .max(4) as usize;
        let per_cell = std::mem::size_of::<LevelState>() + words * std::mem::size_of::<i64>();
        let cells: usize = self.cells.iter().map(|v| v.len() * per_cell).sum();
        std::mem::size_of::<Self>()
            + cells
            + self.cells.len() * std::mem::size_of::<Vec<LevelState>>()
            + self.params.len() * std::mem::size_of::<LevelParams>()
            + self.history.len() * std::mem::size_of::<u64>()
    }

    fn check_usable(&self) -> Result<()> {
        if self.poisoned {
            return Err(Error::Overflow(
                "a noise draw overflowed int64 during an earlier update; this synthesizer \
                 can no longer be used"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Feed the points of the next `points.len() / dim` time steps
    /// (row-major, every coordinate in `[0, 1]`), in time order.
    ///
    /// All-or-nothing for bad input: the shape, every value, the time limit
    /// (`2^62` steps), the parameters and the memory of the levels the batch
    /// reaches are checked before anything changes.
    pub fn update(&mut self, points: &[f64]) -> Result<()> {
        self.check_usable()?;
        if points.len() % self.dim != 0 {
            return Err(invalid!(
                "points must hold whole rows of {} values, got {}",
                self.dim,
                points.len()
            ));
        }
        let n = points.len() / self.dim;
        let mut codes = Vec::new();
        codes
            .try_reserve_exact(n)
            .map_err(|_| Error::OutOfMemory(format!("cannot allocate {n} point paths")))?;
        codes.resize(n, 0);
        encode_points(points, self.dim, MAX_DEPTH, &mut codes)?;
        let end = self
            .time
            .checked_add(n as u64)
            .filter(|&e| e <= MAX_TIME)
            .ok_or_else(|| invalid!("the stream would pass 2^62 points"))?;
        // Every level the batch enters, prepared (and checked) up front.
        let mut upcoming = Vec::new();
        let mut level = self.level;
        let final_level = level_of(&self.epsilon, end)?;
        while level != final_level {
            let next = match level {
                None => nonempty_level(&self.epsilon, 0)?,
                Some(r) => nonempty_level(&self.epsilon, r + 1)?,
            };
            if next > MAX_ONLINE_DEPTH {
                return Err(invalid!(
                    "the partition would pass depth {MAX_ONLINE_DEPTH} (2^{} cells)",
                    MAX_ONLINE_DEPTH + 1
                ));
            }
            // Before the level's parameters, which take time to compute for a large dim.
            check_depth_memory(next)?;
            let start = level_start(&self.epsilon, next)?;
            upcoming.push((start, next, level_params(&self.epsilon, self.dim, next)?));
            level = Some(next);
        }
        if let Some((_, deepest, _)) = upcoming.last() {
            let cells = (1usize << (deepest + 1)) - 2;
            let more = cells.saturating_sub(self.n_regions());
            let bytes = more.saturating_mul(std::mem::size_of::<LevelState>());
            let mut probe: Vec<u8> = Vec::new();
            probe
                .try_reserve_exact(bytes)
                .map_err(|_| Error::OutOfMemory(format!("cannot allocate {more} cell counters")))?;
        }
        if self.dim == 1 {
            let kept = self.history.len() + n;
            self.history
                .try_reserve(n)
                .map_err(|_| Error::OutOfMemory(format!("cannot keep {kept} point paths")))?;
        }
        // From here on only a noise draw beyond int64 can fail.
        let mut upcoming = upcoming.into_iter().peekable();
        let result = (|| -> Result<()> {
            for code in codes {
                let t = self.time + 1;
                if let Some((_, next, params)) = upcoming.next_if(|(start, _, _)| *start == t) {
                    self.enter_level(next, params)?;
                }
                self.observe(code)?;
                self.time = t;
            }
            Ok(())
        })();
        if result.is_err() {
            self.poisoned = true;
        }
        result
    }

    /// Start level `next` at the current time + 1: close the level of every
    /// existing cell and create the cells of the new depths.
    fn enter_level(&mut self, next: u32, params: Vec<LevelParams>) -> Result<()> {
        let old = self.depth() as usize;
        let base = &self.keys;
        for (j, cells) in self.cells.iter_mut().enumerate() {
            let p = &self.params[j];
            for (theta, cell) in cells.iter_mut().enumerate() {
                let position = [theta as u64, (j as u64 + 1) << 32 | u64::from(p.level)];
                let keys = base.at(&position);
                cell.close(p, &params[j], &keys)?;
            }
        }
        for j in old + 1..=next as usize {
            let p = &params[j - 1];
            let cells = if self.dim >= 2 {
                // r_0 = j: the cell counts from its creation on.
                states(1 << j, LevelState::new(p, 0))?
            } else {
                // r_0 = 0: the cell's finished levels since t_0 enter S̃ as
                // exact sum plus one Lap_Z(2/ε_{j,r'}) per non-empty level.
                let mut counts = vec![0i64; 1 << j];
                for code in &self.history {
                    counts[(code >> (MAX_DEPTH - j as u32)) as usize] += 1;
                }
                let noises = (0..next)
                    .filter_map(|r| {
                        match (
                            level_start(&self.epsilon, r),
                            level_start(&self.epsilon, r + 1),
                        ) {
                            (Ok(a), Ok(b)) if b <= a => None,
                            _ => Some(
                                online_epsilon(&self.epsilon, 1, j as u32, r)
                                    .and_then(|e| level_sum_noise(&e)),
                            ),
                        }
                    })
                    .collect::<Result<Vec<_>>>()?;
                let mut history = KeyedDigest::new(&self.master);
                history.words(&self.history);
                let mut v = states(1 << j, LevelState::new(p, 0))?;
                for (theta, (cell, count)) in v.iter_mut().zip(counts).enumerate() {
                    let position = [theta as u64, (j as u64) << 32 | u64::from(next)];
                    let keys = base.at(&position);
                    let mut rng = keys.generator(Draw::History, 0, 0, history.state());
                    let mut s = count;
                    for noise in &noises {
                        s = s.checked_add(noise.sample(&mut rng)?).ok_or_else(|| {
                            Error::Overflow("a private count exceeds int64".into())
                        })?;
                    }
                    *cell = LevelState::new(p, s);
                }
                v
            };
            self.cells.push(cells);
        }
        self.params = params;
        self.level = Some(next);
        Ok(())
    }

    /// Count the point with path `code` at step `time + 1`.
    fn observe(&mut self, code: u64) -> Result<()> {
        let t = self.time + 1;
        if self.dim == 1 && self.level.is_some() {
            self.history.push(code);
        }
        let base = &self.keys;
        for (j, (cells, p)) in self.cells.iter_mut().zip(&self.params).enumerate() {
            let theta = (code >> (MAX_DEPTH - 1 - j as u32)) as usize;
            let position = [theta as u64, (j as u64 + 1) << 32 | u64::from(p.level)];
            let keys = base.at(&position);
            cells[theta].advance_to(p, &keys, t - p.start + 1, Some(1))?;
        }
        Ok(())
    }

    /// The consistent non-negative integer counts of the `2^depth` leaves
    /// (indexed by path), summing to `t`: ε-DP. Brings every cell's counter
    /// up to the current time (drawing the noise of the skipped steps).
    pub fn leaf_counts(&mut self) -> Result<Vec<i64>> {
        self.check_usable()?;
        let depth = self.depth();
        let t = i64::try_from(self.time).map_err(|_| invalid!("time exceeds int64"))?;
        let nodes = (1usize << (depth + 1)) - 1;
        let mut counts = Vec::new();
        counts
            .try_reserve_exact(nodes)
            .map_err(|_| Error::OutOfMemory(format!("cannot allocate {nodes} counts")))?;
        counts.push(t);
        if let Err(e) = self.catch_up(&mut counts) {
            self.poisoned = true;
            return Err(e);
        }
        enforce_tree(&mut counts)?;
        Ok(counts.split_off(nodes - (1 << depth)))
    }

    /// Advance every cell to the current time and append its `N_θ` to
    /// `counts` in heap order. Fails only on a noise draw beyond `i64`.
    fn catch_up(&mut self, counts: &mut Vec<i64>) -> Result<()> {
        let base = &self.keys;
        for (j, (cells, p)) in self.cells.iter_mut().zip(&self.params).enumerate() {
            let upto = self.time - p.start + 1;
            for (theta, cell) in cells.iter_mut().enumerate() {
                if cell.local_time() < upto {
                    let position = [theta as u64, (j as u64 + 1) << 32 | u64::from(p.level)];
                    let keys = base.at(&position);
                    cell.advance_to(p, &keys, upto, None)?;
                }
                counts.push(cell.release());
            }
        }
        Ok(())
    }

    chunked_release! {
        /// Synthetic data, row-major: with `size = None` the paper's `Y_t`
        /// (exactly `m_θ` uniform points in every leaf, `t` rows, the rows of each
        /// chunk shuffled), with `Some(m)` `m` rows drawn i.i.d. from the leaf
        /// counts (a leaf with probability `m_θ/t`, then a uniform point in it):
        /// the chunks of [`Self::release_sampler`] with [`CHUNK_ROWS`](crate::synth::CHUNK_ROWS) rows each.
        /// ε-DP (the same release as [`Self::leaf_counts`]).
        check: check_usable
    }

    /// The release of [`Self::release`] in chunks of `chunk_rows` rows (at
    /// least 1), with a sampling key drawn from the synthesizer's generator.
    /// Placed rows (`size = None`) are laid out leaf by leaf and each chunk is
    /// shuffled: a release of at most one chunk is a uniform permutation.
    pub fn release_sampler(
        &mut self,
        size: Option<u64>,
        chunk_rows: u64,
    ) -> Result<ChunkedRelease<'static>> {
        self.check_usable()?;
        if let Some(r) = ChunkedRelease::unseen(self.time, self.dim, size, chunk_rows) {
            return r;
        }
        let counts = self.leaf_counts()?;
        let depth = self.depth();
        ChunkedRelease::cells(self.dim, depth, &counts, size, &mut self.rng, chunk_rows)
    }

    /// Encode the whole state for a checkpoint. **Sensitive**: it holds the
    /// exact counts and the counters' secret master key (protect it like the
    /// raw data): loaded any number of times and fed the same points, the
    /// counters release the same values; a checkpoint supports one
    /// continuation. The key of an OS-seeded sampling generator is never
    /// written: a loaded copy draws a fresh one. A seeded synthesizer resumes
    /// exactly.
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.check_usable()?;
        let mut w = Writer::new();
        state::write_rational(&mut w, &self.epsilon);
        w.u64(self.dim as u64);
        w.u64(self.time);
        state::write_rng(&mut w, &self.rng);
        write_master(&mut w, Some(&self.master));
        for cells in &self.cells {
            for cell in cells {
                cell.write(&mut w);
            }
        }
        w.u64(self.history.len() as u64);
        for code in &self.history {
            w.u64(*code);
        }
        Ok(state::encode(Kind::OnlineSynthesizer, &w.finish()))
    }

    /// Decode [`Self::to_bytes`] output. Fails with a clear error on
    /// truncated, corrupted or foreign data.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (version, payload) = state::decode_versioned(bytes, Kind::OnlineSynthesizer)?;
        let mut r = Reader::new(payload);
        let epsilon = state::read_rational(&mut r)?;
        let dim = usize::try_from(r.u64()?).map_err(|_| invalid!("bad dim"))?;
        let time = r.u64()?;
        let rng = state::read_rng(&mut r)?;
        let keyed = version >= 2;
        let mut s = if keyed {
            let master = read_master(&mut r)?
                .ok_or_else(|| invalid!("invalid dpstream state: no master key"))?;
            Self::build(&epsilon, dim, rng, master)?
        } else {
            // Version 1 has no master key: one drawn from the restored generator.
            Self::new(&epsilon, dim, rng)?
        };
        if time > MAX_TIME {
            return Err(invalid!("invalid dpstream state: time out of range"));
        }
        s.time = time;
        s.level = level_of(&epsilon, time)?;
        if s.depth() > MAX_ONLINE_DEPTH {
            return Err(invalid!("invalid dpstream state: partition too deep"));
        }
        // Every cell takes at least 64 bytes: refuse a level whose cells the
        // payload cannot hold before computing its parameters (which takes
        // time for a large dim; found by fuzzing).
        let cells = (1u64 << (s.depth() + 1)) - 2;
        if cells.saturating_mul(64) > payload.len() as u64 {
            return Err(invalid!(
                "invalid dpstream state: payload too short for {cells} cells"
            ));
        }
        if let Some(level) = s.level {
            s.params = level_params(&epsilon, dim, level)?;
        }
        for (j, p) in s.params.iter().enumerate() {
            let n = 1usize << (j + 1);
            // Each encoded cell takes at least 64 bytes: a corrupt length cannot allocate much.
            if n.saturating_mul(64) > payload.len() {
                return Err(invalid!("invalid dpstream state: payload too short"));
            }
            let upto = time - p.start + 1;
            // Same capacities as the counters built by `update`.
            let mut cells = Vec::with_capacity(n);
            for _ in 0..n {
                let c = LevelState::read(&mut r, p, keyed)?;
                if c.local_time() > upto {
                    return Err(invalid!("invalid dpstream state: cell ahead of time"));
                }
                cells.push(c);
            }
            s.cells.push(cells);
        }
        // d = 1 keeps the path of every point from t_0 on; paths have 63 bits.
        let expected = match s.level {
            Some(_) if dim == 1 => time - level_start(&epsilon, 0)? + 1,
            _ => 0,
        };
        let n = r.count(8)?;
        if n as u64 != expected {
            return Err(invalid!(
                "invalid dpstream state: {n} point paths where {expected} are kept"
            ));
        }
        let mut history = Vec::with_capacity(n);
        for _ in 0..n {
            let code = r.u64()?;
            if code >> MAX_DEPTH != 0 {
                return Err(invalid!("invalid dpstream state: a point path has 64 bits"));
            }
            history.push(code);
        }
        s.history = history;
        r.finish()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests;

//! Inhomogeneous sparse counting: Algorithm 3 of He, Vershynin, Zhu, an
//! unbounded counter made of one [`SparseCounter`] (Algorithm 2) per time
//! level, each with its own privacy parameter.
//!
//! # Mechanism (as printed)
//!
//! * Time levels: `t_r = ⌈2^r / ε_time⌉`, where `ε_time` is the
//!   synthesizer's total ε (public). Level `r` is the steps `t_r ≤ t < t_{r+1}`.
//! * Steps before `t_{r_0}` (the *starting level* `r_0`) are ignored: their
//!   values enter nothing, and the release there is 0.
//! * Within level `r ≥ r_0`: a fresh Algorithm-2 counter with horizon
//!   `t_{r+1} − t_r` and privacy parameter `ε_r/2` counts the level's values;
//!   its output is `c_t`. The release at `t` is `S̃ + c_t`.
//! * At the end of level `r`: `S̃ ← S̃ + Σ_{t_r ≤ t < t_{r+1}} X_t + Lap_Z(2/ε_r)`
//!   (done when the first step of the next level arrives, so the release at
//!   the last step of level `r` is the printed `S̃ + c_t`).
//! * Levels with `t_{r+1} = t_r` (possible when `ε_time > 1/2`) hold no step
//!   and are skipped: they have no data, no counter and no noise.
//!
//! The parameters `ε_{r_0}, ε_{r_0+1}, …` come from a [`LevelSchedule`]; the
//! online synthesizer uses [`LevelSchedule::Online`], i.e.
//! [`crate::synth::online_epsilon`].
//!
//! # Privacy (Lemma 3.3)
//!
//! * **Neighbouring relation**: streams of non-negative integers that differ
//!   in the value of one step `t` by ±1.
//! * **Guarantee** (Lemma 3.3): if `t` lies in level `r ≥ r_0`, the whole
//!   sequence of releases is `ε_r`-DP: the value enters the level's
//!   Algorithm-2 counter (`ε_r/2`-DP, Lemma 3.2) and the level's sum
//!   (sensitivity 1, noise `Lap_Z(2/ε_r)`: `ε_r/2`). If `t < t_{r_0}` the
//!   output distribution does not depend on `X_t` at all (0-DP). The
//!   synthesizer composes these guarantees across cells (Proposition 4.1).
//! * **Public**: `ε_time`, `r_0`, the schedule, the level boundaries and the
//!   time. Exact sums are secret; `Debug` omits them.
//!
//! # Memory and atomicity
//!
//! `O(log t)`: the level's counter is allocated when the level starts. A
//! refused step (negative value, a count beyond `2^62`, a level whose start
//! does not fit in `u64`, a schedule error) changes nothing, the generator
//! included.

use super::encoding::{bad, read_rational, write_rational};
use super::sparse::{
    read_master, write_master, Draw, RunKeys, SparseKeys, SparseParams, SparseState,
    MAX_SPARSE_COUNT,
};
use super::{check_run_lengths, run_scalar};
use crate::error::{invalid, Error, Result};
use crate::noise::DiscreteLaplace;
use crate::rational::Rational;
use crate::rng::Rng;
use crate::state::{self, Kind, Reader, Writer};
use crate::synth::online_epsilon;
use num_bigint::BigUint;
use num_traits::ToPrimitive;
use std::sync::Arc;

/// A level's privacy parameter as a function of the level.
pub type LevelFn = Arc<dyn Fn(u32) -> Result<Rational> + Send + Sync>;

/// The per-level privacy parameters `ε_r`, `r ≥ r_0` (exact, public).
#[derive(Clone)]
pub enum LevelSchedule {
    /// `ε_{r_0 + i} = table[i]`; steps in a level past the table are refused.
    Table(Vec<Rational>),
    /// `ε_r = online_epsilon(epsilon, dim, depth, r)`: the schedule of a cell
    /// of depth `depth` in the online synthesizer ((4.1) / (5.1)).
    Online {
        /// The synthesizer's total ε.
        epsilon: Rational,
        /// Dimension `d` of `[0,1]^d`.
        dim: u32,
        /// The cell's depth `j ≥ 1`.
        depth: u32,
    },
    /// Any function of the level.
    Function(LevelFn),
}

impl std::fmt::Debug for LevelSchedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Table(t) => f
                .debug_tuple("Table")
                .field(&t.iter().map(ToString::to_string).collect::<Vec<_>>())
                .finish(),
            Self::Online {
                epsilon,
                dim,
                depth,
            } => f
                .debug_struct("Online")
                .field("epsilon", &epsilon.to_string())
                .field("dim", dim)
                .field("depth", depth)
                .finish(),
            Self::Function(_) => f.write_str("Function(..)"),
        }
    }
}

impl LevelSchedule {
    /// `ε_r` for a counter that starts at level `r_0`.
    pub fn epsilon(&self, start_level: u32, level: u32) -> Result<Rational> {
        let e = match self {
            // Checked: an empty table or a level below r_0 (from decoded
            // state) must not underflow (found by fuzzing).
            Self::Table(t) => level
                .checked_sub(start_level)
                .and_then(|i| t.get(i as usize))
                .cloned()
                .ok_or_else(|| match t.len() {
                    0 => invalid!("the schedule has no levels; level {level} has none"),
                    n => invalid!(
                        "the schedule has {n} levels ({start_level}..={}); level {level} has none",
                        u64::from(start_level) + n as u64 - 1
                    ),
                })?,
            Self::Online {
                epsilon,
                dim,
                depth,
            } => online_epsilon(epsilon, *dim, *depth, level)?,
            Self::Function(f) => f(level)?,
        };
        if e.is_zero() {
            return Err(invalid!("the privacy parameter of level {level} is 0"));
        }
        Ok(e)
    }
}

/// `t_r = ⌈2^r / ε⌉`, or an error when it does not fit in `u64`.
pub fn level_start(epsilon: &Rational, level: u32) -> Result<u64> {
    let num = BigUint::from(1u32) << level as usize;
    let n = num * epsilon.denom();
    let d = epsilon.numer();
    ((n + d - 1u32) / d)
        .to_u64()
        .ok_or_else(|| invalid!("time level {level} starts beyond 2^64 steps"))
}

/// The public parameters of one time level `r` of Algorithm 3.
#[derive(Clone, Debug)]
pub(crate) struct LevelParams {
    pub(crate) level: u32,
    /// `t_r`: the level's first step.
    pub(crate) start: u64,
    /// `t_{r+1}`: first step of the next level.
    pub(crate) end: u64,
    /// `Lap_Z(2/ε_r)` for the update of `S̃`.
    sum_noise: DiscreteLaplace,
    /// Algorithm 2 with `ε_r/2` and horizon `t_{r+1} − t_r`.
    sparse: SparseParams,
}

impl LevelParams {
    /// Level `level` (with `t_r < t_{r+1}`) run with `eps_r`.
    pub(crate) fn new(time_epsilon: &Rational, level: u32, eps_r: &Rational) -> Result<Self> {
        let start = level_start(time_epsilon, level)?;
        let end = level_start(time_epsilon, level + 1)?;
        if end <= start {
            return Err(invalid!("time level {level} holds no step"));
        }
        let half = eps_r.mul(&Rational::new(1u32, 2u32)?);
        Ok(Self {
            level,
            start,
            end,
            sum_noise: level_sum_noise(eps_r)?,
            sparse: SparseParams::new(&half, end - start)?,
        })
    }

    /// A draw of the level-sum noise `Lap_Z(2/ε_r)`.
    pub(crate) fn sum_noise(&self, rng: &mut Rng) -> Result<i64> {
        self.sum_noise.sample(rng)
    }
}

/// The noise of a level's sum, `Lap_Z(2/ε_r)` (sensitivity 1, `ε_r/2`).
pub(crate) fn level_sum_noise(eps_r: &Rational) -> Result<DiscreteLaplace> {
    DiscreteLaplace::new(&Rational::new(2u32, 1u32)?.div(eps_r)?)
}

/// The first level at or after `level` that holds a step (`t_r < t_{r+1}`).
pub(crate) fn nonempty_level(time_epsilon: &Rational, mut level: u32) -> Result<u32> {
    while level_start(time_epsilon, level + 1)? <= level_start(time_epsilon, level)? {
        level = level
            .checked_add(1)
            .ok_or_else(|| invalid!("time level beyond u32"))?;
    }
    Ok(level)
}

/// One Algorithm-3 counter's state within its current level (secret).
#[derive(Clone)]
pub(crate) struct LevelState {
    /// `S̃`: private count of the finished levels.
    s_tilde: i64,
    /// Exact sum of the current level's values.
    sum: i64,
    /// The level's Algorithm-2 counter.
    sparse: SparseState,
}

impl LevelState {
    /// A counter entering a level with `S̃ = s_tilde`.
    pub(crate) fn new(p: &LevelParams, s_tilde: i64) -> Self {
        Self {
            s_tilde,
            sum: 0,
            sparse: SparseState::new(&p.sparse),
        }
    }

    /// The level's keyed digest of its values (and those of the levels before).
    pub(crate) fn digest(&self) -> [u64; 2] {
        self.sparse.digest()
    }

    /// `S̃ + c_t` as of the last processed step.
    pub(crate) fn release(&self) -> i64 {
        self.s_tilde.saturating_add(self.sparse.release())
    }

    /// Steps of the level processed so far.
    pub(crate) fn local_time(&self) -> u64 {
        self.sparse.time()
    }

    /// Heap bytes held.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.sparse.heap_bytes()
    }

    /// Encode the state (secret: exact counts).
    pub(crate) fn write(&self, w: &mut Writer) {
        w.i64(self.s_tilde);
        w.i64(self.sum);
        self.sparse.write(w);
    }

    /// Decode [`LevelState::write`] output for a counter in level `p`
    /// (`keyed`: as for [`SparseState::read`]).
    pub(crate) fn read(r: &mut Reader<'_>, p: &LevelParams, keyed: bool) -> Result<Self> {
        let (s_tilde, sum) = (r.i64()?, r.i64()?);
        let sparse = SparseState::read(r, &p.sparse, keyed)?;
        if sum < 0 {
            return Err(invalid!("invalid dpstream state: negative level sum"));
        }
        Ok(Self {
            s_tilde,
            sum,
            sparse,
        })
    }

    /// Check a decoded state against its level (what [`LevelState::read`]
    /// leaves unchecked): the level's sum equals the counts of its
    /// Algorithm-2 counter.
    fn validate(&self) -> Result<()> {
        if self.sparse.validate()? != self.sum {
            return Err(invalid!(
                "invalid dpstream state: the level sum does not match its counter"
            ));
        }
        Ok(())
    }

    /// Process the level's steps up to local step `upto` (1-based), of
    /// which only the last may be non-zero (`value`); the earlier ones are
    /// zeros and are skipped lazily with the same law; the noise keyed by
    /// `keys` (whose position names the level). All-or-nothing.
    pub(crate) fn advance_to(
        &mut self,
        p: &LevelParams,
        keys: &SparseKeys<'_>,
        upto: u64,
        value: Option<i64>,
    ) -> Result<()> {
        let done = self.sparse.time();
        let zeros = upto
            .checked_sub(done + u64::from(value.is_some()))
            .ok_or_else(|| invalid!("internal: step {upto} of the level is already processed"))?;
        self.sparse.advance(&p.sparse, keys, zeros, value)?;
        self.sum = self.sum.saturating_add(value.unwrap_or(0)); // ≤ the exact total ≤ 2^62
        Ok(())
    }

    /// End the level: `S̃ ← S̃ + Σ X + Lap_Z(2/ε_r)`, the noise keyed by
    /// `keys` (the level's) and the level's digest; the state then enters the
    /// level `next` with a fresh Algorithm-2 counter that continues the digest.
    pub(crate) fn close(
        &mut self,
        p: &LevelParams,
        next: &LevelParams,
        keys: &SparseKeys<'_>,
    ) -> Result<()> {
        let digest = self.digest();
        let z = p.sum_noise(&mut keys.generator(Draw::LevelSum, 0, 0, digest))?;
        let s = self
            .s_tilde
            .checked_add(self.sum)
            .and_then(|s| s.checked_add(z))
            .ok_or_else(|| Error::Overflow("the private count exceeds int64".into()))?;
        *self = Self::new(next, s);
        self.sparse.set_digest(digest);
        Ok(())
    }
}

/// Algorithm 3; see the [module docs](self).
#[derive(Clone)]
pub struct InhomogeneousSparseCounter {
    time_epsilon: Rational,
    start_level: u32,
    /// `t_{r_0}`.
    first_time: u64,
    schedule: LevelSchedule,
    time: u64,
    /// The running level, from `t_{r_0}` on.
    level: Option<(LevelParams, LevelState)>,
    /// Exact sum from `t_{r_0}` on, for the range check. Secret.
    total: i64,
    /// Secret master key of the noise, drawn from the caller's generator at
    /// the first counted step; each level's noise is keyed by it, the level
    /// and the values (see [`SparseState::advance`]).
    master: Option<[u8; 32]>,
}

impl std::fmt::Debug for InhomogeneousSparseCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InhomogeneousSparseCounter")
            .field("time_epsilon", &self.time_epsilon.to_string())
            .field("start_level", &self.start_level)
            .field("schedule", &self.schedule)
            .field("time", &self.time)
            .field("level", &self.level())
            .finish_non_exhaustive()
    }
}

impl InhomogeneousSparseCounter {
    /// A counter with time levels `⌈2^r / time_epsilon⌉`, starting level
    /// `start_level` and per-level parameters `schedule`. Fails on a zero
    /// `time_epsilon` or a starting level beyond `2^64` steps.
    pub fn new(time_epsilon: &Rational, start_level: u32, schedule: LevelSchedule) -> Result<Self> {
        if time_epsilon.is_zero() {
            return Err(invalid!("time epsilon must be positive, got 0"));
        }
        let first_time = level_start(time_epsilon, start_level)?;
        // Validate the first level's parameter early (a clear error at construction).
        schedule.epsilon(start_level, start_level)?;
        Ok(Self {
            time_epsilon: time_epsilon.clone(),
            start_level,
            first_time,
            schedule,
            time: 0,
            level: None,
            total: 0,
            master: None,
        })
    }

    /// The ε that defines the time levels.
    pub fn time_epsilon(&self) -> &Rational {
        &self.time_epsilon
    }

    /// `r_0`.
    pub fn start_level(&self) -> u32 {
        self.start_level
    }

    /// `t_{r_0}`: the first step that is counted.
    pub fn first_time(&self) -> u64 {
        self.first_time
    }

    /// The schedule.
    pub fn schedule(&self) -> &LevelSchedule {
        &self.schedule
    }

    /// Steps taken so far (public).
    pub fn time(&self) -> u64 {
        self.time
    }

    /// The level of the last step, `None` before `t_{r_0}` (public).
    pub fn level(&self) -> Option<u32> {
        self.level.as_ref().map(|(p, _)| p.level)
    }

    /// `S̃ + c_t` after the last step (0 before `t_{r_0}`).
    pub fn release(&self) -> i64 {
        self.level.as_ref().map_or(0, |(_, s)| s.release())
    }

    /// Bytes held: `O(log t)`.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.level.as_ref().map_or(0, |(_, s)| s.heap_bytes())
    }

    /// The parameters of level `r` for this counter.
    fn params(&self, r: u32) -> Result<LevelParams> {
        let eps_r = self.schedule.epsilon(self.start_level, r)?;
        LevelParams::new(&self.time_epsilon, r, &eps_r)
    }

    /// Feed the value of the next step. All-or-nothing.
    pub fn step(&mut self, rng: &mut Rng, value: i64) -> Result<()> {
        if value < 0 {
            return Err(invalid!("values must be non-negative, got {value}"));
        }
        let t = self
            .time
            .checked_add(1)
            .ok_or_else(|| invalid!("the counter has reached the largest time step"))?;
        if t < self.first_time {
            // Lemma 3.3 (2): the value enters nothing.
            self.time = t;
            return Ok(());
        }
        let total = self
            .total
            .checked_add(value)
            .filter(|s| *s <= MAX_SPARSE_COUNT)
            .ok_or_else(|| Error::Overflow("the running count exceeds 2^62".into()))?;
        let saved = rng.clone();
        let master = match self.master {
            Some(m) => m,
            None => rng.draw_key(),
        };
        let base = RunKeys::new(&master, rng.is_seeded());
        let result = match &mut self.level {
            // Within the level: the state's advance is all-or-nothing.
            Some((p, s)) if t < p.end => {
                let position = [u64::from(p.level)];
                s.advance_to(p, &base.at(&position), t - p.start + 1, Some(value))
            }
            _ => self
                .enter_level(&base, t, value)
                .map(|level| self.level = Some(level)),
        };
        match result {
            Ok(()) => {
                self.total = total;
                self.time = t;
                self.master = Some(master);
                Ok(())
            }
            Err(e) => {
                *rng = saved;
                Err(e)
            }
        }
    }

    /// The level that step `t` (the first of a level) starts, with `value`
    /// counted; changes nothing.
    fn enter_level(&self, base: &RunKeys, t: u64, value: i64) -> Result<(LevelParams, LevelState)> {
        let (p, mut state) = match &self.level {
            Some((p, s)) => {
                // Empty levels hold no step: no data, no counter, no noise.
                let next = self.params(nonempty_level(&self.time_epsilon, p.level + 1)?)?;
                let mut s = s.clone();
                let position = [u64::from(p.level)];
                s.close(p, &next, &base.at(&position))?;
                (next, s)
            }
            None => {
                let p = self.params(nonempty_level(&self.time_epsilon, self.start_level)?)?;
                let s = LevelState::new(&p, 0);
                (p, s)
            }
        };
        debug_assert!(p.start <= t && t < p.end);
        let position = [u64::from(p.level)];
        state.advance_to(&p, &base.at(&position), t - p.start + 1, Some(value))?;
        Ok((p, state))
    }

    /// Encode the whole counter for a checkpoint
    /// ([`Kind::InhomogeneousSparseCounter`]): `ε_time`, `r_0`, the schedule,
    /// the time and the current level's state (layout in `counters/encoding.rs`),
    /// after the seeded flag: whether its noise came from a seeded generator
    /// (the caller says, as for [`crate::counters::Counter::to_bytes`]).
    ///
    /// **Sensitive**: the bytes hold the exact counts and the secret master
    /// key (protect them like the raw data): loaded any number of times and
    /// fed the same values, the counter releases the same values; a
    /// checkpoint supports one continuation.
    ///
    /// Fails for a [`LevelSchedule::Function`] schedule, which cannot be
    /// encoded; [`LevelSchedule::Table`] and [`LevelSchedule::Online`] can.
    pub fn to_bytes(&self, seeded: bool) -> Result<Vec<u8>> {
        let mut w = Writer::new();
        state::write_seeded_flag(&mut w, seeded);
        write_rational(&mut w, &self.time_epsilon);
        w.u32(self.start_level);
        match &self.schedule {
            LevelSchedule::Table(table) => {
                w.u8(0);
                w.u64(table.len() as u64);
                for e in table {
                    write_rational(&mut w, e);
                }
            }
            LevelSchedule::Online {
                epsilon,
                dim,
                depth,
            } => {
                w.u8(1);
                write_rational(&mut w, epsilon);
                w.u32(*dim);
                w.u32(*depth);
            }
            LevelSchedule::Function(_) => {
                return Err(invalid!(
                    "an inhomogeneous sparse counter with a LevelSchedule::Function schedule \
                     cannot be saved (a function cannot be encoded); use \
                     LevelSchedule::Table or LevelSchedule::Online"
                ))
            }
        }
        w.u64(self.time);
        w.i64(self.total);
        write_master(&mut w, self.master.as_ref());
        match &self.level {
            None => w.u8(0),
            Some((p, s)) => {
                w.u8(1);
                w.u32(p.level);
                s.write(&mut w);
            }
        }
        Ok(state::encode(Kind::InhomogeneousSparseCounter, &w.finish()))
    }

    /// Decode [`InhomogeneousSparseCounter::to_bytes`] output: the counter
    /// and its seeded flag (`false` for a version-1 encoding, which did not
    /// record it). Fails with a clear error on truncated, corrupted or
    /// foreign bytes and on a state that no counter can reach.
    pub fn from_bytes(bytes: &[u8]) -> Result<(Self, bool)> {
        let (version, payload) = state::decode_versioned(bytes, Kind::InhomogeneousSparseCounter)?;
        let mut r = Reader::new(payload);
        let seeded = state::read_seeded_flag(&mut r, version, "inhomogeneous sparse counter")?;
        let time_epsilon = read_rational(&mut r)?;
        // Level r starts at ⌈2^r / ε⌉ ≥ 2^(r − bits(numerator of ε)): a level
        // beyond this bound starts past 2^64 steps (and is refused before its
        // 2^r is computed).
        let max_level = time_epsilon.numer().bits().saturating_add(64);
        let level_ok = |level: u32| u64::from(level) <= max_level;
        let start_level = r.u32()?;
        if !level_ok(start_level) {
            return Err(bad(format!(
                "the starting level {start_level} starts beyond 2^64 steps"
            )));
        }
        let schedule = match r.u8()? {
            0 => {
                // Every encoded rational takes at least 16 bytes.
                let n = r.count(16)?;
                LevelSchedule::Table(
                    (0..n)
                        .map(|_| read_rational(&mut r))
                        .collect::<Result<_>>()?,
                )
            }
            1 => LevelSchedule::Online {
                epsilon: read_rational(&mut r)?,
                dim: r.u32()?,
                depth: r.u32()?,
            },
            tag => return Err(bad(format!("unknown level schedule {tag}"))),
        };
        let mut c = Self::new(&time_epsilon, start_level, schedule).map_err(bad)?;
        let time = r.u64()?;
        let total = r.i64()?;
        let keyed = version >= 3;
        let master = if keyed { read_master(&mut r)? } else { None };
        if !(0..=MAX_SPARSE_COUNT).contains(&total) {
            return Err(bad("the running count is out of range"));
        }
        let level = match (r.u8()?, time >= c.first_time) {
            (0, false) if total == 0 => None,
            (1, true) => {
                let level = r.u32()?;
                if level < start_level || !level_ok(level) {
                    return Err(bad(format!("time level {level} is out of range")));
                }
                let p = c.params(level).map_err(bad)?;
                if !(p.start..p.end).contains(&time) {
                    return Err(bad(format!("time {time} is not in time level {level}")));
                }
                let s = LevelState::read(&mut r, &p, keyed)?;
                s.validate()?;
                let first = nonempty_level(&time_epsilon, start_level)? == level;
                let consistent = s.local_time() == time - p.start + 1
                    && s.sum <= total
                    && (!first || (s.s_tilde, s.sum) == (0, total));
                if !consistent {
                    return Err(bad("the level's state does not match the time"));
                }
                Some((p, s))
            }
            _ => return Err(bad("the level does not match the time")),
        };
        r.finish()?;
        c.time = time;
        c.total = total;
        c.level = level;
        c.master = master;
        Ok((c, seeded))
    }

    /// Feed `values.len()` steps and write each release to `out`. All-or-nothing.
    pub fn run(&mut self, rng: &mut Rng, values: &[i64], out: &mut [i64]) -> Result<()> {
        check_run_lengths(values, out)?;
        run_scalar(self, rng, values, out, |c, r, v| {
            c.step(r, v).map(|_| c.release())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: u32, d: u32) -> Rational {
        Rational::new(n, d).unwrap()
    }

    #[test]
    fn level_starts_are_exact_ceilings() {
        let e = q(1, 3);
        assert_eq!(level_start(&e, 0).unwrap(), 3);
        assert_eq!(level_start(&e, 4).unwrap(), 48);
        let e = q(3, 1);
        // ⌈1/3⌉, ⌈2/3⌉, ⌈4/3⌉, ⌈8/3⌉ = 1, 1, 2, 3
        let s: Vec<u64> = (0..4).map(|r| level_start(&e, r).unwrap()).collect();
        assert_eq!(s, vec![1, 1, 2, 3]);
        assert!(level_start(&q(1, 1), 64).is_err());
        assert_eq!(level_start(&q(1, 1), 63).unwrap(), 1 << 63);
    }

    #[test]
    fn before_the_starting_level_nothing_is_counted() {
        let mut rng = Rng::seed_from_u64(9);
        let sched = LevelSchedule::Table(vec![q(1, 1); 10]);
        let mut c = InhomogeneousSparseCounter::new(&q(1, 2), 3, sched).unwrap();
        assert_eq!(c.first_time(), 16);
        let before = rng.clone().next_u64();
        for _ in 1..16 {
            c.step(&mut rng, 1).unwrap();
            assert_eq!(c.release(), 0);
            assert_eq!(c.level(), None);
        }
        // No noise was drawn for the ignored steps.
        assert_eq!(rng.clone().next_u64(), before);
        c.step(&mut rng, 1).unwrap();
        assert_eq!(c.level(), Some(3));
    }

    #[test]
    fn levels_advance_skip_empty_ones_and_track_the_count() {
        let mut rng = Rng::seed_from_u64(11);
        // ε_time = 3: levels start at 1, 1, 2, 3, 6, 11, 22, ...; level 0 is empty.
        let sched = LevelSchedule::Function(Arc::new(|_| Rational::new(2u32, 1u32)));
        let mut c = InhomogeneousSparseCounter::new(&q(3, 1), 0, sched).unwrap();
        c.step(&mut rng, 1).unwrap();
        assert_eq!(c.level(), Some(1));
        c.step(&mut rng, 1).unwrap();
        assert_eq!(c.level(), Some(2));
        let mut levels = vec![];
        for _ in 2..3000 {
            c.step(&mut rng, 1).unwrap();
            levels.push(c.level().unwrap());
        }
        assert!(levels.windows(2).all(|w| w[0] <= w[1]));
        // t_13 = ⌈8192/3⌉ = 2731 ≤ 3000 < t_14 = 5462.
        assert_eq!(c.level(), Some(13));
        assert!((c.release() - 3000).abs() < 300, "{}", c.release());
    }

    #[test]
    fn refused_steps_change_nothing_and_run_equals_steps() {
        let mut rng = Rng::seed_from_u64(5);
        let sched = LevelSchedule::Table(vec![q(1, 1); 3]);
        let mut c = InhomogeneousSparseCounter::new(&q(1, 1), 1, sched).unwrap();
        // Levels 1, 2, 3: steps 2..16; step 16 (level 4) is refused.
        let xs = vec![1i64; 15];
        let mut out = vec![0; 15];
        let (mut c2, mut r2) = (c.clone(), rng.clone());
        c.run(&mut rng, &xs, &mut out).unwrap();
        for (x, o) in xs.iter().zip(&out) {
            c2.step(&mut r2, *x).unwrap();
            assert_eq!(c2.release(), *o);
        }
        assert_eq!(out[0], 0);
        let state = (format!("{c:?}"), c.release(), rng.clone().next_u64());
        assert!(c.step(&mut rng, 1).is_err());
        assert!(c.step(&mut rng, -1).is_err());
        assert!(c.run(&mut rng, &[1, 1], &mut [0, 0]).is_err());
        assert_eq!(
            (format!("{c:?}"), c.release(), rng.clone().next_u64()),
            state
        );
    }

    #[test]
    fn online_schedule_uses_online_epsilon() {
        let e = q(1, 1);
        let s = LevelSchedule::Online {
            epsilon: e.clone(),
            dim: 2,
            depth: 3,
        };
        assert_eq!(
            s.epsilon(3, 5).unwrap(),
            online_epsilon(&e, 2, 3, 5).unwrap()
        );
        assert!(InhomogeneousSparseCounter::new(&e, 2, s).is_err()); // r < j
    }
}

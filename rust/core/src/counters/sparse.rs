//! Sparse counting with a finite time horizon: Algorithm 2 of He, Vershynin,
//! Zhu ("Online differentially private synthetic data generation"), a
//! modification of the sparse counter of Dwork, Naor, Reingold, Rothblum
//! (their reference [24]), with the [binary tree](super::CounterKind::BinaryTree)
//! counter of this module as the subroutine `A_sub`.
//!
//! # Mechanism (as printed)
//!
//! The timeline `1 … T` is cut into *segments* by a sparse-vector test, and
//! the count of every closed segment is fed as one item to `A_sub`:
//!
//! * `T_0 = ⌊9 ln T / ε⌋` is the public partition threshold (the paper writes
//!   `9 log T/ε`; we take the integer part so the test is on integers. It is
//!   computed in `f64` from the public `T` and ε only; the privacy argument
//!   below holds for any public `T_0`, so its rounding is immaterial).
//! * Each segment `j` draws `λ_j ~ Lap_Z(2/ε)` once: `T̃_j = T_0 + λ_j`.
//! * Before consuming the value `X_{t+1}` (at every time `t = 0, 1, …`),
//!   the test draws a fresh `λ'_t ~ Lap_Z(2/ε)` and checks
//!   `N_j + λ'_t ≤ T̃_j`, where `N_j` is the exact count of segment `j` so
//!   far. If it holds, `X_{t+1}` joins segment `j` and the release at time
//!   `t + 1` is the unchanged `Ñ`. If it fails, segment `j` closes: `N_j` is
//!   fed to `A_sub` (a binary tree counter with parameter `ε/2` and horizon
//!   `T`), `Ñ` becomes `A_sub`'s latest release, a new segment starts with
//!   `N = 0` and a new `λ`, and the test is repeated — as the printed `while`
//!   loop does — before `X_{t+1}` is consumed.
//! * The release at every step is `Ñ`, the private count of the closed
//!   segments; it is constant within a segment. It is **not** monotone (the
//!   tree's noise changes when a segment closes).
//!
//! The noise scales `2/ε` of `λ_j` and `λ'_t` and the parameter `ε/2` of
//! `A_sub` are the paper's, verbatim. All noise is exact discrete Laplace
//! drawn from the caller's [`Rng`], by [`SparseCounter::draw`] (thresholds
//! and tests) and by the binary tree counter (p-sums).
//!
//! # Privacy (Lemma 3.2)
//!
//! * **Neighbouring relation** (event level): two streams of non-negative
//!   integers of length at most `T` that differ in the value of *one* step
//!   by ±1 (for Boolean streams: one bit flipped).
//! * **Guarantee**: the whole sequence of releases (and the number of closed
//!   segments, [`SparseCounter::segments`]) is ε-DP. Lemma 3.2 refers the
//!   privacy part to [24, Theorem 3.1]; the argument with the printed scales
//!   (reviewed: an AboveThreshold instance per segment with *monotone*
//!   queries) is:
//!   (i) Partition. Fix an output (the closing times of all segments) and let
//!   step `t` lie in segment `j`. Tests of other segments never contain
//!   `X_t`. The tests of segment `j` before `t` pass and do not contain
//!   `X_t`; every test of segment `j` from `t` on — in particular the one
//!   failing test that closes it — contains `X_t`, so on the neighbour all of
//!   them move by the same `+1` (or all by `−1`). If they move by `+1`,
//!   shifting `λ_j` by `+1` (density ratio `e^{ε/2}`) keeps every passing
//!   test passing (those before `t` only get likelier) and the failing test
//!   failing, exactly. If they move by `−1`, keep `λ_j`: the passing tests
//!   only get likelier and the failing test needs its `λ'` shifted by one
//!   (`e^{ε/2}`). Either way the partition costs `ε/2`.
//!   (ii) Given the partition, one segment count changes by one, and `A_sub`
//!   (binary tree, `ε/2`) is `ε/2`-DP. Composition: ε.
//! * **Public**: `T`, ε, `T_0` and the time `t`. The exact segment count and
//!   the noisy threshold are secret; `Debug` omits them.
//! * **Split of ε**: `ε/2` for the partition (threshold and test noise, both
//!   `Lap_Z(2/ε)`), `ε/2` for `A_sub` (p-sums of scale `L/(ε/2)`,
//!   `L = ⌈log2(T + 1)⌉`); see [`SparseCounter::epsilon_split`].
//!
//! `A_sub` holds at most `T` segments. Only repeated failures of the test at
//! one time (closing empty segments, probability about `T^{-4.5}` per test)
//! can make more than `T − 1` segments; once `A_sub` is full, no further test
//! is made and `Ñ` stays. That decision depends only on the number of closed
//! segments, an output already covered by the guarantee.
//!
//! # Lazy steps (exactly the same law)
//!
//! Within a segment the count `N_j` changes only on non-zero values, so a
//! run of `n` zero steps is `n` independent tests with the same firing
//! probability `p = P(λ' > T̃_j − N_j)`. [`SparseState::advance`] samples the
//! first firing test of such a run directly
//! ([`TailTest::first_firing`]: one 32-bit word when `n·p ≤ 2^{-32}`, exact
//! inversion otherwise), closes the segment there, and continues with the
//! rest of the run — the same joint law of segments, thresholds and releases
//! as step-by-step processing, with work independent of `n`. The test before
//! a non-zero value belongs to the same run. [`SparseCounter::skip`] exposes
//! this; the online synthesizer advances every region this way.
//!
//! Public parameters (ε, `T`, `T_0`, the noise samplers) live in
//! [`SparseParams`], shared by all counters with the same ε and `T`; one
//! counter's own state ([`SparseState`]) is a few words plus its p-sums,
//! allocated as segments close.
//!
//! # Errors and atomicity
//!
//! [`SparseCounter::step`] refuses a negative value, a step past `T`, and a
//! segment count beyond `2^62`; a refused step changes nothing, the
//! generator included.

use super::encoding::{bad, read_rational, write_rational};
use super::psums::PSums;
use super::split::{epsilon_split, tree_levels, Share};
use super::{check_run_lengths, run_scalar};
use super::{CounterKind, Sensitivity};
use crate::error::{invalid, Error, Result};
use crate::noise::{DiscreteLaplace, TailTest};
use crate::rational::Rational;
use crate::rng::Rng;
use crate::state::{self, Kind, Reader, Writer};

/// Largest exact count a sparse counter keeps (sums stay far inside `i64`).
pub const MAX_SPARSE_COUNT: i64 = 1 << 62;

/// `⌊9 ln T / ε⌋` from public values, saturating at `i64::MAX`.
pub fn sparse_threshold(epsilon: &Rational, horizon: u64) -> i64 {
    // `as` saturates; ln 1 = 0 gives 0.
    (9.0 * (horizon as f64).ln() / epsilon.to_f64_lossy()).floor() as i64
}

/// The public parameters of Algorithm 2 for one ε and horizon `T`.
#[derive(Clone, Debug)]
pub(crate) struct SparseParams {
    epsilon: Rational,
    horizon: u64,
    /// `T_0 = ⌊9 ln T / ε⌋`.
    threshold: i64,
    /// `Lap_Z(2/ε)`: the threshold noise `λ_j` and the tests `λ'_t`.
    tests: TailTest,
    /// `A_sub`'s p-sum noise, `L/(ε/2)`.
    psum: DiscreteLaplace,
    /// `A_sub`'s levels `L = ⌈log2(T + 1)⌉`.
    levels: u32,
}

impl SparseParams {
    /// Fails on `ε = 0`, a zero horizon, or a noise scale above `2^56`.
    pub(crate) fn new(epsilon: &Rational, horizon: u64) -> Result<Self> {
        if epsilon.is_zero() {
            return Err(invalid!("epsilon must be positive, got 0"));
        }
        if horizon == 0 {
            return Err(invalid!("horizon must be at least 1, got 0"));
        }
        let tests = TailTest::new(&Rational::new(2u32, 1u32)?.div(epsilon)?)?;
        let sub = epsilon_split(CounterKind::BinaryTree { horizon }, &half(epsilon))?;
        Ok(Self {
            epsilon: epsilon.clone(),
            horizon,
            threshold: sparse_threshold(epsilon, horizon),
            tests,
            psum: DiscreteLaplace::new(&sub[0].scale(0)?)?,
            levels: tree_levels(horizon),
        })
    }

    /// `ε/2` for the partition, then `A_sub`'s shares (`ε/2` in total).
    pub(crate) fn epsilon_split(&self) -> Vec<Share> {
        let mut shares = vec![Share {
            family: "segment partition (threshold and test noise 2/ε)",
            epsilon: half(&self.epsilon),
            sensitivity: Sensitivity::Fixed(1),
        }];
        let sub = CounterKind::BinaryTree {
            horizon: self.horizon,
        };
        shares.extend(epsilon_split(sub, &half(&self.epsilon)).unwrap_or_default());
        shares
    }
}

fn half(x: &Rational) -> Rational {
    x.mul(&Rational::new(1u32, 2u32).expect("1/2"))
}

/// One Algorithm-2 counter's state. Everything but `time` and the number of
/// segments is secret; the type has no `Debug`.
#[derive(Clone)]
pub(crate) struct SparseState {
    /// Steps processed.
    time: u64,
    /// Whether `λ_1` has been drawn (at the first step).
    started: bool,
    /// `N_j`: exact count of the open segment.
    open_count: i64,
    /// `T̃_j = T_0 + λ_j`.
    noisy_threshold: i64,
    /// Exact sum of the closed segments' counts (`A_sub`'s input).
    closed_sum: i64,
    /// Noise of `A_sub`'s current release.
    sub_noise: i64,
    /// `A_sub`'s p-sums; the number of items is the number of closed segments.
    psums: PSums,
}

impl SparseState {
    pub(crate) fn new(params: &SparseParams) -> Self {
        Self {
            time: 0,
            started: false,
            open_count: 0,
            noisy_threshold: 0,
            closed_sum: 0,
            sub_noise: 0,
            psums: PSums::growing(1, params.levels),
        }
    }

    /// Steps processed.
    pub(crate) fn time(&self) -> u64 {
        self.time
    }

    /// Closed segments (ε-DP output).
    pub(crate) fn segments(&self) -> u64 {
        self.psums.items()
    }

    /// `Ñ`: `A_sub`'s release, the private count of the closed segments.
    pub(crate) fn release(&self) -> i64 {
        // Both terms are far inside ±2^62 unless a draw of scale ≤ 2^56
        // exceeds 2^62 (probability below e^-64).
        self.closed_sum.saturating_add(self.sub_noise)
    }

    /// Encode the state (secret: exact counts and thresholds).
    pub(crate) fn write(&self, w: &mut Writer) {
        w.u64(self.time);
        w.u8(u8::from(self.started));
        for v in [
            self.open_count,
            self.noisy_threshold,
            self.closed_sum,
            self.sub_noise,
        ] {
            w.i64(v);
        }
        self.psums.write(w);
    }

    /// Decode [`SparseState::write`] output for a counter with parameters `p`.
    pub(crate) fn read(r: &mut Reader<'_>, p: &SparseParams) -> Result<Self> {
        let time = r.u64()?;
        let started = match r.u8()? {
            0 => false,
            1 => true,
            _ => return Err(invalid!("invalid dpstream state: bad flag")),
        };
        let (open_count, noisy_threshold, closed_sum, sub_noise) =
            (r.i64()?, r.i64()?, r.i64()?, r.i64()?);
        let psums = PSums::read(r, 1, p.levels)?;
        if time > p.horizon || open_count < 0 || closed_sum < 0 || psums.items() > p.horizon {
            return Err(invalid!(
                "invalid dpstream state: sparse counter out of range"
            ));
        }
        Ok(Self {
            time,
            started,
            open_count,
            noisy_threshold,
            closed_sum,
            sub_noise,
            psums,
        })
    }

    /// Check the invariants of a decoded state that [`SparseState::read`]
    /// leaves unchecked; returns the exact sum of the values it counted.
    pub(crate) fn validate(&self) -> Result<i64> {
        self.psums.validate(false)?;
        let mut noise = [0i64];
        self.psums.noise_total(&mut noise)?;
        let fresh = !self.started
            && self.segments() == 0
            && (self.open_count, self.noisy_threshold, self.closed_sum) == (0, 0, 0);
        let ok = self.started == (self.time > 0)
            && (self.started || fresh)
            && noise[0] == self.sub_noise
            && (self.segments() > 0 || self.closed_sum == 0);
        let total = self
            .closed_sum
            .checked_add(self.open_count)
            .filter(|s| *s <= MAX_SPARSE_COUNT);
        match total {
            Some(total) if ok => Ok(total),
            _ => Err(invalid!(
                "invalid dpstream state: the sparse counter's counts are inconsistent"
            )),
        }
    }

    /// Heap bytes held (the p-sums of the closed segments).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.psums.heap_bytes()
    }

    /// Process `zeros` zero steps and then, if `value` is given, one step of
    /// `value ≥ 0` (the caller checks the sign, the horizon and the range).
    /// Exactly the law of step-by-step processing; see the module docs.
    ///
    /// All-or-nothing for the state (the caller restores `rng` on error,
    /// which only a draw beyond `i64` can cause).
    pub(crate) fn advance(
        &mut self,
        p: &SparseParams,
        rng: &mut Rng,
        zeros: u64,
        value: Option<i64>,
    ) -> Result<()> {
        let steps = zeros
            .checked_add(u64::from(value.is_some()))
            .ok_or_else(|| invalid!("too many steps"))?;
        if steps == 0 {
            return Ok(());
        }
        let mut backup: Option<Self> = None;
        let result = self.advance_inner(p, rng, steps, &mut backup);
        match result {
            Ok((count, thr)) => {
                // `count + value ≤` the counter's exact total, checked by the caller.
                self.open_count = count.saturating_add(value.unwrap_or(0));
                self.noisy_threshold = thr;
                self.started = true;
                self.time += steps;
                Ok(())
            }
            Err(e) => {
                if let Some(b) = backup {
                    *self = b;
                }
                Err(e)
            }
        }
    }

    /// The tests of `steps` steps; returns the open count and threshold.
    /// Saves `self` into `backup` before its first change.
    fn advance_inner(
        &mut self,
        p: &SparseParams,
        rng: &mut Rng,
        steps: u64,
        backup: &mut Option<Self>,
    ) -> Result<(i64, i64)> {
        let noisy = |rng: &mut Rng| -> Result<i64> {
            p.threshold
                .checked_add(p.tests.sample(rng)?)
                .ok_or_else(|| Error::Overflow("the noisy threshold exceeds int64".into()))
        };
        let mut thr = if self.started {
            self.noisy_threshold
        } else {
            noisy(rng)?
        };
        let mut count = self.open_count;
        let mut left = steps;
        // Once A_sub holds T segments no test is made (see the module docs).
        while self.segments() < p.horizon {
            let c = thr
                .checked_sub(count)
                .ok_or_else(|| Error::Overflow("threshold minus count exceeds int64".into()))?;
            let Some(g) = p.tests.first_firing(rng, c, left)? else {
                break;
            };
            // The test of step g fails: the segment closes with `count`, a new
            // one starts, and step g is tested again.
            let z = p.psum.sample(rng)?;
            let mut noise = [0i64];
            self.psums.stage(&[z], &[self.sub_noise], &mut noise)?;
            let next_thr = noisy(rng)?;
            backup.get_or_insert_with(|| self.clone());
            self.psums.commit(&[z]);
            self.sub_noise = noise[0];
            self.closed_sum = self.closed_sum.saturating_add(count); // ≤ the exact total ≤ 2^62
            count = 0;
            thr = next_thr;
            left -= g - 1;
        }
        Ok((count, thr))
    }
}

/// Algorithm 2 (sparse counting with a finite horizon); see the [module docs](self).
#[derive(Clone)]
pub struct SparseCounter {
    params: SparseParams,
    state: SparseState,
    /// Exact sum of all values so far (for the range check). Secret.
    total: i64,
}

impl std::fmt::Debug for SparseCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseCounter")
            .field("epsilon", &self.params.epsilon.to_string())
            .field("horizon", &self.params.horizon)
            .field("threshold", &self.params.threshold)
            .field("time", &self.state.time)
            .finish_non_exhaustive()
    }
}

impl SparseCounter {
    /// An ε-DP sparse counter for `horizon ≥ 1` steps. Fails on `ε = 0`, a
    /// zero horizon, or ε so small that a noise scale exceeds `2^56`.
    pub fn new(epsilon: &Rational, horizon: u64) -> Result<Self> {
        let params = SparseParams::new(epsilon, horizon)?;
        Ok(Self {
            state: SparseState::new(&params),
            params,
            total: 0,
        })
    }

    /// The privacy parameter of the whole stream.
    pub fn epsilon(&self) -> &Rational {
        &self.params.epsilon
    }

    /// The public horizon `T`.
    pub fn horizon(&self) -> u64 {
        self.params.horizon
    }

    /// The public partition threshold `T_0 = ⌊9 ln T / ε⌋`.
    pub fn threshold(&self) -> i64 {
        self.params.threshold
    }

    /// Steps taken so far (public).
    pub fn time(&self) -> u64 {
        self.state.time
    }

    /// Steps still accepted.
    pub fn remaining(&self) -> u64 {
        self.params.horizon - self.state.time
    }

    /// Number of closed segments (part of the ε-DP output).
    pub fn segments(&self) -> u64 {
        self.state.segments()
    }

    /// `Ñ` after the last step (0 before any step). ε-DP.
    pub fn release(&self) -> i64 {
        self.state.release()
    }

    /// How ε is split: `ε/2` for the partition (threshold and test noise of
    /// scale `2/ε`), `ε/2` for the p-sums of `A_sub` (sensitivity `L`).
    pub fn epsilon_split(&self) -> Vec<Share> {
        self.params.epsilon_split()
    }

    /// Bytes held: `O(log T)` (the p-sums grow with the closed segments, at
    /// most `⌈log2(T + 1)⌉` values).
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.state.heap_bytes()
    }

    /// Feed the value of the next step; the release is then [`Self::release`].
    ///
    /// All-or-nothing: on error (negative value, horizon reached, a count
    /// beyond `2^62`) the counter and `rng` are unchanged.
    pub fn step(&mut self, rng: &mut Rng, value: i64) -> Result<()> {
        if value < 0 {
            return Err(invalid!("values must be non-negative, got {value}"));
        }
        self.check_room(1)?;
        let total = self
            .total
            .checked_add(value)
            .filter(|s| *s <= MAX_SPARSE_COUNT)
            .ok_or_else(|| Error::Overflow("the running count exceeds 2^62".into()))?;
        self.guarded(rng, |s, r| s.state.advance(&s.params, r, 0, Some(value)))?;
        self.total = total;
        Ok(())
    }

    /// Feed `n` zero steps at once, with exactly the law of `n` calls of
    /// `step(rng, 0)` (the release is then the one after the last of them),
    /// in time independent of `n`. All-or-nothing.
    pub fn skip(&mut self, rng: &mut Rng, n: u64) -> Result<()> {
        self.check_room(n)?;
        self.guarded(rng, |s, r| s.state.advance(&s.params, r, n, None))
    }

    fn check_room(&self, n: u64) -> Result<()> {
        if n > self.remaining() {
            return Err(invalid!(
                "{n} steps would pass the sparse counter's horizon of {} steps (time is {})",
                self.params.horizon,
                self.state.time
            ));
        }
        Ok(())
    }

    /// Run `f`, restoring `rng` if it fails (the state restores itself).
    fn guarded(
        &mut self,
        rng: &mut Rng,
        f: impl FnOnce(&mut Self, &mut Rng) -> Result<()>,
    ) -> Result<()> {
        let saved = rng.clone();
        f(self, rng).inspect_err(|_| *rng = saved)
    }

    /// Encode the whole counter for a checkpoint ([`Kind::SparseCounter`]):
    /// the seeded flag, ε, `T`, the exact total, then the state (layout in
    /// `counters/encoding.rs`). `seeded`: whether its noise came from a
    /// seeded generator (the counter does not own its generator, so the
    /// caller says; it is stored so that a loaded counter stays marked not
    /// private).
    ///
    /// **Sensitive**: the bytes hold the exact counts and the noisy
    /// threshold (protect them like the raw data). No generator state is
    /// stored: the counter has none.
    pub fn to_bytes(&self, seeded: bool) -> Vec<u8> {
        let mut w = Writer::new();
        state::write_seeded_flag(&mut w, seeded);
        write_rational(&mut w, &self.params.epsilon);
        w.u64(self.params.horizon);
        w.i64(self.total);
        self.state.write(&mut w);
        state::encode(Kind::SparseCounter, &w.finish())
    }

    /// Decode [`SparseCounter::to_bytes`] output: the counter and its seeded
    /// flag (`false` for a version-1 encoding, which did not record it).
    /// Fails with a clear error on truncated, corrupted or foreign bytes and
    /// on a state that no counter can reach.
    pub fn from_bytes(bytes: &[u8]) -> Result<(Self, bool)> {
        let (version, payload) = state::decode_versioned(bytes, Kind::SparseCounter)?;
        let mut r = Reader::new(payload);
        let seeded = state::read_seeded_flag(&mut r, version, "sparse counter")?;
        let epsilon = read_rational(&mut r)?;
        let horizon = r.u64()?;
        let params = SparseParams::new(&epsilon, horizon).map_err(bad)?;
        let total = r.i64()?;
        let state = SparseState::read(&mut r, &params)?;
        r.finish()?;
        if state.validate()? != total {
            return Err(bad(
                "the sparse counter's total does not match its segments",
            ));
        }
        Ok((
            Self {
                params,
                state,
                total,
            },
            seeded,
        ))
    }

    /// Feed `values.len()` steps and write each step's release to `out`.
    ///
    /// All-or-nothing: on error the counter and `rng` are as before the call
    /// (and `out` is unspecified).
    pub fn run(&mut self, rng: &mut Rng, values: &[i64], out: &mut [i64]) -> Result<()> {
        check_run_lengths(values, out)?;
        self.check_room(values.len() as u64)?;
        run_scalar(self, rng, values, out, |c, r, v| {
            c.step(r, v).map(|_| c.release())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eps(n: u32, d: u32) -> Rational {
        Rational::new(n, d).unwrap()
    }

    #[test]
    fn threshold_is_public_and_as_documented() {
        let c = SparseCounter::new(&eps(1, 1), 1000).unwrap();
        assert_eq!(c.threshold(), (9.0 * 1000f64.ln()).floor() as i64); // 62
        assert_eq!(c.threshold(), 62);
        assert_eq!(SparseCounter::new(&eps(1, 2), 1).unwrap().threshold(), 0);
        assert_eq!(
            SparseCounter::new(&eps(1, 10), 100).unwrap().threshold(),
            414
        );
        let shares = c.epsilon_split();
        assert_eq!(shares.len(), 2);
        assert_eq!(shares[0].epsilon, eps(1, 2));
        assert_eq!(shares[1].epsilon, eps(1, 2));
        // The sub-counter's p-sum scale: L / (ε/2) with L = 10 levels for T = 1000.
        assert_eq!(shares[1].scale(0).unwrap(), eps(20, 1));
    }

    #[test]
    fn release_is_constant_within_segments_and_zero_before_the_first() {
        let mut rng = Rng::seed_from_u64(7);
        let mut c = SparseCounter::new(&eps(1, 1), 2000).unwrap();
        let mut last = (0u64, 0i64);
        for t in 0..2000u64 {
            c.step(&mut rng, i64::from(t % 3 == 0)).unwrap();
            if c.segments() == last.0 {
                assert_eq!(c.release(), last.1, "changed inside a segment at {t}");
            }
            if c.segments() == 0 {
                assert_eq!(c.release(), 0);
            }
            last = (c.segments(), c.release());
        }
        // 667 ones with T_0 = 68: about 10 segments, and the release is close.
        assert!((5..=20).contains(&c.segments()), "{}", c.segments());
        assert!((c.release() - 667).abs() < 200, "{}", c.release());
        assert!(c.step(&mut rng, 0).is_err());
    }

    #[test]
    fn refused_steps_change_nothing_and_run_equals_steps() {
        let mut rng = Rng::seed_from_u64(3);
        let mut c = SparseCounter::new(&eps(1, 2), 50).unwrap();
        let before = (format!("{c:?}"), rng.clone().next_u64());
        assert!(c.step(&mut rng, -1).is_err());
        assert_eq!((format!("{c:?}"), rng.clone().next_u64()), before);
        let xs: Vec<i64> = (0..50).map(|i| i64::from(i % 2 == 0) * 3).collect();
        let mut out = vec![0; 50];
        assert!(c.run(&mut rng, &[1, -2], &mut [0, 0]).is_err());
        assert!(c.run(&mut rng, &vec![0; 51], &mut vec![0; 51]).is_err());
        assert_eq!((format!("{c:?}"), rng.clone().next_u64()), before);
        let (mut c2, mut rng2) = (c.clone(), rng.clone());
        c.run(&mut rng, &xs, &mut out).unwrap();
        for (x, o) in xs.iter().zip(&out) {
            c2.step(&mut rng2, *x).unwrap();
            assert_eq!(c2.release(), *o);
        }
        assert_eq!(rng.next_u64(), rng2.next_u64());
        let mut big = SparseCounter::new(&eps(1, 1), 5).unwrap();
        big.step(&mut rng, MAX_SPARSE_COUNT).unwrap();
        assert!(matches!(big.step(&mut rng, 1), Err(Error::Overflow(_))));
        assert_eq!(big.time(), 1);
    }

    #[test]
    fn memory_is_logarithmic() {
        let mut rng = Rng::seed_from_u64(1);
        let mut c = SparseCounter::new(&eps(1, 1), 1 << 16).unwrap();
        let m = c.memory_bytes();
        for _ in 0..5000 {
            c.step(&mut rng, 1).unwrap();
        }
        // About 5000 / T_0 = 50 segments: at most one p-sum noise per level.
        assert!(c.segments() > 10);
        assert!(
            c.memory_bytes() <= m + 17 * 8,
            "{} vs {m}",
            c.memory_bytes()
        );
    }

    /// `skip(n)` has the law of `n` zero steps: two-sample chi-square on the
    /// number of closed segments (α = 1e-6) in regimes that exercise the
    /// fast path, short runs drawn test by test, and the exact skipper.
    #[test]
    fn skipping_zeros_has_the_law_of_zero_steps() {
        use crate::noise::test_support::chi2_critical;
        // ε = 1, T = 1000: T_0 = 62, test noise scale 2, so after 60 ones a
        // zero run is likely to close the segment.
        for (ones, zeros) in [(60u64, 20u64), (60, 400), (0, 900), (61, 3)] {
            let reps = 20_000;
            let mut hist = [[0u64; 4]; 2];
            let mut rng = Rng::seed_from_u64(1000 + ones + zeros);
            for _ in 0..reps {
                for (lazy, h) in hist.iter_mut().enumerate() {
                    let mut c = SparseCounter::new(&eps(1, 1), 1000).unwrap();
                    for _ in 0..ones {
                        c.step(&mut rng, 1).unwrap();
                    }
                    if lazy == 1 {
                        c.skip(&mut rng, zeros).unwrap();
                    } else {
                        for _ in 0..zeros {
                            c.step(&mut rng, 0).unwrap();
                        }
                    }
                    assert_eq!(c.time(), ones + zeros);
                    h[(c.segments() as usize).min(3)] += 1;
                }
            }
            let mut stat = 0.0;
            let mut df = 0.0;
            for k in 0..4 {
                let col = (hist[0][k] + hist[1][k]) as f64;
                if col == 0.0 {
                    continue;
                }
                df += 1.0;
                for row in &hist {
                    let e = col / 2.0;
                    stat += (row[k] as f64 - e).powi(2) / e;
                }
            }
            let df: f64 = df - 1.0;
            if df >= 1.0 {
                assert!(
                    stat < chi2_critical(df),
                    "ones {ones}, zeros {zeros}: {hist:?} (chi2 {stat})"
                );
            }
            if ones == 60 && zeros == 400 {
                // The regime does exercise closing inside the run.
                assert!(hist[1][1] > reps / 4, "{hist:?}");
            }
        }
    }

    #[test]
    fn skip_respects_the_horizon_and_changes_nothing_on_error() {
        let mut rng = Rng::seed_from_u64(2);
        let mut c = SparseCounter::new(&eps(1, 1), 100).unwrap();
        c.skip(&mut rng, 40).unwrap();
        let before = (format!("{c:?}"), rng.clone().next_u64());
        assert!(c.skip(&mut rng, 61).is_err());
        assert_eq!((format!("{c:?}"), rng.clone().next_u64()), before);
        c.skip(&mut rng, 60).unwrap();
        assert_eq!(c.remaining(), 0);
        c.skip(&mut rng, 0).unwrap();
    }
}

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
//! `A_sub` are the paper's, verbatim. All noise is exact discrete Laplace.
//!
//! # Keys (one continuation per checkpoint)
//!
//! The noise is drawn from generators keyed by the counter's secret master
//! key (drawn from the caller's [`Rng`] at the first step and stored in its
//! checkpoint), the state's public position (level, cell) and a keyed digest
//! of the non-zero values with their times ([`SparseKeys::generator`]). A
//! *run* is the tests from one count and threshold to the next (from a
//! non-zero value or a closing test): its own generator decides its tests
//! as a fixed function of its stream (the first 32 one by one in order, the
//! rest by one uniform: [`TailTest::first_firing_replayable`]), so every call
//! replays the same draws for the tests so far and the answers agree; a
//! closing test draws its p-sum noise and the next threshold from another.
//! So the draws do not depend on how the steps are grouped into calls
//! ([`SparseCounter::skip`] or steps): a checkpoint loaded any number
//! of times and fed the same values releases the same values, and other
//! values give independent noise (distinct inputs of a pseudorandom
//! function). The tests of a run are independent given its count and
//! threshold, so the law is that of step-by-step processing.
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
//! ([`TailTest::first_firing_replayable`]: one 32-bit word when
//! `n·p ≤ 2^{-32}`, else up to 32 tests drawn one by one and exact inversion
//! for the rest), closes the segment there, and continues with the
//! rest of the run — the same joint law of segments, thresholds and releases
//! as step-by-step processing, with work bounded independently of `n`. The
//! test before a non-zero value belongs to the same run. [`SparseCounter::skip`] exposes
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
use crate::rng::{chacha12_block, derive_key, tag, DigestPowers, KeyedDigest, Rng, APPEND_WORDS};
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

/// Write an optional master key (a flag, then the 32 bytes).
pub(crate) fn write_master(w: &mut Writer, master: Option<&[u8; 32]>) {
    match master {
        None => w.u8(0),
        Some(m) => {
            w.u8(1);
            for b in m {
                w.u8(*b);
            }
        }
    }
}

/// Read [`write_master`] output.
pub(crate) fn read_master(r: &mut Reader<'_>) -> Result<Option<[u8; 32]>> {
    match r.u8()? {
        0 => Ok(None),
        1 => {
            let mut m = [0u8; 32];
            for b in m.iter_mut() {
                *b = r.u8()?;
            }
            Ok(Some(m))
        }
        _ => Err(invalid!("invalid dpstream state: bad master key flag")),
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
    /// The first test of the current run: the tests from here on share the
    /// count and threshold until a non-zero value or a closing test.
    run_start: u64,
    /// The keyed digest of the non-zero values so far, with their times.
    digest: [u64; 2],
}

/// The keys of sparse states under a secret master key: derived once per
/// owner (four ChaCha blocks), then [`RunKeys::at`] a state's position.
pub(crate) struct RunKeys {
    /// `derive_key(master, [SPARSE_RUN])`: the key of the runs' blocks.
    run: [u8; 32],
    /// Whether the master key came from a seeded generator (then it is not
    /// private).
    seeded: bool,
    /// The keyed digest under the master key, empty (its secret points).
    hash: KeyedDigest,
    powers: DigestPowers,
}

impl RunKeys {
    /// The keys under `master`.
    pub(crate) fn new(master: &[u8; 32], seeded: bool) -> Self {
        let hash = KeyedDigest::new(master);
        Self {
            run: derive_key(master, &[tag::SPARSE_RUN]),
            seeded,
            powers: hash.powers(),
            hash,
        }
    }

    /// The keys of the state at `position` (e.g. its level and cell; at most
    /// 3 words).
    pub(crate) fn at<'a>(&'a self, position: &'a [u64]) -> SparseKeys<'a> {
        SparseKeys {
            keys: self,
            position,
        }
    }
}

/// Where a sparse state's noise comes from: its owner's [`RunKeys`] and the
/// state's public position.
#[derive(Clone, Copy)]
pub(crate) struct SparseKeys<'a> {
    keys: &'a RunKeys,
    position: &'a [u64],
}

/// What a keyed generator of a run draws.
#[derive(Clone, Copy)]
pub(crate) enum Draw {
    /// The run's tests ([`TailTest::first_firing_replayable`]).
    Tests = 0,
    /// A closing test's p-sum noise and the next segment's threshold.
    Close = 1,
    /// The first segment's threshold.
    First = 2,
    /// The level sum's noise of an inhomogeneous counter.
    LevelSum = 3,
    /// The noise of the finished levels of a cell the online synthesizer
    /// creates (`d = 1`).
    History = 4,
}

/// The randomness of one keyed draw: one ChaCha block.
pub(crate) struct KeyedStream {
    block: [u8; 64],
    seeded: bool,
}

impl KeyedStream {
    /// A word of the block (the fast path of a run's tests reads only this).
    pub(crate) fn first_u32(&self) -> u32 {
        u32::from_le_bytes([self.block[0], self.block[1], self.block[2], self.block[3]])
    }

    /// A generator keyed by the block's second half (independent of its
    /// first word).
    pub(crate) fn rng(&self) -> Rng {
        let mut key = [0u8; 32];
        key.copy_from_slice(&self.block[32..]);
        Rng::keyed_stream(key, 0, self.seeded)
    }
}

impl SparseKeys<'_> {
    /// `digest` with `words` appended.
    fn absorb(&self, digest: [u64; 2], words: &[u64]) -> [u64; 2] {
        let mut d = self.keys.hash.at(digest);
        d.append(words, &self.keys.powers);
        d.state()
    }

    /// The generator of `draw` for the run that starts at test `start` after
    /// `segments` closed segments and the values of `digest`: a fixed
    /// function of the master key and these words, so a state loaded any
    /// number of times and fed the same values draws the same noise, in any
    /// grouping of its calls.
    pub(crate) fn generator(&self, draw: Draw, start: u64, segments: u64, digest: [u64; 2]) -> Rng {
        self.stream(draw, start, segments, digest).rng()
    }

    /// The block behind [`SparseKeys::generator`]: its first word and the
    /// key of the generator.
    ///
    /// The words are hashed by the keyed digest (its points are secret: two
    /// distinct word sequences collide with negligible probability), and the
    /// hash's two halves are the 128-bit input of the pseudorandom function
    /// [`chacha12_block`] under a key derived from the master key: one ChaCha
    /// block per run.
    pub(crate) fn stream(
        &self,
        draw: Draw,
        start: u64,
        segments: u64,
        digest: [u64; 2],
    ) -> KeyedStream {
        let mut words = [0u64; APPEND_WORDS];
        let len = 6 + self.position.len();
        words[..6].copy_from_slice(&[
            draw as u64,
            start,
            segments,
            digest[0],
            digest[1],
            self.position.len() as u64,
        ]);
        words[6..len].copy_from_slice(self.position);
        let mut h = self.keys.hash;
        h.append(&words[..len], &self.keys.powers);
        let [h0, h1] = h.state();
        KeyedStream {
            block: chacha12_block(&self.keys.run, h0, h1),
            seeded: self.keys.seeded,
        }
    }
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
            run_start: 1,
            digest: [1, 1],
        }
    }

    /// The keyed digest of the values so far (for a level's sum noise).
    pub(crate) fn digest(&self) -> [u64; 2] {
        self.digest
    }

    /// Continue the digest of an earlier state (a new level of the same counter).
    pub(crate) fn set_digest(&mut self, digest: [u64; 2]) {
        self.digest = digest;
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
        w.u64(self.run_start);
        w.u64(self.digest[0]);
        w.u64(self.digest[1]);
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

    /// Decode [`SparseState::write`] output for a counter with parameters `p`;
    /// `keyed`: the encoding has the run and digest (a state written before
    /// them continues with a run starting at its next test).
    pub(crate) fn read(r: &mut Reader<'_>, p: &SparseParams, keyed: bool) -> Result<Self> {
        let keys = if keyed {
            Some((r.u64()?, [r.u64()?, r.u64()?]))
        } else {
            None
        };
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
        let (run_start, digest) = keys.unwrap_or((time + 1, [1, 1]));
        if run_start == 0 || run_start > time + 1 {
            return Err(invalid!(
                "invalid dpstream state: sparse counter run out of range"
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
            run_start,
            digest,
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
            && (self.started || (fresh && self.run_start == 1))
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
    /// The noise is keyed (see [`SparseKeys::generator`]): each run of tests
    /// with one count and threshold (from a non-zero value or a closing test
    /// to the next) has its own randomness, of which its tests are a fixed
    /// function ([`TailTest::first_firing_replayable`]), so the same values
    /// give the same draws however the steps are grouped into calls.
    ///
    /// All-or-nothing for the state (only a draw beyond `i64` can fail).
    pub(crate) fn advance(
        &mut self,
        p: &SparseParams,
        keys: &SparseKeys<'_>,
        zeros: u64,
        value: Option<i64>,
    ) -> Result<()> {
        let steps = zeros
            .checked_add(u64::from(value.is_some()))
            .ok_or_else(|| invalid!("too many steps"))?;
        if steps == 0 {
            return Ok(());
        }
        let end = self.time + steps;
        let mut backup: Option<Self> = None;
        let result = self.advance_inner(p, keys, end, &mut backup);
        match result {
            Ok((count, thr, start)) => {
                let v = value.unwrap_or(0);
                // `count + value ≤` the counter's exact total, checked by the caller.
                self.open_count = count.saturating_add(v);
                self.noisy_threshold = thr;
                self.started = true;
                self.time = end;
                self.run_start = start;
                if v != 0 {
                    self.digest = keys.absorb(self.digest, &[end, v as u64]);
                    self.run_start = end + 1;
                }
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

    /// The tests up to test `end`; returns the open count, the threshold and
    /// the start of the open run. Saves `self` into `backup` before its first
    /// change.
    fn advance_inner(
        &mut self,
        p: &SparseParams,
        keys: &SparseKeys<'_>,
        end: u64,
        backup: &mut Option<Self>,
    ) -> Result<(i64, i64, u64)> {
        let noisy = |rng: &mut Rng| -> Result<i64> {
            p.threshold
                .checked_add(p.tests.sample(rng)?)
                .ok_or_else(|| Error::Overflow("the noisy threshold exceeds int64".into()))
        };
        let mut start = self.run_start;
        let mut thr = if self.started {
            self.noisy_threshold
        } else {
            noisy(&mut keys.generator(Draw::First, start, 0, self.digest))?
        };
        let mut count = self.open_count;
        // Once A_sub holds T segments no test is made (see the module docs).
        while self.segments() < p.horizon {
            let c = thr
                .checked_sub(count)
                .ok_or_else(|| Error::Overflow("threshold minus count exceeds int64".into()))?;
            let segments = self.segments();
            // The run's own generator decides its tests as a fixed function
            // of its stream: every call replays the run's tests so far, and
            // the answers agree ([`TailTest::first_firing_replayable`]).
            let n = end - start + 1;
            let tests = keys.stream(Draw::Tests, start, segments, self.digest);
            let Some(g) =
                p.tests
                    .first_firing_replayable(tests.first_u32(), || tests.rng(), c, n)?
            else {
                break;
            };
            let at = start + g - 1;
            if at <= self.time {
                return Err(invalid!(
                    "invalid dpstream state: a sparse counter's test fired in the past"
                ));
            }
            // The test of step `at` fails: the segment closes with `count`, a
            // new one starts, and step `at` is tested again.
            let mut close = keys.generator(Draw::Close, start, segments, self.digest);
            let z = p.psum.sample(&mut close)?;
            let mut noise = [0i64];
            self.psums.stage(&[z], &[self.sub_noise], &mut noise)?;
            let next_thr = noisy(&mut close)?;
            backup.get_or_insert_with(|| self.clone());
            self.psums.commit(&[z]);
            self.sub_noise = noise[0];
            self.closed_sum = self.closed_sum.saturating_add(count); // ≤ the exact total ≤ 2^62
            count = 0;
            thr = next_thr;
            start = at;
        }
        Ok((count, thr, start))
    }
}

/// Algorithm 2 (sparse counting with a finite horizon); see the [module docs](self).
#[derive(Clone)]
pub struct SparseCounter {
    params: SparseParams,
    state: SparseState,
    /// Exact sum of all values so far (for the range check). Secret.
    total: i64,
    /// Secret master key of the noise, drawn from the caller's generator at
    /// the first step ([`SparseState::advance`] keys every run by it).
    master: Option<[u8; 32]>,
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
            master: None,
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
        self.keyed(rng, |state, p, keys| state.advance(p, keys, 0, Some(value)))?;
        self.total = total;
        Ok(())
    }

    /// Feed `n` zero steps at once, with exactly the law of `n` calls of
    /// `step(rng, 0)` (the release is then the one after the last of them),
    /// in time independent of `n`. All-or-nothing.
    pub fn skip(&mut self, rng: &mut Rng, n: u64) -> Result<()> {
        self.check_room(n)?;
        self.keyed(rng, |state, p, keys| state.advance(p, keys, n, None))
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

    /// Run `f` with the counter's keys (its master key drawn from `rng` at
    /// the first call), restoring `rng` if it fails (the state restores itself).
    fn keyed(
        &mut self,
        rng: &mut Rng,
        f: impl FnOnce(&mut SparseState, &SparseParams, &SparseKeys<'_>) -> Result<()>,
    ) -> Result<()> {
        let saved = rng.clone();
        let master = match self.master {
            Some(m) => m,
            None => rng.draw_key(),
        };
        let base = RunKeys::new(&master, rng.is_seeded());
        let keys = base.at(&[]);
        match f(&mut self.state, &self.params, &keys) {
            Ok(()) => {
                self.master = Some(master);
                Ok(())
            }
            Err(e) => {
                *rng = saved;
                Err(e)
            }
        }
    }

    /// Encode the whole counter for a checkpoint ([`Kind::SparseCounter`]):
    /// the seeded flag, ε, `T`, the exact total, then the state (layout in
    /// `counters/encoding.rs`). `seeded`: whether its noise came from a
    /// seeded generator (the counter does not own its generator, so the
    /// caller says; it is stored so that a loaded counter stays marked not
    /// private).
    ///
    /// **Sensitive**: the bytes hold the exact counts, the noisy threshold
    /// and the secret master key (protect them like the raw data): loaded any
    /// number of times and fed the same values, the counter releases the same
    /// values; a checkpoint supports one continuation.
    pub fn to_bytes(&self, seeded: bool) -> Vec<u8> {
        let mut w = Writer::new();
        state::write_seeded_flag(&mut w, seeded);
        write_rational(&mut w, &self.params.epsilon);
        w.u64(self.params.horizon);
        w.i64(self.total);
        write_master(&mut w, self.master.as_ref());
        self.state.write(&mut w);
        state::encode(Kind::SparseCounter, &w.finish())
    }

    /// Decode [`SparseCounter::to_bytes`] output: the counter and its seeded
    /// flag (`false` for a version-1 encoding, which did not record it). A
    /// version-1 or -2 encoding holds no master key: the loaded counter draws
    /// one at its next step.
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
        let keyed = version >= 3;
        let master = if keyed { read_master(&mut r)? } else { None };
        let state = SparseState::read(&mut r, &params, keyed)?;
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
                master,
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
    /// About two minutes: `make check` runs it (`cargo test -- --ignored`).
    #[test]
    #[ignore = "slow (about two minutes): make check runs it"]
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

    /// A checkpoint loaded any number of times and fed the same values gives
    /// the same state, byte for byte, however the zeros are grouped into
    /// calls; other values give other noise.
    #[test]
    fn loads_fed_the_same_values_give_the_same_noise_in_any_grouping() {
        let mut rng = Rng::from_os().unwrap();
        let mut c = SparseCounter::new(&eps(4, 1), 2000).unwrap();
        for t in 0..300 {
            c.step(&mut rng, i64::from(t % 4 == 0)).unwrap();
        }
        let saved = c.to_bytes(false);
        let values: Vec<i64> = (0..900).map(|t| i64::from(t % 7 == 0)).collect();
        let continue_with = |values: &[i64], grouped: bool| {
            let (mut d, _) = SparseCounter::from_bytes(&saved).unwrap();
            // The master key is stored: the generator given is not used.
            let mut other = Rng::from_os().unwrap();
            let mut zeros = 0;
            let mut noises = Vec::new();
            for &v in values {
                if grouped && v == 0 {
                    zeros += 1;
                    continue;
                }
                d.skip(&mut other, zeros).unwrap();
                zeros = 0;
                d.step(&mut other, v).unwrap();
                if v != 0 {
                    noises.push(d.state.sub_noise);
                }
            }
            d.skip(&mut other, zeros).unwrap();
            (d, noises)
        };
        let (first, noises) = continue_with(&values, false);
        assert!(first.segments() > c.segments() + 3);
        for grouped in [true, false, true] {
            let (again, again_noises) = continue_with(&values, grouped);
            assert_eq!(again.to_bytes(false), first.to_bytes(false));
            assert_eq!(again_noises, noises);
        }
        let mut changed = values.clone();
        changed[0] = 1 - changed[0];
        // The noise of every segment closed after the change is another draw.
        let (_, other) = continue_with(&changed, true);
        assert_ne!(other, noises);
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

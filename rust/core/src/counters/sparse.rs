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
//!   is: (i) the partition into segments is a sparse-vector mechanism whose
//!   only test that can *fail* with the changed step `t` in the running
//!   count is the one that closes `t`'s segment (every test of that segment
//!   made before `t` passes and does not contain `X_t`; later segments do not
//!   contain it). Shifting the threshold noise `λ_j` by one (cost `ε/2`)
//!   matches every test of the segment in one direction; in the other the
//!   passing tests only get likelier and the one failing test costs `ε/2`
//!   through `λ'`. So the partition costs `ε/2`. (ii) Given the partition,
//!   one segment count changes by one, and `A_sub` is `ε/2`-DP. Total ε.
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
//! # Errors and atomicity
//!
//! [`SparseCounter::step`] refuses a negative value, a step past `T`, and a
//! segment count beyond `2^62`; a refused step changes nothing, the
//! generator included.

use super::split::Share;
use super::{check_run_lengths, run_scalar};
use super::{Counter, CounterKind};
use crate::error::{invalid, Error, Result};
use crate::noise::DiscreteLaplace;
use crate::rational::Rational;
use crate::rng::Rng;

/// Largest exact count a sparse counter keeps (sums stay far inside `i64`).
pub const MAX_SPARSE_COUNT: i64 = 1 << 62;

/// Algorithm 2 (sparse counting with a finite horizon); see the [module docs](self).
#[derive(Clone)]
pub struct SparseCounter {
    epsilon: Rational,
    horizon: u64,
    /// `T_0 = ⌊9 ln T / ε⌋`, public.
    threshold: i64,
    /// `Lap_Z(2/ε)` for `λ_j` and `λ'_t`.
    noise: DiscreteLaplace,
    time: u64,
    /// Closed segments (ε-DP output).
    segments: u64,
    /// Whether `λ_1` has been drawn (at the first step).
    started: bool,
    /// `N_j`: exact count of the open segment. Secret.
    open_count: i64,
    /// `T̃_j = T_0 + λ_j`. Secret.
    noisy_threshold: i128,
    /// Exact sum of all values so far (for the range check). Secret.
    total: i64,
    /// `A_sub`: binary tree counter over segment counts, `ε/2`, horizon `T`.
    sub: Counter,
    /// `Ñ`, the release.
    release: i64,
}

impl std::fmt::Debug for SparseCounter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SparseCounter")
            .field("epsilon", &self.epsilon.to_string())
            .field("horizon", &self.horizon)
            .field("threshold", &self.threshold)
            .field("time", &self.time)
            .finish_non_exhaustive()
    }
}

/// `⌊9 ln T / ε⌋` from public values, saturating at `i64::MAX`.
pub fn sparse_threshold(epsilon: &Rational, horizon: u64) -> i64 {
    // `as` saturates; ln 1 = 0 gives 0.
    (9.0 * (horizon as f64).ln() / epsilon.to_f64_lossy()).floor() as i64
}

impl SparseCounter {
    /// An ε-DP sparse counter for `horizon ≥ 1` steps. Fails on `ε = 0`, a
    /// zero horizon, or ε so small that a noise scale exceeds `2^56`.
    /// Everything is allocated here.
    pub fn new(epsilon: &Rational, horizon: u64) -> Result<Self> {
        if epsilon.is_zero() {
            return Err(invalid!("epsilon must be positive, got 0"));
        }
        if horizon == 0 {
            return Err(invalid!("horizon must be at least 1, got 0"));
        }
        let half = epsilon.mul(&Rational::new(1u32, 2u32)?);
        let noise = DiscreteLaplace::new(&Rational::new(2u32, 1u32)?.div(epsilon)?)?;
        let sub = Counter::new(CounterKind::BinaryTree { horizon }, &half, 1)?;
        Ok(Self {
            epsilon: epsilon.clone(),
            horizon,
            threshold: sparse_threshold(epsilon, horizon),
            noise,
            time: 0,
            segments: 0,
            started: false,
            open_count: 0,
            noisy_threshold: 0,
            total: 0,
            sub,
            release: 0,
        })
    }

    /// The privacy parameter of the whole stream.
    pub fn epsilon(&self) -> &Rational {
        &self.epsilon
    }

    /// The public horizon `T`.
    pub fn horizon(&self) -> u64 {
        self.horizon
    }

    /// The public partition threshold `T_0 = ⌊9 ln T / ε⌋`.
    pub fn threshold(&self) -> i64 {
        self.threshold
    }

    /// Steps taken so far (public).
    pub fn time(&self) -> u64 {
        self.time
    }

    /// Steps still accepted.
    pub fn remaining(&self) -> u64 {
        self.horizon - self.time
    }

    /// Number of closed segments (part of the ε-DP output).
    pub fn segments(&self) -> u64 {
        self.segments
    }

    /// `Ñ` after the last step (0 before any step). ε-DP.
    pub fn release(&self) -> i64 {
        self.release
    }

    /// How ε is split: `ε/2` for the partition (threshold and test noise of
    /// scale `2/ε`), `ε/2` for the p-sums of `A_sub` (sensitivity `L`).
    pub fn epsilon_split(&self) -> Vec<Share> {
        let mut shares = vec![Share {
            family: "segment partition (threshold and test noise 2/ε)",
            epsilon: self.epsilon.mul(&Rational::new(1u32, 2u32).expect("1/2")),
            sensitivity: super::Sensitivity::Fixed(1),
        }];
        shares.extend(self.sub.epsilon_split());
        shares
    }

    /// Bytes held: `O(log T)`, fixed at construction.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() - std::mem::size_of::<Counter>() + self.sub.memory_bytes()
    }

    /// The one place where this counter draws its own noise (`λ_j`, `λ'_t`).
    fn draw(&self, rng: &mut Rng) -> Result<i64> {
        self.noise.sample(rng)
    }

    /// Feed the value of the next step; the release is then [`Self::release`].
    ///
    /// All-or-nothing: on error (negative value, horizon reached, a count
    /// beyond `2^62`) the counter and `rng` are unchanged.
    pub fn step(&mut self, rng: &mut Rng, value: i64) -> Result<()> {
        if value < 0 {
            return Err(invalid!("values must be non-negative, got {value}"));
        }
        if self.remaining() == 0 {
            return Err(invalid!(
                "the sparse counter's horizon of {} steps is reached",
                self.horizon
            ));
        }
        let total = self
            .total
            .checked_add(value)
            .filter(|s| *s <= MAX_SPARSE_COUNT)
            .ok_or_else(|| Error::Overflow("the running count exceeds 2^62".into()))?;
        let saved = rng.clone();
        match self.stage(rng) {
            Ok(staged) => {
                let (closed, count, thr) = staged;
                // `count ≤ total`, so this cannot overflow.
                self.open_count = count + value;
                self.noisy_threshold = thr;
                self.started = true;
                self.segments += closed;
                if closed > 0 {
                    self.release = self.sub.release()[0];
                }
                self.total = total;
                self.time += 1;
                Ok(())
            }
            Err(e) => {
                *rng = saved;
                Err(e)
            }
        }
    }

    /// The tests before the next value; feeds closed segments to `A_sub`.
    /// Returns `(segments closed, open count, noisy threshold)`. On error
    /// `A_sub` is unchanged (the caller restores `rng`).
    fn stage(&mut self, rng: &mut Rng) -> Result<(u64, i64, i128)> {
        let t0 = i128::from(self.threshold);
        let mut thr = if self.started {
            self.noisy_threshold
        } else {
            t0 + i128::from(self.draw(rng)?)
        };
        let mut count = self.open_count;
        let mut closed_first = None;
        let mut closed = 0u64;
        let room = self.sub.remaining();
        while closed < room {
            let test = self.draw(rng)?;
            if i128::from(count) + i128::from(test) <= thr {
                break;
            }
            closed_first.get_or_insert(count);
            closed += 1;
            count = 0;
            thr = t0 + i128::from(self.draw(rng)?);
        }
        match closed {
            0 => {}
            1 => self.sub.step(rng, &[closed_first.unwrap_or(0)])?,
            _ => {
                // Several segments at one time (probability ~T^-4.5): the
                // rare path may allocate, to stay all-or-nothing.
                let saved = self.sub.clone();
                let mut feed = |sub: &mut Counter| -> Result<()> {
                    sub.step(rng, &[closed_first.unwrap_or(0)])?;
                    for _ in 1..closed {
                        sub.step(rng, &[0])?;
                    }
                    Ok(())
                };
                if let Err(e) = feed(&mut self.sub) {
                    self.sub = saved;
                    return Err(e);
                }
            }
        }
        Ok((closed, count, thr))
    }

    /// Feed `values.len()` steps and write each step's release to `out`.
    ///
    /// All-or-nothing: on error the counter and `rng` are as before the call
    /// (and `out` is unspecified).
    pub fn run(&mut self, rng: &mut Rng, values: &[i64], out: &mut [i64]) -> Result<()> {
        check_run_lengths(values, out)?;
        if values.len() as u64 > self.remaining() {
            return Err(invalid!(
                "{} steps would pass the sparse counter's horizon of {} steps (time is {})",
                values.len(),
                self.horizon,
                self.time
            ));
        }
        run_scalar(self, rng, values, out, |c, r, v| {
            c.step(r, v).map(|_| c.release)
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
    fn memory_is_fixed_and_logarithmic() {
        let mut rng = Rng::seed_from_u64(1);
        let mut c = SparseCounter::new(&eps(1, 1), 1 << 16).unwrap();
        let m = c.memory_bytes();
        for _ in 0..5000 {
            c.step(&mut rng, 1).unwrap();
        }
        assert_eq!(c.memory_bytes(), m);
        assert!(m < 2048, "{m}");
    }
}

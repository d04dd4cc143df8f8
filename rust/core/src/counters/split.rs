//! How each counter spends ε: the one place where it is split.
//!
//! A counter adds noise to a few *families* of noisy values (per-step values,
//! block sums, p-sums, …). One increment enters at most `sensitivity` values
//! of a family, each by at most 1 in ℓ1 norm (the neighbouring relation of
//! [`crate::counters`]), so the family's values have ℓ1-sensitivity
//! `sensitivity` and discrete Laplace noise of scale `sensitivity / ε_share`
//! on each value makes the family `ε_share`-DP. Families are independent
//! mechanisms on the same stream, so the counter is `Σ ε_share`-DP by basic
//! composition, and every release is post-processing of the noisy values.
//! [`epsilon_split`] returns the shares; they sum to exactly ε (tested).

use super::CounterKind;
use crate::error::{invalid, Result};
use crate::rational::Rational;

/// How many values of one family a single increment enters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sensitivity {
    /// The same number for every increment.
    Fixed(u64),
    /// The hybrid counter's epoch trees: an increment of epoch `k` (times
    /// `2^k + 1 .. 2^(k+1) − 1`) enters at most `k` p-sums of its epoch's
    /// tree, and no p-sum of any other epoch.
    EpochLevels,
}

/// The share of ε spent on one family of noisy values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Share {
    /// What is noised ("step value", "block sum", "p-sum", …).
    pub family: &'static str,
    /// The part of ε this family spends.
    pub epsilon: Rational,
    /// How many values of the family one increment enters.
    pub sensitivity: Sensitivity,
}

impl Share {
    /// The discrete Laplace scale of each value of this family,
    /// `sensitivity / epsilon`. `epoch` is the hybrid epoch `k ≥ 1` for
    /// [`Sensitivity::EpochLevels`] and ignored otherwise.
    pub fn scale(&self, epoch: u32) -> Result<Rational> {
        let sens = match self.sensitivity {
            Sensitivity::Fixed(s) => s,
            Sensitivity::EpochLevels if epoch >= 1 => u64::from(epoch),
            Sensitivity::EpochLevels => {
                return Err(invalid!("epoch 0 of the hybrid counter has no p-sums"))
            }
        };
        Rational::new(sens, 1u32)?.div(&self.epsilon)
    }
}

/// The number of levels of a binary tree over `horizon` items:
/// `⌈log2(horizon + 1)⌉`, the bit length of `horizon`. An item at time
/// `i ≤ horizon` lies in one dyadic interval per length `2^j`, and that
/// interval's p-sum is formed only if it ends by `horizon`, i.e. for
/// `2^j ≤ horizon`: at most this many p-sums.
pub fn tree_levels(horizon: u64) -> u32 {
    u64::BITS - horizon.leading_zeros()
}

/// The ε split of a counter of `kind`: every share, scale and sensitivity.
///
/// | kind | families (ε share, sensitivity) | scale |
/// |---|---|---|
/// | `Simple` | step value (ε, 1) | `1/ε` |
/// | `Block`, `UnboundedBlock` | block sum (ε/2, 1), step value (ε/2, 1) | `2/ε` |
/// | `BinaryTree { horizon: T }` | p-sum (ε, `L = ⌈log2(T+1)⌉`) | `L/ε` |
/// | `Hybrid` | power-of-two increment (ε/2, 1), epoch-`k` p-sum (ε/2, `k`) | `2/ε`, `2k/ε` |
pub fn epsilon_split(kind: CounterKind, epsilon: &Rational) -> Result<Vec<Share>> {
    if epsilon.is_zero() {
        return Err(invalid!("epsilon must be positive, got 0"));
    }
    let half = epsilon.mul(&Rational::new(1u32, 2u32)?);
    let share = |family, epsilon: &Rational, sensitivity| Share {
        family,
        epsilon: epsilon.clone(),
        sensitivity,
    };
    Ok(match kind {
        CounterKind::Simple => vec![share("step value", epsilon, Sensitivity::Fixed(1))],
        CounterKind::Block { horizon: 0 } => {
            return Err(invalid!("horizon must be at least 1, got 0"))
        }
        CounterKind::Block { .. } | CounterKind::UnboundedBlock => vec![
            share("block sum", &half, Sensitivity::Fixed(1)),
            share("step value", &half, Sensitivity::Fixed(1)),
        ],
        CounterKind::BinaryTree { horizon: 0 } => {
            return Err(invalid!("horizon must be at least 1, got 0"))
        }
        CounterKind::BinaryTree { horizon } => vec![share(
            "p-sum",
            epsilon,
            Sensitivity::Fixed(u64::from(tree_levels(horizon))),
        )],
        CounterKind::Hybrid => vec![
            share("power-of-two increment", &half, Sensitivity::Fixed(1)),
            share("epoch p-sum", &half, Sensitivity::EpochLevels),
        ],
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigUint;

    fn kinds() -> Vec<CounterKind> {
        let mut k = vec![
            CounterKind::Simple,
            CounterKind::UnboundedBlock,
            CounterKind::Hybrid,
        ];
        for h in [1, 2, 3, 4, 7, 8, 1000, 1 << 40, u64::MAX] {
            k.push(CounterKind::Block { horizon: h });
            k.push(CounterKind::BinaryTree { horizon: h });
        }
        k
    }

    #[test]
    fn shares_sum_to_epsilon_and_each_family_costs_its_share() {
        for eps in [
            Rational::new(1u32, 1u32).unwrap(),
            Rational::from_f64(0.1, "e").unwrap(),
            Rational::new(7u32, 3u32).unwrap(),
        ] {
            for kind in kinds() {
                let shares = epsilon_split(kind, &eps).unwrap();
                let eps_shares: Vec<Rational> = shares.iter().map(|s| s.epsilon.clone()).collect();
                // Σ ε_share == ε exactly (so certainly ≤ ε).
                assert_eq!(Rational::sum(&eps_shares), eps, "{kind:?}");
                // Each family's privacy loss sensitivity / scale equals its share.
                for s in &shares {
                    let epochs: Vec<u32> = match s.sensitivity {
                        Sensitivity::Fixed(_) => vec![0],
                        Sensitivity::EpochLevels => (1..64).collect(),
                    };
                    for k in epochs {
                        let scale = s.scale(k).unwrap();
                        let sens = match s.sensitivity {
                            Sensitivity::Fixed(v) => v,
                            Sensitivity::EpochLevels => u64::from(k),
                        };
                        let loss = Rational::new(sens, 1u32).unwrap().div(&scale).unwrap();
                        assert_eq!(loss, s.epsilon, "{kind:?} {}", s.family);
                    }
                }
            }
        }
    }

    #[test]
    fn scales_are_the_documented_ones() {
        let eps = Rational::new(1u32, 2u32).unwrap();
        let r = |n: u64, d: u64| Rational::new(n, d).unwrap();
        let scales = |kind| -> Vec<Rational> {
            epsilon_split(kind, &eps)
                .unwrap()
                .iter()
                .map(|s| s.scale(3).unwrap())
                .collect()
        };
        assert_eq!(scales(CounterKind::Simple), vec![r(2, 1)]);
        assert_eq!(
            scales(CounterKind::Block { horizon: 100 }),
            vec![r(4, 1), r(4, 1)]
        );
        assert_eq!(scales(CounterKind::UnboundedBlock), vec![r(4, 1), r(4, 1)]);
        // T = 1000 has 10 bits: L = 10 levels, scale L/ε = 20.
        assert_eq!(
            scales(CounterKind::BinaryTree { horizon: 1000 }),
            vec![r(20, 1)]
        );
        // Hybrid, epoch 3: 2/ε = 4 for the powers of two, 2·3/ε = 12 for p-sums.
        assert_eq!(scales(CounterKind::Hybrid), vec![r(4, 1), r(12, 1)]);
    }

    #[test]
    fn tree_levels_is_the_bit_length() {
        for (t, l) in [
            (1u64, 1u32),
            (2, 2),
            (3, 2),
            (4, 3),
            (7, 3),
            (8, 4),
            (1023, 10),
        ] {
            assert_eq!(tree_levels(t), l, "T = {t}");
            // ⌈log2(T + 1)⌉ computed independently.
            let mut c = 0;
            while (1u128 << c) < u128::from(t) + 1 {
                c += 1;
            }
            assert_eq!(c, l);
        }
        assert_eq!(tree_levels(u64::MAX), 64);
    }

    #[test]
    fn bad_arguments_are_refused() {
        let zero = Rational::new(0u32, 1u32).unwrap();
        assert!(epsilon_split(CounterKind::Simple, &zero).is_err());
        let one = Rational::new(BigUint::from(1u32), BigUint::from(1u32)).unwrap();
        assert!(epsilon_split(CounterKind::Block { horizon: 0 }, &one).is_err());
        assert!(epsilon_split(CounterKind::BinaryTree { horizon: 0 }, &one).is_err());
        let hybrid = epsilon_split(CounterKind::Hybrid, &one).unwrap();
        assert!(hybrid[1].scale(0).is_err());
    }
}

//! The per-level privacy budget of PrivHP: the one place where ε is split.
//!
//! PrivHP (Theorem 2 of Holland et al.) is ε-DP when the per-level
//! parameters satisfy `Σ_{l=0}^{r} σ_l ≤ ε`: level `l ≤ L_k` of the exact tree
//! gets discrete Laplace noise of scale `1/σ_l` (one point changes one count
//! per level by one), and the sketch of level `l > L_k` gets scale `j/σ_l`
//! (one point changes one cell per row). The split below is exact: every
//! `σ_l` is a rational `ε · q_l / 2^40` with integers `q_l` summing to at most
//! `2^40`, so the sum never exceeds ε.

use crate::error::{invalid, Result};
use crate::rational::Rational;

/// Resolution of the split: `σ_l = ε · q_l / 2^BUDGET_GRID_BITS`.
pub const BUDGET_GRID_BITS: u32 = 40;

/// How ε is divided between the levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BudgetRule {
    /// Equation (23): `σ_l ∝ sqrt(Γ_{l−1})` for `l ≤ L_k` and `∝ sqrt(k γ_{l−1})`
    /// beyond, which minimises the noise term of Theorem 3.
    Optimal,
    /// `σ_l = ε / (r + 1)` for every level.
    Uniform,
}

/// `σ_0 … σ_depth` for PrivHP on `[0,1]^dim` with pruning parameter `k`.
///
/// Diameters are in the ℓ∞ metric: a level-`l` cell has sides
/// `2^{−⌊l/d⌋}` or `2^{−⌈l/d⌉}`, so `γ_l = 2^{−⌊l/d⌋}` and
/// `Γ_l = 2^l γ_l`; the root's predecessor terms are taken as the root's own
/// (`Γ_{−1} = γ_{−1} = 1`, the diameter of the domain). Only public values
/// enter: ε, `dim`, `k` and `depth`.
pub fn privhp_budget(
    epsilon: &Rational,
    dim: usize,
    k: usize,
    depth: u32,
    rule: BudgetRule,
) -> Result<Vec<Rational>> {
    if epsilon.is_zero() {
        return Err(invalid!("epsilon must be positive, got 0"));
    }
    if dim == 0 {
        return Err(invalid!("dim must be at least 1"));
    }
    if k == 0 {
        return Err(invalid!("k must be at least 1"));
    }
    let levels = depth as usize + 1;
    let grid: u64 = 1 << BUDGET_GRID_BITS;
    let q: Vec<u64> = match rule {
        BudgetRule::Uniform => vec![grid / levels as u64; levels],
        BudgetRule::Optimal => {
            let l_k = usize::BITS - 1 - k.leading_zeros(); // floor(log2 k)
                                                           // log2 of the weights, to stay finite at any depth: weight_l = 2^{e_l / 2}.
            let log_gamma = |l: i64| -> f64 {
                if l < 0 {
                    0.0
                } else {
                    -((l / dim as i64) as f64)
                }
            };
            let log_w: Vec<f64> = (0..levels as i64)
                .map(|l| {
                    let prev = l - 1;
                    let log_inner = if l <= i64::from(l_k) {
                        // Γ_{l−1} = 2^{l−1} γ_{l−1} (and 1 for l = 0).
                        if prev < 0 {
                            0.0
                        } else {
                            prev as f64 + log_gamma(prev)
                        }
                    } else {
                        (k as f64).log2() + log_gamma(prev)
                    };
                    log_inner / 2.0
                })
                .collect();
            let top = log_w.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = log_w.iter().map(|lw| (lw - top).exp2()).collect();
            let total: f64 = w.iter().sum();
            // The weights only choose public parameters; the integer
            // rounding below is what guarantees Σ σ_l ≤ ε.
            w.iter()
                .map(|wi| ((wi / total) * grid as f64).floor() as u64)
                .collect()
        }
    };
    let q = fix_grid(q, grid)?;
    q.iter()
        .map(|&ql| Ok(epsilon.mul(&Rational::new(ql, grid)?)))
        .collect()
}

/// Make every `q_l ≥ 1` and `Σ q_l ≤ grid`, taking any excess from the largest.
fn fix_grid(mut q: Vec<u64>, grid: u64) -> Result<Vec<u64>> {
    if q.len() as u64 > grid {
        return Err(invalid!("depth too large for the budget grid"));
    }
    for ql in q.iter_mut() {
        *ql = (*ql).max(1);
    }
    let mut total: u64 = q.iter().sum();
    while total > grid {
        let (i, _) = q
            .iter()
            .enumerate()
            .max_by_key(|(_, &v)| v)
            .ok_or_else(|| invalid!("empty budget"))?;
        let cut = (total - grid).min(q[i] - 1);
        q[i] -= cut;
        total -= cut;
    }
    Ok(q)
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_bigint::BigUint;

    #[test]
    fn split_never_exceeds_epsilon() {
        for eps in [
            Rational::new(1u32, 1u32).unwrap(),
            Rational::from_f64(0.1, "e").unwrap(),
            Rational::new(7u32, 3u32).unwrap(),
        ] {
            for dim in [1, 2, 3, 7] {
                for k in [1, 2, 3, 64, 1000] {
                    for depth in [0u32, 1, 5, 20, 60] {
                        for rule in [BudgetRule::Optimal, BudgetRule::Uniform] {
                            let s = privhp_budget(&eps, dim, k, depth, rule).unwrap();
                            assert_eq!(s.len(), depth as usize + 1);
                            assert!(s.iter().all(|x| !x.is_zero()));
                            let total = Rational::sum(&s);
                            assert!(total <= eps, "{rule:?} d={dim} k={k} r={depth}");
                            // Nearly all of ε is used.
                            let slack = Rational::new(
                                eps.numer() * BigUint::from(depth + 2),
                                eps.denom() << BUDGET_GRID_BITS,
                            )
                            .unwrap();
                            let with_slack = Rational::sum(&[total.clone(), slack]);
                            assert!(eps <= with_slack);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn optimal_matches_equation_23_in_one_dimension() {
        // d = 1, k = 4 (L_k = 2): weights 1,1,1 then sqrt(4·2^{-(l-1)}).
        let eps = Rational::new(1u32, 1u32).unwrap();
        let s = privhp_budget(&eps, 1, 4, 5, BudgetRule::Optimal).unwrap();
        let f: Vec<f64> = s.iter().map(|x| x.to_f64_lossy()).collect();
        // Γ_{l-1} = 1 for d = 1: levels 0..=2 have weight 1; level 3: sqrt(4·2^-2) = 1;
        // level 4: sqrt(4·2^-3); level 5: sqrt(4·2^-4).
        let w = [1.0, 1.0, 1.0, 1.0, (0.5f64).sqrt(), 0.5];
        let total: f64 = w.iter().sum();
        for (x, wi) in f.iter().zip(w) {
            assert!((x - wi / total).abs() < 1e-9, "{f:?}");
        }
    }

    #[test]
    fn bad_arguments_are_refused() {
        let eps = Rational::new(1u32, 1u32).unwrap();
        let zero = Rational::new(0u32, 1u32).unwrap();
        assert!(privhp_budget(&zero, 1, 4, 5, BudgetRule::Optimal).is_err());
        assert!(privhp_budget(&eps, 0, 4, 5, BudgetRule::Optimal).is_err());
        assert!(privhp_budget(&eps, 1, 0, 5, BudgetRule::Optimal).is_err());
    }
}

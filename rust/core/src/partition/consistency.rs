//! Consistent, non-negative counts on a binary hierarchy: Algorithm 4 of
//! PrivHP (Holland et al.), which is an instance of Algorithm 4 of
//! He–Vershynin–Zhu.
//!
//! Given a parent count `p >= 0` and noisy child counts `(l, r)`:
//!
//! 1. *Correction 1*: negative children are set to 0.
//! 2. `Λ = l + r − p` is split into two halves `(a, b)` with `a + b = Λ`, both
//!    with the sign of `Λ` (for `f64`: `Λ/2` each; for `i64` the left child
//!    takes the larger-magnitude half of an odd `Λ`).
//! 3. *Correction 2*: if `l − a < 0`, the left child becomes 0 and the right
//!    one inherits `p`; else if `r − b < 0`, the right child becomes 0 and the
//!    left one inherits `p`.
//! 4. Otherwise `l ← l − a`, `r ← r − b`.
//!
//! Afterwards `l + r = p`, `l, r >= 0`, and both children moved in the same
//! direction from their clamped values (a deficit raises both, a surplus
//! lowers both; He et al.'s condition `(m₀ − n₀)(m₁ − n₁) >= 0`).
//!
//! `i64` is exact (`Λ` is formed in `i128`, so no input overflows). For `f64`
//! the rounding of steps 2–4 is repaired ([`Count::repair_rounding`]): the
//! float sum of the children is exactly the parent and the direction is
//! kept, at the cost of a few ulps of the parent against the printed rule.
//!
//! This is post-processing of private counts: it reads nothing else, so the
//! output is as private as its input.

use crate::error::{invalid, Result};

/// A count type the consistency rule works with: `f64` (fractional noisy
/// estimates) or `i64` (integer noisy counts).
pub trait Count: Copy + PartialOrd + std::fmt::Debug {
    /// Zero.
    fn zero() -> Self;
    /// `self + other` (saturating for `i64`).
    fn add(self, other: Self) -> Self;
    /// `self − other` (saturating for `i64`).
    fn sub(self, other: Self) -> Self;
    /// Split `Λ` into `(a, b)` with `a + b == Λ`, both with the sign of `Λ`
    /// (or zero); `a` goes to the left child.
    fn split(self) -> (Self, Self);
    /// The halves of `Λ = left + right − parent`, i.e. `split(Λ)`. Types
    /// whose sum could overflow compute it more widely (`i64` uses `i128`).
    fn excess_halves(left: Self, right: Self, parent: Self) -> (Self, Self) {
        left.add(right).sub(parent).split()
    }
    /// The children after subtracting the halves of `Λ` (before correction 2):
    /// `(left − a, right − b)` with `(a, b) = excess_halves(left, right, parent)`.
    fn rebalance(parent: Self, left: Self, right: Self) -> (Self, Self) {
        let (a, b) = Self::excess_halves(left, right, parent);
        (left.sub(a), right.sub(b))
    }
    /// Repair rounding: given the clamped inputs `(n0, n1)` and the rule's
    /// output `(left, right)`, return children that add up to `parent`
    /// exactly and moved in the same direction from `(n0, n1)`. Identity by
    /// default (exact types).
    fn repair_rounding(parent: Self, n0: Self, n1: Self, left: Self, right: Self) -> (Self, Self) {
        let _ = (parent, n0, n1);
        (left, right)
    }
    /// Whether the value is a usable count (finite for floats).
    fn is_finite(self) -> bool {
        true
    }
}

impl Count for f64 {
    #[inline]
    fn zero() -> Self {
        0.0
    }
    #[inline]
    fn add(self, other: Self) -> Self {
        self + other
    }
    #[inline]
    fn sub(self, other: Self) -> Self {
        self - other
    }
    /// `(Λ/2, Λ/2)`.
    #[inline]
    fn split(self) -> (Self, Self) {
        let h = self * 0.5;
        (h, h)
    }
    /// `left − Λ/2 = ((left − right) + parent) / 2` (and symmetrically),
    /// formed without the cancellation of `left + right − parent` when the
    /// children are much larger than the parent.
    #[inline]
    fn rebalance(parent: Self, left: Self, right: Self) -> (Self, Self) {
        (
            ((left - right) + parent) * 0.5,
            ((right - left) + parent) * 0.5,
        )
    }
    /// Float rounding can leave `left + right` an ulp away from `parent`, or
    /// (at the ulp scale) move one child against the other. First the larger
    /// child is clamped to `[parent/2, parent]` and the smaller becomes
    /// `parent − larger`, exact by Sterbenz's lemma, so the float sum is
    /// exactly `parent`; if that breaks the direction, the nearest
    /// direction-preserving split with an exact sum is used instead. Either
    /// way the result differs from the printed rule by a few ulps of
    /// `parent` at most.
    fn repair_rounding(parent: Self, n0: Self, n1: Self, left: Self, right: Self) -> (Self, Self) {
        let all = [parent, n0, n1, left, right];
        if !all.iter().all(|x| x.is_finite()) {
            return (left, right);
        }
        let (x, y) = exact_split(parent, left, right);
        let moved = |new: f64, old: f64| (new > old) as i8 - (new < old) as i8;
        if moved(x, n0) * moved(y, n1) >= 0 {
            return (x, y);
        }
        // Exact sign of n0 + n1 − parent (TwoSum: s + e == n0 + n1 exactly).
        let sum = n0 + n1;
        let bb = sum - n0;
        let err = (n0 - (sum - bb)) + (n1 - bb);
        let excess = if sum != parent {
            moved(sum, parent)
        } else {
            moved(err, 0.0)
        };
        let half = parent * 0.5;
        let big_first = n0 >= n1;
        let (big, small) = if big_first { (n0, n1) } else { (n1, n0) };
        // New values for (big, small), each never moving against the other.
        let (nb, ns) = match excess {
            // Surplus: lower both (or keep one).
            1 if big >= parent => (parent, 0.0),
            1 => (big, parent - big), // big ∈ (parent/2, parent): exact
            // Deficit: raise both (or keep one).
            -1 if big >= half => (big, parent - big), // big ∈ [parent/2, parent): exact
            -1 => (half, parent - half),
            // Already consistent in exact arithmetic: keep the inputs.
            _ => (big, small),
        };
        if big_first {
            (nb, ns)
        } else {
            (ns, nb)
        }
    }
    #[inline]
    fn is_finite(self) -> bool {
        f64::is_finite(self)
    }
}

impl Count for i64 {
    #[inline]
    fn zero() -> Self {
        0
    }
    #[inline]
    fn add(self, other: Self) -> Self {
        self.saturating_add(other)
    }
    #[inline]
    fn sub(self, other: Self) -> Self {
        self.saturating_sub(other)
    }
    /// `(Λ − ⌊Λ/2⌉₀, ⌊Λ/2⌉₀)` with division truncating toward zero: for odd
    /// `Λ` the left child takes the larger-magnitude half (5 → (3, 2),
    /// −5 → (−3, −2)). Never overflows.
    #[inline]
    fn split(self) -> (Self, Self) {
        let b = self / 2;
        (self - b, b)
    }
    /// `Λ` computed in `i128`, so that no input overflows. With `left, right,
    /// parent` in `[0, i64::MAX]`, `Λ ∈ [−i64::MAX, 2·i64::MAX]` and both
    /// halves fit in `i64`.
    #[inline]
    fn excess_halves(left: Self, right: Self, parent: Self) -> (Self, Self) {
        let lambda = i128::from(left) + i128::from(right) - i128::from(parent);
        let b = lambda / 2;
        let a = lambda - b;
        let fit = |v: i128| i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX });
        (fit(a), fit(b))
    }
}

/// Children `(x, y)` with `x + y == parent` exactly in `f64`, close to the
/// finite non-negative `(left, right)`: the larger is clamped to `[parent/2,
/// parent]` and the smaller is `parent − larger` (exact by Sterbenz's lemma;
/// differences of subnormals are exact too).
fn exact_split(parent: f64, left: f64, right: f64) -> (f64, f64) {
    let half = parent * 0.5;
    if left >= right {
        let big = left.max(half).min(parent);
        (big, parent - big)
    } else {
        let big = right.max(half).min(parent);
        (parent - big, big)
    }
}

/// `max(x, 0)`, with NaN (unordered) mapped to 0.
#[inline]
fn clamp_non_negative<C: Count>(x: C) -> C {
    if x >= C::zero() {
        x
    } else {
        C::zero()
    }
}

/// Algorithm 4 of PrivHP on one parent and its two children: afterwards
/// `left + right == max(parent, 0)` (exactly, also for `f64`), both are
/// non-negative, and both moved in the same direction from their clamped
/// values.
///
/// The parent should already be consistent (non-negative); a negative or NaN
/// parent is treated as 0. NaN children are treated as 0 (correction 1).
/// For `f64` the guarantees need finite inputs; infinities never panic but
/// may give infinite or NaN outputs (use [`enforce_tree`], which refuses them).
pub fn enforce_consistency<C: Count>(parent: C, left: &mut C, right: &mut C) {
    let zero = C::zero();
    let parent = clamp_non_negative(parent);
    // Correction 1.
    let l = clamp_non_negative(*left);
    let r = clamp_non_negative(*right);
    let (l2, r2) = C::rebalance(parent, l, r);
    let (x, y) = if l2 < zero {
        // Correction 2 (left).
        (zero, parent)
    } else if r2 < zero {
        // Correction 2 (right).
        (parent, zero)
    } else {
        (l2, r2)
    };
    (*left, *right) = C::repair_rounding(parent, l, r, x, y);
}

/// Algorithm 4 over a whole complete binary tree in heap layout (index 0 is
/// the root, node `i` has children `2i+1` and `2i+2`; `len = 2^(L+1) − 1` for
/// depth `L`): the root is clamped to `>= 0`, then every parent is made
/// consistent with its children, top-down (a parent before its children).
///
/// Fails, changing nothing, when `len` is not `2^(L+1) − 1` or a count is not
/// finite.
pub fn enforce_tree<C: Count>(counts: &mut [C]) -> Result<()> {
    let n = counts.len();
    if n == 0 || !n.checked_add(1).is_some_and(usize::is_power_of_two) {
        return Err(invalid!(
            "a complete binary tree in heap layout has 2^(L+1) − 1 nodes, got {n}"
        ));
    }
    if let Some(i) = counts.iter().position(|c| !c.is_finite()) {
        return Err(invalid!("counts[{i}] = {:?} is not finite", counts[i]));
    }
    counts[0] = clamp_non_negative(counts[0]);
    // Heap order is breadth-first, so every parent is final before its children.
    for i in 0..n / 2 {
        let parent = counts[i];
        let (_, rest) = counts.split_at_mut(2 * i + 1);
        let (l, r) = rest.split_at_mut(1);
        enforce_consistency(parent, &mut l[0], &mut r[0]);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// Algorithm 4 exactly as printed, in `i128` (no overflow possible).
    fn reference_i64(p: i64, l: i64, r: i64) -> (i64, i64) {
        let p = i128::from(p.max(0));
        let (l, r) = (i128::from(l.max(0)), i128::from(r.max(0)));
        let lambda = l + r - p;
        let b = lambda / 2;
        let a = lambda - b;
        let (x, y) = if l - a < 0 {
            (0, p)
        } else if r - b < 0 {
            (p, 0)
        } else {
            (l - a, r - b)
        };
        (x as i64, y as i64)
    }

    /// Algorithm 4 as printed, in `f64` (no settling).
    fn reference_f64(p: f64, l: f64, r: f64) -> (f64, f64) {
        let p = p.max(0.0);
        let (l, r) = (l.max(0.0), r.max(0.0));
        let half = (l + r - p) / 2.0;
        if l - half < 0.0 {
            (0.0, p)
        } else if r - half < 0.0 {
            (p, 0.0)
        } else {
            (l - half, r - half)
        }
    }

    /// Integers at several magnitudes, including both ends of the range.
    fn int(rng: &mut Rng) -> i64 {
        let m = rng.next_u64() as i64;
        match rng.below_u64(6) {
            0 => m,
            1 => [0, 1, -1, i64::MAX, i64::MIN, i64::MAX - 1][rng.below_u64(6) as usize],
            2 => m >> 40,
            3 => m >> 56,
            _ => m >> 60,
        }
    }

    fn float(rng: &mut Rng) -> f64 {
        let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        match rng.below_u64(5) {
            0 => (u - 0.3) * 1e12,
            1 => [0.0, -0.0, 1.0, -1.0, 0.5, f64::MIN_POSITIVE, 1e300][rng.below_u64(7) as usize],
            2 => (u - 0.3) * 10.0,
            _ => ((u - 0.3) * 200.0).round(),
        }
    }

    fn sign<C: Count>(x: C) -> i32 {
        if x > C::zero() {
            1
        } else if x < C::zero() {
            -1
        } else {
            0
        }
    }

    /// The invariants every output must satisfy.
    fn check_invariants<C: Count>(
        p: C,
        l0: C,
        r0: C,
        l: C,
        r: C,
        exact_sum: impl Fn(C, C, C) -> bool,
    ) {
        let zero = C::zero();
        let p = clamp_non_negative(p);
        assert!(
            l >= zero && r >= zero,
            "negative output {l:?}, {r:?} from {p:?}, {l0:?}, {r0:?}"
        );
        assert!(
            exact_sum(p, l, r),
            "{l:?} + {r:?} != {p:?} (inputs {l0:?}, {r0:?})"
        );
        // Same direction relative to the clamped inputs.
        let (n0, n1) = (clamp_non_negative(l0), clamp_non_negative(r0));
        let (d0, d1) = (sign(l.sub(n0)), sign(r.sub(n1)));
        assert!(
            d0 * d1 >= 0,
            "opposite moves: ({n0:?}, {n1:?}) -> ({l:?}, {r:?}), parent {p:?}"
        );
    }

    #[test]
    fn i64_property_matches_algorithm_4() {
        let mut rng = Rng::seed_from_u64(21);
        for _ in 0..500_000 {
            let (p, l0, r0) = (int(&mut rng), int(&mut rng), int(&mut rng));
            let (mut l, mut r) = (l0, r0);
            enforce_consistency(p, &mut l, &mut r);
            assert_eq!((l, r), reference_i64(p, l0, r0), "inputs {p}, {l0}, {r0}");
            check_invariants(p, l0, r0, l, r, |p, l, r| {
                i128::from(l) + i128::from(r) == i128::from(p)
            });
        }
    }

    #[test]
    fn f64_property_matches_algorithm_4() {
        let mut rng = Rng::seed_from_u64(22);
        for _ in 0..500_000 {
            let (p, l0, r0) = (float(&mut rng), float(&mut rng), float(&mut rng));
            let (mut l, mut r) = (l0, r0);
            enforce_consistency(p, &mut l, &mut r);
            check_invariants(p, l0, r0, l, r, |p, l, r| l + r == p);
            // Same result as the printed algorithm up to rounding.
            let (x, y) = reference_f64(p, l0, r0);
            let tol = 4.0 * f64::EPSILON * (p.max(0.0) + l0.abs() + r0.abs());
            assert!(
                (l - x).abs() <= tol && (r - y).abs() <= tol,
                "{p} {l0} {r0}: ({l}, {r}) vs ({x}, {y})"
            );
        }
    }

    #[test]
    fn f64_rounding_keeps_every_invariant() {
        // Magnitudes spread over 2^±40 and nearly consistent triples, where
        // float rounding is most likely to break the sum or the direction.
        let mut rng = Rng::seed_from_u64(24);
        let wide = |rng: &mut Rng| {
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            let e = rng.below_u64(80) as i32 - 40;
            let s = if rng.bit() { 1.0 } else { -0.2 };
            s * u * 2f64.powi(e)
        };
        for _ in 0..2_000_000 {
            let p = wide(&mut rng).abs();
            let l0 = wide(&mut rng);
            let r0 = match rng.below_u64(3) {
                0 => p - l0.abs() * 1e-17,
                1 => p - l0,
                _ => wide(&mut rng),
            };
            let (mut l, mut r) = (l0, r0);
            enforce_consistency(p, &mut l, &mut r);
            check_invariants(p, l0, r0, l, r, |p, l, r| l + r == p);
            let (x, y) = reference_f64(p, l0, r0);
            let tol = 4.0 * f64::EPSILON * (p + l0.abs() + r0.abs());
            assert!(
                (l - x).abs() <= tol && (r - y).abs() <= tol,
                "{p:e} {l0:e} {r0:e}: ({l:e}, {r:e}) vs ({x:e}, {y:e})"
            );
        }
    }

    #[test]
    fn paper_corner_cases() {
        let run = |p: i64, l: i64, r: i64| {
            let (mut a, mut b) = (l, r);
            enforce_consistency(p, &mut a, &mut b);
            (a, b)
        };
        // Already consistent: unchanged.
        assert_eq!(run(10, 3, 7), (3, 7));
        // Deficit: both raised by half of it; odd excess → left takes the larger half.
        assert_eq!(run(10, 2, 2), (5, 5));
        assert_eq!(run(10, 3, 4), (5, 5));
        assert_eq!(run(11, 3, 3), (6, 5));
        // Surplus: both lowered.
        assert_eq!(run(10, 8, 8), (5, 5));
        assert_eq!(run(10, 9, 8), (5, 5));
        assert_eq!(run(10, 12, 1), (10, 0));
        // Correction 1: negatives clamped first.
        assert_eq!(run(10, -5, -7), (5, 5));
        assert_eq!(run(7, -5, 3), (2, 5));
        // Correction 2: the violating child goes to 0, its sibling inherits the parent.
        assert_eq!(run(4, 0, 10), (0, 4));
        assert_eq!(run(4, 10, 0), (4, 0));
        assert_eq!(run(4, 1, 20), (0, 4));
        assert_eq!(run(4, -3, 20), (0, 4));
        // Zero and negative parents.
        assert_eq!(run(0, 5, 9), (0, 0));
        assert_eq!(run(-3, 5, 9), (0, 0));
        // Extremes do not overflow.
        assert_eq!(
            run(i64::MAX, i64::MAX, i64::MAX),
            (i64::MAX / 2, i64::MAX / 2 + 1)
        );
        assert_eq!(
            run(i64::MAX, i64::MIN, i64::MIN),
            (i64::MAX / 2 + 1, i64::MAX / 2)
        );
        assert_eq!(run(i64::MAX, 0, 0), (i64::MAX / 2 + 1, i64::MAX / 2));
        // Example 7.1 of the paper: before (3.5, 3.7), parent 4.6 → (2.2, 2.4).
        let (mut a, mut b) = (3.5f64, 3.7);
        enforce_consistency(4.6, &mut a, &mut b);
        assert!(
            (a - 2.2).abs() < 1e-12 && (b - 2.4).abs() < 1e-12,
            "{a} {b}"
        );
        assert_eq!(a + b, 4.6);
        // NaN children count as 0; a NaN parent as 0.
        let (mut a, mut b) = (f64::NAN, 2.0);
        enforce_consistency(6.0, &mut a, &mut b);
        assert_eq!((a, b), (2.0, 4.0));
        let (mut a, mut b) = (1.0, 2.0);
        enforce_consistency(f64::NAN, &mut a, &mut b);
        assert_eq!((a, b), (0.0, 0.0));
        // Infinities never panic.
        let (mut a, mut b) = (f64::INFINITY, 1.0);
        enforce_consistency(f64::INFINITY, &mut a, &mut b);
    }

    #[test]
    fn split_conventions() {
        assert_eq!(5i64.split(), (3, 2));
        assert_eq!((-5i64).split(), (-3, -2));
        assert_eq!(1i64.split(), (1, 0));
        assert_eq!((-1i64).split(), (-1, 0));
        assert_eq!(i64::MIN.split(), (i64::MIN / 2, i64::MIN / 2));
        assert_eq!(i64::MAX.split(), (i64::MAX / 2 + 1, i64::MAX / 2));
        assert_eq!(3.0f64.split(), (1.5, 1.5));
        assert_eq!(
            i64::excess_halves(i64::MAX, i64::MAX, 0),
            (i64::MAX, i64::MAX)
        );
    }

    fn check_tree<C: Count>(before: &[C], after: &[C], exact_sum: impl Fn(C, C, C) -> bool + Copy) {
        assert_eq!(after[0], clamp_non_negative(before[0]));
        for i in 0..after.len() / 2 {
            let (l, r) = (2 * i + 1, 2 * i + 2);
            check_invariants(
                after[i], before[l], before[r], after[l], after[r], exact_sum,
            );
            // Each step is exactly enforce_consistency on the final parent.
            let (mut x, mut y) = (before[l], before[r]);
            enforce_consistency(after[i], &mut x, &mut y);
            assert_eq!((x, y), (after[l], after[r]));
        }
    }

    #[test]
    fn trees_become_consistent() {
        let mut rng = Rng::seed_from_u64(23);
        for depth in 0..=10u32 {
            let n = (1usize << (depth + 1)) - 1;
            for _ in 0..20 {
                // Noisy counts of some true tree: leaves random, parents sums, then noise.
                let mut t: Vec<i64> = vec![0; n];
                for i in (0..n).rev() {
                    t[i] = if 2 * i + 1 < n {
                        t[2 * i + 1] + t[2 * i + 2]
                    } else {
                        rng.below_u64(20) as i64
                    };
                }
                let noisy: Vec<i64> = t
                    .iter()
                    .map(|&c| c + rng.below_u64(21) as i64 - 10)
                    .collect();
                let mut ints = noisy.clone();
                enforce_tree(&mut ints).unwrap();
                check_tree(&noisy, &ints, |p, l, r| l + r == p);
                let noisy_f: Vec<f64> = noisy
                    .iter()
                    .map(|&c| c as f64 + float(&mut rng) * 1e-3)
                    .collect();
                let mut floats = noisy_f.clone();
                enforce_tree(&mut floats).unwrap();
                check_tree(&noisy_f, &floats, |p, l, r| l + r == p);
                // Leaves sum to the root.
                let leaves = &ints[n / 2..];
                assert_eq!(leaves.iter().sum::<i64>(), ints[0]);
            }
        }
    }

    #[test]
    fn tree_shape_and_values_are_checked() {
        for n in [0usize, 2, 4, 5, 6, 8, 14] {
            let mut t = vec![1i64; n];
            let err = enforce_tree(&mut t).unwrap_err().to_string();
            assert!(err.contains(&format!("got {n}")), "{err}");
        }
        let mut one = [-4i64];
        enforce_tree(&mut one).unwrap();
        assert_eq!(one, [0]);
        let mut t = [3.0, 1.0, f64::NAN];
        let err = enforce_tree(&mut t).unwrap_err().to_string();
        assert_eq!(err, "counts[2] = NaN is not finite");
        assert_eq!(t[0], 3.0, "nothing changed on error");
        let mut t = [3.0, f64::INFINITY, 1.0];
        assert!(enforce_tree(&mut t).is_err());
    }
}

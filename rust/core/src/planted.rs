//! Planted bugs for the privacy audits: a **test-only** hook that makes the
//! default online synthesizer ([`crate::synth::EpochSynthesizer`]), the
//! paper's ([`crate::synth::OnlineSynthesizer`]) and PrivHP
//! ([`crate::synth::PrivHP`], hence the fixed-memory
//! [`crate::synth::ContinualPrivHP`] built on it) spend more ε than they
//! claim.
//!
//! The hook exists only when the crate is built with the Cargo feature
//! `planted-bugs` (off by default; the release extension built by
//! `maturin develop --release` and the Makefile never enables it). Without
//! the feature, [`spend`] is the identity and there is no way to change it:
//! the setter is not compiled. With the feature, [`set_epsilon_factor`]
//! multiplies every ε these mechanisms hand to their noise (each block's
//! `ε/(k+1)`, each cell counter's `ε_{j,r}`, each PrivHP level's `σ_l`) by a
//! factor `f`: `f = 2` halves every noise scale, i.e. a split that sums to
//! `2ε`. The audits in
//! `tests/audit/test_audit_planted.py` (run by `make test-planted` on a
//! separate build) check that such a bug is flagged.

use crate::error::Result;
use crate::rational::Rational;

#[cfg(feature = "planted-bugs")]
use std::sync::atomic::{AtomicU32, Ordering};

/// The planted factor (1: no bug). Process-wide.
#[cfg(feature = "planted-bugs")]
static EPSILON_FACTOR: AtomicU32 = AtomicU32::new(1);

/// Plant the bug: multiply the ε the synthesizers spend by `factor ≥ 1`
/// (1 removes it). Applies to blocks, levels and PrivHP summaries created
/// afterwards.
#[cfg(feature = "planted-bugs")]
pub fn set_epsilon_factor(factor: u32) -> Result<()> {
    if factor == 0 {
        return Err(crate::error::invalid!(
            "the planted factor must be at least 1"
        ));
    }
    EPSILON_FACTOR.store(factor, Ordering::SeqCst);
    Ok(())
}

/// The planted factor (always 1 without the feature).
pub fn epsilon_factor() -> u32 {
    #[cfg(feature = "planted-bugs")]
    {
        EPSILON_FACTOR.load(Ordering::SeqCst)
    }
    #[cfg(not(feature = "planted-bugs"))]
    {
        1
    }
}

/// The ε a mechanism spends for a share `eps` of its budget: `eps` itself,
/// unless a bug is planted (feature `planted-bugs` only).
pub(crate) fn spend(eps: Rational) -> Result<Rational> {
    match epsilon_factor() {
        1 => Ok(eps),
        f => Ok(eps.mul(&Rational::new(f, 1u32)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(not(feature = "planted-bugs"))]
    fn without_the_feature_the_hook_is_the_identity() {
        // `set_epsilon_factor` is not compiled here (calling it would not build);
        // the factor is the constant 1 and `spend` changes nothing.
        assert_eq!(epsilon_factor(), 1);
        let eps = Rational::new(3u32, 7u32).unwrap();
        assert_eq!(spend(eps.clone()).unwrap(), eps);
    }

    #[test]
    #[cfg(feature = "planted-bugs")]
    fn with_the_feature_no_bug_is_planted_until_asked() {
        // The factor is process-wide: this test does not change it (other tests run
        // in parallel); the planted-bug audits check its effect.
        assert_eq!(epsilon_factor(), 1);
        assert!(set_epsilon_factor(0).is_err());
        assert_eq!(epsilon_factor(), 1);
    }
}

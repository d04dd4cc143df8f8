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
//!
//! [`set_epochs_bug`] plants a bug in how the default synthesizer composes
//! its blocks, with the right split: a point in `k + 2` blocks
//! ([`EpochsBug::ExtraBlock`]) or noise redrawn at each release
//! ([`EpochsBug::RedrawEachRelease`]). It applies to the calling thread.

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

/// A planted bug in how the default online synthesizer composes its blocks
/// (feature `planted-bugs` only; [`EpochsBug::None`] otherwise).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EpochsBug {
    /// No bug.
    None,
    /// Every merged block (more than one epoch) is measured twice, with
    /// independent noise: a point of a merged block enters `k + 2` noisy
    /// blocks, each at `ε/(k+1)`.
    ExtraBlock,
    /// Every release draws new noise for every block (the key is mixed with
    /// the release's index): repeated releases average the noise away.
    RedrawEachRelease,
}

#[cfg(feature = "planted-bugs")]
thread_local! {
    /// The planted block bug of this thread (the synthesizers read it on the
    /// thread that releases; a thread-local keeps parallel tests apart).
    static EPOCHS_BUG: std::cell::Cell<EpochsBug> = const { std::cell::Cell::new(EpochsBug::None) };
}

/// Plant a block bug in the default online synthesizer, on the calling
/// thread ([`EpochsBug::None`] removes it).
#[cfg(feature = "planted-bugs")]
pub fn set_epochs_bug(bug: EpochsBug) {
    EPOCHS_BUG.with(|b| b.set(bug));
}

/// The planted block bug of the calling thread (always
/// [`EpochsBug::None`] without the feature).
pub fn epochs_bug() -> EpochsBug {
    #[cfg(feature = "planted-bugs")]
    {
        EPOCHS_BUG.with(|b| b.get())
    }
    #[cfg(not(feature = "planted-bugs"))]
    {
        EpochsBug::None
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
        assert_eq!(epochs_bug(), EpochsBug::None);
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

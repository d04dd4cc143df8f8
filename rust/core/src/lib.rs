//! `dpstream-core`: the privacy-critical core of dpstream.
//!
//! Pure Rust, no Python. Everything that touches private data or draws
//! privacy noise lives here: the cryptographically secure generator
//! ([`rng`]) and the master keys of checkpointed streams ([`keys`]), exact
//! integer noise ([`noise`]), exact rationals for privacy parameters
//! ([`rational`]), the binary partition of `[0,1]^d` ([`partition`]), linear sketches ([`sketch`]), continual-release
//! counters ([`counters`]), the synthesizers
//! ([`synth`]) and the versioned binary encoding of their state ([`state`]). The Python package binds to this crate
//! through the thin `dpstream-python` crate.
//!
//! Rules every module follows (see `DESIGN.md`):
//! * privacy noise is integer-valued and sampled exactly (Canonne–Kamath–Steinke)
//!   from [`rng::Rng`], a ChaCha CSPRNG seeded by the operating system;
//! * a seeded [`rng::Rng`] exists for tests and experiments only and gives no privacy;
//! * no floating-point arithmetic decides any random outcome.
#![forbid(unsafe_code)]

pub mod counters;
pub mod error;
pub mod keys;
pub mod noise;
pub mod partition;
pub mod planted;
pub mod rational;
pub mod rng;
pub mod sketch;
pub mod state;
pub mod synth;

pub use error::{Error, Result};
pub use keys::KeyRing;
pub use rational::Rational;
pub use rng::Rng;

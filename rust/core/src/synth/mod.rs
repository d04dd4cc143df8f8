//! Synthetic data generators.
//!
//! * [`PrivHP`]: the one-pass, fixed-memory generator of Holland et al.
//!   (private sketches below an exact top of the hierarchy, top-k pruning,
//!   consistency), releasing a [`TreeGenerator`].
//! * [`OnlineSynthesizer`]: the online generator of He, Vershynin, Zhu
//!   (Algorithm 1): ε-DP synthetic data at any time of an infinite stream.
//! * [`EpochSynthesizer`]: the default online generator: noisy hierarchical
//!   histograms per release epoch, a tree mechanism over epochs, least
//!   squares and pruning.
//! * [`ContinualPrivHP`]: continual-release PrivHP in fixed memory (PrivHP
//!   paper, Appendix A): the binary mechanism over release epochs applied to
//!   PrivHP summaries, up to a public number of releases.
//! * [`ChunkedRelease`]: an online release's points in chunks of a public
//!   size, each from its own generator (the same points on any machine).
//! * [`online_epsilon`]: the privacy schedule `ε_{j,r}` of the online
//!   synthesizer of He, Vershynin, Zhu ((4.1) and (5.1)).

mod budget;
mod continual;
mod epochs;
mod online;
mod online_budget;
mod privhp;
mod release;
mod tree_generator;

pub use budget::{privhp_budget, BudgetRule, BUDGET_GRID_BITS};
pub use continual::{
    continual_block_epsilon, continual_levels, ContinualPrivHP, MAX_CONTINUAL_RELEASES,
};
pub use epochs::{
    block_depth, block_epsilon, block_scale, point_split, super_block, EpochSynthesizer, BRANCHING,
    DEPTH_FACTOR, EXPAND_SDS, MAX_EPOCH_DEPTH,
};
pub use online::{OnlineSynthesizer, MAX_ONLINE_BYTES, MAX_ONLINE_DEPTH};
pub use online_budget::{online_epsilon, MAX_ONLINE_DIM};
pub use privhp::{PrivHP, PrivHPConfig};
pub use release::{ChunkedRelease, CHUNK_ROWS};
pub use tree_generator::TreeGenerator;

//! Synthetic data generators.
//!
//! * [`PrivHP`]: the one-pass, fixed-memory generator of Holland et al.
//!   (private sketches below an exact top of the hierarchy, top-k pruning,
//!   consistency), releasing a [`TreeGenerator`].

mod budget;
mod privhp;
mod tree_generator;

pub use budget::{privhp_budget, BudgetRule, BUDGET_GRID_BITS};
pub use privhp::{PrivHP, PrivHPConfig};
pub use tree_generator::TreeGenerator;

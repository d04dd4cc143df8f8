//! The binary hierarchical partition of `[0,1]^d` and consistent counts on it.
//!
//! * [`path`]: the cell of a point at every level of the hierarchy, as one
//!   integer (its *path*), and the corners of a cell. Level `l → l+1` halves
//!   coordinate `l mod d`, so a level-`l` cell is an `l`-bit integer whose most
//!   significant bit is the first cut, and the level-`l` ancestor of a
//!   level-`r` path is `path >> (r - l)`.
//! * [`consistency`]: Algorithm 4 of PrivHP (Holland et al.), the same rule
//!   as Algorithm 4 of He–Vershynin–Zhu: non-negative counts whose children
//!   add up to their parent, correcting both children in the same direction.
//!
//! Nothing here draws noise or touches privacy parameters: encoding points is
//! a deterministic function of each point alone, and consistency is
//! post-processing of already private counts. The partition's shape (`dim`,
//! `depth`) is public.

pub mod consistency;
pub mod path;

pub use consistency::{enforce_consistency, enforce_tree, Count};
pub use path::{
    cell_bounds, clip_points, cuts, encode_point, encode_points, validate_cell, validate_points,
    MAX_DEPTH,
};

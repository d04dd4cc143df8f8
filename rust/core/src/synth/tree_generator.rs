//! The released PrivHP generator: a consistent binary partition tree with
//! non-negative counts, sampled root to leaf.
//!
//! Privacy: a `TreeGenerator` is the output of PrivHP's release (noisy
//! counts, then deterministic pruning and consistency), so everything done
//! with it — sampling, listing cells, saving — is post-processing and spends
//! no privacy budget. Its sampling randomness is not privacy noise.

use crate::error::{invalid, Result};
use crate::partition::path::{cell_bounds, MAX_DEPTH};
use crate::rng::Rng;
use crate::state::{self, Kind, Reader, Writer};

/// No children.
const LEAF: u32 = u32::MAX;

/// One cell of the partition.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Node {
    pub(crate) level: u32,
    pub(crate) theta: u64,
    pub(crate) count: f64,
    /// Index of the left child; the right child follows it. `LEAF` if none.
    pub(crate) left: u32,
}

impl Node {
    pub(crate) fn new(level: u32, theta: u64, count: f64) -> Self {
        Self {
            level,
            theta,
            count,
            left: LEAF,
        }
    }
}

/// A synthetic-data generator over `[0,1]^dim`: pick a leaf with probability
/// proportional to its count by a root-to-leaf descent, then a uniform point
/// in the leaf's cell.
///
/// It records whether the release's privacy noise came from a seeded
/// generator ([`TreeGenerator::noise_seeded`]: reproducible, **not
/// private**), and its encoding keeps that flag.
#[derive(Clone, Debug, PartialEq)]
pub struct TreeGenerator {
    dim: usize,
    nodes: Vec<Node>,
    noise_seeded: bool,
}

impl TreeGenerator {
    /// A generator from an arena whose node 0 is the root; validated.
    /// `noise_seeded`: whether the release's noise came from a seeded
    /// generator.
    pub(crate) fn from_nodes(dim: usize, nodes: Vec<Node>, noise_seeded: bool) -> Result<Self> {
        let g = Self {
            dim,
            nodes,
            noise_seeded,
        };
        g.validate()?;
        Ok(g)
    }

    /// Whether the release's privacy noise came from a seeded generator:
    /// then the generator is reproducible and **not private**.
    pub fn noise_seeded(&self) -> bool {
        self.noise_seeded
    }

    fn validate(&self) -> Result<()> {
        if self.dim == 0 || self.dim > 1 << 16 {
            return Err(invalid!("generator dimension {} is out of range", self.dim));
        }
        let root = self
            .nodes
            .first()
            .ok_or_else(|| invalid!("generator has no nodes"))?;
        if root.level != 0 || root.theta != 0 {
            return Err(invalid!("generator root must be the level-0 cell"));
        }
        let n = self.nodes.len();
        let mut reached = vec![false; n];
        reached[0] = true;
        for (i, node) in self.nodes.iter().enumerate() {
            if !(node.count.is_finite() && node.count >= 0.0) {
                return Err(invalid!("node {i} has an invalid count {}", node.count));
            }
            if node.level > MAX_DEPTH || (node.level < 64 && node.theta >> node.level != 0) {
                return Err(invalid!("node {i} has an invalid cell"));
            }
            if node.left == LEAF {
                continue;
            }
            let l = node.left as usize;
            if l <= i || l + 1 >= n || reached[l] || reached[l + 1] {
                return Err(invalid!("node {i} has invalid children"));
            }
            reached[l] = true;
            reached[l + 1] = true;
            let (a, b) = (&self.nodes[l], &self.nodes[l + 1]);
            if a.level != node.level + 1
                || b.level != node.level + 1
                || a.theta != node.theta << 1
                || b.theta != (node.theta << 1) | 1
            {
                return Err(invalid!("node {i}'s children are not its two halves"));
            }
        }
        if reached.iter().any(|&r| !r) {
            return Err(invalid!("generator has unreachable nodes"));
        }
        Ok(())
    }

    /// Dimension of the points.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of cells (leaves) in the partition.
    pub fn n_leaves(&self) -> usize {
        self.nodes.iter().filter(|n| n.left == LEAF).count()
    }

    /// Number of nodes in the tree.
    pub fn n_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// The (noisy, consistent) total count at the root.
    pub fn total(&self) -> f64 {
        self.nodes[0].count
    }

    /// Deepest level of any leaf.
    pub fn depth(&self) -> u32 {
        self.nodes.iter().map(|n| n.level).max().unwrap_or(0)
    }

    #[cfg(test)]
    pub(crate) fn nodes_for_test(&self) -> &[Node] {
        &self.nodes
    }

    /// Heap bytes plus the struct itself.
    pub fn memory_bytes(&self) -> usize {
        std::mem::size_of::<Self>() + self.nodes.capacity() * std::mem::size_of::<Node>()
    }

    /// `out.len() / dim` points, row-major. Fails if `out.len()` is not a
    /// multiple of `dim`.
    pub fn sample(&self, rng: &mut Rng, out: &mut [f64]) -> Result<()> {
        if out.len() % self.dim != 0 {
            return Err(invalid!("output length is not a multiple of dim"));
        }
        let mut cell = CellSampler::new(self.dim);
        for point in out.chunks_exact_mut(self.dim) {
            let leaf = self.descend(rng);
            cell.sample(rng, leaf.theta, leaf.level, point);
        }
        Ok(())
    }

    /// `(theta, level)` of the leaves, in arena order (as in [`Self::cells`]).
    pub(crate) fn leaves(&self) -> impl Iterator<Item = (u64, u32)> + '_ {
        self.nodes
            .iter()
            .filter(|n| n.left == LEAF)
            .map(|n| (n.theta, n.level))
    }

    /// Integer counts for the leaves (arena order, as in [`Self::cells`])
    /// that sum to `n`: the leaf counts scaled to `n` and rounded by largest
    /// remainder (ties to the earlier leaf). If every leaf count is 0, the
    /// leaves are weighted by their volume `2^-level` (uniform on the domain).
    pub(crate) fn scaled_leaf_counts(&self, n: u64) -> Vec<u64> {
        let leaves: Vec<&Node> = self.nodes.iter().filter(|l| l.left == LEAF).collect();
        let mut weights: Vec<f64> = leaves.iter().map(|l| l.count).collect();
        let mut total: f64 = weights.iter().sum();
        if total.is_nan() || total <= 0.0 {
            weights = leaves
                .iter()
                .map(|l| (-f64::from(l.level)).exp2())
                .collect();
            total = weights.iter().sum();
        }
        let factor = n as f64 / total;
        let mut counts = Vec::with_capacity(leaves.len());
        let mut rema = Vec::with_capacity(leaves.len());
        let mut placed = 0u64;
        for (i, w) in weights.iter().enumerate() {
            let v = w * factor;
            let f = v.floor().max(0.0).min(n as f64) as u64;
            counts.push(f);
            placed = placed.saturating_add(f);
            rema.push((v - f as f64, i));
        }
        // Floating error could leave the floors a little above n: trim from the end.
        let mut i = counts.len();
        while placed > n && i > 0 {
            i -= 1;
            let cut = counts[i].min(placed - n);
            counts[i] -= cut;
            placed -= cut;
        }
        rema.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
        let left = n - placed;
        if !rema.is_empty() {
            for j in 0..left {
                counts[rema[(j % rema.len() as u64) as usize].1] += 1;
            }
        }
        counts
    }

    fn descend(&self, rng: &mut Rng) -> &Node {
        let mut node = &self.nodes[0];
        while node.left != LEAF {
            let l = node.left as usize;
            let (c0, c1) = (self.nodes[l].count, self.nodes[l + 1].count);
            let go_left = if c0 + c1 > 0.0 {
                unit(rng) * (c0 + c1) < c0
            } else {
                rng.bit()
            };
            node = &self.nodes[if go_left { l } else { l + 1 }];
        }
        node
    }

    /// The leaves: `(lower, upper, counts)` with corners row-major `(L, dim)`.
    pub fn cells(&self) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let leaves: Vec<&Node> = self.nodes.iter().filter(|n| n.left == LEAF).collect();
        let mut lower = vec![0.0; leaves.len() * self.dim];
        let mut upper = vec![0.0; leaves.len() * self.dim];
        let mut counts = Vec::with_capacity(leaves.len());
        for (i, leaf) in leaves.iter().enumerate() {
            let range = i * self.dim..(i + 1) * self.dim;
            cell_bounds(
                leaf.theta,
                leaf.level,
                self.dim,
                &mut lower[range.clone()],
                &mut upper[range],
            );
            counts.push(leaf.count);
        }
        (lower, upper, counts)
    }

    /// The versioned, checksummed encoding ([`crate::state`]), version 2: a
    /// flags byte (bit 0: the noise was seeded), `dim` (`u32`), the node
    /// count (`u64`), then per node its level (`u8`), cell (`u64`), count
    /// (`f64`) and left child (`u32`). Version 1 is the same without the
    /// flags byte.
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::new();
        state::write_seeded_flag(&mut w, self.noise_seeded);
        w.u32(self.dim as u32);
        w.u64(self.nodes.len() as u64);
        for n in &self.nodes {
            w.u8(n.level as u8);
            w.u64(n.theta);
            w.f64(n.count);
            w.u32(n.left);
        }
        state::encode(Kind::TreeGenerator, &w.finish())
    }

    /// Decode and validate bytes written by [`TreeGenerator::to_bytes`];
    /// a version-1 encoding (before the flag) decodes as not seeded.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self> {
        let (version, payload) = state::decode_versioned(bytes, Kind::TreeGenerator)?;
        let mut r = Reader::new(payload);
        let noise_seeded = state::read_seeded_flag(&mut r, version, "generator")?;
        let dim = r.u32()? as usize;
        let n = r.count(1 + 8 + 8 + 4)?;
        let mut nodes = Vec::with_capacity(n);
        for _ in 0..n {
            let level = u32::from(r.u8()?);
            let theta = r.u64()?;
            let count = r.f64()?;
            let left = r.u32()?;
            nodes.push(Node {
                level,
                theta,
                count,
                left,
            });
        }
        r.finish()?;
        Self::from_nodes(dim, nodes, noise_seeded)
            .map_err(|e| invalid!("invalid dpstream state: {e}"))
    }
}

/// Uniform points in cells of the binary partition (reusing its buffers).
pub(crate) struct CellSampler {
    lower: Vec<f64>,
    upper: Vec<f64>,
}

impl CellSampler {
    pub(crate) fn new(dim: usize) -> Self {
        Self {
            lower: vec![0.0; dim],
            upper: vec![0.0; dim],
        }
    }

    /// A uniform point of cell `theta` at `level` into `point` (`dim` values).
    pub(crate) fn sample(&mut self, rng: &mut Rng, theta: u64, level: u32, point: &mut [f64]) {
        self.set_cell(theta, level);
        self.sample_current(rng, point);
    }

    /// Make cell `theta` at `level` the current cell.
    pub(crate) fn set_cell(&mut self, theta: u64, level: u32) {
        let dim = self.lower.len();
        cell_bounds(theta, level, dim, &mut self.lower, &mut self.upper);
    }

    /// A uniform point of the current cell into `point`.
    pub(crate) fn sample_current(&self, rng: &mut Rng, point: &mut [f64]) {
        for ((x, lo), hi) in point.iter_mut().zip(&self.lower).zip(&self.upper) {
            *x = lo + unit(rng) * (hi - lo);
        }
    }
}

/// Uniform in `[0, 1)` on the 2^-53 grid (sampling, not privacy noise).
#[inline]
fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Root [0,1] (count 4) split into [0,1/2) (count 1) and [1/2,1] (count 3),
    /// the right half split again into quarters with counts 3 and 0.
    fn small() -> TreeGenerator {
        let mut nodes = vec![
            Node::new(0, 0, 4.0),
            Node::new(1, 0, 1.0),
            Node::new(1, 1, 3.0),
        ];
        nodes[0].left = 1;
        nodes.push(Node::new(2, 2, 3.0));
        nodes.push(Node::new(2, 3, 0.0));
        nodes[2].left = 3;
        TreeGenerator::from_nodes(1, nodes, false).unwrap()
    }

    #[test]
    fn samples_follow_the_counts() {
        let g = small();
        assert_eq!(g.n_leaves(), 3);
        let mut rng = Rng::seed_from_u64(1);
        let mut out = vec![0.0; 40_000];
        g.sample(&mut rng, &mut out).unwrap();
        let low = out.iter().filter(|&&x| x < 0.5).count() as u64;
        let mid = out.iter().filter(|&&x| (0.5..0.75).contains(&x)).count() as u64;
        let high = out.iter().filter(|&&x| x >= 0.75).count();
        crate::noise::test_support::binomial_within(low, 40_000, 0.25, "left half");
        assert_eq!(low + mid, 40_000);
        assert_eq!(high, 0);
    }

    #[test]
    fn cells_and_bytes_round_trip() {
        let g = small();
        let (lo, hi, c) = g.cells();
        assert_eq!(lo, vec![0.0, 0.5, 0.75]);
        assert_eq!(hi, vec![0.5, 0.75, 1.0]);
        assert_eq!(c, vec![1.0, 3.0, 0.0]);
        let bytes = g.to_bytes();
        assert_eq!(TreeGenerator::from_bytes(&bytes).unwrap(), g);
        for i in 0..bytes.len() {
            assert!(TreeGenerator::from_bytes(&bytes[..i]).is_err());
        }
    }

    /// The seeded flag survives a save (issue 28), a version-1 encoding
    /// (no flags byte) loads as not seeded, and a bad flags byte is refused.
    #[test]
    fn the_seeded_flag_survives_a_save_and_version_1_loads() {
        let g = small();
        let seeded = TreeGenerator {
            noise_seeded: true,
            ..g.clone()
        };
        for h in [&g, &seeded] {
            let back = TreeGenerator::from_bytes(&h.to_bytes()).unwrap();
            assert_eq!(&back, h);
            assert_eq!(back.noise_seeded(), h.noise_seeded());
        }
        let payload = state::decode(&seeded.to_bytes(), Kind::TreeGenerator)
            .unwrap()
            .to_vec();
        assert_eq!(payload[0], 1);
        let v1 = state::encode_version(Kind::TreeGenerator, 1, &payload[1..]);
        assert_eq!(TreeGenerator::from_bytes(&v1).unwrap(), g);
        let mut bad = payload;
        bad[0] = 2;
        let err = TreeGenerator::from_bytes(&state::encode(Kind::TreeGenerator, &bad))
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad generator flags 2"), "{err}");
    }

    #[test]
    fn invalid_trees_are_refused() {
        let g = small();
        let mut bad = g.nodes.clone();
        bad[3].theta = 1; // not a child of node 2
        assert!(TreeGenerator::from_nodes(1, bad, false).is_err());
        let mut bad = g.nodes.clone();
        bad[1].count = f64::NAN;
        assert!(TreeGenerator::from_nodes(1, bad, false).is_err());
        let mut bad = g.nodes.clone();
        bad[0].left = 3; // children 3, 4 are level 2
        assert!(TreeGenerator::from_nodes(1, bad, false).is_err());
        assert!(TreeGenerator::from_nodes(0, g.nodes.clone(), false).is_err());
        assert!(TreeGenerator::from_nodes(1, vec![], false).is_err());
        let mut w = g.nodes.clone();
        w.push(Node::new(1, 0, 0.0)); // unreachable
        assert!(TreeGenerator::from_nodes(1, w, false).is_err());
    }

    #[test]
    fn an_empty_total_samples_uniformly() {
        let mut nodes = vec![
            Node::new(0, 0, 0.0),
            Node::new(1, 0, 0.0),
            Node::new(1, 1, 0.0),
        ];
        nodes[0].left = 1;
        let g = TreeGenerator::from_nodes(2, nodes, false).unwrap();
        let mut rng = Rng::seed_from_u64(2);
        let mut out = vec![0.0; 2000];
        g.sample(&mut rng, &mut out).unwrap();
        assert!(out.iter().all(|x| (0.0..=1.0).contains(x)));
        assert!(out.chunks(2).any(|p| p[0] < 0.5) && out.chunks(2).any(|p| p[0] >= 0.5));
    }
}

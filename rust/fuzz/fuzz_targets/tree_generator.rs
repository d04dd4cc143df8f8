//! `TreeGenerator::from_bytes`, then sampling, cells and re-encoding.
#![no_main]
use dpstream_core::state::Kind;
use dpstream_core::synth::TreeGenerator;
use dpstream_fuzz::{all_in_unit, op_rng, state_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = state_bytes(data, Kind::TreeGenerator) else {
        return;
    };
    let Ok(g) = TreeGenerator::from_bytes(&bytes) else {
        return;
    };
    let mut rng = op_rng(data);
    let dim = g.dim();
    assert!(g.n_leaves() >= 1 && g.n_leaves() <= g.n_nodes());
    assert!(g.total().is_finite() && g.total() >= 0.0);
    let _ = (g.depth(), g.memory_bytes());
    // Sampling: points inside the unit cube, at most 2^16 values.
    let rows = ((1usize << 16) / dim).clamp(1, 64);
    let mut out = vec![0.0; rows * dim];
    g.sample(&mut rng, &mut out)
        .expect("a whole number of rows");
    assert!(all_in_unit(&out), "a sampled point left [0, 1]^d");
    if dim > 1 {
        assert!(g.sample(&mut rng, &mut vec![0.0; dim + 1]).is_err());
    }
    // The leaves tile the cube (when small enough to list).
    if g.n_leaves().saturating_mul(dim) <= 1 << 20 {
        let (lower, upper, counts) = g.cells();
        assert_eq!(counts.len(), g.n_leaves());
        assert_eq!(lower.len(), counts.len() * dim);
        assert!(lower
            .iter()
            .zip(&upper)
            .all(|(l, u)| 0.0 <= *l && l < u && *u <= 1.0));
        if dim <= 64 {
            let volume: f64 = lower
                .chunks(dim)
                .zip(upper.chunks(dim))
                .map(|(l, u)| l.iter().zip(u).map(|(a, b)| b - a).product::<f64>())
                .sum();
            assert!((volume - 1.0).abs() < 1e-9, "leaves cover volume {volume}");
        }
    }
    // Re-encoding is decodable and canonical.
    let again = g.to_bytes();
    let h = TreeGenerator::from_bytes(&again).expect("re-encoded generator decodes");
    assert_eq!(h, g);
    assert_eq!(h.to_bytes(), again);
});

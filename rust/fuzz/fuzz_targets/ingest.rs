//! Batch ingestion with arbitrary `f64` bit patterns and shapes:
//! `partition::path::encode_points`, `OnlineSynthesizer::update` and
//! `PrivHP::update`. A batch is accepted exactly when it is a whole number of
//! rows of values in `[0, 1]`; a refused batch changes nothing.
//!
//! Input: `dim (u8) ++ depth (u8) ++ choice (u8) ++ f64 values (8 bytes each, raw bits)`.
#![no_main]
use dpstream_core::partition::path::encode_points;
use dpstream_core::sketch::SketchKind;
use dpstream_core::synth::{BudgetRule, OnlineSynthesizer, PrivHP, PrivHPConfig};
use dpstream_core::{Rational, Rng};
use dpstream_fuzz::all_in_unit;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let [dim, depth, choice, rest @ ..] = data else {
        return;
    };
    let dim = usize::from(*dim);
    let depth = u32::from(*depth);
    let points: Vec<f64> = rest
        .chunks_exact(8)
        .map(|c| f64::from_bits(u64::from_le_bytes(c.try_into().unwrap())))
        .collect();
    let whole = dim > 0 && points.len().is_multiple_of(dim);
    let valid = whole && all_in_unit(&points);

    // encode_points: any dim and depth; out of the right or a wrong length.
    let n = points.len().checked_div(dim).unwrap_or(0);
    let extra = usize::from(choice & 1);
    let mut out = vec![u64::MAX; n + extra];
    match encode_points(&points, dim, depth, &mut out) {
        Ok(()) => {
            assert!(valid && extra == 0 && depth <= 63);
            assert!(out.iter().all(|&c| depth == 64 || c >> depth == 0));
        }
        Err(_) => assert!(out.iter().all(|&c| c == u64::MAX), "out changed on error"),
    }
    if dim == 0 {
        return;
    }

    let eps = [(1u32, 1u32), (1, 10), (4, 1), (1, 1000)][usize::from(choice >> 1 & 3)];
    let eps = Rational::new(eps.0, eps.1).unwrap();

    // OnlineSynthesizer: two updates (the second a prefix of the batch).
    if let Ok(mut s) = OnlineSynthesizer::new(&eps, dim, Rng::seed_from_u64(1)) {
        for batch in [&points[..], &points[..points.len() / 2]] {
            let before = s.to_bytes().unwrap();
            let ok = dim > 0 && batch.len() % dim == 0 && all_in_unit(batch);
            match s.update(batch) {
                Ok(()) => assert!(ok, "update accepted a bad batch"),
                Err(e) => {
                    assert!(!ok || e.to_string().contains("depth"), "refused: {e}");
                    assert_eq!(
                        s.to_bytes().unwrap(),
                        before,
                        "a refused batch changed state"
                    );
                }
            }
        }
    }

    // PrivHP: a small configuration of the same dimension.
    let cfg = PrivHPConfig {
        epsilon: eps,
        dim,
        k: 1 + usize::from(choice >> 3 & 7),
        width: 8,
        rows: 1 + usize::from(choice >> 6),
        depth: depth.clamp(1, 60),
        sketch: if choice & 0x20 == 0 {
            SketchKind::CountMin
        } else {
            SketchKind::Count
        },
        budget: BudgetRule::Optimal,
    };
    if let Ok(mut p) = PrivHP::new(cfg, &mut Rng::seed_from_u64(2)) {
        let before = p.to_bytes().unwrap();
        match p.update(&points) {
            Ok(()) => {
                assert!(valid, "PrivHP accepted a bad batch");
                assert_eq!(p.points_seen(), n as u64);
            }
            Err(_) => {
                assert!(!valid, "PrivHP refused a valid batch");
                assert_eq!(
                    p.to_bytes().unwrap(),
                    before,
                    "a refused batch changed state"
                );
            }
        }
    }
});

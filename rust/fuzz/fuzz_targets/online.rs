//! `OnlineSynthesizer::from_bytes`, then updates (valid and hostile),
//! counts, releases and re-encoding.
#![no_main]
use dpstream_core::state::Kind;
use dpstream_core::synth::OnlineSynthesizer;
use dpstream_fuzz::{all_in_unit, op_rng, some_points, state_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = state_bytes(data, Kind::OnlineSynthesizer) else {
        return;
    };
    let Ok(mut s) = OnlineSynthesizer::from_bytes(&bytes) else {
        return;
    };
    let mut rng = op_rng(data);
    let dim = s.dim();
    let encoded = s.to_bytes().expect("a usable synthesizer encodes");
    let back = OnlineSynthesizer::from_bytes(&encoded).expect("re-encoded state decodes");
    if s.is_seeded() {
        assert_eq!(back.to_bytes().unwrap(), encoded);
    }
    let _ = (s.memory_bytes(), s.n_regions(), s.epsilon());

    for _ in 0..2 {
        let before = s.to_bytes().unwrap();
        let n = rng.below_u64(12) as usize;
        let hostile = rng.bit();
        let points = some_points(&mut rng, n, dim.min(1 << 10), hostile);
        let valid = all_in_unit(&points) && points.len().is_multiple_of(dim);
        let time = s.time();
        match s.update(&points) {
            Ok(()) => {
                assert!(valid, "the synthesizer accepted a bad batch");
                assert_eq!(s.time(), time + (points.len() / dim) as u64);
            }
            Err(_) => {
                if s.to_bytes().is_err() {
                    return; // poisoned by a noise overflow: refuses everything
                }
                if s.is_seeded() {
                    assert_eq!(
                        s.to_bytes().unwrap(),
                        before,
                        "a refused batch changed state"
                    );
                }
                assert_eq!(s.time(), time);
            }
        }
    }
    // The released counts are a consistent partition of the time.
    if s.depth() <= 16 {
        if let Ok(counts) = s.leaf_counts() {
            assert_eq!(counts.len(), 1usize << s.depth());
            assert!(counts.iter().all(|&c| c >= 0));
            assert_eq!(counts.iter().sum::<i64>() as u64, s.time());
        }
    }
    let m = 1 + rng.below_u64(8);
    if let Ok(out) = s.release(Some(m)) {
        assert_eq!(out.len() as u64, m * dim as u64);
        assert!(all_in_unit(&out));
    }
    if s.time() * dim as u64 <= 1 << 14 {
        if let Ok(out) = s.release(None) {
            assert_eq!(out.len() as u64, s.time() * dim as u64);
            assert!(all_in_unit(&out));
        }
    }
    if let Ok(again) = s.to_bytes() {
        let t = OnlineSynthesizer::from_bytes(&again).expect("re-encoded state decodes");
        assert_eq!(t.time(), s.time());
        if s.is_seeded() {
            assert_eq!(t.to_bytes().unwrap(), again);
        }
    }
});

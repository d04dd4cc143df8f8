//! `PrivHP::from_bytes`, then updates (valid and hostile), merges,
//! re-encoding and the release.
#![no_main]
use dpstream_core::state::Kind;
use dpstream_core::synth::PrivHP;
use dpstream_fuzz::{all_in_unit, op_rng, some_points, state_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = state_bytes(data, Kind::PrivHP) else {
        return;
    };
    let Ok(p) = PrivHP::from_bytes(&bytes) else {
        return;
    };
    let mut rng = op_rng(data);
    let dim = p.config().dim;
    let encoded = p.to_bytes().expect("an unreleased summary encodes");
    let back = PrivHP::from_bytes(&encoded).expect("re-encoded summary decodes");
    assert_eq!(back.to_bytes().unwrap(), encoded);

    let mut q = p.clone();
    q.set_threads(1 + rng.below_u64(2) as usize);
    for _ in 0..3 {
        let before = q.to_bytes().unwrap();
        let n = rng.below_u64(20) as usize;
        let hostile = rng.bit();
        let mut points = some_points(&mut rng, n, dim.min(1 << 12), hostile);
        if rng.below_u64(8) == 0 {
            points.push(0.5); // a ragged batch
        }
        let valid = all_in_unit(&points) && points.len().is_multiple_of(dim);
        match q.update(&points) {
            Ok(()) => assert!(valid, "PrivHP accepted a bad batch"),
            Err(_) => assert_eq!(
                q.to_bytes().unwrap(),
                before,
                "a refused batch changed state"
            ),
        }
    }
    let before = q.to_bytes().unwrap();
    if q.merge(&p).is_err() {
        assert_eq!(
            q.to_bytes().unwrap(),
            before,
            "a refused merge changed state"
        );
    }
    let again = q.to_bytes().unwrap();
    assert_eq!(
        PrivHP::from_bytes(&again).unwrap().to_bytes().unwrap(),
        again
    );

    if let Ok(g) = q.release(&mut rng) {
        assert_eq!(g.dim(), dim);
        assert!(g.n_nodes() <= p.config().max_generator_nodes());
        let rows = ((1usize << 14) / dim).clamp(1, 16);
        let mut out = vec![0.0; rows * dim];
        g.sample(&mut rng, &mut out).unwrap();
        assert!(all_in_unit(&out));
        assert!(q.update(&vec![0.5; dim]).is_err());
        assert!(q.to_bytes().is_err());
        assert!(q.release(&mut rng).unwrap() == g);
    }
});

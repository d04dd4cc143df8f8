//! `LinearSketch::from_bytes`, then queries, updates, merges, noise and
//! re-encoding; every refused operation must leave the sketch unchanged.
#![no_main]
use dpstream_core::sketch::LinearSketch;
use dpstream_core::state::Kind;
use dpstream_fuzz::{op_rng, some_epsilon, state_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = state_bytes(data, Kind::Sketch) else {
        return;
    };
    let Ok(decoded) = LinearSketch::from_bytes(&bytes) else {
        return;
    };
    let (s, record) = (decoded.sketch, decoded.record);
    if let Some(budget) = &record.budget {
        assert!(record.spent <= *budget, "a decoded ledger spent past its budget");
    }
    let mut rng = op_rng(data);
    assert_eq!(s.cells().len(), s.rows() * s.width());
    assert_eq!(s.hashes().len(), s.rows());
    let keys: Vec<u64> = (0..16).map(|_| rng.next_u64()).collect();
    let mut out = vec![0.0; keys.len()];
    s.query_many(&keys, &mut out).unwrap();
    assert!(out.iter().all(|x| !x.is_nan()));
    assert!(s.query_many(&keys, &mut out[..1]).is_err() || keys.len() == 1);

    // Checked batch update: all or nothing.
    let mut t = s.clone();
    let counts: Vec<i64> = keys
        .iter()
        .map(|_| match rng.below_u64(4) {
            0 => i64::MAX,
            1 => i64::MIN,
            _ => rng.below_u64(100) as i64 - 50,
        })
        .collect();
    if t.update_many(&keys, &counts).is_err() {
        assert!(t == s, "a refused update_many changed the sketch");
    }
    assert!(t.update_many(&keys, &counts[..1]).is_err() || keys.len() == 1);

    // Unchecked hot-path updates saturate, never panic.
    let mut u = s.clone();
    for &k in &keys {
        u.update(k, i64::MAX);
        u.update(k, i64::MIN);
    }

    // Merging with itself doubles or is refused unchanged.
    let mut m = s.clone();
    if m.merge(&s).is_err() {
        assert!(m == s, "a refused merge changed the sketch");
    }

    // Noise: all or nothing, the generator restored on error.
    let mut n = s.clone();
    let eps = some_epsilon(&mut rng);
    let saved = rng.clone();
    if n.add_noise(&mut rng, &eps).is_err() {
        assert!(n == s, "refused noise changed the sketch");
        assert_eq!(rng.clone().next_u64(), saved.clone().next_u64());
    }

    // Re-encoding is decodable and canonical (a version-1 input comes back as
    // version 2 with its exhausted ledger).
    let again = s.to_bytes(&record).expect("a decoded record re-encodes");
    let back = LinearSketch::from_bytes(&again).expect("re-encoded sketch decodes");
    assert!(back.sketch == s && back.record == record && !back.legacy);
    assert_eq!(back.sketch.to_bytes(&back.record).unwrap(), again);
});

//! `InhomogeneousSparseCounter::from_bytes`, then steps, runs and
//! re-encoding; a refused step must leave the counter and generator unchanged.
#![no_main]
use dpstream_core::counters::InhomogeneousSparseCounter;
use dpstream_core::state::Kind;
use dpstream_core::Rng;
use dpstream_fuzz::{op_rng, state_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = state_bytes(data, Kind::InhomogeneousSparseCounter) else {
        return;
    };
    let Ok((mut c, seeded)) = InhomogeneousSparseCounter::from_bytes(&bytes) else {
        return;
    };
    // `ops` picks the inputs, `rng` draws the noise: a refused call must
    // leave `rng` untouched.
    let mut ops = op_rng(data);
    let mut rng = Rng::seed_from_u64(ops.next_u64());
    let again = c.to_bytes(seeded).expect("decoded schedules encode");
    let (d, flag) =
        InhomogeneousSparseCounter::from_bytes(&again).expect("re-encoded counter decodes");
    assert_eq!(flag, seeded);
    assert_eq!(d.to_bytes(seeded).unwrap(), again);
    let _ = (c.memory_bytes(), c.first_time(), c.level(), c.release());

    for _ in 0..8 {
        let before = (c.to_bytes(seeded).unwrap(), rng.clone().next_u64());
        let v = match ops.below_u64(10) {
            0 => i64::MAX,
            1 => -1,
            _ => ops.below_u64(3) as i64,
        };
        let time = c.time();
        match c.step(&mut rng, v) {
            Ok(()) => assert_eq!(c.time(), time + 1),
            Err(_) => assert_eq!(
                (c.to_bytes(seeded).unwrap(), rng.clone().next_u64()),
                before
            ),
        }
    }
    let values: Vec<i64> = (0..ops.below_u64(8))
        .map(|_| ops.below_u64(2) as i64)
        .collect();
    let mut out = vec![0; values.len()];
    let before = (c.to_bytes(seeded).unwrap(), rng.clone().next_u64());
    if c.run(&mut rng, &values, &mut out).is_err() {
        assert_eq!(
            (c.to_bytes(seeded).unwrap(), rng.clone().next_u64()),
            before
        );
    }
    let again = c.to_bytes(seeded).unwrap();
    let e = InhomogeneousSparseCounter::from_bytes(&again)
        .expect("re-encoded counter decodes")
        .0;
    assert_eq!(e.to_bytes(seeded).unwrap(), again);
});

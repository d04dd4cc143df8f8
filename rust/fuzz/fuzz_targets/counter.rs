//! `Counter::from_bytes` (every counter kind), then steps, runs and
//! re-encoding; a refused step must leave the counter and generator unchanged.
#![no_main]
use dpstream_core::counters::Counter;
use dpstream_core::state::Kind;
use dpstream_core::Rng;
use dpstream_fuzz::{op_rng, state_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = state_bytes(data, Kind::Counter) else {
        return;
    };
    let Ok((mut c, seeded)) = Counter::from_bytes(&bytes) else {
        return;
    };
    // `ops` picks the inputs, `rng` draws the noise: a refused call must
    // leave `rng` untouched.
    let mut ops = op_rng(data);
    let mut rng = Rng::seed_from_u64(ops.next_u64());
    let dim = c.dim();
    assert_eq!(c.release().len(), dim);
    let again = c.to_bytes(seeded);
    let (d, flag) = Counter::from_bytes(&again).expect("re-encoded counter decodes");
    assert_eq!((d.to_bytes(flag), flag), (again, seeded));
    let _ = (
        c.memory_bytes(),
        c.epsilon_split(),
        c.remaining(),
        c.horizon(),
    );

    for _ in 0..4 {
        let before = (c.to_bytes(seeded), rng.clone().next_u64());
        let row: Vec<i64> = (0..dim + usize::from(ops.below_u64(16) == 0))
            .map(|_| match ops.below_u64(16) {
                0 => i64::MAX,
                1 => i64::MIN,
                _ => ops.below_u64(7) as i64 - 3,
            })
            .collect();
        let time = c.time();
        match c.step(&mut rng, &row) {
            Ok(()) => assert_eq!(c.time(), time + 1),
            Err(_) => assert_eq!((c.to_bytes(seeded), rng.clone().next_u64()), before),
        }
    }
    if dim <= 64 {
        let steps = ops.below_u64(6) as usize;
        let incs: Vec<i64> = (0..steps * dim).map(|_| ops.below_u64(3) as i64).collect();
        let mut out = vec![0; incs.len()];
        let before = (c.to_bytes(seeded), rng.clone().next_u64());
        if c.run(&mut rng, &incs, &mut out).is_err() {
            assert_eq!((c.to_bytes(seeded), rng.clone().next_u64()), before);
        }
    }
    let again = c.to_bytes(seeded);
    assert_eq!(Counter::from_bytes(&again).unwrap().0.to_bytes(seeded), again);
});

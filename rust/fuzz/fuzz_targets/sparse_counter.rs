//! `SparseCounter::from_bytes`, then steps, skips (any length, which must
//! take time independent of it), runs and re-encoding.
#![no_main]
use dpstream_core::counters::SparseCounter;
use dpstream_core::state::Kind;
use dpstream_core::Rng;
use dpstream_fuzz::{op_rng, state_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some(bytes) = state_bytes(data, Kind::SparseCounter) else {
        return;
    };
    let Ok((mut c, seeded)) = SparseCounter::from_bytes(&bytes) else {
        return;
    };
    // `ops` picks the inputs, `rng` draws the noise: a refused call must
    // leave `rng` untouched.
    let mut ops = op_rng(data);
    let mut rng = Rng::seed_from_u64(ops.next_u64());
    let again = c.to_bytes(seeded);
    let (d, flag) = SparseCounter::from_bytes(&again).expect("re-encoded counter decodes");
    assert_eq!(flag, seeded);
    assert_eq!(d.to_bytes(seeded), again);
    let _ = (
        c.memory_bytes(),
        c.epsilon_split(),
        c.threshold(),
        c.segments(),
    );

    for _ in 0..6 {
        let before = (c.to_bytes(seeded), rng.clone().next_u64());
        let time = c.time();
        let result = match ops.below_u64(4) {
            0 => {
                let n = match ops.below_u64(3) {
                    0 => ops.next_u64(),
                    1 => c.remaining(),
                    _ => ops.below_u64(1000),
                };
                c.skip(&mut rng, n).map(|()| n)
            }
            1 => {
                let v = match ops.below_u64(3) {
                    0 => i64::MAX,
                    1 => -1,
                    _ => (ops.next_u64() >> 1) as i64,
                };
                c.step(&mut rng, v).map(|()| 1)
            }
            _ => {
                let v = ops.below_u64(3) as i64;
                c.step(&mut rng, v).map(|()| 1)
            }
        };
        match result {
            Ok(n) => assert_eq!(c.time(), time + n),
            Err(_) => assert_eq!((c.to_bytes(seeded), rng.clone().next_u64()), before),
        }
        assert!(c.time() <= c.horizon());
    }
    let n = (ops.below_u64(8) as usize).min(c.remaining() as usize);
    let values: Vec<i64> = (0..n).map(|_| ops.below_u64(3) as i64).collect();
    let mut out = vec![0; n];
    c.run(&mut rng, &values, &mut out)
        .expect("valid values within the horizon");
    let again = c.to_bytes(seeded);
    assert_eq!(SparseCounter::from_bytes(&again).unwrap().to_bytes(), again);
});

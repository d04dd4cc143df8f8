//! Regression tests from fuzzing (`rust/fuzz`, issue 7): inputs that once
//! made a decoder or an ingestion path panic, abort, hang or over-allocate.
//! Each is fed to the public API, which must now return an error.

use dpstream_core::counters::{Counter, InhomogeneousSparseCounter, SparseCounter};
use dpstream_core::sketch::LinearSketch;
use dpstream_core::state::{self, Kind};
use dpstream_core::synth::{
    ContinualPrivHP, EpochSynthesizer, OnlineSynthesizer, PrivHP, TreeGenerator,
};

/// Every decoder refuses `bytes` with an error (and does not panic). The
/// envelope is checked to be either broken or one of some kind, in any
/// version that kind reads.
fn all_decoders_refuse(bytes: &[u8]) {
    assert!(
        state::peek_kind(bytes).is_err()
            || Kind::ALL
                .iter()
                .any(|&k| state::decode_versioned(bytes, k).is_ok())
    );
    assert!(TreeGenerator::from_bytes(bytes).is_err());
    assert!(LinearSketch::from_bytes(bytes).is_err());
    assert!(PrivHP::from_bytes(bytes).is_err());
    assert!(OnlineSynthesizer::from_bytes(bytes).is_err());
    assert!(EpochSynthesizer::from_bytes(bytes).is_err());
    assert!(ContinualPrivHP::from_bytes(bytes).is_err());
    assert!(Counter::from_bytes(bytes).is_err());
    assert!(SparseCounter::from_bytes(bytes).is_err());
    assert!(InhomogeneousSparseCounter::from_bytes(bytes).is_err());
}

/// The error of `decode` on `payload` wrapped as a version-1 `kind`, which
/// every decoder refuses.
fn v1_refusal<T>(
    kind: Kind,
    payload: &[u8],
    decode: impl Fn(&[u8]) -> dpstream_core::Result<T>,
) -> String {
    let bytes = state::encode_version(kind, 1, payload);
    all_decoders_refuse(&bytes);
    match decode(&bytes) {
        Ok(_) => panic!("a version-1 {kind:?} payload was accepted"),
        Err(e) => e.to_string(),
    }
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

/// A header whose payload length is near 2^64: `length + 24` overflowed
/// (a panic with overflow checks, fuzz target `state_header`).
#[test]
fn a_payload_length_near_2_pow_64_is_refused() {
    let mut bytes = hex("445053545245414d 0100 0500 ffffffffffffffff");
    bytes.extend_from_slice(&[0xff; 40]);
    for len in [u64::MAX, u64::MAX - 23, u64::MAX - 10] {
        bytes[12..20].copy_from_slice(&len.to_le_bytes());
        let err = state::peek_kind(&bytes).unwrap_err().to_string();
        assert!(err.contains("length mismatch"), "{err}");
        for kind in Kind::ALL {
            assert!(state::decode(&bytes, kind).is_err());
        }
    }
    // The fuzzer's own input (a whole 131-byte file).
    let found: &[u8] = &[
        68, 80, 83, 84, 82, 69, 65, 77, 1, 0, 5, 0, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 51, 0, 0, 0, 0, 0, 222, 3, 28, 231, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0,
        0, 0, 0, 0, 0, 2, 0, 0, 0, 255, 255, 255, 255, 255, 0, 0, 0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 28,
        3, 223,
    ];
    assert!(state::peek_kind(found).is_err());
    all_decoders_refuse(found);
    // Fuzz target `tree_generator` found the same overflow.
    all_decoders_refuse(&hex(
        "445053545245414d 0100 0100 f7ffffffffffffff 38ff7b34122b",
    ));
}

/// An online synthesizer state (ε = 1/2, dim 1391) whose time field puts it
/// at level 20 in a 60-byte payload: decoding computed the parameters of all
/// 20 depths (slow for a large dim: a 10 s timeout under the fuzzer) before
/// noticing that the payload cannot hold the 2^21 cells (fuzz target `online`).
#[test]
fn a_deep_online_state_in_a_short_payload_is_refused_early() {
    let payload: &[u8] = &[
        1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 2, 111, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        44, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 49, 0, 0, 0, 0, 0,
        0,
    ];
    // A version-1 layout (before the master key).
    let err = v1_refusal(
        Kind::OnlineSynthesizer,
        payload,
        OnlineSynthesizer::from_bytes,
    );
    assert!(err.contains("payload too short"), "{err}");
}

/// A public ε so large that the first point starts a partition of depth 30
/// (2^31 cell counters, over 200 GiB): refused with a clear error before
/// anything is allocated, and the synthesizer is unchanged.
#[test]
fn an_online_partition_beyond_the_memory_limit_is_refused() {
    use dpstream_core::{Error, Rational, Rng};
    let eps = Rational::new(1u64 << 30, 1u32).unwrap();
    let mut s = OnlineSynthesizer::new(&eps, 2, Rng::seed_from_u64(1)).unwrap();
    let before = s.to_bytes().unwrap();
    let err = s.update(&[0.5, 0.5]).unwrap_err();
    assert!(matches!(err, Error::InvalidParameter(_)), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.contains("depth 30") && msg.contains("16 GiB limit"),
        "{msg}"
    );
    assert_eq!(s.to_bytes().unwrap(), before);
    assert_eq!(s.time(), 0);
    // Deeper than the depth limit: the older error.
    let eps = Rational::new(1u64 << 45, 1u32).unwrap();
    let mut s = OnlineSynthesizer::new(&eps, 2, Rng::seed_from_u64(1)).unwrap();
    let msg = s.update(&[0.5, 0.5]).unwrap_err().to_string();
    assert!(msg.contains("would pass depth 40"), "{msg}");
}

/// Buffers that cannot be allocated are reported as `OutOfMemory` (a Python
/// `MemoryError`), not as an arithmetic overflow.
#[test]
fn allocation_failures_are_out_of_memory_errors() {
    use dpstream_core::counters::CounterKind;
    use dpstream_core::{Error, Rational, Rng};
    let eps = Rational::new(1u32, 1u32).unwrap();
    let err = Counter::new(CounterKind::Simple, &eps, 1 << 60).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory(_)), "{err:?}");
    let mut s = OnlineSynthesizer::new(&eps, 2, Rng::seed_from_u64(1)).unwrap();
    s.update(&[0.5, 0.5, 0.25, 0.75]).unwrap();
    let err = s.release(Some(1 << 62)).unwrap_err();
    assert!(matches!(err, Error::OutOfMemory(_)), "{err:?}");
    assert!(err.to_string().contains("cannot allocate"), "{err}");
}

/// An inhomogeneous sparse counter with an empty table of level epsilons
/// and starting level 0: the error message computed `0 + 0 − 1` in `u64`
/// (a panic with overflow checks, fuzz target `inhomogeneous_counter`).
#[test]
fn an_empty_level_table_is_refused() {
    use dpstream_core::counters::LevelSchedule;
    use dpstream_core::Rational;
    let eps = Rational::new(1u32, 1u32).unwrap();
    for r0 in [0, 1, 7] {
        let err = InhomogeneousSparseCounter::new(&eps, r0, LevelSchedule::Table(vec![]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("the schedule has no levels"), "{err}");
    }
    // The fuzzer's input: a version-1 payload (before the seeded flags
    // byte), wrapped in a valid header and checksum.
    let payload: &[u8] = &[
        1, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0, 0, 0, 66, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0,
        0, 0, 0, 2, 1, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0,
        0, 0, 0, 0, 1, 1, 0, 99, 99, 99, 99, 99, 99, 99, 0, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1, 4,
        1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0, 0,
        0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0, 0, 0, 0, 0, 0, 0, 66, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    let err = v1_refusal(
        Kind::InhomogeneousSparseCounter,
        payload,
        InhomogeneousSparseCounter::from_bytes,
    );
    assert!(err.starts_with("invalid dpstream state"), "{err}");
}

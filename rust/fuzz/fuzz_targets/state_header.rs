//! The envelope of every encoded object: `state::peek_kind` and
//! `state::decode` on arbitrary bytes.
#![no_main]
use dpstream_core::state::{self, Kind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let peeked = state::peek_kind(data);
    for kind in Kind::ALL {
        match (state::decode_versioned(data, kind), &peeked) {
            (Ok((version, payload)), Ok(k)) => {
                assert_eq!(*k, kind);
                assert_eq!(payload.len() + 24, data.len());
                // Re-encoding the payload gives the input back.
                assert_eq!(state::encode_version(kind, version, payload), data);
                // `decode` takes the current version only.
                assert_eq!(state::decode(data, kind).is_ok(), version == kind.version());
            }
            (Ok(_), Err(e)) => panic!("decode accepted what peek_kind refused: {e}"),
            (Err(e), Ok(k)) => assert!(*k != kind, "decode refused its own kind: {e}"),
            (Err(e), Err(_)) => assert!(e.to_string().starts_with("invalid dpstream state")),
        }
    }
    // Wrapping arbitrary bytes always decodes back to them.
    for kind in Kind::ALL {
        let wrapped = state::encode(kind, data);
        assert_eq!(state::decode(&wrapped, kind).unwrap(), data);
    }
});

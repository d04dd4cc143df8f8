use super::*;
use crate::rational::Rational;
use crate::synth::{ContinualPrivHP, EpochSynthesizer, OnlineSynthesizer};

fn q(n: u32, d: u32) -> Rational {
    Rational::new(n, d).unwrap()
}

fn points(seed: u64, n: usize, dim: usize) -> Vec<f64> {
    let mut rng = Rng::seed_from_u64(seed);
    (0..n * dim)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

/// A synthesizer's `release_sampler(size, chunk_rows)`.
type Sampler = Box<dyn FnMut(Option<u64>, u64) -> ChunkedRelease<'static>>;

/// Twin synthesizers of each method, fed the same points.
fn twins(method: u8) -> [Sampler; 2] {
    let make = move || -> Sampler {
        let pts = points(7, 1500, 2);
        match method {
            0 => {
                let mut s = EpochSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(3)).unwrap();
                s.update(&pts[..1000]).unwrap();
                s.release(None).unwrap();
                s.update(&pts[1000..]).unwrap();
                Box::new(move |size, c| s.release_sampler(size, c).unwrap())
            }
            1 => {
                let mut s = OnlineSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(3)).unwrap();
                s.update(&pts).unwrap();
                Box::new(move |size, c| s.release_sampler(size, c).unwrap())
            }
            _ => {
                let mut s =
                    ContinualPrivHP::new(&q(1, 1), 2, 1 << 20, 10_000, 8, Rng::seed_from_u64(3))
                        .unwrap();
                s.update(&pts[..700]).unwrap();
                s.release(None).unwrap();
                s.update(&pts[700..]).unwrap();
                Box::new(move |size, c| s.release_sampler(size, c).unwrap().into_owned())
            }
        }
    };
    [make(), make()]
}

#[test]
fn chunks_concatenated_are_one_sample() {
    for method in 0..3 {
        for size in [None, Some(1234)] {
            let [mut a, _] = twins(method);
            let r = a(size, 100);
            assert_eq!(r.rows(), size.unwrap_or(1500));
            assert_eq!(r.n_chunks(), r.rows().div_ceil(100));
            let whole = r.sample().unwrap();
            // Chunks drawn in any order are the same rows.
            let mut parts: Vec<(u64, Vec<f64>)> = (0..r.n_chunks())
                .rev()
                .map(|i| (i, r.chunk(i).unwrap()))
                .collect();
            parts.sort_by_key(|p| p.0);
            let joined: Vec<f64> = parts.into_iter().flat_map(|p| p.1).collect();
            assert_eq!(whole, joined, "method {method}, size {size:?}");
            assert!(whole.iter().all(|x| (0.0..=1.0).contains(x)));
            // The encoding draws the same chunks.
            let back = ChunkedRelease::from_bytes(&r.to_bytes().unwrap()).unwrap();
            assert_eq!(back.sample().unwrap(), whole);
            assert_eq!(back.chunk(3).unwrap(), r.chunk(3).unwrap());
        }
    }
}

#[test]
fn release_is_the_default_chunked_sample() {
    for method in 0..3 {
        for size in [None, Some(999)] {
            let [mut a, mut b] = twins(method);
            let one = a(size, CHUNK_ROWS).sample().unwrap();
            let chunked = b(size, CHUNK_ROWS);
            assert_eq!(chunked.n_chunks(), 1);
            assert_eq!(chunked.chunk(0).unwrap(), one);
        }
    }
    // And `release` is that sample, on twins.
    let pts = points(7, 1500, 2);
    let mut a = EpochSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(3)).unwrap();
    let mut b = EpochSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(3)).unwrap();
    a.update(&pts).unwrap();
    b.update(&pts).unwrap();
    let r = b.release_sampler(None, CHUNK_ROWS).unwrap();
    assert_eq!(a.release(None).unwrap(), r.sample().unwrap());
}

#[test]
fn placed_rows_follow_the_leaf_counts() {
    // Every placed chunking gives each cell its count, whatever the chunk size.
    let [mut a, mut b] = twins(1);
    let small = a(None, 37).sample().unwrap();
    let big = b(None, CHUNK_ROWS).sample().unwrap();
    let cells = |rows: &[f64]| {
        // t = 1500, ε = 1: the leaves are the cells of depth 10.
        let mut v = vec![0u64; rows.len() / 2];
        crate::partition::path::encode_points(rows, 2, 10, &mut v).unwrap();
        v.sort_unstable();
        v
    };
    assert_ne!(small, big);
    assert_eq!(cells(&small), cells(&big));
}

#[test]
fn bad_chunks_are_refused() {
    let [mut a, _] = twins(0);
    let r = a(Some(10), 4);
    assert_eq!(r.n_chunks(), 3);
    assert_eq!(r.chunk_bounds(2).unwrap(), (8, 10));
    assert!(r.chunk(3).is_err());
    assert!(check_chunk_rows(0).is_err());
    let mut s = EpochSynthesizer::new(&q(1, 1), 1, Rng::seed_from_u64(3)).unwrap();
    s.update(&[0.5]).unwrap();
    let before = s.to_bytes();
    assert!(s.release_sampler(None, 0).is_err());
    assert_eq!(s.to_bytes(), before);
    // No point: an empty release (of no chunk) or a refusal.
    let mut empty = EpochSynthesizer::new(&q(1, 1), 1, Rng::seed_from_u64(3)).unwrap();
    let r = empty.release_sampler(None, 5).unwrap();
    assert_eq!((r.rows(), r.n_chunks()), (0, 0));
    assert!(r.sample().unwrap().is_empty());
    assert!(empty.release_sampler(Some(1), 5).is_err());
    let mut bytes = r.to_bytes().unwrap();
    assert_eq!(ChunkedRelease::from_bytes(&bytes).unwrap().rows(), 0);
    let n = bytes.len();
    bytes[n - 5] ^= 1;
    assert!(ChunkedRelease::from_bytes(&bytes).is_err());
    // A payload edited to an impossible dimension is refused, not allocated.
    let payload = state::decode(&r.to_bytes().unwrap(), Kind::OnlineRelease)
        .unwrap()
        .to_vec();
    let mut edited = payload.clone();
    edited[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = ChunkedRelease::from_bytes(&state::encode(Kind::OnlineRelease, &edited));
    assert!(err.unwrap_err().to_string().contains("out of range"));
    assert!(ChunkedRelease::from_bytes(&state::encode(Kind::OnlineRelease, &payload)).is_ok());
}

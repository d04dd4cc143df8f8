use super::*;

fn q(n: u32, d: u32) -> Rational {
    Rational::new(n, d).unwrap()
}

fn uniform_points(rng: &mut Rng, n: usize, dim: usize) -> Vec<f64> {
    (0..n * dim)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

#[test]
fn depth_follows_the_time_levels() {
    let mut s = OnlineSynthesizer::new(&q(1, 4), 2, Rng::seed_from_u64(1)).unwrap();
    let mut data = Rng::seed_from_u64(2);
    assert_eq!(s.depth(), 0);
    // t_r = 4·2^r: 4, 8, 16, 32, …
    for t in 1..=100u64 {
        s.update(&uniform_points(&mut data, 1, 2)).unwrap();
        let expect = if t < 4 { 0 } else { (t / 4).ilog2() };
        assert_eq!(s.depth(), expect, "t = {t}");
        assert_eq!(s.n_regions(), (1usize << (expect + 1)) - 2);
    }
    // ε = 3: t_0 = t_1 = 1, t_2 = 2, t_3 = 3, t_4 = 6 (level 0 is empty).
    let mut s = OnlineSynthesizer::new(&q(3, 1), 1, Rng::seed_from_u64(1)).unwrap();
    let depths: Vec<u32> = (0..6)
        .map(|_| {
            s.update(&[0.3]).unwrap();
            s.depth()
        })
        .collect();
    assert_eq!(depths, vec![1, 2, 3, 3, 3, 4]);
}

#[test]
fn releases_have_t_points_and_consistent_counts() {
    for dim in [1usize, 2, 3] {
        let mut s = OnlineSynthesizer::new(&q(1, 1), dim, Rng::seed_from_u64(5)).unwrap();
        let mut data = Rng::seed_from_u64(6);
        for batch in [1usize, 7, 100, 1000] {
            s.update(&uniform_points(&mut data, batch, dim)).unwrap();
            let counts = s.leaf_counts().unwrap();
            assert_eq!(counts.len(), 1 << s.depth());
            assert!(counts.iter().all(|&c| c >= 0));
            assert_eq!(counts.iter().sum::<i64>() as u64, s.time());
            let y = s.release(None).unwrap();
            assert_eq!(y.len() as u64, s.time() * dim as u64);
            assert!(y.iter().all(|&x| (0.0..=1.0).contains(&x)));
            let m = s.release(Some(17)).unwrap();
            assert_eq!(m.len(), 17 * dim);
        }
    }
}

#[test]
fn release_matches_the_data_roughly() {
    // All points in the left half of [0,1]^2: the released left half must
    // hold most. (At ε = 1 and t = 20000 the shallow cells' sparse counters
    // still hide the current level — their thresholds 18 ln T / ε_{1,r}
    // exceed the level's length — so the check uses a large ε.)
    let mut s = OnlineSynthesizer::new(&q(64, 1), 2, Rng::seed_from_u64(9)).unwrap();
    let mut data = Rng::seed_from_u64(10);
    let mut pts = uniform_points(&mut data, 20_000, 2);
    for row in pts.chunks_exact_mut(2) {
        row[0] *= 0.5;
    }
    s.update(&pts).unwrap();
    let y = s.release(None).unwrap();
    let left = y.chunks_exact(2).filter(|p| p[0] < 0.5).count();
    assert!(left > 19_000, "{left}");
}

#[test]
fn batching_does_not_change_the_output() {
    let mut data = Rng::seed_from_u64(3);
    let pts = uniform_points(&mut data, 3000, 2);
    let mut a = OnlineSynthesizer::new(&q(1, 2), 2, Rng::seed_from_u64(4)).unwrap();
    let mut b = OnlineSynthesizer::new(&q(1, 2), 2, Rng::seed_from_u64(4)).unwrap();
    a.update(&pts).unwrap();
    for chunk in pts.chunks(2 * 37) {
        b.update(chunk).unwrap();
    }
    assert_eq!(a.leaf_counts().unwrap(), b.leaf_counts().unwrap());
    assert_eq!(a.release(None).unwrap(), b.release(None).unwrap());
}

#[test]
fn bad_input_changes_nothing() {
    let mut s = OnlineSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(4)).unwrap();
    let mut twin = OnlineSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(4)).unwrap();
    let mut data = Rng::seed_from_u64(3);
    let pts = uniform_points(&mut data, 500, 2);
    s.update(&pts).unwrap();
    twin.update(&pts).unwrap();
    assert!(s.update(&[0.1, 0.2, 0.3]).is_err());
    assert!(s.update(&[0.1, f64::NAN]).is_err());
    assert!(s.update(&[0.1, 0.2, 1.5, 0.2]).is_err());
    assert_eq!(s.time(), 500);
    assert_eq!(s.release(None).unwrap(), twin.release(None).unwrap());
    assert!(OnlineSynthesizer::new(&q(0, 1), 2, Rng::seed_from_u64(1)).is_err());
    assert!(OnlineSynthesizer::new(&q(1, 1), 0, Rng::seed_from_u64(1)).is_err());
    let mut empty = OnlineSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(1)).unwrap();
    assert!(empty.release(Some(3)).is_err());
    assert_eq!(empty.release(None).unwrap().len(), 0);
}

#[test]
fn checkpoints_resume_exactly() {
    let mut data = Rng::seed_from_u64(8);
    for dim in [1usize, 2] {
        let pts = uniform_points(&mut data, 5000, dim);
        let mut a = OnlineSynthesizer::new(&q(1, 1), dim, Rng::seed_from_u64(7)).unwrap();
        let mut b = OnlineSynthesizer::new(&q(1, 1), dim, Rng::seed_from_u64(7)).unwrap();
        let cut = 1234 * dim;
        a.update(&pts[..cut]).unwrap();
        b.update(&pts[..cut]).unwrap();
        a.release(None).unwrap();
        b.release(None).unwrap();
        let bytes = b.to_bytes().unwrap();
        let memory = b.memory_bytes();
        let mut b = OnlineSynthesizer::from_bytes(&bytes).unwrap();
        assert_eq!(b.to_bytes().unwrap(), bytes);
        assert_eq!(b.memory_bytes(), memory);
        a.update(&pts[cut..]).unwrap();
        b.update(&pts[cut..]).unwrap();
        assert_eq!(a.release(None).unwrap(), b.release(None).unwrap());
        // Corruption is detected.
        let mut bad = bytes.clone();
        let mid = bad.len() / 2;
        bad[mid] ^= 1;
        assert!(OnlineSynthesizer::from_bytes(&bad).is_err());
        assert!(OnlineSynthesizer::from_bytes(&bytes[..bytes.len() - 1]).is_err());
    }
    // An OS-seeded synthesizer does not write its key and reloads with a fresh one.
    let mut s = OnlineSynthesizer::new(&q(1, 1), 2, Rng::from_os().unwrap()).unwrap();
    s.update(&[0.5, 0.5, 0.25, 0.75]).unwrap();
    let loaded = OnlineSynthesizer::from_bytes(&s.to_bytes().unwrap()).unwrap();
    assert!(!loaded.is_seeded());
    assert_eq!(loaded.time(), 2);
}

#[test]
fn memory_is_fixed_within_a_level() {
    let mut s = OnlineSynthesizer::new(&q(1, 1), 2, Rng::seed_from_u64(1)).unwrap();
    let mut data = Rng::seed_from_u64(2);
    s.update(&uniform_points(&mut data, 1 << 12, 2)).unwrap();
    let m = s.memory_bytes();
    // Level 12 runs to t = 8191; the cells hold no p-sums at these counts.
    s.update(&uniform_points(&mut data, 4000, 2)).unwrap();
    assert_eq!(s.depth(), 12);
    assert_eq!(s.memory_bytes(), m);
}

#[test]
fn shuffle_is_a_uniform_permutation() {
    use crate::noise::test_support::chi2_critical;
    let mut rng = Rng::seed_from_u64(12);
    let n = 1usize << 14;
    let bins = 16;
    let reps = 3000;
    let mut hist = vec![0u64; bins];
    for _ in 0..reps {
        let rows: Vec<f64> = (0..2 * n).map(|i| (i / 2) as f64).collect();
        let mut out = rows;
        crate::synth::release::shuffle_rows(&mut rng, &mut out, 2).unwrap();
        let mut seen = vec![false; n];
        for row in out.chunks_exact(2) {
            assert_eq!(row[0], row[1]);
            seen[row[0] as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        // Where did row 0 land?
        let pos = out.chunks_exact(2).position(|r| r[0] == 0.0).unwrap();
        hist[pos * bins / n] += 1;
    }
    let e = reps as f64 / bins as f64;
    let stat: f64 = hist.iter().map(|&h| (h as f64 - e).powi(2) / e).sum();
    assert!(stat < chi2_critical((bins - 1) as f64), "{hist:?}");
}

#[test]
fn checkpoints_with_impossible_histories_are_refused() {
    let mut s = OnlineSynthesizer::new(&q(1, 1), 1, Rng::seed_from_u64(1)).unwrap();
    let pts: Vec<f64> = (0..20).map(|i| f64::from(i) / 20.0).collect();
    s.update(&pts).unwrap();
    let good = s.to_bytes().unwrap();
    let payload = crate::state::decode(&good, Kind::OnlineSynthesizer)
        .unwrap()
        .to_vec();
    // The last 8 bytes are the last point's path: 2^64 − 1 has more than 63 bits.
    let mut bad = payload.clone();
    let n = bad.len();
    bad[n - 8..].copy_from_slice(&u64::MAX.to_le_bytes());
    let encoded = crate::state::encode(Kind::OnlineSynthesizer, &bad);
    assert!(OnlineSynthesizer::from_bytes(&encoded).is_err());
    // One path too few for the time.
    let mut short = payload[..n - 8].to_vec();
    let count_at = short.len() - 19 * 8 - 8;
    short[count_at..count_at + 8].copy_from_slice(&19u64.to_le_bytes());
    let encoded = crate::state::encode(Kind::OnlineSynthesizer, &short);
    assert!(OnlineSynthesizer::from_bytes(&encoded).is_err());
}

/// A checkpoint loaded any number of times and fed the same points releases
/// the same counts, whenever the counts are read.
#[test]
fn loads_fed_the_same_points_release_the_same_counts() {
    let mut data = Rng::seed_from_u64(81);
    let pts = uniform_points(&mut data, 3000, 2);
    let mut s = OnlineSynthesizer::new(&q(1, 1), 2, Rng::from_os().unwrap()).unwrap();
    s.update(&pts[..2000]).unwrap();
    s.leaf_counts().unwrap();
    let saved = s.to_bytes().unwrap();
    let run = |pts: &[f64], reads: usize| {
        let mut t = OnlineSynthesizer::from_bytes(&saved).unwrap();
        for chunk in pts.chunks(pts.len() / reads) {
            t.update(chunk).unwrap();
            t.leaf_counts().unwrap();
        }
        t.leaf_counts().unwrap()
    };
    let first = run(&pts[2000..], 1);
    for reads in [1, 5, 2] {
        assert_eq!(run(&pts[2000..], reads), first);
    }
    // Other points (the independence of their noise is tested on the sparse
    // counter, `counters::sparse`).
    let other = run(&uniform_points(&mut data, 1000, 2), 1);
    assert_ne!(other, first);
}

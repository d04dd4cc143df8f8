use super::*;

fn eps(n: u32, d: u32) -> Rational {
    Rational::new(n, d).unwrap()
}

fn seeded(dim: usize, e: Rational, seed: u64) -> EpochSynthesizer {
    EpochSynthesizer::new(&e, dim, Rng::seed_from_u64(seed)).unwrap()
}

fn points(n: usize, dim: usize, seed: u64) -> Vec<f64> {
    let mut rng = Rng::seed_from_u64(seed);
    (0..n * dim)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

/// One noise read of a release: the block's epochs, depth, the key read and
/// the scale of the sampler actually used.
#[derive(Clone)]
struct Read {
    first: u64,
    len: u64,
    depth: u32,
    key: [u8; 32],
    scale: Rational,
}

thread_local! {
    static TRACE: std::cell::RefCell<Option<Vec<Read>>> = const { std::cell::RefCell::new(None) };
}

/// Called by every noise read (test builds only): recorded while tracing.
pub(super) fn trace_read(b: &Block, key: [u8; 32], scale: &Rational) {
    TRACE.with(|t| {
        if let Some(v) = t.borrow_mut().as_mut() {
            v.push(Read {
                first: b.first,
                len: b.len,
                depth: b.depth,
                key,
                scale: scale.clone(),
            });
        }
    });
}

/// For a replaced point at each epoch `1..=epochs`: the ε it actually costs,
/// counted from the noisy measurements the releases read (one release after
/// each epoch of one point, ε = 64, d = 1). Each distinct measurement (block
/// and key) of a block that holds the epoch costs `2·depth / scale` (the
/// ℓ1-sensitivity of the block's levels over the scale of the sampler that
/// was used); a measurement read again by a later release costs nothing more.
/// Derived from the reads, not from the split's formula.
fn epsilon_spent_per_epoch(epsilon: &Rational, epochs: u64) -> Vec<Rational> {
    TRACE.with(|t| *t.borrow_mut() = Some(Vec::new()));
    let mut s = EpochSynthesizer::new(epsilon, 1, Rng::seed_from_u64(41)).unwrap();
    let mut rng = Rng::seed_from_u64(42);
    for _ in 0..epochs {
        let x = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
        s.update(&[x]).unwrap();
        s.release_tree().unwrap();
        // Every live block is read (each measures level 1 at least, and the
        // root always splits at this ε).
        assert!(s.blocks.iter().all(|b| b.depth >= 1));
    }
    let reads = TRACE.with(|t| t.borrow_mut().take()).unwrap();
    let mut measurements: Vec<Read> = Vec::new();
    for r in reads {
        if !measurements.iter().any(|m| m.key == r.key) {
            measurements.push(r);
        }
    }
    (1..=epochs)
        .map(|e| {
            let parts: Vec<Rational> = measurements
                .iter()
                .filter(|m| m.first <= e && e < m.first + m.len)
                .map(|m| {
                    Rational::new(2 * m.depth, 1u32)
                        .unwrap()
                        .div(&m.scale)
                        .unwrap()
                })
                .collect();
            Rational::sum(&parts)
        })
        .collect()
}

#[test]
fn every_epoch_costs_at_most_epsilon_counted_from_the_reads() {
    // A replaced point at every epoch up to 300 (super-blocks 0, 1 and the
    // start of 2): the measurements that hold it, as the releases read them,
    // sum to at most ε, and to exactly ε when all its k + 1 blocks have been
    // read (every epoch of super-block 0; an epoch of super-block 1 that is
    // not the last of its run of 16, whose single block is merged before any
    // release reads it).
    let e = eps(64, 1);
    let spent = epsilon_spent_per_epoch(&e, 300);
    for (i, x) in spent.iter().enumerate() {
        let epoch = i as u64 + 1;
        assert!(*x <= e, "epoch {epoch}: {x} > {e}");
        let complete = epoch < 16 || (epoch < 256 && epoch % 16 != 15);
        if complete {
            assert_eq!(*x, e, "epoch {epoch}");
        }
    }
    // The split itself (the formula the code calls) also sums to ε.
    for k in 0..40 {
        let per = block_epsilon(&e, k).unwrap();
        let parts: Vec<Rational> = (0..=k).map(|_| per.clone()).collect();
        assert_eq!(Rational::sum(&parts), e);
    }
}

#[test]
#[cfg(feature = "planted-bugs")]
fn planted_block_bugs_are_caught_by_the_count() {
    // With a point in k + 2 blocks, or noise redrawn at each release, the
    // count from the reads passes ε (the planted bugs are on this thread only).
    use crate::planted::{set_epochs_bug, EpochsBug};
    let e = eps(64, 1);
    for bug in [EpochsBug::ExtraBlock, EpochsBug::RedrawEachRelease] {
        set_epochs_bug(bug);
        let spent = epsilon_spent_per_epoch(&e, 60);
        set_epochs_bug(EpochsBug::None);
        let over = spent.iter().filter(|x| **x > e).count();
        assert!(over > 0, "{bug:?} not caught");
    }
}

#[test]
fn depth_rule_is_the_largest_level_within_the_bound() {
    let e = eps(1, 1);
    for (k, n) in [(0u32, 10u64), (0, 1000), (3, 100_000), (6, 1 << 20)] {
        let l = block_depth(&e, k, n);
        let ok = |l: u32| {
            (1u128 << l) * u128::from(l) * 2 * u128::from(k + 1)
                <= u128::from(DEPTH_FACTOR) * u128::from(n)
        };
        if l > 0 {
            assert!(ok(l));
        }
        assert!(!ok(l + 1));
    }
    assert_eq!(block_depth(&e, 0, 0), 0);
}

/// The blocks a release at epoch `e` should see: from epoch 1 on, the longest aligned
/// run of `b^h ≤ b^k` epochs (`k` the super-block) that ends by `e`.
fn reference_blocks(e: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut p = 1u64;
    while p <= e {
        let k = super_block(p);
        let mut len = BRANCHING.pow(k);
        while p % len != 0 || p + len - 1 > e {
            len /= BRANCHING;
        }
        out.push((p, len));
        p += len;
    }
    out
}

#[test]
fn blocks_form_the_base_b_decomposition_of_each_super_block() {
    let mut s = seeded(2, eps(1, 1), 1);
    let pts = points(4, 2, 2);
    let last = BRANCHING * BRANCHING + 3 * BRANCHING + 5;
    for epoch in 1..=last {
        s.update(&pts).unwrap();
        s.release(Some(1)).unwrap();
        let got: Vec<(u64, u64)> = s.blocks.iter().map(|b| (b.first, b.len)).collect();
        assert_eq!(got, reference_blocks(epoch), "epoch {epoch}");
        for b in &s.blocks {
            assert_eq!(super_block(b.first), b.k);
            assert_eq!(b.paths.len() as u64, 4 * b.len);
        }
    }
    // A release without new points closes no epoch.
    s.release(None).unwrap();
    assert_eq!(s.epochs(), last);
    // The state round-trips with its block layout.
    let back = EpochSynthesizer::from_bytes(&s.to_bytes()).unwrap();
    assert_eq!(back.n_blocks(), s.n_blocks());
}

#[test]
fn release_has_t_points_in_the_cube_and_repeats_between_epochs() {
    let mut s = seeded(2, eps(1, 1), 3);
    s.update(&points(5000, 2, 4)).unwrap();
    let a = s.release_tree().unwrap();
    let b = s.release_tree().unwrap();
    assert_eq!(a, b, "the noise of a block is fixed");
    let (_, _, counts) = a.cells();
    assert_eq!(counts.iter().sum::<f64>(), 5000.0);
    assert!(counts.iter().all(|&c| c >= 0.0 && c.fract() == 0.0));
    let out = s.release(None).unwrap();
    assert_eq!(out.len(), 5000 * 2);
    assert!(out.iter().all(|x| (0.0..=1.0).contains(x)));
    assert_eq!(s.release(Some(7)).unwrap().len(), 14);
}

/// The noise of every cell of levels 1..=2 of every live block (test access).
fn block_noise(s: &EpochSynthesizer) -> Vec<(u64, u64, Vec<i64>)> {
    s.blocks
        .iter()
        .filter(|b| b.depth >= 2)
        .map(|b| {
            let noise = (1..=2u32)
                .flat_map(|l| (0..1u64 << l).map(move |th| (l, th)))
                .map(|(l, th)| b.noise(l, th, false).unwrap())
                .collect();
            (b.first, b.len, noise)
        })
        .collect()
}

#[test]
fn checkpoint_loads_give_one_release_for_the_same_data() {
    // The review's scenario: a checkpoint in an open epoch (epoch 21 of
    // super-block 1), loaded 200 times, each copy fed the same later epochs up
    // to epoch 31, whose close merges epochs 16..=31 into one block. Every
    // copy gives the same releases, byte for byte (the open epoch's block, the
    // merged block and the sampled points).
    let mut s = EpochSynthesizer::new(&eps(4, 1), 1, Rng::from_os().unwrap()).unwrap();
    for e in 0..20u64 {
        s.update(&points(40, 1, e)).unwrap();
        s.release_tree().unwrap();
    }
    s.update(&points(40, 1, 20)).unwrap();
    let bytes = s.to_bytes();
    let continue_from = |data_seed: u64| {
        let mut c = EpochSynthesizer::from_bytes(&bytes).unwrap();
        let first = c.release(None).unwrap();
        for e in 21..31u64 {
            c.update(&points(40, 1, e + data_seed)).unwrap();
            c.release_tree().unwrap();
        }
        assert_eq!(c.epochs(), 31);
        assert!(c.blocks.iter().any(|b| b.first == 16 && b.len == 16));
        (first, c.release(Some(50)).unwrap(), block_noise(&c), c)
    };
    let (first, last, noise, _) = continue_from(0);
    let mut distinct = std::collections::HashSet::new();
    for _ in 0..200 {
        let (f, l, n, _) = continue_from(0);
        assert_eq!(n, noise);
        distinct.insert((
            f.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
            l.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        ));
    }
    assert_eq!(distinct.len(), 1);
    assert!(distinct.contains(&(
        first.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
        last.iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
    )));
    // Other data after the checkpoint: the blocks over epochs 1..=15 are the
    // saved ones (same noise); the merged block over 16..=31 has other points,
    // hence an independent key: its noise differs in most cells, so the
    // difference of the two continuations is not the difference of the data.
    let (_, _, other, c) = continue_from(1000);
    assert_eq!(other.len(), noise.len());
    for ((f, l, a), (g, m, b)) in noise.iter().zip(&other) {
        assert_eq!((f, l), (g, m));
        let same = a.iter().zip(b).filter(|(x, y)| x == y).count();
        if *f >= 16 {
            assert!(same < a.len(), "block {f}+{l}: {same} of {} equal", a.len());
        } else {
            assert_eq!(a, b);
        }
    }
    assert_eq!(c.time(), s.time() + 10 * 40);
}

#[test]
fn a_version_1_checkpoint_still_loads_and_is_tied_to_its_block_keys() {
    let mut s = EpochSynthesizer::new(&eps(2, 1), 2, Rng::from_os().unwrap()).unwrap();
    s.update(&points(500, 2, 1)).unwrap();
    s.release_tree().unwrap();
    s.update(&points(500, 2, 2)).unwrap();
    // Version 1: the same payload without the 32-byte master key after the
    // generator flag (an OS-seeded generator writes one byte).
    let payload = state::decode(&s.to_bytes(), Kind::EpochSynthesizer)
        .unwrap()
        .to_vec();
    let head = state_header_len(&payload);
    let mut v1 = payload[..head].to_vec();
    v1.extend_from_slice(&payload[head + 32..]);
    let old = state::encode_version(Kind::EpochSynthesizer, 1, &v1);
    let mut a = EpochSynthesizer::from_bytes(&old).unwrap();
    let mut b = EpochSynthesizer::from_bytes(&old).unwrap();
    assert_eq!(a.time(), 1000);
    assert_eq!(a.release_tree().unwrap(), b.release_tree().unwrap());
    // Saved again, it is a version-2 checkpoint.
    let again = a.to_bytes();
    assert_eq!(
        state::decode_versioned(&again, Kind::EpochSynthesizer)
            .unwrap()
            .0,
        2
    );
}

/// Bytes of the payload up to the master key: ε, dim, time, epochs, the
/// generator flag of an OS-seeded generator.
fn state_header_len(payload: &[u8]) -> usize {
    let mut r = Reader::new(payload);
    state::read_rational(&mut r).unwrap();
    for _ in 0..3 {
        r.u64().unwrap();
    }
    assert_eq!(r.u8().unwrap(), 0);
    payload.len() - r.remaining()
}

#[test]
fn seeded_run_resumes_exactly_and_batching_does_not_matter() {
    let pts = points(4000, 3, 7);
    let mut a = seeded(3, eps(2, 1), 9);
    a.update(&pts[..3000]).unwrap();
    a.update(&pts[3000..]).unwrap();
    let mut b = seeded(3, eps(2, 1), 9);
    b.update(&pts[..6000]).unwrap();
    let mut b = EpochSynthesizer::from_bytes(&b.to_bytes()).unwrap();
    b.update(&pts[6000..]).unwrap();
    assert_eq!(a.release(None).unwrap(), b.release(None).unwrap());
    assert_eq!(a.memory_bytes(), b.memory_bytes());
}

#[test]
fn bad_input_changes_nothing() {
    let mut s = seeded(2, eps(1, 1), 1);
    s.update(&points(100, 2, 1)).unwrap();
    let before = s.to_bytes();
    assert!(s.update(&[0.5, 1.5]).is_err());
    assert!(s.update(&[0.5, f64::NAN]).is_err());
    assert!(s.update(&[0.5]).is_err());
    assert_eq!(s.to_bytes(), before);
    assert!(EpochSynthesizer::new(&Rational::zero(), 2, Rng::seed_from_u64(1)).is_err());
    assert!(EpochSynthesizer::new(&eps(1, 1), 0, Rng::seed_from_u64(1)).is_err());
    let mut empty = seeded(2, eps(1, 1), 1);
    assert!(empty.release(Some(3)).is_err());
    assert_eq!(empty.release(None).unwrap().len(), 0);
}

#[test]
fn memory_is_a_public_formula() {
    let mut a = seeded(2, eps(1, 1), 1);
    let mut b = seeded(2, eps(1, 1), 1);
    a.update(&points(1000, 2, 1)).unwrap();
    b.update(&vec![0.25; 2000]).unwrap();
    assert_eq!(a.memory_bytes(), b.memory_bytes());
    a.release(Some(1)).unwrap();
    b.release(Some(1)).unwrap();
    assert_eq!(a.memory_bytes(), b.memory_bytes());
}

#[test]
fn corrupt_states_are_refused() {
    let mut s = seeded(2, eps(1, 1), 1);
    s.update(&points(100, 2, 1)).unwrap();
    s.release(Some(1)).unwrap();
    let bytes = s.to_bytes();
    for cut in [0, 10, bytes.len() / 2, bytes.len() - 1] {
        assert!(EpochSynthesizer::from_bytes(&bytes[..cut]).is_err());
    }
}

#[test]
fn concentrated_stream_is_placed_where_it_is() {
    // All points in [0, 1/8)^2: the release puts almost all its mass there.
    let mut s = seeded(2, eps(1, 1), 11);
    let pts: Vec<f64> = points(20_000, 2, 12).iter().map(|x| x / 8.0).collect();
    s.update(&pts).unwrap();
    let out = s.release(None).unwrap();
    let inside = out
        .chunks_exact(2)
        .filter(|p| p[0] < 0.125 && p[1] < 0.125)
        .count();
    assert!(inside as f64 > 0.97 * 20_000.0, "{inside}");
}

#[test]
fn mutated_states_are_refused_or_decoded_without_panic() {
    let mut s = seeded(2, eps(1, 1), 5);
    for i in 0..20 {
        s.update(&points(7, 2, i)).unwrap();
        s.release(Some(1)).unwrap();
    }
    s.update(&points(3, 2, 99)).unwrap();
    let bytes = s.to_bytes();
    let header = 20;
    let payload_end = bytes.len() - 4;
    let mut rng = Rng::seed_from_u64(6);
    for _ in 0..2000 {
        let mut bad = bytes.clone();
        let at = header + rng.below_u64((payload_end - header) as u64) as usize;
        bad[at] ^= 1 << rng.below_u64(8);
        // Refresh the checksum so the decoder reaches the payload checks.
        let payload = bad[header..payload_end].to_vec();
        let fixed = state::encode(Kind::EpochSynthesizer, &payload);
        if let Ok(mut d) = EpochSynthesizer::from_bytes(&fixed) {
            // A state that decodes is usable.
            d.release(Some(2)).unwrap();
        }
    }
}

/// `(paths, counts)` of `pts` at level 63, one entry per distinct path, in
/// decreasing path order (any order is allowed).
fn counted(pts: &[f64], dim: usize) -> (Vec<u64>, Vec<u64>) {
    let mut paths = vec![0u64; pts.len() / dim];
    encode_points(pts, dim, PATH_BITS, &mut paths).unwrap();
    let mut map = std::collections::BTreeMap::new();
    for p in paths {
        *map.entry(p).or_insert(0u64) += 1;
    }
    map.into_iter().rev().unzip()
}

#[test]
fn counts_of_finest_cells_equal_the_points_byte_for_byte() {
    // Repeated points (a coarse grid) and distinct ones, over several epochs.
    let mut pts = points(3000, 2, 11);
    for v in pts.iter_mut().take(2000) {
        *v = (*v * 8.0).floor() / 8.0;
    }
    let mut a = seeded(2, eps(1, 1), 4);
    let mut b = seeded(2, eps(1, 1), 4);
    for (i, part) in [&pts[..1000], &pts[1000..4400], &pts[4400..]]
        .into_iter()
        .enumerate()
    {
        a.update(part).unwrap();
        // Two calls per epoch, one of them with a zero count and a repeated path.
        let (mut paths, mut counts) = counted(part, 2);
        let half = paths.len() / 2;
        b.update_counts(&paths[half..], &counts[half..]).unwrap();
        paths.truncate(half);
        counts.truncate(half);
        paths.push(paths[0]);
        counts.push(0);
        b.update_counts(&paths, &counts).unwrap();
        assert_eq!(a.time(), b.time());
        assert_eq!(a.memory_bytes(), b.memory_bytes());
        assert_eq!(a.to_bytes(), b.to_bytes(), "open epoch {i}");
        assert_eq!(a.release(None).unwrap(), b.release(None).unwrap());
        assert_eq!(a.to_bytes(), b.to_bytes(), "after release {i}");
    }
    assert_eq!(a.release(Some(50)).unwrap(), b.release(Some(50)).unwrap());
}

#[test]
fn counts_all_one_and_counts_summing_to_the_length_equal_the_points() {
    // Distinct points (every count 1: the paths as they are), then counts [0, 2]
    // (their sum is their length, yet not every count is 1).
    let pts = points(500, 2, 5);
    let (paths, counts) = counted(&pts, 2);
    assert!(counts.iter().all(|&c| c == 1), "distinct points");
    let pair = &pts[14..18];
    let (q, _) = counted(pair, 2);
    let mut a = seeded(2, eps(1, 1), 2);
    let mut b = seeded(2, eps(1, 1), 2);
    a.update(&pts).unwrap();
    a.update(&[pair, pair].concat()).unwrap();
    b.update_counts(&paths, &counts).unwrap();
    b.update_counts(&q, &[0, 2]).unwrap();
    b.update_counts(&q[..1], &[2]).unwrap();
    assert_eq!(a.time(), b.time());
    assert_eq!(a.to_bytes(), b.to_bytes());
    assert_eq!(a.release(None).unwrap(), b.release(None).unwrap());
}

#[test]
fn bad_counts_change_nothing() {
    let mut s = seeded(2, eps(1, 1), 1);
    s.update(&points(10, 2, 1)).unwrap();
    let before = s.to_bytes();
    assert!(s.update_counts(&[1, 2], &[1]).is_err());
    assert!(s.update_counts(&[1, 1 << 63], &[1, 1]).is_err());
    assert!(s.update_counts(&[1, 2], &[u64::MAX, 1]).is_err());
    assert!(s.update_counts(&[1], &[MAX_TIME]).is_err());
    assert_eq!(s.to_bytes(), before);
    s.update_counts(&[], &[]).unwrap();
    assert_eq!(s.to_bytes(), before);
}

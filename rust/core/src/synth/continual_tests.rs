use super::*;

fn eps(p: u32, q: u32) -> Rational {
    Rational::new(p, q).unwrap()
}

fn uniform_points(rng: &mut Rng, n: usize, dim: usize) -> Vec<f64> {
    (0..n * dim)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

/// Clustered points (a corner of the square), so releases are not uniform.
fn corner_points(rng: &mut Rng, n: usize) -> Vec<f64> {
    (0..2 * n)
        .map(|_| 0.25 * (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

fn synth(r: u64, seed: u64) -> ContinualPrivHP {
    ContinualPrivHP::new(&eps(1, 1), 2, 1 << 20, 100_000, r, Rng::seed_from_u64(seed)).unwrap()
}

#[test]
fn the_split_sums_to_epsilon() {
    for (r, l) in [
        (1, 1),
        (2, 2),
        (3, 2),
        (4, 3),
        (7, 3),
        (8, 4),
        (100, 7),
        (1 << 32, 33),
    ] {
        assert_eq!(continual_levels(r), l, "R = {r}");
        for e in [eps(1, 1), eps(1, 3), eps(7, 2)] {
            let b = continual_block_epsilon(&e, l).unwrap();
            // Replacement costs 2·ε_b per block, a point is in at most L blocks.
            let total = b.mul(&Rational::new(2 * u64::from(l), 1u32).unwrap());
            assert_eq!(total, e, "R = {r}");
        }
    }
    assert!(continual_block_epsilon(&eps(1, 1), 0).is_err());
    let s = synth(100, 1);
    assert_eq!(
        s.config().epsilon,
        continual_block_epsilon(&eps(1, 1), 7).unwrap()
    );
}

#[test]
fn blocks_follow_the_binary_decomposition_of_the_epoch_count() {
    let mut s = synth(20, 2);
    let mut rng = Rng::seed_from_u64(3);
    let sizes: Vec<u64> = (1..=20).map(|e| 10 * e).collect();
    for (i, &n) in sizes.iter().enumerate() {
        let e = i as u64 + 1;
        s.update(&uniform_points(&mut rng, n as usize, 2)).unwrap();
        let out = s.release(None).unwrap();
        assert_eq!(out.len() as u64, 2 * s.time());
        assert_eq!(s.epochs(), e);
        assert_eq!(s.n_blocks(), e.count_ones() as usize);
        for j in 0..s.levels() as usize {
            let live = e >> j & 1 == 1;
            assert_eq!(s.gens[j].is_some(), live, "e = {e}, j = {j}");
            // Block j covers the 2^j epochs ending at e with its lower bits cleared.
            let expected: u64 = if live {
                let end = (e >> j) << j;
                (end - (1 << j) + 1..=end)
                    .map(|k| sizes[k as usize - 1])
                    .sum()
            } else {
                0
            };
            assert_eq!(s.alphas[j].points_seen(), expected, "e = {e}, j = {j}");
        }
        assert_eq!(s.current.points_seen(), 0);
    }
    // A release with no new points closes no epoch and changes no generator.
    let before = s.gens.clone();
    s.release(Some(5)).unwrap();
    assert_eq!(s.epochs(), 20);
    assert_eq!(s.gens, before);
}

#[test]
fn a_merged_block_equals_one_summary_of_its_points() {
    let mut s = synth(8, 4);
    let mut whole = s.current.clone();
    let mut rng = Rng::seed_from_u64(5);
    for n in [100, 250, 30, 400] {
        let pts = uniform_points(&mut rng, n, 2);
        s.update(&pts).unwrap();
        whole.update(&pts).unwrap();
        s.release(None).unwrap();
    }
    // Epoch 4 = 0b100: one block of 4 epochs.
    assert_eq!(s.alphas[2].to_bytes().unwrap(), whole.to_bytes().unwrap());
    for j in [0, 1, 3] {
        assert_eq!(s.alphas[j].points_seen(), 0);
        assert!(s.gens[j].is_none());
    }
}

#[test]
fn a_release_past_the_cap_is_refused_and_changes_nothing() {
    let mut s = synth(3, 6);
    let mut rng = Rng::seed_from_u64(7);
    for _ in 0..3 {
        s.update(&uniform_points(&mut rng, 50, 2)).unwrap();
        s.release(None).unwrap();
    }
    // Releases without new points are free.
    assert_eq!(s.release(None).unwrap().len(), 300);
    s.update(&uniform_points(&mut rng, 10, 2)).unwrap();
    let bytes = s.to_bytes().unwrap();
    for size in [None, Some(4)] {
        let err = s.release(size).unwrap_err().to_string();
        assert!(err.contains("max_releases = 3"), "{err}");
        let err = s.cells().unwrap_err().to_string();
        assert!(err.contains("max_releases = 3"), "{err}");
    }
    assert_eq!(s.to_bytes().unwrap(), bytes);
    assert_eq!(s.epochs(), 3);
    assert_eq!(s.time(), 160);
}

#[test]
fn releases_have_the_asked_sizes_and_follow_the_data() {
    let mut s = synth(10, 8);
    let mut rng = Rng::seed_from_u64(9);
    assert!(s.release(None).unwrap().is_empty());
    assert!(s.release(Some(3)).is_err());
    for _ in 0..5 {
        s.update(&corner_points(&mut rng, 4000)).unwrap();
        let out = s.release(None).unwrap();
        assert_eq!(out.len() as u64, 2 * s.time());
        assert!(out.iter().all(|x| (0.0..=1.0).contains(x)));
    }
    let drawn = s.release(Some(10_000)).unwrap();
    assert_eq!(drawn.len(), 20_000);
    // At ε = 1 and 20,000 points, most synthetic points land near the corner.
    let near = drawn.chunks(2).filter(|p| p[0] < 0.3 && p[1] < 0.3).count();
    assert!(near > 8_000, "{near}");
    let (lo, hi, counts) = s.cells().unwrap();
    assert_eq!(lo.len(), hi.len());
    assert_eq!(lo.len(), 2 * counts.len());
    assert_eq!(counts.iter().sum::<u64>(), s.time());
}

#[test]
fn memory_is_fixed_and_within_the_budget() {
    for (budget, r) in [(1usize << 20, 100u64), (256 << 10, 10), (8 << 20, 1000)] {
        let mut s =
            ContinualPrivHP::new(&eps(1, 1), 2, budget, 1_000_000, r, Rng::seed_from_u64(10))
                .unwrap();
        let reported = s.memory_bytes();
        assert!(reported <= budget, "{reported} > {budget}");
        // Every summary the object holds is one unit's footprint.
        assert_eq!(s.current.memory_bytes(), s.config().footprint());
        let mut rng = Rng::seed_from_u64(11);
        for _ in 0..r.min(12) {
            s.update(&uniform_points(&mut rng, 2000, 2)).unwrap();
            s.release(Some(10)).unwrap();
            assert_eq!(s.memory_bytes(), reported);
            let held: usize = s.alphas.iter().map(PrivHP::memory_bytes).sum::<usize>()
                + s.current.memory_bytes()
                + s.gens
                    .iter()
                    .flatten()
                    .map(TreeGenerator::memory_bytes)
                    .sum::<usize>();
            assert!(held <= reported);
        }
        for g in s.gens.iter().flatten() {
            assert!(g.n_nodes() <= s.config().max_generator_nodes());
        }
    }
    let err = ContinualPrivHP::new(&eps(1, 1), 2, 1000, 1000, 10, Rng::seed_from_u64(1))
        .unwrap_err()
        .to_string();
    assert!(err.contains("memory_bytes = 1000 is too small"), "{err}");
}

#[test]
fn bad_parameters_are_refused() {
    let mk = |e: Rational, dim, mem, n, r| {
        ContinualPrivHP::new(&e, dim, mem, n, r, Rng::seed_from_u64(1))
            .unwrap_err()
            .to_string()
    };
    assert!(mk(Rational::zero(), 2, 1 << 20, 10, 10).contains("epsilon"));
    assert!(mk(eps(1, 1), 0, 1 << 20, 10, 10).contains("dim"));
    assert!(mk(eps(1, 1), 2, 1 << 20, 0, 10).contains("expected_n"));
    assert!(mk(eps(1, 1), 2, 1 << 20, 10, 0).contains("max_releases"));
    assert!(mk(eps(1, 1), 2, 1 << 20, 10, (1 << 32) + 1).contains("max_releases"));
    let mut s = synth(4, 1);
    assert!(s.update(&[0.1, 0.2, 0.3]).is_err());
    assert!(s.update(&[0.1, 1.5]).is_err());
    assert!(s.update(&[0.1, f64::NAN]).is_err());
    assert_eq!(s.time(), 0);
}

#[test]
fn checkpoints_resume_exactly_and_restore_the_same_generators() {
    let mut rng = Rng::seed_from_u64(12);
    let batches: Vec<Vec<f64>> = (0..7).map(|_| corner_points(&mut rng, 700)).collect();
    let mut straight = synth(16, 13);
    let mut outs = Vec::new();
    for b in &batches {
        straight.update(b).unwrap();
        outs.push(straight.release(Some(50)).unwrap());
    }
    // Checkpoint after 3 releases and 1 pending batch, resume twice.
    let mut s = synth(16, 13);
    for b in &batches[..3] {
        s.update(b).unwrap();
        s.release(Some(50)).unwrap();
    }
    s.update(&batches[3]).unwrap();
    let bytes = s.to_bytes().unwrap();
    assert_eq!(state::peek_kind(&bytes).unwrap(), Kind::ContinualPrivHP);
    for _ in 0..2 {
        let mut back = ContinualPrivHP::from_bytes(&bytes).unwrap();
        assert_eq!(back.to_bytes().unwrap(), bytes);
        assert_eq!(back.memory_bytes(), s.memory_bytes());
        assert_eq!(back.gens, s.gens);
        assert_eq!(back.release(Some(50)).unwrap(), outs[3]);
        for (b, out) in batches[4..].iter().zip(&outs[4..]) {
            back.update(b).unwrap();
            assert_eq!(&back.release(Some(50)).unwrap(), out);
        }
    }
    // An OS-seeded checkpoint taken between releases restores the same noisy
    // generators at every load.
    let mut os =
        ContinualPrivHP::new(&eps(1, 1), 2, 1 << 20, 10_000, 8, Rng::from_os().unwrap()).unwrap();
    for b in &batches[..3] {
        os.update(b).unwrap();
        os.release(None).unwrap();
    }
    let bytes = os.to_bytes().unwrap();
    let a = ContinualPrivHP::from_bytes(&bytes).unwrap();
    let b = ContinualPrivHP::from_bytes(&bytes).unwrap();
    assert!(!a.is_seeded());
    assert_eq!(a.gens, os.gens);
    assert_eq!(b.gens, os.gens);
    let (mut a, mut b) = (a, b);
    assert_eq!(a.cells().unwrap(), b.cells().unwrap());
}

#[test]
fn checkpoint_loads_give_one_release_for_the_same_data() {
    // A checkpoint after 3 releases with an open epoch, loaded 200 times; each
    // copy is fed the same batches up to epoch 8, whose close merges epochs
    // 1..=8 into one released block: one release, byte for byte. Other data
    // after the checkpoint: the merged block has other points, hence other
    // noise (its generator differs), while the blocks released before the
    // checkpoint stay the same.
    let mut rng = Rng::seed_from_u64(21);
    let batches: Vec<Vec<f64>> = (0..8).map(|_| corner_points(&mut rng, 300)).collect();
    let mut os =
        ContinualPrivHP::new(&eps(1, 1), 2, 1 << 20, 10_000, 8, Rng::from_os().unwrap()).unwrap();
    for b in &batches[..3] {
        os.update(b).unwrap();
        os.release(None).unwrap();
    }
    os.update(&batches[3]).unwrap();
    let bytes = os.to_bytes().unwrap();
    let run = |shift: f64| {
        let mut c = ContinualPrivHP::from_bytes(&bytes).unwrap();
        let mut outs = vec![c.release(Some(40)).unwrap()];
        for b in &batches[4..] {
            let b: Vec<f64> = b.iter().map(|x| (x + shift).min(1.0)).collect();
            c.update(&b).unwrap();
            outs.push(c.release(None).unwrap());
        }
        assert_eq!(c.epochs(), 8);
        let bits: Vec<Vec<u64>> = outs
            .iter()
            .map(|o| o.iter().map(|x| x.to_bits()).collect())
            .collect();
        (bits, c.gens.clone())
    };
    let first = run(0.0);
    let mut distinct = std::collections::HashSet::new();
    for _ in 0..200 {
        let r = run(0.0);
        assert_eq!(r.1, first.1);
        distinct.insert(r.0);
    }
    assert_eq!(distinct.len(), 1);
    assert!(distinct.contains(&first.0));
    let other = run(0.5);
    assert!(first.1[3].is_some() && other.1[3].is_some());
    assert_ne!(first.1[3], other.1[3]);
}

#[test]
fn a_version_1_checkpoint_still_loads() {
    let mut rng = Rng::seed_from_u64(22);
    let mut s = synth(8, 23);
    s.update(&corner_points(&mut rng, 200)).unwrap();
    s.release(None).unwrap();
    let bytes = s.to_bytes().unwrap();
    // Version 1: no master key after the (seeded) generator state.
    let payload = state::decode(&bytes, Kind::ContinualPrivHP).unwrap();
    let mut r = Reader::new(payload);
    state::read_rational(&mut r).unwrap();
    for _ in 0..6 {
        r.u64().unwrap();
    }
    state::read_rng(&mut r).unwrap();
    let head = payload.len() - r.remaining();
    let mut v1 = payload[..head].to_vec();
    v1.extend_from_slice(&payload[head + 32..]);
    let old = state::encode_version(Kind::ContinualPrivHP, 1, &v1);
    let mut back = ContinualPrivHP::from_bytes(&old).unwrap();
    assert_eq!(back.gens, s.gens);
    back.update(&corner_points(&mut rng, 200)).unwrap();
    assert_eq!(back.release(None).unwrap().len(), 2 * 400);
}

#[test]
fn corrupt_checkpoints_are_refused() {
    let mut s =
        ContinualPrivHP::new(&eps(1, 1), 1, 64 << 10, 1000, 4, Rng::seed_from_u64(14)).unwrap();
    let mut rng = Rng::seed_from_u64(15);
    s.update(&uniform_points(&mut rng, 30, 1)).unwrap();
    s.release(None).unwrap();
    s.update(&uniform_points(&mut rng, 20, 1)).unwrap();
    let bytes = s.to_bytes().unwrap();
    let step = (bytes.len() / 400).max(1);
    for i in (0..bytes.len()).step_by(step) {
        assert!(ContinualPrivHP::from_bytes(&bytes[..i]).is_err(), "{i}");
        let mut bad = bytes.clone();
        bad[i] ^= 0x10;
        let err = ContinualPrivHP::from_bytes(&bad).unwrap_err().to_string();
        assert!(err.starts_with("invalid dpstream state"), "{i}: {err}");
    }
    // Valid checksum, broken invariant: a block that does not match the epochs.
    let payload = state::decode(&bytes, Kind::ContinualPrivHP)
        .unwrap()
        .to_vec();
    let mut edited = payload.clone();
    // ε (1/1): 2 × (8 + 1) bytes, then dim, memory, expected_n, R, time, epochs.
    let at = 18 + 5 * 8;
    edited[at..at + 8].copy_from_slice(&2u64.to_le_bytes());
    let err = ContinualPrivHP::from_bytes(&state::encode(Kind::ContinualPrivHP, &edited))
        .unwrap_err()
        .to_string();
    assert!(err.contains("does not match 2 epochs"), "{err}");
    let mut edited = payload;
    let at = 18 + 4 * 8;
    edited[at..at + 8].copy_from_slice(&49u64.to_le_bytes());
    let err = ContinualPrivHP::from_bytes(&state::encode(Kind::ContinualPrivHP, &edited))
        .unwrap_err()
        .to_string();
    assert!(err.contains("count 50 points, not 49"), "{err}");
}

#[test]
fn random_edits_under_a_valid_checksum_never_panic() {
    let mut s =
        ContinualPrivHP::new(&eps(1, 1), 1, 64 << 10, 1000, 4, Rng::seed_from_u64(16)).unwrap();
    let mut rng = Rng::seed_from_u64(17);
    for n in [30, 20, 10] {
        s.update(&uniform_points(&mut rng, n, 1)).unwrap();
        s.release(None).unwrap();
    }
    s.update(&uniform_points(&mut rng, 5, 1)).unwrap();
    let payload = state::decode(&s.to_bytes().unwrap(), Kind::ContinualPrivHP)
        .unwrap()
        .to_vec();
    for _ in 0..300 {
        let mut edited = payload.clone();
        for _ in 0..=rng.below_u64(3) {
            let at = rng.below_u64(edited.len() as u64) as usize;
            edited[at] = rng.next_u64() as u8;
        }
        if let Ok(mut back) =
            ContinualPrivHP::from_bytes(&state::encode(Kind::ContinualPrivHP, &edited))
        {
            // A decoded state is usable: it releases (or refuses past R) without panicking.
            let _ = back.release(Some(3));
            let _ = back.release(None);
        }
    }
}

#[test]
fn merged_partition_summaries_equal_the_points_byte_for_byte() {
    let mut rng = Rng::seed_from_u64(3);
    let mut a = synth(8, 5);
    let mut b = synth(8, 5);
    for epoch in 0..3 {
        let pts = corner_points(&mut rng, 2500 + 100 * epoch);
        a.update(&pts).unwrap();
        // Three partitions counted by copies of the template, merged, then fed.
        let mut merged = b.template().unwrap();
        for part in pts.chunks(2 * 900) {
            let mut s = b.template().unwrap();
            s.update(part).unwrap();
            merged.merge(&s).unwrap();
        }
        b.merge_summary(&merged).unwrap();
        assert_eq!(a.time(), b.time());
        assert_eq!(
            a.to_bytes().unwrap(),
            b.to_bytes().unwrap(),
            "open epoch {epoch}"
        );
        assert_eq!(a.release(None).unwrap(), b.release(None).unwrap());
        assert_eq!(a.to_bytes().unwrap(), b.to_bytes().unwrap());
    }
    assert_eq!(a.memory_bytes(), b.memory_bytes());
}

#[test]
fn foreign_or_released_summaries_change_nothing() {
    let mut a = synth(4, 1);
    a.update(&[0.5, 0.5]).unwrap();
    let before = a.to_bytes().unwrap();
    let other = synth(4, 2).template().unwrap(); // other hash keys
    assert!(a.merge_summary(&other).is_err());
    let mut released = a.template().unwrap();
    released.update(&[0.1, 0.2]).unwrap();
    released.release(&mut Rng::seed_from_u64(1)).unwrap();
    assert!(a.merge_summary(&released).is_err());
    assert_eq!(a.to_bytes().unwrap(), before);
    // The template is empty and leaves the object as it was.
    assert_eq!(a.template().unwrap().points_seen(), 0);
    a.merge_summary(&a.template().unwrap()).unwrap();
    assert_eq!(a.to_bytes().unwrap(), before);
}

/// One released block: its epochs, key and the level budgets its PrivHP used.
type Released = (u64, u64, [u8; 32], Vec<Rational>);

thread_local! {
    static RELEASES: std::cell::RefCell<Option<Vec<Released>>> =
        const { std::cell::RefCell::new(None) };
}

/// Called by every block release (test builds only): recorded while tracing.
pub(super) fn trace_release(first: u64, len: u64, key: [u8; 32], sigmas: &[Rational]) {
    RELEASES.with(|t| {
        if let Some(v) = t.borrow_mut().as_mut() {
            v.push((first, len, key, sigmas.to_vec()));
        }
    });
}

#[test]
fn every_epoch_costs_at_most_epsilon_counted_from_the_releases() {
    // R = 300 epochs of one point, a release after each (L = 9 levels). For a
    // replaced point at each epoch, sum over the distinct released blocks that
    // hold it of what replacement costs there (2·Σ σ_l: one count-min bucket
    // +1, another −1 per level, at scale 1/σ_l), from the budgets the releases
    // used, not from the split's formula: at most ε (a point is in at most L
    // released blocks); within 2^-30 of ε for an epoch in L of them (epoch 1).
    let e = eps(1, 1);
    let mut s = ContinualPrivHP::new(&e, 1, 1 << 20, 1000, 300, Rng::seed_from_u64(31)).unwrap();
    assert_eq!(s.levels(), 9);
    RELEASES.with(|t| *t.borrow_mut() = Some(Vec::new()));
    let mut rng = Rng::seed_from_u64(32);
    for _ in 0..300 {
        s.update(&uniform_points(&mut rng, 1, 1)).unwrap();
        s.release(Some(1)).unwrap();
    }
    let releases = RELEASES.with(|t| t.borrow_mut().take()).unwrap();
    assert_eq!(releases.len(), 300);
    let two = Rational::new(2u32, 1u32).unwrap();
    let slack = e.mul(&Rational::new(1u32, 1u64 << 30).unwrap());
    for epoch in 1..=300u64 {
        let mut seen: Vec<[u8; 32]> = Vec::new();
        let mut parts = Vec::new();
        for (first, len, key, sigmas) in &releases {
            if *first <= epoch && epoch < first + len && !seen.contains(key) {
                seen.push(*key);
                parts.push(two.mul(&Rational::sum(sigmas)));
            }
        }
        let total = Rational::sum(&parts);
        assert!(total <= e, "epoch {epoch}: {total} > {e}");
        assert!(parts.len() <= 9, "epoch {epoch}: {} blocks", parts.len());
        // The release closing epoch e' forms the block of its last 2^tz(e') epochs:
        // it holds e iff e' − 2^tz(e') < e ≤ e'.
        let holding = (epoch..=300)
            .filter(|&x| x - (1u64 << x.trailing_zeros()) < epoch)
            .count();
        assert_eq!(parts.len(), holding, "epoch {epoch}");
        if holding == 9 {
            assert!(total.add(&slack) >= e, "epoch {epoch}: {total}");
        }
    }
}

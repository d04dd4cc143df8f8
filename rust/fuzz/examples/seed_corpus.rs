//! Write seed corpora of valid encodings for the state targets:
//! `cargo run --release --example seed_corpus` (from `rust/fuzz`) fills
//! `corpus/<target>/`. Each object is written twice: as a whole file (mode
//! byte 0) and as a bare payload (mode byte 1); see the crate docs.

use dpstream_core::counters::{
    Counter, CounterKind, InhomogeneousSparseCounter, LevelSchedule, SparseCounter,
};
use dpstream_core::sketch::{LinearSketch, SketchKind, SketchRecord};
use dpstream_core::state::{self, Kind};
use dpstream_core::synth::{BudgetRule, OnlineSynthesizer, PrivHP, PrivHPConfig};
use dpstream_core::{Rational, Rng};
use std::path::Path;

fn q(n: u32, d: u32) -> Rational {
    Rational::new(n, d).unwrap()
}

fn write(target: &str, name: &str, kind: Kind, bytes: &[u8]) {
    let dir = Path::new("corpus").join(target);
    std::fs::create_dir_all(&dir).unwrap();
    let mut whole = vec![0u8];
    whole.extend_from_slice(bytes);
    std::fs::write(dir.join(format!("{name}-file")), whole).unwrap();
    let mut payload = vec![1u8];
    payload.extend_from_slice(state::decode(bytes, kind).unwrap());
    std::fs::write(dir.join(format!("{name}-payload")), payload).unwrap();
}

fn points(rng: &mut Rng, n: usize, dim: usize) -> Vec<f64> {
    (0..n * dim)
        .map(|_| (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect()
}

fn main() {
    let mut rng = Rng::seed_from_u64(7);
    // PrivHP summaries and their released generators.
    for (i, (dim, k, depth, rows, sketch)) in [
        (1usize, 2usize, 4u32, 1usize, SketchKind::CountMin),
        (2, 4, 6, 2, SketchKind::Count),
        (3, 1, 3, 3, SketchKind::CountMin),
        (2, 8, 3, 1, SketchKind::Count),
    ]
    .into_iter()
    .enumerate()
    {
        let cfg = PrivHPConfig {
            epsilon: q(1, 1),
            dim,
            k,
            width: 4,
            rows,
            depth,
            sketch,
            budget: if i % 2 == 0 {
                BudgetRule::Optimal
            } else {
                BudgetRule::Uniform
            },
        };
        let mut p = PrivHP::new(cfg, &mut rng).unwrap();
        let pts = points(&mut rng, 20 + 10 * i, dim);
        p.update(&pts).unwrap();
        write(
            "privhp",
            &format!("p{i}"),
            Kind::PrivHP,
            &p.to_bytes().unwrap(),
        );
        let g = p.release(&mut rng).unwrap();
        write(
            "tree_generator",
            &format!("g{i}"),
            Kind::TreeGenerator,
            &g.to_bytes(),
        );
    }
    // Sketches, exact and released.
    for (i, (kind, rows, width)) in [
        (SketchKind::CountMin, 1usize, 4usize),
        (SketchKind::Count, 3, 8),
        (SketchKind::Count, 2, 2),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = LinearSketch::new(kind, rows, width, &mut rng).unwrap();
        s.update_many(&[1, 2, 3, 99], &[5, 1, 7, 2]).unwrap();
        let exact = SketchRecord {
            budget: Some(q(2, 1)),
            spent: q(1, 2),
            ..SketchRecord::exact()
        };
        write("sketch", &format!("s{i}"), Kind::Sketch, &s.to_bytes(&exact).unwrap());
        s.add_noise(&mut rng, &q(1, 1)).unwrap();
        let released = SketchRecord {
            released: true,
            noise_seeded: i % 2 == 0,
            budget: Some(q(1, 1)),
            spent: q(1, 1),
        };
        write("sketch", &format!("s{i}r"), Kind::Sketch, &s.to_bytes(&released).unwrap());
    }
    // Online synthesizers at several times, seeded (they resume exactly).
    for (i, (dim, n, eps)) in [
        (1usize, 5usize, q(1, 1)),
        (2, 9, q(1, 1)),
        (1, 0, q(1, 2)),
        (3, 12, q(2, 1)),
    ]
    .into_iter()
    .enumerate()
    {
        let mut s = OnlineSynthesizer::new(&eps, dim, Rng::seed_from_u64(i as u64)).unwrap();
        s.update(&points(&mut rng, n, dim)).unwrap();
        write(
            "online",
            &format!("o{i}"),
            Kind::OnlineSynthesizer,
            &s.to_bytes().unwrap(),
        );
    }
    // Counters of every kind.
    let kinds = [
        CounterKind::Simple,
        CounterKind::Block { horizon: 20 },
        CounterKind::UnboundedBlock,
        CounterKind::BinaryTree { horizon: 20 },
        CounterKind::Hybrid,
    ];
    for (i, kind) in kinds.into_iter().enumerate() {
        for (dim, steps) in [(1usize, 5u64), (2, 11)] {
            let mut c = Counter::new(kind, &q(1, 2), dim).unwrap();
            for t in 0..steps {
                let row: Vec<i64> = (0..dim).map(|k| ((t + k as u64) % 3) as i64 - 1).collect();
                c.step(&mut rng, &row).unwrap();
            }
            write(
                "counter",
                &format!("c{i}-{dim}"),
                Kind::Counter,
                &c.to_bytes(i % 2 == 0),
            );
        }
    }
    // Sparse counters.
    for (i, (horizon, steps)) in [(50u64, 0u64), (50, 30), (1000, 400)]
        .into_iter()
        .enumerate()
    {
        let mut c = SparseCounter::new(&q(1, 1), horizon).unwrap();
        for t in 0..steps {
            c.step(&mut rng, i64::from(t % 2 == 0)).unwrap();
        }
        write(
            "sparse_counter",
            &format!("sc{i}"),
            Kind::SparseCounter,
            &c.to_bytes(),
        );
    }
    // Inhomogeneous sparse counters, both encodable schedules.
    let schedules = [
        (q(1, 2), 1u32, LevelSchedule::Table(vec![q(1, 1); 8])),
        (
            q(1, 1),
            2,
            LevelSchedule::Online {
                epsilon: q(1, 1),
                dim: 2,
                depth: 2,
            },
        ),
    ];
    for (i, (te, r0, sched)) in schedules.into_iter().enumerate() {
        for steps in [0u64, 3, 40] {
            let mut c = InhomogeneousSparseCounter::new(&te, r0, sched.clone()).unwrap();
            for _ in 0..steps {
                c.step(&mut rng, 1).unwrap();
            }
            write(
                "inhomogeneous_counter",
                &format!("ic{i}-{steps}"),
                Kind::InhomogeneousSparseCounter,
                &c.to_bytes().unwrap(),
            );
        }
    }
    // The header target gets whole files of every kind (without the mode byte).
    for target in ["privhp", "tree_generator", "sketch", "online", "counter"] {
        let dir = Path::new("corpus").join(target);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.to_string_lossy().ends_with("-file") {
                let bytes = std::fs::read(&path).unwrap();
                let out = Path::new("corpus/state_header");
                std::fs::create_dir_all(out).unwrap();
                let name = format!("{target}-{}", path.file_name().unwrap().to_string_lossy());
                std::fs::write(out.join(name), &bytes[1..]).unwrap();
            }
        }
    }
    // Ingestion: a few valid batches of small dimension.
    let out = Path::new("corpus/ingest");
    std::fs::create_dir_all(out).unwrap();
    for (dim, depth, choice, n) in [(1u8, 8u8, 0u8, 10usize), (2, 12, 2, 20), (3, 20, 0x25, 7)] {
        let mut bytes = vec![dim, depth, choice];
        for x in points(&mut rng, n, usize::from(dim)) {
            bytes.extend_from_slice(&x.to_bits().to_le_bytes());
        }
        std::fs::write(out.join(format!("batch-{dim}-{n}")), bytes).unwrap();
    }
    println!("seed corpora written under corpus/");
}

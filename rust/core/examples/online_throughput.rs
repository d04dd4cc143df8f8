//! Time of the online synthesizer: `n` uniform points in `[0,1]^d` with a
//! release every `every` steps (defaults: d = 2, ε = 1, 10^6 steps, 10^4).
//!
//! `cargo run --release -p dpstream-core --example online_throughput -- [n] [every] [d]`

use dpstream_core::synth::OnlineSynthesizer;
use dpstream_core::{Rational, Rng};
use std::time::Instant;

fn main() -> Result<(), dpstream_core::Error> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("integer arguments"))
        .collect();
    let n = args.first().copied().unwrap_or(1_000_000);
    let every = args.get(1).copied().unwrap_or(10_000);
    let dim = args.get(2).copied().unwrap_or(2) as usize;
    let mut data = Rng::seed_from_u64(1);
    let points: Vec<f64> = (0..n as usize * dim)
        .map(|_| (data.next_u64() >> 11) as f64 / (1u64 << 53) as f64)
        .collect();
    let mut s = OnlineSynthesizer::new(&Rational::new(1u32, 1u32)?, dim, Rng::from_os()?)?;
    let (mut t_update, mut t_release) = (0.0, 0.0);
    for chunk in points.chunks(every as usize * dim) {
        let a = Instant::now();
        s.update(chunk)?;
        let b = Instant::now();
        let y = s.release(None)?;
        t_update += (b - a).as_secs_f64();
        t_release += b.elapsed().as_secs_f64();
        assert_eq!(y.len(), s.time() as usize * dim);
    }
    println!(
        "steps {n}, release every {every}: update {t_update:.2} s, releases {t_release:.2} s, \
         total {:.2} s; {} cells, {:.1} MiB",
        t_update + t_release,
        s.n_regions(),
        s.memory_bytes() as f64 / (1 << 20) as f64
    );
    Ok(())
}

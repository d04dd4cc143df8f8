//! Continual-release PrivHP in fixed memory on an edge device, without
//! Python: stream points, release `R` times, print the memory report, and
//! optionally write a checkpoint that Python loads with `dpstream.load`.
//!
//! ```text
//! cargo run --release -p dpstream-core --example continual_edge -- \
//!     --epsilon 1 --dim 2 --memory-bytes 1048576 --points 1000000 --releases 100 [--out state.dpst]
//! ```
//!
//! The stream is generated here (a Gaussian-like cluster at (1/4, 1/4) and
//! uniform background, from `--data-seed`): on a device it would come from a
//! sensor. The releases are evenly spaced (public times, fixed in advance);
//! `--releases` is also the cap `R`. `--expected-n` (default `--points`) is
//! the public guess of the stream length. `--seed N` seeds the noise
//! (reproducible, NOT private). Exit status 2 on bad arguments.

use dpstream_core::synth::ContinualPrivHP;
use dpstream_core::{Rational, Rng};
use std::io::Write;

mod common;

/// Points generated per update.
const BATCH: usize = 4096;

fn main() {
    if let Err(msg) = run() {
        eprintln!("continual_edge: {msg}");
        std::process::exit(2);
    }
}

fn unit(rng: &mut Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

fn run() -> Result<(), String> {
    let opts = common::options()?;
    let num = |k: &str, default: Option<u64>| -> Result<u64, String> {
        match opts.get(k) {
            Some(v) => v
                .parse::<u64>()
                .map_err(|_| format!("--{k} must be a whole number")),
            None => default.ok_or_else(|| format!("--{k} is required")),
        }
    };
    let eps_text = opts.get("epsilon").map_or("1", String::as_str);
    let x: f64 = eps_text
        .parse()
        .map_err(|_| format!("bad --epsilon {eps_text}"))?;
    let epsilon = Rational::from_f64(x, "epsilon").map_err(|e| e.to_string())?;
    let dim = num("dim", Some(2))? as usize;
    let memory = num("memory-bytes", Some(1 << 20))? as usize;
    let points = num("points", Some(1_000_000))?;
    let releases = num("releases", Some(100))?;
    let expected_n = num("expected-n", Some(points))?;
    if releases == 0 || points < releases {
        return Err("need 1 <= --releases <= --points".into());
    }
    let rng = match opts.get("seed") {
        Some(s) => Rng::seed_from_u64(s.parse().map_err(|_| "--seed must be a number")?),
        None => Rng::from_os().map_err(|e| e.to_string())?,
    };
    let mut data_rng = Rng::seed_from_u64(num("data-seed", Some(7))?);
    let mut synth = ContinualPrivHP::new(&epsilon, dim, memory, expected_n, releases, rng)
        .map_err(|e| e.to_string())?;
    let cfg = synth.config();
    println!(
        "continual PrivHP: ε = {epsilon}, d = {dim}, R = {releases}, L = {} levels, \
         ε per block = {}, depth {}, k {}, width {}",
        synth.levels(),
        cfg.epsilon,
        cfg.depth,
        cfg.k,
        cfg.width
    );
    println!(
        "memory: {} bytes reserved of {memory} (fixed at construction)",
        synth.memory_bytes()
    );
    println!("release        t  blocks  memory_bytes  share near (1/4,..) data/synthetic");
    let mut batch = vec![0.0f64; BATCH * dim];
    let (mut fed, mut near_data) = (0u64, 0u64);
    for r in 1..=releases {
        let until = points * r / releases;
        while fed < until {
            let m = BATCH.min((until - fed) as usize);
            for row in batch[..m * dim].chunks_exact_mut(dim) {
                let clustered = data_rng.below_u64(4) != 0;
                for v in row.iter_mut() {
                    *v = if clustered {
                        // Sum of 4 uniforms: a bump of sd ~0.03 around 1/4.
                        let s: f64 = (0..4).map(|_| unit(&mut data_rng)).sum();
                        (0.25 + (s - 2.0) * 0.05).clamp(0.0, 1.0)
                    } else {
                        unit(&mut data_rng)
                    };
                }
                near_data += u64::from(row.iter().all(|&v| (0.15..0.35).contains(&v)));
            }
            synth.update(&batch[..m * dim]).map_err(|e| e.to_string())?;
            fed += m as u64;
        }
        let out = synth.release(Some(10_000)).map_err(|e| e.to_string())?;
        let near_synth = out
            .chunks_exact(dim)
            .filter(|p| p.iter().all(|&v| (0.15..0.35).contains(&v)))
            .count();
        if r == 1 || r == releases || r.is_power_of_two() {
            println!(
                "{r:>7} {:>8} {:>7} {:>13}  {:.3} / {:.3}",
                synth.time(),
                synth.n_blocks(),
                synth.memory_bytes(),
                near_data as f64 / fed as f64,
                near_synth as f64 / 10_000.0
            );
        }
    }
    if let Some(path) = opts.get("out") {
        let bytes = synth.to_bytes().map_err(|e| e.to_string())?;
        let mut f = std::fs::File::create(path).map_err(|e| format!("{path}: {e}"))?;
        f.write_all(&bytes).map_err(|e| e.to_string())?;
        println!(
            "checkpoint ({} bytes, SENSITIVE: exact counts) -> {path}",
            bytes.len()
        );
    }
    if synth.is_seeded() {
        println!("(seeded: NOT PRIVATE)");
    }
    Ok(())
}

//! Draws per second of the exact samplers, from Rust alone:
//! `cargo run --release -p dpstream-core --example noise_throughput [draws]`.
use dpstream_core::noise::{DiscreteGaussian, DiscreteLaplace};
use dpstream_core::{Rational, Rng};
use std::time::Instant;

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2_000_000);
    let mut rng = Rng::from_os().expect("OS entropy");
    let mut out = vec![0i64; n];
    let start = Instant::now();
    for _ in 0..n / 4 {
        std::hint::black_box(rng.next_u64());
    }
    let words = (n / 4) as f64 / start.elapsed().as_secs_f64();
    println!("raw generator: {:.1} M words/s", words / 1e6);
    for scale in [0.5, 1.0, 10.0, 1e3, 1e6, 0.1] {
        let d = DiscreteLaplace::new(&Rational::from_f64(scale, "scale").unwrap()).unwrap();
        let start = Instant::now();
        d.fill(&mut rng, &mut out).unwrap();
        let rate = n as f64 / start.elapsed().as_secs_f64();
        println!("discrete_laplace scale {scale}: {:.2} M/s", rate / 1e6);
    }
    for sigma in [1.0, 10.0, 1e6] {
        let d = DiscreteGaussian::new(&Rational::from_f64(sigma, "sigma").unwrap()).unwrap();
        let start = Instant::now();
        d.fill(&mut rng, &mut out).unwrap();
        let rate = n as f64 / start.elapsed().as_secs_f64();
        println!("discrete_gaussian sigma {sigma}: {:.2} M/s", rate / 1e6);
    }
}

//! PrivHP on an edge device, without Python: read points as CSV from stdin
//! in fixed memory, then write the ε-DP generator to a file that Python (or
//! Rust) loads with `dpstream.load` / `TreeGenerator::from_bytes`.
//!
//! ```text
//! cargo run --release -p dpstream-core --example privhp_edge -- \
//!     --epsilon 1 --dim 2 --memory-bytes 1000000 --expected-n 100000 --out gen.dpst < points.csv
//! ```
//!
//! Each line holds `dim` comma-separated coordinates in [0, 1]. Options:
//! `--epsilon` (a decimal or `p/q`), `--dim`, `--out`, and either
//! `--memory-bytes` with `--expected-n` (public values that choose k, width
//! and depth) or all of `--k --width --depth`; `--rows` (default 1),
//! `--sketch count-min|count`, `--seed N` (reproducible, NOT private; the file
//! records it, and Python loads such a file only with `allow_seeded=True`).
//! Exit status 2 on bad arguments or input, with a message naming the problem.

use dpstream_core::sketch::SketchKind;
use dpstream_core::synth::{BudgetRule, PrivHP, PrivHPConfig};
use dpstream_core::{Rational, Rng};
use std::io::{BufRead, Write};

mod common;

/// Points buffered before each update: the reader's whole memory.
const BATCH: usize = 4096;

fn main() {
    if let Err(msg) = run() {
        eprintln!("privhp_edge: {msg}");
        std::process::exit(2);
    }
}

fn parse_epsilon(s: &str) -> Result<Rational, String> {
    let r = if let Some((p, q)) = s.split_once('/') {
        let p: u64 = p.trim().parse().map_err(|_| format!("bad --epsilon {s}"))?;
        let q: u64 = q.trim().parse().map_err(|_| format!("bad --epsilon {s}"))?;
        Rational::new(p, q).map_err(|e| e.to_string())?
    } else {
        let x: f64 = s.parse().map_err(|_| format!("bad --epsilon {s}"))?;
        Rational::from_f64(x, "epsilon").map_err(|e| e.to_string())?
    };
    if r.is_zero() {
        return Err("--epsilon must be positive".into());
    }
    Ok(r)
}

fn run() -> Result<(), String> {
    let opts = common::options()?;
    let get = |k: &str| opts.get(k).map(String::as_str);
    let num = |k: &str| -> Result<Option<u64>, String> {
        get(k)
            .map(|v| {
                v.parse::<u64>()
                    .map_err(|_| format!("--{k} must be a whole number"))
            })
            .transpose()
    };
    let epsilon = parse_epsilon(get("epsilon").ok_or("--epsilon is required")?)?;
    let dim = num("dim")?.ok_or("--dim is required")? as usize;
    let out = get("out").ok_or("--out is required")?.to_string();
    let rows = num("rows")?.unwrap_or(1) as usize;
    let sketch = match get("sketch").unwrap_or("count-min") {
        "count-min" => SketchKind::CountMin,
        "count" => SketchKind::Count,
        other => return Err(format!("--sketch must be count-min or count, got {other}")),
    };
    let cfg = match (num("memory-bytes")?, num("k")?) {
        (Some(mem), None) => {
            let n = num("expected-n")?.ok_or("--memory-bytes needs --expected-n")?;
            PrivHPConfig::for_memory(epsilon, dim, n, mem as usize, sketch, rows)
                .map_err(|e| e.to_string())?
        }
        (None, Some(k)) => PrivHPConfig {
            epsilon,
            dim,
            k: k as usize,
            width: num("width")?.ok_or("--k needs --width")? as usize,
            rows,
            depth: num("depth")?.ok_or("--k needs --depth")? as u32,
            sketch,
            budget: BudgetRule::Optimal,
        },
        _ => {
            return Err(
                "give either --memory-bytes (with --expected-n) or --k/--width/--depth".into(),
            )
        }
    };
    let mut rng = match num("seed")? {
        Some(s) => Rng::seed_from_u64(s),
        None => Rng::from_os().map_err(|e| e.to_string())?,
    };
    let mut summary = PrivHP::new(cfg, &mut rng).map_err(|e| e.to_string())?;

    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    let mut line = String::new();
    let mut batch = vec![0.0f64; BATCH * dim];
    let (mut filled, mut line_no) = (0usize, 0u64);
    loop {
        line.clear();
        let read = input.read_line(&mut line).map_err(|e| e.to_string())?;
        if read > 0 {
            line_no += 1;
            let text = line.trim();
            if text.is_empty() {
                continue;
            }
            let row = &mut batch[filled * dim..(filled + 1) * dim];
            let mut fields = text.split(',');
            for x in row.iter_mut() {
                let f = fields
                    .next()
                    .ok_or_else(|| format!("line {line_no}: fewer than {dim} values"))?;
                let v: f64 = f
                    .trim()
                    .parse()
                    .map_err(|_| format!("line {line_no}: {f:?} is not a number"))?;
                if !(0.0..=1.0).contains(&v) {
                    return Err(format!("line {line_no}: {v} is outside [0, 1]"));
                }
                *x = v;
            }
            if fields.next().is_some() {
                return Err(format!("line {line_no}: more than {dim} values"));
            }
            filled += 1;
        }
        if filled == BATCH || (read == 0 && filled > 0) {
            summary
                .update(&batch[..filled * dim])
                .map_err(|e| format!("batch ending at line {line_no}: {e}"))?;
            filled = 0;
        }
        if read == 0 {
            break;
        }
    }
    let generator = summary.release(&mut rng).map_err(|e| e.to_string())?;
    let tmp = format!("{out}.tmp");
    {
        let mut f = std::fs::File::create(&tmp).map_err(|e| format!("{tmp}: {e}"))?;
        f.write_all(&generator.to_bytes())
            .map_err(|e| e.to_string())?;
        f.sync_all().map_err(|e| e.to_string())?;
    }
    std::fs::rename(&tmp, &out).map_err(|e| format!("{out}: {e}"))?;
    eprintln!(
        "privhp_edge: {} points, summary {} bytes (fixed), generator {} leaves -> {out}{}",
        summary.points_seen(),
        summary.memory_bytes(),
        generator.n_leaves(),
        if rng.is_seeded() {
            " (seeded: NOT PRIVATE)"
        } else {
            ""
        }
    );
    Ok(())
}

//! `angel-ps bench codec`: SketchML on mini-batch gradients of logistic regression, against
//! raw (12 bytes a pair) and zstd-compressed raw bytes: bytes per pair, encode and decode
//! throughput on one core, and the error the codec puts on the values.
//!
//! The gradients are those of a mini-batch of `--batch` rows, each with `--features` features
//! drawn from a Zipf law over the key space (like click logs): keys are either compact counter
//! indices (`--dim` of them) or hashed over 2^40 (the hashing trick), values are summed
//! residuals (p - y) / batch.

use std::error::Error;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::Instant;

use angel_proto::sketchml::{self, SketchParams};
use angel_runner::output::Output;
use clap::Args;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};

use super::Table;

/// Flags of `angel-ps bench codec`.
#[derive(Debug, Args)]
pub struct CodecBenchArgs {
    /// What is printed: tables (text) or JSON lines (json; see docs/operations.md).
    #[arg(long, value_enum, default_value_t)]
    pub output: Output,
    /// Rows per mini-batch.
    #[arg(long, default_value_t = 2048)]
    pub batch: usize,
    /// Features per row.
    #[arg(long, default_value_t = 39)]
    pub features: usize,
    /// Compact key space (counter indices).
    #[arg(long, default_value_t = 500_000)]
    pub dim: u64,
    /// Gradients encoded per measurement.
    #[arg(long, default_value_t = 200)]
    pub rounds: usize,
    /// Also write the table, as Markdown, to this file.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

/// One mini-batch gradient: sorted distinct keys, summed residuals.
fn gradient(args: &CodecBenchArgs, hashed: bool, rng: &mut StdRng) -> (Vec<u64>, Vec<f64>) {
    let zipf = Zipf::new(args.dim as f64, 1.1).expect("valid Zipf law");
    let mut sums = std::collections::HashMap::new();
    for _ in 0..args.batch {
        let residual = rng.random::<f64>() - if rng.random::<f64>() < 0.2 { 1.0 } else { 0.0 };
        for f in 0..args.features as u64 {
            let rank = zipf.sample(rng) as u64;
            let key = match hashed {
                false => (rank * 39 + f) % args.dim,
                true => xxhash_rust::xxh3::xxh3_64(&(rank * 39 + f).to_le_bytes()) >> 24,
            };
            *sums.entry(key).or_insert(0.0) += residual / args.batch as f64;
        }
    }
    let mut pairs: Vec<(u64, f64)> = sums.into_iter().collect();
    pairs.sort_unstable_by_key(|p| p.0);
    pairs.into_iter().unzip()
}

/// Pairs per second over `rounds` calls of `f` on gradients of `pairs` pairs each.
fn throughput(pairs: usize, rounds: usize, mut f: impl FnMut()) -> f64 {
    let started = Instant::now();
    for _ in 0..rounds {
        f();
    }
    (pairs * rounds) as f64 / started.elapsed().as_secs_f64()
}

/// Runs the benchmark and prints the table.
pub fn run(args: CodecBenchArgs) -> Result<(), Box<dyn Error>> {
    let params = SketchParams::default();
    let mut rng = StdRng::seed_from_u64(11);
    let mut rows = Vec::new();
    for hashed in [false, true] {
        let (keys, values) = gradient(&args, hashed, &mut rng);
        let n = keys.len();
        let payload = sketchml::encode(&keys, &values, &params)?;
        let (_, decoded) = sketchml::decode(&payload, usize::MAX)?;
        let mut raw = angel_proto::wire::encode_keys(&keys).to_vec();
        raw.extend_from_slice(&angel_proto::wire::encode_values(
            &values.iter().map(|&v| v as f32).collect::<Vec<f32>>(),
        ));
        let zstd = zstd::bulk::compress(&raw, 3)?.len();
        let sorted: std::collections::HashMap<u64, f64> = sketchml::decode(&payload, usize::MAX)?
            .0
            .into_iter()
            .zip(decoded)
            .collect();
        let error: f64 = keys
            .iter()
            .zip(&values)
            .map(|(k, v)| (sorted[k] - v).abs())
            .sum::<f64>()
            / values.iter().map(|v| v.abs()).sum::<f64>();
        let encode = throughput(n, args.rounds, || {
            black_box(sketchml::encode(&keys, &values, &params).ok());
        });
        let decode = throughput(n, args.rounds, || {
            black_box(sketchml::decode(&payload, usize::MAX).ok());
        });
        let per_pair = payload.len() as f64 / n as f64;
        rows.push(vec![
            if hashed {
                "hashed, 2^40"
            } else {
                "counter indices"
            }
            .to_string(),
            n.to_string(),
            format!("{:.2}", raw.len() as f64 / n as f64),
            format!("{:.2}", zstd as f64 / n as f64),
            format!("{per_pair:.2}"),
            format!("{:.1}x", raw.len() as f64 / payload.len() as f64),
            format!("{:.1}x", zstd as f64 / payload.len() as f64),
            format!("{:.1}", encode / 1e6),
            format!("{:.1}", decode / 1e6),
            format!("{:.1}%", error * 100.0),
        ]);
    }
    let table = Table::new(
        &[
            "keys",
            "pairs",
            "raw B/pair",
            "zstd B/pair",
            "sketchml B/pair",
            "vs raw",
            "vs zstd",
            "encode M pairs/s",
            "decode M pairs/s",
            "mean |error| / mean |g|",
        ],
        rows,
    );
    let note = format!(
        "sketchml{:?}; one core; zstd level 3 on the raw bytes; targets: <= 2.0 B/pair, >= 20M pairs/s",
        (params.buckets, params.groups, params.rows, params.col_ratio)
    );
    super::show(args.output, &[("codec", &table)], &[&note]);
    if let Some(path) = &args.out {
        super::write(path, &format!("{}\n{note}\n", table.markdown()))?;
    }
    Ok(())
}

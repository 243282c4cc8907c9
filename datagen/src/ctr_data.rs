//! A generator of Criteo-like click logs for demos, tests and benchmarks: an id, a 0/1
//! click label, 13 numeric count columns (`i1..i13`, long-tailed, some missing) and 26
//! categorical columns (`c1..c26`, cardinalities from 4 to 10^5 with power-law value
//! frequencies, some missing). The label is drawn from a hidden logistic model over the
//! categorical values and log-bucketed counts, so the data is learnable and a model's AUC
//! has a ceiling well below 1. Same seed, same file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, Zipf};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// Numeric columns.
pub const NUMERIC: usize = 13;
/// Categorical columns.
pub const CATEGORICAL: usize = 26;

/// Spread of the hidden per-feature weights.
const WEIGHT_SCALE: f64 = 0.45;
/// Hidden intercept: about one click in four.
const BIAS: f64 = -1.3;

/// The hidden weight of feature `value` of column `column`: a deterministic normal draw.
fn weight(seed: u64, column: usize, value: u64) -> f64 {
    let h = xxh3_64_with_seed(&value.to_le_bytes(), seed ^ (column as u64) << 32);
    let mut rng = StdRng::seed_from_u64(h);
    Normal::new(0.0, WEIGHT_SCALE)
        .expect("valid normal")
        .sample(&mut rng)
}

fn cardinality(column: usize) -> u64 {
    [4, 10, 30, 100, 300, 1_000, 3_000, 10_000, 30_000, 100_000][column % 10]
}

/// Writes `rows` rows to `path` as CSV with a header.
pub fn generate(path: &Path, rows: u64, seed: u64) -> std::io::Result<()> {
    let mut out = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let mut header = vec!["id".to_string(), "label".to_string()];
    header.extend((1..=NUMERIC).map(|i| format!("i{i}")));
    header.extend((1..=CATEGORICAL).map(|c| format!("c{c}")));
    writeln!(out, "{}", header.join(","))?;
    let mut rng = StdRng::seed_from_u64(seed);
    let zipfs: Vec<Zipf<f64>> = (0..CATEGORICAL)
        .map(|c| Zipf::new(cardinality(c) as f64, 1.1).expect("valid zipf"))
        .collect();
    let counts = Normal::new(1.5f64, 1.4).expect("valid normal");
    let mut line = String::with_capacity(512);
    for id in 0..rows {
        line.clear();
        let mut margin = BIAS;
        let mut fields = Vec::with_capacity(NUMERIC + CATEGORICAL);
        for i in 0..NUMERIC {
            if rng.random::<f64>() < 0.1 {
                fields.push(String::new());
                continue;
            }
            let v = counts.sample(&mut rng).exp().floor() as u64;
            margin += weight(seed, i, 64 - v.leading_zeros() as u64) * 0.5;
            fields.push(v.to_string());
        }
        for (c, zipf) in zipfs.iter().enumerate() {
            if rng.random::<f64>() < 0.05 {
                fields.push(String::new());
                continue;
            }
            let v = zipf.sample(&mut rng) as u64;
            margin += weight(seed, NUMERIC + c, v);
            fields.push(format!(
                "{:08x}",
                xxh3_64_with_seed(&v.to_le_bytes(), c as u64) as u32
            ));
        }
        let click = rng.random::<f64>() < 1.0 / (1.0 + (-margin).exp());
        writeln!(out, "{id},{},{}", u8::from(click), fields.join(","))?;
    }
    out.flush()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_learnable_file() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a.csv"), dir.path().join("b.csv"));
        generate(&a, 2000, 3).unwrap();
        generate(&b, 2000, 3).unwrap();
        let text = std::fs::read_to_string(&a).unwrap();
        assert_eq!(text, std::fs::read_to_string(&b).unwrap());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2001);
        assert_eq!(lines[1].split(',').count(), 2 + NUMERIC + CATEGORICAL);
        let clicks = lines[1..]
            .iter()
            .filter(|l| l.split(',').nth(1) == Some("1"))
            .count();
        assert!((200..900).contains(&clicks), "click rate {clicks}/2000");
    }
}

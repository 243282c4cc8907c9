//! A generator of wide sparse rows for `angel-ps bench gbdt`: each row lists `nnz` distinct
//! features of `features`, drawn with Zipf popularity (a few features in most rows, most in
//! few), each with a value uniform in [0, 1) to 3 decimals; the 0/1 label is drawn from a
//! hidden model of thresholds and one interaction, so trees can learn it and its AUC has a
//! ceiling below 1. Rows are written in the LIBSVM layout (`label feature:value ...`, features
//! from 0, ascending), which `read_libsvm(path, 'index_base=0')` and scikit-learn's
//! `load_svmlight_file` both read; a share goes to the holdout file. Same seed, same files.

use crate::split_files::SplitFiles;
use std::io::Write;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal, Zipf};
use xxhash_rust::xxh3::xxh3_64_with_seed;

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct SparseSpec {
    /// Rows in all (train and holdout).
    pub rows: u64,
    /// Features: indices 0 to features - 1.
    pub features: u64,
    /// Features each row lists.
    pub nnz: usize,
    /// Share of the rows written to the holdout file.
    pub holdout: f64,
}

/// The hidden weight of feature `f` when its value passes its threshold: a deterministic
/// normal draw.
fn weight(seed: u64, f: u64) -> f64 {
    let mut rng = StdRng::seed_from_u64(xxh3_64_with_seed(&f.to_le_bytes(), seed));
    Normal::new(0.0, 1.0)
        .expect("valid normal")
        .sample(&mut rng)
}

/// Writes the rows of `spec` to `train` and `holdout`; returns the rows written to each.
pub fn generate(
    train: &Path,
    holdout: &Path,
    spec: &SparseSpec,
    seed: u64,
) -> std::io::Result<(u64, u64)> {
    let mut files = SplitFiles::create(train, holdout, None)?;
    let mut rng = StdRng::seed_from_u64(seed);
    let zipf = Zipf::new(spec.features as f64, 1.0).expect("valid zipf");
    let nnz = spec.nnz.min(spec.features as usize);
    let mut row: Vec<(u64, f64)> = Vec::with_capacity(nnz);
    for _ in 0..spec.rows {
        row.clear();
        while row.len() < nnz {
            let f = zipf.sample(&mut rng) as u64 - 1;
            if !row.iter().any(|p| p.0 == f) {
                row.push((f, (rng.random::<f64>() * 1000.0).floor() / 1000.0));
            }
        }
        row.sort_unstable_by_key(|p| p.0);
        let mut margin = -0.5;
        for &(f, v) in &row {
            if v > 0.5 {
                margin += weight(seed, f);
            }
        }
        // An interaction of the two most common features.
        let value = |f: u64| row.iter().find(|p| p.0 == f).map(|p| p.1);
        if let (Some(a), Some(b)) = (value(0), value(1)) {
            margin += if (a > 0.3) == (b > 0.6) { 1.5 } else { -1.5 };
        }
        let label = u8::from(rng.random::<f64>() < 1.0 / (1.0 + (-margin).exp()));
        let out = files.pick(&mut rng, spec.holdout);
        write!(out, "{label}")?;
        for &(f, v) in &row {
            write!(out, " {f}:{v}")?;
        }
        writeln!(out)?;
    }
    files.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_rows_of_distinct_ascending_features() {
        let dir = tempfile::tempdir().unwrap();
        let spec = SparseSpec {
            rows: 2000,
            features: 500,
            nnz: 10,
            holdout: 0.1,
        };
        let path = |n: &str| dir.path().join(n);
        let made = generate(&path("a"), &path("a.test"), &spec, 3).unwrap();
        generate(&path("b"), &path("b.test"), &spec, 3).unwrap();
        let text = std::fs::read_to_string(path("a")).unwrap();
        assert_eq!(text, std::fs::read_to_string(path("b")).unwrap());
        assert_eq!(made.0 + made.1, 2000);
        assert!((100..300).contains(&made.1), "{made:?}");
        let mut positives = 0;
        for line in text.lines() {
            let mut fields = line.split(' ');
            positives += u64::from(fields.next() == Some("1"));
            let features: Vec<u64> = fields
                .map(|p| p.split(':').next().unwrap().parse().unwrap())
                .collect();
            assert_eq!(features.len(), 10);
            assert!(features.windows(2).all(|w| w[0] < w[1]), "{line}");
            assert!(features.iter().all(|&f| f < 500));
        }
        let rate = positives as f64 / made.0 as f64;
        assert!((0.2..0.8).contains(&rate), "positive rate {rate}");
    }
}

//! A generator of rows whose label depends on pairs of features, for factorization machines'
//! tests and figures: each row picks one category in each of `fields` fields (uniformly, one
//! feature per field, value 1), and its 0/1 label is drawn with probability
//! `sigmoid(bias + sum_i w_i + sum_{i<j} <v_i, v_j>)` under a hidden factorization machine of
//! rank `rank`. The interactions carry most of the signal (their margin spreads about 2, the
//! linear weights' about 0.3), so a linear model cannot reach the generator's own AUC and a
//! factorization machine can. Rows go to two LIBSVM files (features from 0), a share to the
//! holdout. Same seed, same files and the same hidden model ([`Hidden::new`]).

use crate::split_files::SplitFiles;
use std::io::Write;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct InteractionSpec {
    /// Rows in all (train and holdout).
    pub rows: u64,
    /// Fields: each row has one feature of each.
    pub fields: u64,
    /// Categories per field: field `f`'s are features `f * categories ..`.
    pub categories: u64,
    /// Factors of the hidden model.
    pub rank: usize,
    /// Share of the rows written to the holdout file.
    pub holdout: f64,
}

impl InteractionSpec {
    /// Features in all.
    pub fn features(&self) -> u64 {
        self.fields * self.categories
    }
}

/// The hidden factorization machine of a seed: the intercept, and per feature its weight and
/// its factors.
#[derive(Debug, Clone)]
pub struct Hidden {
    bias: f64,
    weights: Vec<f64>,
    factors: Vec<Vec<f64>>,
}

impl Hidden {
    /// The model `spec`'s rows follow under `seed`: factors drawn so the pairs' interactions
    /// sum to a spread of about 2, whatever the fields and rank.
    pub fn new(spec: &InteractionSpec, seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_f00d);
        let pairs = (spec.fields * spec.fields.saturating_sub(1) / 2).max(1) as f64;
        // Var(<v_i, v_j>) = rank sd^4: the pairs' sum has variance pairs rank sd^4 = 4.
        let sd = (4.0 / (pairs * spec.rank as f64)).powf(0.25);
        let factor = Normal::new(0.0, sd).expect("valid normal");
        let weight = Normal::new(0.0, 0.3).expect("valid normal");
        let features = spec.features() as usize;
        Hidden {
            bias: -0.3,
            weights: (0..features).map(|_| weight.sample(&mut rng)).collect(),
            factors: (0..features)
                .map(|_| (0..spec.rank).map(|_| factor.sample(&mut rng)).collect())
                .collect(),
        }
    }

    /// The margin of a row with `features` (each of value 1).
    pub fn margin(&self, features: &[u64]) -> f64 {
        let mut m = self.bias;
        for (at, &i) in features.iter().enumerate() {
            m += self.weights[i as usize];
            for &j in &features[at + 1..] {
                let (vi, vj) = (&self.factors[i as usize], &self.factors[j as usize]);
                m += vi.iter().zip(vj).map(|(a, b)| a * b).sum::<f64>();
            }
        }
        m
    }

    /// The probability that a row with `features` is labelled 1.
    pub fn probability(&self, features: &[u64]) -> f64 {
        1.0 / (1.0 + (-self.margin(features)).exp())
    }
}

/// Writes the rows of `spec` to `train` and `holdout`; returns the rows written to each.
pub fn generate(
    train: &Path,
    holdout: &Path,
    spec: &InteractionSpec,
    seed: u64,
) -> std::io::Result<(u64, u64)> {
    let mut files = SplitFiles::create(train, holdout, None)?;
    let hidden = Hidden::new(spec, seed);
    let mut rng = StdRng::seed_from_u64(seed);
    let mut row = Vec::with_capacity(spec.fields as usize);
    for _ in 0..spec.rows {
        row.clear();
        row.extend(
            (0..spec.fields).map(|f| f * spec.categories + rng.random_range(0..spec.categories)),
        );
        let label = u8::from(rng.random::<f64>() < hidden.probability(&row));
        let out = files.pick(&mut rng, spec.holdout);
        write!(out, "{label}")?;
        for &f in &row {
            write!(out, " {f}:1")?;
        }
        writeln!(out)?;
    }
    files.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> InteractionSpec {
        InteractionSpec {
            rows: 2000,
            fields: 4,
            categories: 5,
            rank: 2,
            holdout: 0.25,
        }
    }

    #[test]
    fn rows_have_one_feature_per_field_and_labels_follow_the_hidden_model() {
        let dir = tempfile::tempdir().unwrap();
        let (train, holdout) = (dir.path().join("t"), dir.path().join("h"));
        let (n_train, n_holdout) = generate(&train, &holdout, &spec(), 3).unwrap();
        assert_eq!(n_train + n_holdout, 2000);
        assert!((350..650).contains(&n_holdout), "{n_holdout}");
        let hidden = Hidden::new(&spec(), 3);
        let (mut labels, mut expected) = (0.0, 0.0);
        for line in std::fs::read_to_string(&train).unwrap().lines() {
            let mut parts = line.split(' ');
            labels += parts.next().unwrap().parse::<f64>().unwrap();
            let features: Vec<u64> = parts
                .map(|p| p.strip_suffix(":1").unwrap().parse().unwrap())
                .collect();
            for (f, &feature) in features.iter().enumerate() {
                assert_eq!(feature / 5, f as u64, "{line}");
            }
            expected += hidden.probability(&features);
        }
        // The positives' count is a sum of independent draws: within 4 standard deviations.
        let sd = (n_train as f64 * 0.25).sqrt();
        assert!(
            (labels - expected).abs() < 4.0 * sd,
            "{labels} vs {expected}"
        );
        let again = dir.path().join("again");
        generate(&again, &dir.path().join("h2"), &spec(), 3).unwrap();
        assert_eq!(
            std::fs::read(&train).unwrap(),
            std::fs::read(&again).unwrap()
        );
    }
}

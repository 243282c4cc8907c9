//! A generator of synthetic ratings from a known low-rank model, for matrix factorization's
//! tests and `angel-ps bench mf`: rating = 3 + b_u + b_i + p_u . q_i + noise, with factors
//! drawn so the dot product has a spread of about 1, biases of spread 0.3, and Gaussian noise
//! of the given sigma, the floor no model's RMSE can go below. Users and items are drawn
//! uniformly; a share of the ratings goes to the holdout file. Same seed, same files.

use crate::split_files::SplitFiles;
use std::io::Write;
use std::path::Path;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};

/// What to generate.
#[derive(Debug, Clone, Copy)]
pub struct RatingsSpec {
    /// User ids run from 0 to users - 1.
    pub users: u64,
    /// Item ids run from 0 to items - 1.
    pub items: u64,
    /// Ratings in all (train and holdout).
    pub ratings: u64,
    /// Factors of the hidden model.
    pub rank: usize,
    /// Standard deviation of the noise added to each rating.
    pub noise: f64,
    /// Share of the ratings written to the holdout file.
    pub holdout: f64,
}

impl RatingsSpec {
    /// A small set a job trains on in about a second (300 users x 100 items, 30,000 ratings of
    /// a rank-4 model, noise 0.1, 10% held out): what the example jobs' tests run.
    pub fn small() -> Self {
        RatingsSpec {
            users: 300,
            items: 100,
            ratings: 30_000,
            rank: 4,
            noise: 0.1,
            holdout: 0.1,
        }
    }
}

/// The hidden model's factors and bias of id `id` of a side (`side` 0: users, 1: items).
fn hidden(seed: u64, side: u64, id: u64, rank: usize) -> (Vec<f64>, f64) {
    let mut rng =
        StdRng::seed_from_u64(seed ^ (side << 62) ^ id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let factor = Normal::new(0.0, (rank as f64).powf(-0.25)).expect("valid normal");
    let bias = Normal::new(0.0, 0.3).expect("valid normal");
    let factors = (0..rank).map(|_| factor.sample(&mut rng)).collect();
    (factors, bias.sample(&mut rng))
}

/// Writes `spec`'s ratings as CSV (`user,item,rating`) to `train` and `holdout`.
pub fn generate(
    train: &Path,
    holdout: &Path,
    spec: &RatingsSpec,
    seed: u64,
) -> std::io::Result<()> {
    let users: Vec<_> = (0..spec.users)
        .map(|u| hidden(seed, 0, u, spec.rank))
        .collect();
    let items: Vec<_> = (0..spec.items)
        .map(|i| hidden(seed, 1, i, spec.rank))
        .collect();
    let mut files = SplitFiles::create(train, holdout, Some("user,item,rating"))?;
    let noise = Normal::new(0.0, spec.noise).expect("valid normal");
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..spec.ratings {
        let (u, i) = (
            rng.random_range(0..spec.users),
            rng.random_range(0..spec.items),
        );
        let ((p, bu), (q, bi)) = (&users[u as usize], &items[i as usize]);
        let dot: f64 = p.iter().zip(q).map(|(a, b)| a * b).sum();
        let rating = 3.0 + bu + bi + dot + noise.sample(&mut rng);
        let out = files.pick(&mut rng, spec.holdout);
        writeln!(out, "{u},{i},{rating:.6}")?;
    }
    files.finish().map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ratings spread around 3 by the model and the noise, and a rerun writes the same.
    #[test]
    fn ratings_follow_the_hidden_model_and_repeat_with_the_seed() {
        let dir = tempfile::tempdir().unwrap();
        let spec = RatingsSpec {
            users: 50,
            items: 40,
            ratings: 4000,
            rank: 4,
            noise: 0.1,
            holdout: 0.25,
        };
        let (a, b, c) = (
            dir.path().join("a"),
            dir.path().join("b"),
            dir.path().join("c"),
        );
        generate(&a, &b, &spec, 5).unwrap();
        generate(&c, &dir.path().join("d"), &spec, 5).unwrap();
        let train = std::fs::read_to_string(&a).unwrap();
        assert_eq!(train, std::fs::read_to_string(&c).unwrap());
        let ratings: Vec<f64> = (train.lines().skip(1))
            .map(|l| l.rsplit(',').next().unwrap().parse().unwrap())
            .collect();
        let held = std::fs::read_to_string(&b).unwrap().lines().count() - 1;
        assert!((800..1200).contains(&held), "{held} of 4000 held out");
        let mean = ratings.iter().sum::<f64>() / ratings.len() as f64;
        let sd =
            (ratings.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / ratings.len() as f64).sqrt();
        assert!((mean - 3.0).abs() < 0.3, "mean {mean}");
        assert!((0.7..1.6).contains(&sd), "spread {sd}");
    }
}

//! Quantile-bucket quantification: the magnitudes of one sign's values are cut into
//! equal-frequency buckets at quantiles read from a DDSketch, and every value is replaced by
//! its bucket's index; the message carries each bucket's mean once.
//!
//! DDSketch (sketches-ddsketch) bounds the *relative* error of a quantile's value, which is
//! what gradients need: their magnitudes span several orders, and a split point off by 1% of
//! its own value moves only values that were within 1% of it.

use sketches_ddsketch::{Config, DDSketch};

/// Relative accuracy of the sketch's quantiles.
const ALPHA: f64 = 0.01;
/// Bins the sketch may grow to (covers magnitudes from 1e-30 to 1e30 at 1%).
const MAX_BINS: u32 = 8192;
/// Magnitudes below this are one bin (they all round to zero in f32 updates anyway).
const MIN_VALUE: f64 = 1e-30;

/// The buckets of one sign.
#[derive(Debug, Clone, PartialEq)]
pub struct Buckets {
    /// Ascending split points; bucket `b` holds magnitudes in `[splits[b-1], splits[b])`.
    pub splits: Vec<f64>,
    /// The magnitude each bucket decodes to: the mean of its values, or for an empty bucket
    /// its lower edge (the smallest magnitude for bucket 0). Never above the bucket's upper edge.
    pub means: Vec<f32>,
}

impl Buckets {
    /// Up to `count` equal-frequency buckets over `magnitudes` (all finite, >= 0).
    pub fn build(magnitudes: &[f64], count: usize) -> Buckets {
        Self::build_indexed(magnitudes, count).0
    }

    /// [`Buckets::build`], with the bucket of every magnitude in input order (found once, for
    /// the means, and kept for the encoder).
    pub fn build_indexed(magnitudes: &[f64], count: usize) -> (Buckets, Vec<u16>) {
        let mut sketch = DDSketch::new(Config::new(ALPHA, MAX_BINS, MIN_VALUE));
        for &m in magnitudes {
            sketch.add(m);
        }
        let mut splits: Vec<f64> = (1..count.max(1))
            .filter_map(|j| sketch.quantile(j as f64 / count as f64).ok().flatten())
            .collect();
        splits.dedup();
        let mut sums = vec![(0.0f64, 0u64); splits.len() + 1];
        let mut indices = Vec::with_capacity(magnitudes.len());
        for &m in magnitudes {
            let b = bucket_of(&splits, m);
            indices.push(b as u16);
            let s = &mut sums[b];
            (s.0, s.1) = (s.0 + m, s.1 + 1);
        }
        let smallest = magnitudes.iter().copied().fold(f64::INFINITY, f64::min);
        let means = sums
            .iter()
            .enumerate()
            .map(|(b, &(sum, n))| {
                let upper = splits.get(b).copied().unwrap_or(f64::INFINITY);
                let mean = match (n, b) {
                    (0, 0) => smallest,
                    (0, _) => splits[b - 1],
                    _ => sum / n as f64,
                };
                at_most(mean, upper)
            })
            .collect();
        (Buckets { splits, means }, indices)
    }

    /// The bucket of magnitude `m`.
    pub fn index(&self, m: f64) -> usize {
        bucket_of(&self.splits, m)
    }
}

/// `v` in f32, rounded down if rounding to nearest would pass `upper`.
fn at_most(v: f64, upper: f64) -> f32 {
    let f = v as f32;
    match f64::from(f) > upper {
        true => f.next_down(),
        false => f,
    }
}

fn bucket_of(splits: &[f64], m: f64) -> usize {
    splits.partition_point(|&s| s <= m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_hold_about_equal_counts_and_means_stay_inside() {
        let values: Vec<f64> = (1..=10_000).map(|i| (i as f64 * 1e-4).powi(3)).collect();
        let b = Buckets::build(&values, 16);
        assert_eq!(b.means.len(), b.splits.len() + 1);
        let mut counts = vec![0usize; b.means.len()];
        for &v in &values {
            let i = b.index(v);
            counts[i] += 1;
            let upper = b.splits.get(i).copied().unwrap_or(f64::INFINITY);
            assert!(f64::from(b.means[i]) <= upper);
        }
        assert!(
            counts.iter().all(|&c| (400..=900).contains(&c)),
            "{counts:?}"
        );
    }
}

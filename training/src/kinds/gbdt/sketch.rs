//! Candidate split values per feature, from quantile sketches merged on the PS.
//!
//! The sketch is DDSketch's (Masson et al., VLDB 2019): a value falls in the bucket of index
//! `ceil(log_γ |v|)`, `γ = (1 + α) / (1 - α)`, so a bucket spans a relative width of
//! `γ - 1` (about `2α`), and the sketch is its buckets' counts. Two sketches merge by adding
//! their counts, so the merged sketch is a row of counters on the PS: a column per feature and
//! bucket, which the workers push their counts to and the servers add up. The job then pulls
//! each feature's counts and cuts it at its quantiles.
//!
//! A feature's buckets are laid out in the order of their values: negative values (largest
//! magnitude first), zero, positive values. A cut is a bucket's largest value, so a row's bin
//! is the number of cuts below its value and a split at a cut sends left exactly the bins at
//! or below it.

use std::collections::HashMap;

/// Relative accuracy of the sketch (DDSketch's α): a bucket spans about 2%.
pub const ACCURACY: f64 = 0.01;
/// Bucket indices kept per sign; magnitudes beyond `γ^±MAX_INDEX` (about 1e±9) share the
/// outermost bucket.
const MAX_INDEX: i64 = 1040;
/// Buckets per feature: each sign's indices and zero.
pub const BUCKETS: u64 = 2 * (2 * MAX_INDEX as u64 + 1) + 1;

fn gamma() -> f64 {
    (1.0 + ACCURACY) / (1.0 - ACCURACY)
}

/// The bucket of value `v` within its feature's buckets, in the order of values.
pub fn bucket(v: f64) -> u64 {
    let zero = (BUCKETS / 2) as i64;
    if v == 0.0 || v.is_nan() {
        return zero as u64;
    }
    let index = (v.abs().ln() / gamma().ln()).ceil();
    let index = (index.clamp(-(MAX_INDEX as f64), MAX_INDEX as f64)) as i64 + MAX_INDEX + 1;
    match v > 0.0 {
        true => (zero + index) as u64,
        false => (zero - index) as u64,
    }
}

/// The largest value bucket `b` holds (0 for zero's), which splits at `b` compare with.
pub fn upper(b: u64) -> f64 {
    let zero = BUCKETS / 2;
    let magnitude = |offset: u64| offset as i64 - MAX_INDEX - 1;
    match b.cmp(&zero) {
        std::cmp::Ordering::Equal => 0.0,
        std::cmp::Ordering::Greater => gamma().powi(magnitude(b - zero) as i32),
        std::cmp::Ordering::Less => -gamma().powi(magnitude(zero - b) as i32 - 1),
    }
}

/// A worker's sketch of its rows: counts by column of the sketch row (feature after feature,
/// [`BUCKETS`] each).
#[derive(Debug, Default)]
pub struct Counts(pub HashMap<u64, i64>);

impl Counts {
    /// Counts value `v` of feature `f`.
    pub fn add(&mut self, f: u64, v: f64) {
        *self.0.entry(f * BUCKETS + bucket(v)).or_default() += 1;
    }

    /// The counts as a push: columns ascending, and their counts.
    pub fn into_push(self) -> (Vec<u64>, Vec<i64>) {
        let mut pairs: Vec<(u64, i64)> = self.0.into_iter().collect();
        pairs.sort_unstable();
        pairs.into_iter().unzip()
    }
}

/// The `bins - 1` cuts of one feature from its merged bucket `counts` (in bucket order), each
/// the largest value of a bucket, the rest `+inf` (bins no value reaches). With no more
/// occupied buckets than cuts, a cut after each; otherwise LightGBM's greedy binning: a bucket
/// holding at least `1 / bins` of the values is a bin of its own, and the other values are cut
/// into bins of about equal counts. So a value most rows share (a zero) takes one bin, not the
/// bins the rest of the values need, as XGBoost's and LightGBM's cuts do.
pub fn cuts(counts: &[i64], bins: usize) -> Vec<f64> {
    let occupied: Vec<(u64, i64)> = (counts.iter().enumerate())
        .filter(|&(_, &c)| c > 0)
        .map(|(b, &c)| (b as u64, c))
        .collect();
    let mut cuts = Vec::with_capacity(bins - 1);
    if occupied.len() < bins {
        cuts.extend(occupied.iter().map(|&(b, _)| upper(b)));
    } else {
        let n: i64 = occupied.iter().map(|o| o.1).sum();
        let big = |c: i64| c as f64 * bins as f64 >= n as f64;
        let (big_buckets, big_values) =
            (occupied.iter().filter(|o| big(o.1))).fold((0, 0), |(k, s), o| (k + 1, s + o.1));
        let per_bin = (n - big_values) as f64 / (bins - big_buckets).max(1) as f64;
        let mut filled = 0;
        for pair in occupied.windows(2) {
            let ((b, c), next) = (pair[0], pair[1].1);
            filled += c;
            if big(c) || big(next) || filled as f64 >= per_bin {
                cuts.push(upper(b));
                filled = 0;
                if cuts.len() == bins - 1 {
                    break;
                }
            }
        }
    }
    cuts.resize(bins - 1, f64::INFINITY);
    cuts
}

/// The bin of value `v` under a feature's `cuts`: how many cuts lie below it.
pub fn bin_of(cuts: &[f64], v: f64) -> usize {
    cuts.partition_point(|&c| c < v)
}

/// Every feature's cuts, `bins - 1` each, as the model's cuts matrix holds them.
#[derive(Debug, Clone, PartialEq)]
pub struct Cuts {
    pub bins: usize,
    pub values: Vec<f64>,
}

impl Cuts {
    /// The cuts of feature `f`.
    pub fn of(&self, f: u64) -> &[f64] {
        let per = self.bins - 1;
        &self.values[f as usize * per..][..per]
    }

    /// The largest value bin `bin` of feature `f` holds: a split's threshold.
    pub fn threshold(&self, f: u64, bin: usize) -> f64 {
        self.of(f)[bin]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_follow_the_values_and_hold_them_within_the_accuracy() {
        let values = [
            -1e12, -3.5, -1.0, -0.01, 0.0, 1e-12, 0.01, 1.0, 1.0001, 2.0, 7e8,
        ];
        for pair in values.windows(2) {
            assert!(bucket(pair[0]) <= bucket(pair[1]), "{pair:?}");
        }
        for &v in &values[1..values.len() - 1] {
            let b = bucket(v);
            assert!(v <= upper(b), "{v} above its bucket's {}", upper(b));
            if b > 0 && v.abs() > 1e-9 {
                // A negative bucket's largest value is a bound it does not reach.
                assert!(v >= upper(b - 1), "{v} in the bucket before");
                assert!((upper(b) - v).abs() <= (gamma() - 1.0) * v.abs(), "{v}");
            }
        }
        assert!(bucket(f64::NAN) == BUCKETS / 2 && bucket(-1e300) == 0);
        assert_eq!(bucket(1e300), BUCKETS - 1);
    }

    #[test]
    fn cuts_fall_at_the_quantiles_and_bins_follow_them() {
        // Values 1..=100: quartile cuts near 25, 50, 75.
        let mut counts = vec![0i64; BUCKETS as usize];
        for v in 1..=100 {
            counts[bucket(f64::from(v)) as usize] += 1;
        }
        let cuts = cuts(&counts, 4);
        for (cut, q) in cuts.iter().zip([25.0, 50.0, 75.0]) {
            assert!((cut - q).abs() <= 0.03 * q, "{cut} vs {q}");
        }
        let bins: Vec<usize> = [1.0, 25.0, 26.0, 60.0, 100.0]
            .iter()
            .map(|&v| bin_of(&cuts, v))
            .collect();
        assert_eq!(bins, [0, 0, 1, 2, 3]);
        // One value: one cut at it, the other bins empty.
        let mut one = vec![0i64; BUCKETS as usize];
        one[bucket(1.0) as usize] = 9;
        let cuts = super::cuts(&one, 4);
        assert_eq!(&cuts[1..], [f64::INFINITY; 2]);
        assert_eq!((bin_of(&cuts, 1.0), bin_of(&cuts, 5.0)), (0, 1));
        // Three values and 8 bins: a cut after each.
        let mut three = vec![0i64; BUCKETS as usize];
        for v in [1.0, 2.0, 3.0] {
            three[bucket(v) as usize] = 5;
        }
        let cuts = super::cuts(&three, 8);
        let bins: Vec<usize> = [1.0, 2.0, 3.0].iter().map(|&v| bin_of(&cuts, v)).collect();
        assert_eq!(bins, [0, 1, 2]);
    }

    #[test]
    fn a_value_most_rows_share_takes_one_bin_and_the_rest_share_the_others() {
        // 900 zeros and the values 1..=100, in 8 bins: the zeros alone in bin 0, the other 100
        // values over the 7 other bins, about 100 / 7 in each.
        let mut counts = vec![0i64; BUCKETS as usize];
        counts[bucket(0.0) as usize] = 900;
        for v in 1..=100 {
            counts[bucket(f64::from(v)) as usize] += 1;
        }
        let cuts = cuts(&counts, 8);
        assert_eq!(cuts[0], 0.0);
        assert!(cuts.windows(2).all(|w| w[0] < w[1]), "{cuts:?}");
        let mut per_bin = [0; 8];
        for v in 1..=100 {
            per_bin[bin_of(&cuts, f64::from(v))] += 1;
        }
        assert_eq!(per_bin[0], 0, "{per_bin:?}");
        assert!(
            per_bin[1..].iter().all(|&n| (10..=20).contains(&n)),
            "{per_bin:?}"
        );
    }
}

//! Row and feature subsampling per tree: XGBoost's `subsample` and `colsample_bytree`,
//! LightGBM's bagging and feature fractions.
//!
//! Each tree sees a share of the rows (the others keep their margins but add nothing to its
//! histograms, so its splits and leaf values come from the sampled rows alone) and a share of
//! the features (the others' histograms stay zero, and a zero histogram never splits: its
//! every candidate gains exactly 0). The draws follow the model's seed, the tree and the row's
//! content (its label, features and values), not the worker that holds the row: a model grows
//! the same trees however its rows are spread over workers.

use angel_client::task_change::mix;

/// A number in [0, 1) drawn from `parts`.
fn unit(parts: &[u64]) -> f64 {
    (mix(parts) >> 11) as f64 / (1u64 << 53) as f64
}

/// The identity of a row the draws start from: a hash of its label and its (feature, value)
/// pairs as listed.
pub fn row_id(label: f64, pairs: impl IntoIterator<Item = (u64, f64)>) -> u64 {
    let mut parts = vec![label.to_bits()];
    for (key, value) in pairs {
        parts.extend([key, value.to_bits()]);
    }
    mix(&parts)
}

/// Whether the row of identity `id` is among the rows tree `tree` samples, a share
/// `fraction` of them (each row drawn alone).
pub fn keeps_row(id: u64, seed: u64, tree: usize, fraction: f64) -> bool {
    fraction >= 1.0 || unit(&[id, seed, tree as u64]) < fraction
}

/// The features tree `tree` of a model of `dim` features samples: `fraction x dim` of them
/// (rounded, at least 1), as a mask; `None` when it takes them all.
pub fn features(seed: u64, tree: usize, dim: u64, fraction: f64) -> Option<Vec<bool>> {
    if fraction >= 1.0 {
        return None;
    }
    let take = ((fraction * dim as f64).round() as usize).clamp(1, dim as usize);
    let mut order: Vec<(u64, u64)> = (0..dim)
        .map(|f| (mix(&[seed, tree as u64, f, u64::MAX]), f))
        .collect();
    order.select_nth_unstable(take - 1);
    let mut mask = vec![false; dim as usize];
    for &(_, f) in &order[..take] {
        mask[f as usize] = true;
    }
    Some(mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_takes_its_share_of_the_features_and_the_next_tree_others() {
        let first = features(7, 0, 1000, 0.3).unwrap();
        let second = features(7, 1, 1000, 0.3).unwrap();
        assert_eq!(first.iter().filter(|&&k| k).count(), 300);
        assert_eq!(second.iter().filter(|&&k| k).count(), 300);
        assert_ne!(first, second);
        assert_eq!(
            features(7, 0, 1000, 0.3).unwrap(),
            first,
            "the seed decides"
        );
        assert_eq!(
            features(7, 0, 10, 0.01)
                .unwrap()
                .iter()
                .filter(|&&k| k)
                .count(),
            1
        );
        assert!(features(7, 0, 10, 1.0).is_none());
    }

    #[test]
    fn a_tree_samples_its_share_of_the_rows() {
        // 20,000 rows at 0.7: the count's standard deviation is about 65; allow 5 of them.
        let kept = (0..20_000u64)
            .filter(|&id| keeps_row(mix(&[id]), 3, 2, 0.7))
            .count() as f64;
        assert!((kept - 14_000.0).abs() < 5.0 * 64.8, "{kept}");
        assert!(keeps_row(1, 3, 2, 1.0));
    }
}

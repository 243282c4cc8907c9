//! How the per-partition results of a PS function combine into one answer.

use crate::Merge;

/// Folds `next` into `acc` element by element with `merge`. Both come from partitions of the
/// same call, so they have equal length; a longer `next` extends `acc`.
pub fn merge_into(merge: Merge, acc: &mut Vec<f64>, next: &[f64]) {
    if merge == Merge::Concat {
        acc.extend_from_slice(next);
        return;
    }
    if merge == Merge::Argmax {
        if next
            .first()
            .is_some_and(|&n| acc.first().is_none_or(|&a| n > a))
        {
            acc.clear();
            acc.extend_from_slice(next);
        }
        return;
    }
    if acc.len() < next.len() {
        let fill = match merge {
            Merge::Min => f64::INFINITY,
            Merge::Max => f64::NEG_INFINITY,
            _ => 0.0,
        };
        acc.resize(next.len(), fill);
    }
    for (a, &b) in acc.iter_mut().zip(next) {
        *a = match merge {
            Merge::Min => a.min(b),
            Merge::Max => a.max(b),
            Merge::Sum | Merge::SumSqrt | Merge::Argmax | Merge::Concat | Merge::Unspecified => {
                *a + b
            }
        };
    }
}

/// Applies the final step of a merge once all partitions are in (the square root of norm2).
pub fn finish(merge: Merge, mut values: Vec<f64>) -> Vec<f64> {
    if merge == Merge::SumSqrt {
        values.iter_mut().for_each(|v| *v = v.sqrt());
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merges_fold_elementwise() {
        let mut acc = Vec::new();
        merge_into(Merge::Min, &mut acc, &[3.0, -1.0]);
        merge_into(Merge::Min, &mut acc, &[2.0, 5.0]);
        assert_eq!(acc, vec![2.0, -1.0]);

        let mut acc = Vec::new();
        merge_into(Merge::SumSqrt, &mut acc, &[9.0]);
        merge_into(Merge::SumSqrt, &mut acc, &[16.0]);
        assert_eq!(finish(Merge::SumSqrt, acc), vec![5.0]);

        let mut acc = Vec::new();
        for next in [
            &[1.0, 7.0][..],
            &[],
            &[3.0, 8.0],
            &[3.0, 9.0],
            &[f64::NAN, 1.0],
        ] {
            merge_into(Merge::Argmax, &mut acc, next);
        }
        assert_eq!(
            acc,
            vec![3.0, 8.0],
            "the greatest first value, the earliest on a tie"
        );
        let mut acc = Vec::new();
        for next in [&[4.0, 1.0][..], &[], &[2.0, 5.0]] {
            merge_into(Merge::Concat, &mut acc, next);
        }
        assert_eq!(acc, vec![4.0, 1.0, 2.0, 5.0]);
    }
}

//! [`Binned`]: a worker's rows as the trees see them: per row, its features (ascending) and
//! the bin of each one's value under the model's cuts. Histograms add a row's gradient to
//! these bins, and a split at a bin sends left the rows at or below it, so the row's values
//! are needed no more once binned.

use super::sketch::{Cuts, bin_of};
use crate::error::{Result, input_err};
use crate::rows::SparseRows;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Binned {
    /// Row r owns `features[offsets[r]..offsets[r + 1]]` and the same `bins`.
    offsets: Vec<usize>,
    features: Vec<u32>,
    bins: Vec<u8>,
}

impl Binned {
    /// The rows of `rows` under `cuts`; an error naming the row when it lists a feature twice
    /// (a tree would not know which value to split it by).
    pub fn new(function: &str, rows: &SparseRows, cuts: &Cuts) -> Result<Self> {
        let mut binned = Binned {
            offsets: Vec::with_capacity(rows.len() + 1),
            ..Default::default()
        };
        binned.offsets.push(0);
        let mut row: Vec<(u32, u8)> = Vec::new();
        for r in 0..rows.len() {
            row.clear();
            for (at, &f) in rows.keys(r).iter().enumerate() {
                let bin = bin_of(cuts.of(f), rows.value(r, at));
                row.push((f as u32, bin as u8));
            }
            row.sort_unstable_by_key(|&(f, _)| f);
            if let Some(pair) = row.windows(2).find(|p| p[0].0 == p[1].0) {
                return input_err(format!(
                    "{function}: row {r} of the batch lists feature {} twice; a tree splits \
                     a row by one value per feature",
                    pair[0].0
                ));
            }
            binned.features.extend(row.iter().map(|p| p.0));
            binned.bins.extend(row.iter().map(|p| p.1));
            binned.offsets.push(binned.features.len());
        }
        Ok(binned)
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `r`'s features and their bins.
    pub fn row(&self, r: usize) -> (&[u32], &[u8]) {
        let range = self.offsets[r]..self.offsets[r + 1];
        (&self.features[range.clone()], &self.bins[range])
    }

    /// Row `r`'s bin of feature `f`, `None` when the row does not have it.
    pub fn bin(&self, r: usize, f: u64) -> Option<usize> {
        let (features, bins) = self.row(r);
        let at = features.binary_search(&(f as u32)).ok()?;
        Some(usize::from(bins[at]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, ListArray};
    use arrow::datatypes::{Float64Type, UInt64Type};
    use std::sync::Arc;

    fn rows(idx: Vec<Vec<u64>>, val: Vec<Vec<f64>>) -> SparseRows {
        let idx = ListArray::from_iter_primitive::<UInt64Type, _, _>(
            idx.into_iter().map(|r| Some(r.into_iter().map(Some))),
        );
        let val = ListArray::from_iter_primitive::<Float64Type, _, _>(
            val.into_iter().map(|r| Some(r.into_iter().map(Some))),
        );
        let labels: ArrayRef = Arc::new(Float64Array::from(vec![0.0; 2]));
        let (idx, val): (ArrayRef, ArrayRef) = (Arc::new(idx), Arc::new(val));
        SparseRows::from_arrays("t", Some(&labels), &idx, Some(&val)).unwrap()
    }

    #[test]
    fn rows_keep_their_features_sorted_with_the_bins_of_their_values() {
        // Two features, three bins: cuts 0 and 10 for feature 0, 1 and 2 for feature 1.
        let cuts = Cuts {
            bins: 3,
            values: vec![0.0, 10.0, 1.0, 2.0],
        };
        let binned = Binned::new(
            "t",
            &rows(vec![vec![1, 0], vec![1]], vec![vec![1.5, 11.0], vec![0.5]]),
            &cuts,
        )
        .unwrap();
        assert_eq!(binned.row(0), (&[0, 1][..], &[2, 1][..]));
        assert_eq!((binned.bin(1, 1), binned.bin(1, 0)), (Some(0), None));
        let err = Binned::new(
            "t",
            &rows(vec![vec![1, 1], vec![]], vec![vec![1.0, 2.0], vec![]]),
            &cuts,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("row 0") && err.contains("feature 1 twice"),
            "{err}"
        );
    }
}

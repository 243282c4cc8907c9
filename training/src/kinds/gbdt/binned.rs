//! [`Binned`]: a worker's rows as the trees see them: per row, for each of its features
//! (ascending), the histogram slot of its value's bin under the model's cuts, `feature bins +
//! bin`. Histograms add a row's gradient at these slots, and a split at a bin sends left the
//! rows at or below it, so the row's values are needed no more once binned.
//!
//! A feature at least a quarter of the rows have also gets a column: each row's bin of it, a
//! byte per row. Moving a node's rows to its children looks up one feature's bin of each row,
//! and reading it from a column (a megabyte per million rows, which stays in cache) costs a
//! fraction of a search through each row's slots in memory.

use std::collections::HashMap;

use super::sketch::{Cuts, bin_of};
use crate::error::{Result, input_err};
use crate::rows::SparseRows;

/// A row's byte in a column when it lacks the feature.
const MISSING: u8 = u8::MAX;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Binned {
    /// Bins per feature.
    bins: usize,
    /// Row r owns `slots[offsets[r]..offsets[r + 1]]`.
    offsets: Vec<usize>,
    slots: Vec<u32>,
    /// The columns of the features a quarter of the rows have (none with more than 255 bins,
    /// whose bins leave no byte for a missing value).
    columns: HashMap<u64, Vec<u8>>,
}

/// How one feature's bins are read: from its column, or from the rows' slots.
#[derive(Debug, Clone, Copy)]
pub enum Column<'a> {
    Dense(&'a [u8]),
    Sparse(&'a Binned, u64),
}

impl Column<'_> {
    /// Row `r`'s bin, `None` when the row does not have the feature.
    pub fn bin(&self, r: usize) -> Option<usize> {
        match *self {
            Column::Dense(bins) => Some(bins[r]).filter(|&b| b != MISSING).map(usize::from),
            Column::Sparse(binned, f) => binned.bin(r, f),
        }
    }
}

impl Binned {
    /// The rows of `rows` under `cuts`; an error naming the row when it lists a feature twice
    /// (a tree would not know which value to split it by).
    pub fn new(function: &str, rows: &SparseRows, cuts: &Cuts) -> Result<Self> {
        let bins = cuts.bins;
        let mut binned = Binned {
            bins,
            offsets: Vec::with_capacity(rows.len() + 1),
            slots: Vec::new(),
            columns: HashMap::new(),
        };
        binned.offsets.push(0);
        let mut row: Vec<u32> = Vec::new();
        for r in 0..rows.len() {
            row.clear();
            for (at, &f) in rows.keys(r).iter().enumerate() {
                let slot = f as usize * bins + bin_of(cuts.of(f), rows.value(r, at));
                let Ok(slot) = u32::try_from(slot) else {
                    return input_err(format!(
                        "{function}: row {r} of the batch has feature {f}, past what a \
                         tree's histograms hold"
                    ));
                };
                row.push(slot);
            }
            row.sort_unstable();
            if let Some(pair) = row
                .windows(2)
                .find(|p| p[0] as usize / bins == p[1] as usize / bins)
            {
                return input_err(format!(
                    "{function}: row {r} of the batch lists feature {} twice; a tree splits \
                     a row by one value per feature",
                    pair[0] as usize / bins
                ));
            }
            binned.slots.extend_from_slice(&row);
            binned.offsets.push(binned.slots.len());
        }
        binned.columns = binned.frequent_columns();
        Ok(binned)
    }

    /// The columns of the features at least a quarter of the rows have.
    fn frequent_columns(&self) -> HashMap<u64, Vec<u8>> {
        if self.bins > usize::from(MISSING) {
            return HashMap::new();
        }
        let features = self.slots.iter().max().map_or(0, |&s| self.feature(s) + 1);
        let mut counts = vec![0usize; features];
        for &s in &self.slots {
            counts[self.feature(s)] += 1;
        }
        // Each frequent feature's place in `columns`, by feature.
        let mut place = vec![usize::MAX; features];
        let mut columns = Vec::new();
        for (f, _) in (counts.iter().enumerate()).filter(|&(_, &c)| c > 0 && 4 * c >= self.len()) {
            place[f] = columns.len();
            columns.push((f as u64, vec![MISSING; self.len()]));
        }
        for r in 0..self.len() {
            for &s in self.slots(r) {
                if let Some((_, column)) = columns.get_mut(place[self.feature(s)]) {
                    column[r] = (s as usize % self.bins) as u8;
                }
            }
        }
        columns.into_iter().collect()
    }

    /// How feature `f`'s bins are read.
    pub fn column(&self, f: u64) -> Column<'_> {
        match self.columns.get(&f) {
            Some(bins) => Column::Dense(bins),
            None => Column::Sparse(self, f),
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `r`'s histogram slots, one per feature it has, ascending.
    pub fn slots(&self, r: usize) -> &[u32] {
        &self.slots[self.offsets[r]..self.offsets[r + 1]]
    }

    /// The feature of slot `slot`.
    pub fn feature(&self, slot: u32) -> usize {
        slot as usize / self.bins
    }

    /// Row `r`'s bin of feature `f`, `None` when the row does not have it.
    pub fn bin(&self, r: usize, f: u64) -> Option<usize> {
        let slots = self.slots(r);
        let first = (f as usize).checked_mul(self.bins)?;
        let at = slots.partition_point(|&s| (s as usize) < first);
        let bin = (slots.get(at)?.to_owned() as usize).checked_sub(first)?;
        (bin < self.bins).then_some(bin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{ArrayRef, Float64Array, ListArray};
    use arrow::datatypes::{Float64Type, UInt64Type};
    use std::sync::Arc;

    fn rows(idx: Vec<Vec<u64>>, val: Vec<Vec<f64>>) -> SparseRows {
        let len = idx.len();
        let idx = ListArray::from_iter_primitive::<UInt64Type, _, _>(
            idx.into_iter().map(|r| Some(r.into_iter().map(Some))),
        );
        let val = ListArray::from_iter_primitive::<Float64Type, _, _>(
            val.into_iter().map(|r| Some(r.into_iter().map(Some))),
        );
        let labels: ArrayRef = Arc::new(Float64Array::from(vec![0.0; len]));
        let (idx, val): (ArrayRef, ArrayRef) = (Arc::new(idx), Arc::new(val));
        SparseRows::from_arrays("t", Some(&labels), &idx, Some(&val)).unwrap()
    }

    #[test]
    fn a_feature_a_quarter_of_the_rows_have_gets_a_column_of_the_same_bins() {
        let cuts = Cuts {
            bins: 3,
            values: vec![0.0, 10.0, 1.0, 2.0],
        };
        // Feature 1 in every row, feature 0 in one of five.
        let mut idx = vec![vec![1, 0]];
        idx.extend(vec![vec![1]; 4]);
        let mut val = vec![vec![1.5, 11.0]];
        val.extend((0..4).map(|v| vec![v as f64]));
        let binned = Binned::new("t", &rows(idx, val), &cuts).unwrap();
        let (dense, sparse) = (binned.column(1), binned.column(0));
        assert!(matches!(dense, Column::Dense(_)) && matches!(sparse, Column::Sparse(..)));
        for r in 0..5 {
            assert_eq!(dense.bin(r), binned.bin(r, 1), "row {r}");
            assert_eq!(sparse.bin(r), binned.bin(r, 0), "row {r}");
        }
        assert_eq!((sparse.bin(0), sparse.bin(1)), (Some(2), None));
        assert_eq!(binned.column(2).bin(0), None, "a feature no row has");
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
        assert_eq!(binned.slots(0), [2, 3 + 1]);
        assert_eq!((binned.bin(0, 0), binned.bin(0, 1)), (Some(2), Some(1)));
        assert_eq!(binned.feature(4), 1);
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

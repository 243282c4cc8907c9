//! [`SparseRows`]: the rows a model trains on or predicts, as a sparse design
//! matrix (feature indices per row, optional values), plus labels when training.
//!
//! [`SparseRows::gather`] lists the distinct keys of a range of rows (the pruned pull of one
//! mini-batch) and remembers where each non-zero's weight sits in that list, so margins and
//! gradients are computed without a hash lookup per non-zero.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::Arc;

use ahash::RandomState;

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::compute::cast;
use arrow::datatypes::{ArrowPrimitiveType, DataType, Field, Float64Type, UInt32Type, UInt64Type};

use crate::error::{Result, input_err};

/// Feature rows: indices per row, with values (1.0 when absent) and labels.
#[derive(Debug, Default)]
pub struct SparseRows {
    labels: Vec<f64>,
    /// Row r owns `indices[offsets[r]..offsets[r + 1]]`.
    offsets: Vec<usize>,
    indices: Vec<u64>,
    values: Option<Vec<f64>>,
}

/// Training rows cut into mini-batches, each with its gathered keys: what a training pass
/// needs of a record batch, kept across epochs by the key-list cache.
#[derive(Debug)]
pub struct MiniBatches {
    /// Labels, offsets and values of the rows. Their indices are dropped once gathered, so
    /// these rows are not gathered again.
    pub rows: SparseRows,
    /// Each mini-batch's rows and gathered keys, in order.
    pub batches: Vec<(Range<usize>, Gathered)>,
}

/// The distinct keys of some rows, and for each of their non-zeros the key's position.
#[derive(Debug)]
pub struct Gathered {
    /// Distinct keys, ascending, then the intercept's key (the largest for checked rows).
    pub keys: Vec<u64>,
    /// Per non-zero of the gathered rows, in order: its key's position in `keys`.
    slots: Vec<u32>,
    /// First non-zero of the gathered rows.
    base: usize,
}

impl SparseRows {
    /// Reads `indices` (a list of integers per row), optional `values` (a list of numbers per
    /// row, same lengths) and optional `labels` (numbers) of `function`'s arguments.
    pub fn from_arrays(
        function: &str,
        labels: Option<&ArrayRef>,
        indices: &ArrayRef,
        values: Option<&ArrayRef>,
    ) -> Result<Self> {
        // Compact (32-bit) indices are widened here, once, not cast as a whole column.
        let (offsets, flat) = match indices.data_type() {
            DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _)
                if f.data_type() == &DataType::UInt32 =>
            {
                let (offsets, flat) =
                    list_of::<UInt32Type>(function, "indices", indices, DataType::UInt32)?;
                (offsets, flat.into_iter().map(u64::from).collect())
            }
            _ => list_of::<UInt64Type>(function, "indices", indices, DataType::UInt64)?,
        };
        let values = match values {
            None => None,
            Some(v) => {
                let (voffsets, flat) =
                    list_of::<Float64Type>(function, "values", v, DataType::Float64)?;
                if let Some(r) = (0..offsets.len() - 1)
                    .find(|&r| voffsets[r + 1] - voffsets[r] != offsets[r + 1] - offsets[r])
                {
                    return input_err(format!(
                        "{function}: row {r} of the batch has {} indices but {} values",
                        offsets[r + 1] - offsets[r],
                        voffsets[r + 1] - voffsets[r]
                    ));
                }
                Some(flat)
            }
        };
        let labels = read_labels(function, labels)?;
        Ok(SparseRows {
            labels,
            offsets,
            indices: flat,
            values,
        })
    }

    /// Reads `points` (a list of numbers per row: coordinate `i` at position `i`) of
    /// `function`'s arguments as rows without labels.
    pub fn from_points(function: &str, points: &ArrayRef) -> Result<Self> {
        let (offsets, values) =
            list_of::<Float64Type>(function, "point", points, DataType::Float64)?;
        let indices = (offsets.windows(2))
            .flat_map(|w| 0..(w[1] - w[0]) as u64)
            .collect();
        Ok(SparseRows {
            labels: Vec::new(),
            offsets,
            indices,
            values: Some(values),
        })
    }

    /// Rows of `per_row` keys each (in row order, `keys.len() / per_row` rows) with values
    /// 1.0 and the optional `labels` column of `function`'s arguments.
    pub fn from_keys(
        function: &str,
        keys: Vec<u64>,
        per_row: usize,
        labels: Option<&ArrayRef>,
    ) -> Result<Self> {
        let rows = keys.len() / per_row.max(1);
        Ok(SparseRows {
            labels: read_labels(function, labels)?,
            offsets: (0..=rows).map(|r| r * per_row).collect(),
            indices: keys,
            values: None,
        })
    }

    /// The rows of `parts`, one after the other.
    pub fn concat(parts: Vec<SparseRows>) -> SparseRows {
        let mut all = SparseRows {
            offsets: vec![0],
            values: parts.iter().any(|p| p.values.is_some()).then(Vec::new),
            ..Default::default()
        };
        for part in parts {
            all.append(&part, 0..part.len());
        }
        all
    }

    /// Rows `rows` (in that order), as rows of their own.
    pub fn select(&self, rows: &[usize]) -> SparseRows {
        let mut picked = SparseRows {
            offsets: vec![0],
            values: self.values.as_ref().map(|_| Vec::new()),
            ..Default::default()
        };
        for &r in rows {
            picked.append(self, r..r + 1);
        }
        picked
    }

    /// Adds rows `range` of `other`.
    fn append(&mut self, other: &SparseRows, range: Range<usize>) {
        for r in range {
            let nz = other.offsets[r]..other.offsets[r + 1];
            self.indices.extend_from_slice(&other.indices[nz.clone()]);
            if let Some(values) = self.values.as_mut() {
                match &other.values {
                    Some(v) => values.extend_from_slice(&v[nz]),
                    None => values.extend(std::iter::repeat_n(1.0, nz.len())),
                }
            }
            self.labels.extend(other.labels.get(r));
            self.offsets.push(self.indices.len());
        }
    }

    /// The keys of row `r` (before the rows are cut into mini-batches).
    pub fn keys(&self, r: usize) -> &[u64] {
        &self.indices[self.offsets[r]..self.offsets[r + 1]]
    }

    /// The values of row `r`'s keys; `None` without a values column (every value 1).
    pub fn values(&self, r: usize) -> Option<&[f64]> {
        (self.values.as_ref()).map(|v| &v[self.offsets[r]..self.offsets[r + 1]])
    }

    /// The value of row `r`'s key number `at` (1 without a values column).
    pub fn value(&self, r: usize, at: usize) -> f64 {
        self.values
            .as_ref()
            .map_or(1.0, |v| v[self.offsets[r] + at])
    }

    /// Refuses what a model of dimension `dim` cannot use, naming the row: a NaN or infinite
    /// label, an index at or past `dim` (column `dim` is the intercept, so it would alias it),
    /// a NaN or infinite value. One pass over the batch; a NaN reaching the servers would
    /// poison every weight it touches.
    pub fn check(&self, function: &str, model: &str, dim: u64) -> Result<()> {
        let row_of = |i: usize| self.offsets.partition_point(|&o| o <= i) - 1;
        if let Some(r) = self.labels.iter().position(|l| !l.is_finite()) {
            return input_err(format!(
                "{function}: the label is {} in row {r} of the batch; labels must be finite \
                 numbers (filter such rows out)",
                self.labels[r]
            ));
        }
        if let Some(i) = self.indices.iter().position(|&k| k >= dim) {
            return input_err(format!(
                "{function}: index {} in row {} of the batch is outside model '{model}', whose \
                 indices run from 0 to {} (dim = {dim}); create the model with a larger dim",
                self.indices[i],
                row_of(i),
                dim - 1
            ));
        }
        let values = self.values.as_deref().unwrap_or_default();
        if let Some(i) = values.iter().position(|v| !v.is_finite()) {
            return input_err(format!(
                "{function}: the value of index {} in row {} of the batch is {}; values must \
                 be finite numbers",
                self.indices[i],
                row_of(i),
                values[i]
            ));
        }
        Ok(())
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    /// True when there are no rows.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Label of row `r` (training only).
    pub fn label(&self, r: usize) -> f64 {
        self.labels[r]
    }

    /// Cuts the rows into mini-batches of `size` rows and gathers the keys of each; the
    /// indices are dropped then, since the gathered slots hold all training needs of them.
    pub fn into_mini_batches(mut self, size: usize, bias: u64) -> MiniBatches {
        let batches = (0..self.len())
            .step_by(size.max(1))
            .map(|start| {
                let range = start..(start + size).min(self.len());
                (range.clone(), self.gather(range, bias))
            })
            .collect();
        self.indices = Vec::new();
        MiniBatches {
            rows: self,
            batches,
        }
    }

    /// The distinct keys of `rows` (ascending, so the client's split by server finds them
    /// sorted) plus the intercept key `bias`, last.
    pub fn gather(&self, rows: Range<usize>, bias: u64) -> Gathered {
        let nz = self.offsets[rows.start]..self.offsets[rows.end];
        let indices = &self.indices[nz.clone()];
        let (mut keys, mut slots) = match usize::try_from(bias) {
            Ok(bias) if bias < DENSE_KEYS => DENSE_SLOTS
                .with_borrow_mut(|table| dense_slots(table, indices, bias))
                .unwrap_or_else(|| hashed_slots(indices)),
            _ => hashed_slots(indices),
        };
        sort_keys(&mut keys, &mut slots);
        keys.push(bias);
        Gathered {
            keys,
            slots,
            base: nz.start,
        }
    }

    /// `(slot, value)` of each non-zero of row `r`, which must be among the gathered rows.
    pub fn row<'a>(&'a self, r: usize, g: &'a Gathered) -> impl Iterator<Item = (usize, f64)> + 'a {
        let nz = self.offsets[r]..self.offsets[r + 1];
        let slots = &g.slots[nz.start - g.base..nz.end - g.base];
        let values = self.values.as_ref().map(|v| &v[nz]);
        slots
            .iter()
            .enumerate()
            .map(move |(i, &s)| (s as usize, values.map_or(1.0, |v| v[i])))
    }

    /// `w_o . x + intercept_o` for row `r` and each output `o` (into `out`), given the
    /// weights of the gathered keys, output after output.
    pub fn margins(&self, r: usize, g: &Gathered, weights: &[f32], out: &mut [f64]) {
        let n = g.keys.len();
        for (o, m) in out.iter_mut().enumerate() {
            let w = &weights[o * n..(o + 1) * n];
            *m = self
                .row(r, g)
                .map(|(s, v)| f64::from(w[s]) * v)
                .sum::<f64>()
                + f64::from(w[n - 1]);
        }
    }

    /// Adds to `grads` (one weight row of the gathered keys, the intercept last) the gradient
    /// of `d` times row `r`'s linear margin: `d x` to its features' weights, `d` to the
    /// intercept.
    pub fn add_gradient(&self, r: usize, g: &Gathered, d: f64, grads: &mut [f64]) {
        self.row(r, g).for_each(|(s, v)| grads[s] += d * v);
        grads[g.keys.len() - 1] += d;
    }

    /// A hash of every row's label, keys and values: rows read anew from the same data hash
    /// the same.
    pub fn content_hash(&self) -> u64 {
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        for (label, bounds) in self.labels.iter().zip(self.offsets.windows(2)) {
            hasher.update(&label.to_le_bytes());
            hasher.update(&((bounds[1] - bounds[0]) as u64).to_le_bytes());
        }
        for index in &self.indices {
            hasher.update(&index.to_le_bytes());
        }
        for value in self.values.iter().flatten() {
            hasher.update(&value.to_le_bytes());
        }
        hasher.digest()
    }

    /// A hash of rows `range` (gathered in `g`): their labels, keys and values in row order.
    /// What orders a BSP model's workers, so it tells apart any two mini-batches that would
    /// not push the same gradients (dense rows all use the same keys).
    pub fn fingerprint(&self, range: Range<usize>, g: &Gathered) -> u64 {
        let mut bytes = Vec::new();
        for r in range {
            bytes.extend(
                self.labels
                    .get(r)
                    .copied()
                    .unwrap_or_default()
                    .to_le_bytes(),
            );
            for (s, v) in self.row(r, g) {
                bytes.extend(g.keys[s].to_le_bytes());
                bytes.extend(v.to_le_bytes());
            }
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }

    /// Refuses a label model `model`'s kind cannot learn (`refuse` says why), naming the row.
    pub fn check_labels(
        &self,
        function: &str,
        model: &str,
        refuse: impl Fn(f64) -> Option<String>,
    ) -> Result<()> {
        for (r, &label) in self.labels.iter().enumerate() {
            if let Some(why) = refuse(label) {
                return input_err(format!(
                    "{function}: row {r} of the batch, model '{model}': {why}"
                ));
            }
        }
        Ok(())
    }
}

/// The numbers of the `labels` column (none: no labels), refusing a NULL.
fn read_labels(function: &str, labels: Option<&ArrayRef>) -> Result<Vec<f64>> {
    let Some(l) = labels else {
        return Ok(Vec::new());
    };
    let l = cast(l, &DataType::Float64).or_else(|_| {
        input_err(format!(
            "{function}: the label must be a number, got {}",
            l.data_type()
        ))
    })?;
    let l = l.as_primitive::<Float64Type>();
    if let Some(r) = (0..l.len()).find(|&r| l.is_null(r)) {
        return input_err(format!(
            "{function}: the label of row {r} of the batch is NULL or not a number; filter \
             such rows out"
        ));
    }
    Ok(l.values().to_vec())
}

/// Models with fewer columns than this find a key's position in a table indexed by key, one
/// per thread, rather than by hashing: compact counter indices are small, and hashing each
/// non-zero of every mini-batch was the largest cost of a training epoch.
const DENSE_KEYS: usize = 1 << 22;

thread_local! {
    /// Per key: its position in the mini-batch being gathered, or `u32::MAX`; every entry is
    /// `u32::MAX` between calls.
    static DENSE_SLOTS: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Distinct keys and slots of `indices` through `table`; `None` (the table left clean) when a
/// key is past `bias`, which only an unchecked batch holds.
fn dense_slots(table: &mut Vec<u32>, indices: &[u64], bias: usize) -> Option<(Vec<u64>, Vec<u32>)> {
    if table.len() <= bias {
        table.resize(bias + 1, u32::MAX);
    }
    let mut keys = Vec::new();
    let mut slots = Vec::with_capacity(indices.len());
    for &k in indices {
        let Some(slot) = usize::try_from(k).ok().and_then(|k| table.get_mut(k)) else {
            break;
        };
        if *slot == u32::MAX {
            *slot = keys.len() as u32;
            keys.push(k);
        }
        slots.push(*slot);
    }
    for &k in &keys {
        table[k as usize] = u32::MAX;
    }
    (slots.len() == indices.len()).then_some((keys, slots))
}

/// Sorts `keys` and points `slots` at their new positions.
fn sort_keys(keys: &mut [u64], slots: &mut [u32]) {
    if keys.is_sorted() {
        return;
    }
    let mut order: Vec<u32> = (0..keys.len() as u32).collect();
    order.sort_unstable_by_key(|&i| keys[i as usize]);
    let mut moved_to = vec![0u32; keys.len()];
    for (new, &old) in order.iter().enumerate() {
        moved_to[old as usize] = new as u32;
    }
    let sorted: Vec<u64> = order.iter().map(|&i| keys[i as usize]).collect();
    keys.copy_from_slice(&sorted);
    for s in slots {
        *s = moved_to[*s as usize];
    }
}

/// Distinct keys and slots of `indices` through a hash map.
fn hashed_slots(indices: &[u64]) -> (Vec<u64>, Vec<u32>) {
    let mut position: HashMap<u64, u32, RandomState> =
        HashMap::with_capacity_and_hasher(indices.len(), RandomState::new());
    let mut keys = Vec::new();
    let slots = indices
        .iter()
        .map(|&k| {
            *position.entry(k).or_insert_with(|| {
                keys.push(k);
                keys.len() as u32 - 1
            })
        })
        .collect();
    (keys, slots)
}

/// The offsets and flat values of a list column, cast to element type `T`.
fn list_of<T: ArrowPrimitiveType>(
    function: &str,
    what: &str,
    array: &ArrayRef,
    element: DataType,
) -> Result<(Vec<usize>, Vec<T::Native>)> {
    let target = DataType::List(Arc::new(Field::new_list_field(element.clone(), true)));
    if element.is_integer() {
        whole_numbers(function, what, array)?;
    }
    let Ok(list) = cast(array, &target) else {
        return input_err(format!(
            "{function}: {what} must be a list of numbers per row, got {}",
            array.data_type()
        ));
    };
    let list = list.as_list::<i32>();
    let first = list.value_offsets()[0] as usize;
    let offsets: Vec<usize> = list
        .value_offsets()
        .iter()
        .map(|&o| o as usize - first)
        .collect();
    let flat = list
        .values()
        .slice(first, list.value_offsets()[list.len()] as usize - first);
    let flat = flat.as_primitive::<T>();
    if let Some(i) = (0..flat.len()).find(|&i| flat.is_null(i)) {
        let row = offsets.partition_point(|&o| o <= i) - 1;
        let kind = match element {
            DataType::UInt64 | DataType::UInt32 => "a whole number from 0",
            _ => "a number",
        };
        return input_err(format!(
            "{function}: the {what} of row {row} of the batch hold a NULL or a value that is \
             not {kind}; filter such rows out"
        ));
    }
    Ok((offsets, flat.values().to_vec()))
}

/// Refuses a list of floating-point numbers of which one is not whole: a cast to integers
/// would truncate it (word 1.9 read as word 1).
fn whole_numbers(function: &str, what: &str, array: &ArrayRef) -> Result<()> {
    let floating = match array.data_type() {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            f.data_type().is_floating()
        }
        _ => false,
    };
    if !floating {
        return Ok(());
    }
    let (offsets, flat) = list_of::<Float64Type>(function, what, array, DataType::Float64)?;
    match flat.iter().position(|v| v.fract() != 0.0) {
        None => Ok(()),
        Some(i) => input_err(format!(
            "{function}: the {what} of row {} of the batch hold {}, which is not a whole number",
            offsets.partition_point(|&o| o <= i) - 1,
            flat[i]
        )),
    }
}

#[cfg(test)]
mod tests {
    use arrow::array::{Float64Array, ListArray};

    use super::*;

    /// The margin of a one-output model.
    fn margin(rows: &SparseRows, r: usize, g: &Gathered, w: &[f32]) -> f64 {
        let mut m = [0.0];
        rows.margins(r, g, w, &mut m);
        m[0]
    }

    #[test]
    fn gathers_distinct_keys_and_computes_margins() {
        let idx: ArrayRef = Arc::new(ListArray::from_iter_primitive::<UInt64Type, _, _>(vec![
            Some(vec![Some(5), Some(2)]),
            None,
            Some(vec![Some(2), Some(9)]),
        ]));
        let val: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(vec![
            Some(vec![Some(1.0), Some(2.0)]),
            None,
            Some(vec![Some(3.0), Some(-1.0)]),
        ]));
        let labels: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 0.0, 1.0]));
        let rows = SparseRows::from_arrays("t", Some(&labels), &idx, Some(&val)).unwrap();
        assert_eq!(rows.len(), 3);
        let g = rows.gather(1..3, 100);
        assert_eq!(g.keys, vec![2, 9, 100]);
        let hashed = rows.gather(1..3, 1 << 40);
        assert_eq!(hashed.keys, vec![2, 9, 1 << 40]);
        assert_eq!(hashed.slots, g.slots);
        let unchecked = rows.gather(0..3, 8);
        assert_eq!(
            unchecked.keys,
            vec![2, 5, 9, 8],
            "a key past the intercept is hashed"
        );
        let w = [0.5f32, 2.0, 10.0];
        assert_eq!(margin(&rows, 1, &g, &w), 10.0);
        assert_eq!(margin(&rows, 2, &g, &w), 0.5 * 3.0 - 2.0 + 10.0);
        let all = rows.gather(0..3, 100);
        assert_eq!(
            all.keys,
            vec![2, 5, 9, 100],
            "sorted, whatever the rows' order"
        );
        let w4 = [0.5f32, 4.0, 2.0, 10.0];
        assert_eq!(margin(&rows, 0, &all, &w4), 4.0 + 0.5 * 2.0 + 10.0);
        let short: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(vec![
            Some(vec![Some(1.0)]),
            None,
            None,
        ]));
        rows.check("t", "m", 10).unwrap();
        let mini = SparseRows::from_arrays("t", Some(&labels), &idx, Some(&val))
            .unwrap()
            .into_mini_batches(2, 100);
        let ranges: Vec<_> = mini.batches.iter().map(|(r, _)| r.clone()).collect();
        assert_eq!(ranges, [0..2, 2..3]);
        assert_eq!(mini.batches[1].1.keys, vec![2, 9, 100]);
        assert_eq!(
            margin(&mini.rows, 2, &mini.batches[1].1, &w),
            0.5 * 3.0 - 2.0 + 10.0
        );
        assert_eq!(
            margin(&mini.rows, 0, &mini.batches[0].1, &w),
            2.0 + 0.5 * 2.0 + 10.0
        );
        let err = rows.check("t", "m", 9).unwrap_err().to_string();
        assert!(err.contains("index 9 in row 2"), "{err}");
        let err = SparseRows::from_arrays("t", None, &idx, Some(&short)).unwrap_err();
        assert!(
            err.to_string()
                .contains("row 0 of the batch has 2 indices but 1 values"),
            "{err}"
        );
    }

    /// Indices given as floating-point numbers are read when whole, refused (naming the row
    /// and the value) when not, never truncated.
    #[test]
    fn fractional_indices_are_refused_not_truncated() {
        let floats = |rows: Vec<Vec<f64>>| -> ArrayRef {
            let rows = rows
                .into_iter()
                .map(|r| Some(r.into_iter().map(Some).collect::<Vec<_>>()));
            Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(rows))
        };
        let whole = floats(vec![vec![1.0, 2.0], vec![7.0]]);
        let rows = SparseRows::from_arrays("t", None, &whole, None).unwrap();
        assert_eq!((rows.keys(0), rows.keys(1)), (&[1, 2][..], &[7][..]));
        let fractional = floats(vec![vec![3.0], vec![1.9, 2.7]]);
        let err = SparseRows::from_arrays("t", None, &fractional, None).unwrap_err();
        assert!(
            err.to_string()
                .contains("row 1 of the batch hold 1.9, which is not a whole number"),
            "{err}"
        );
    }
}

//! [`Block`]: the rows x columns rectangle one partition stores, generic over the value type,
//! and [`AnyBlock`], which erases the type so a server can hold blocks of every type together.

use std::ops::Range;

use angel_proto::{Element, PsError, Result, SnapshotRow, StorageKind, ValueType, wire};
use bytes::Bytes;

use super::row::{RowMut, RowRef};
use super::{Growth, RowStore, SparseMap};
use crate::optim::MAX_STATE_ROWS;

/// The data of one partition. Rows and keys are global; callers check them against
/// [`Block::rows`] and [`Block::cols`] before calling.
#[derive(Debug, Clone)]
pub struct Block<T> {
    rows: Range<u64>,
    cols: Range<u64>,
    data: Vec<RowStore<T>>,
}

impl<T: Element> Block<T> {
    /// Allocates a zeroed block; dense storage that cannot be allocated is RESOURCE_EXHAUSTED
    /// instead of an abort.
    pub fn new(rows: Range<u64>, cols: Range<u64>, storage: StorageKind) -> Result<Self> {
        let width = usize::try_from(cols.end - cols.start).ok();
        let data = (rows.start..rows.end)
            .map(|_| match storage {
                StorageKind::Sparse => Ok(RowStore::Sparse(SparseMap::default())),
                _ => width
                    .and_then(|w| {
                        let mut v = Vec::new();
                        v.try_reserve_exact(w).ok()?;
                        v.resize(w, T::default());
                        Some(RowStore::Dense(v))
                    })
                    .ok_or_else(|| {
                        PsError::TooLarge(format!(
                            "cannot allocate a dense row of {} elements",
                            cols.end - cols.start
                        ))
                    }),
            })
            .collect::<Result<_>>()?;
        Ok(Block { rows, cols, data })
    }

    fn store(&self, row: u64) -> &RowStore<T> {
        &self.data[(row - self.rows.start) as usize]
    }

    fn store_mut(&mut self, row: u64) -> &mut RowStore<T> {
        &mut self.data[(row - self.rows.start) as usize]
    }

    /// Packed values of `keys` in `row`, or of the whole row when `keys` is `None`
    /// (with the stored keys for sparse rows).
    pub fn pull(&self, row: u64, keys: Option<&[u64]>) -> (Bytes, Bytes) {
        match (self.store(row), keys) {
            (RowStore::Dense(v), None) => (Bytes::new(), wire::encode_values(v)),
            (RowStore::Sparse(m), None) => {
                let (k, v): (Vec<u64>, Vec<T>) = m.iter().unzip();
                (wire::encode_keys(&k), wire::encode_values(&v))
            }
            (RowStore::Dense(v), Some(keys)) => {
                let start = self.cols.start;
                let values: Vec<T> = keys.iter().map(|&k| v[(k - start) as usize]).collect();
                (Bytes::new(), wire::encode_values(&values))
            }
            (RowStore::Sparse(m), Some(keys)) => {
                let values: Vec<T> = keys.iter().map(|&k| m.get(k).unwrap_or_default()).collect();
                (Bytes::new(), wire::encode_values(&values))
            }
        }
    }

    /// Adds packed `values` at `keys` of `row`, or across the whole row when `keys` is `None`.
    /// Lengths were checked by the caller.
    pub fn push(&mut self, row: u64, keys: Option<&[u64]>, values: &[u8]) -> Result<()> {
        self.add(row, keys, values)?;
        self.settle(row);
        Ok(())
    }

    /// A sparse row that filled up takes one value per column ([`SparseMap::fill_within`]);
    /// called after a write.
    pub fn settle(&mut self, row: u64) {
        let cols = self.cols.clone();
        if let RowStore::Sparse(m) = self.store_mut(row) {
            m.fill_within(cols);
        }
    }

    fn add(&mut self, row: u64, keys: Option<&[u64]>, values: &[u8]) -> Result<()> {
        let values: Vec<T> = wire::decode_values(values, "push values")?;
        let start = self.cols.start;
        match (self.store_mut(row), keys) {
            (RowStore::Dense(v), None) => {
                v.iter_mut().zip(values).for_each(|(x, d)| *x = x.plus(d));
            }
            (RowStore::Sparse(m), None) => {
                for (col, d) in (start..).zip(values) {
                    if d != T::default() {
                        m.add(col, d);
                    }
                }
            }
            (RowStore::Dense(v), Some(keys)) => {
                for (&k, d) in keys.iter().zip(values) {
                    let x = &mut v[(k - start) as usize];
                    *x = x.plus(d);
                }
            }
            (RowStore::Sparse(m), Some(keys)) => {
                // Keys past the stored count are new at least: room for them at once.
                m.reserve(keys.len().saturating_sub(m.len()));
                keys.iter().zip(values).for_each(|(&k, d)| m.add(k, d));
            }
        }
        Ok(())
    }

    /// Applies an optimizer step at each of `keys` of a model block: `row` holds the weights
    /// and the `width - 1` rows after it the optimizer's state, all of which this block must
    /// hold. `grads` are packed gradients, one per key. Lengths and rows were checked by the
    /// caller.
    pub fn update(
        &mut self,
        (row, width): (u64, usize),
        keys: &[u64],
        grads: &[u8],
        step: &mut dyn FnMut(&mut [f64], f64),
    ) -> Result<()> {
        let grads: Vec<T> = wire::decode_values(grads, "gradients")?;
        let start = self.cols.start;
        let mut slot = [0.0f64; 1 + MAX_STATE_ROWS];
        let slot = &mut slot[..width];
        let first = (row - self.rows.start) as usize;
        let group = &mut self.data[first..first + width];
        for (&k, g) in keys.iter().zip(grads) {
            for (s, row) in slot.iter_mut().zip(group.iter()) {
                *s = match row {
                    RowStore::Dense(v) => v[(k - start) as usize].to_f64(),
                    RowStore::Sparse(m) => m.get(k).unwrap_or_default().to_f64(),
                };
            }
            step(slot, g.to_f64());
            for (&s, row) in slot.iter().zip(group.iter_mut()) {
                match row {
                    RowStore::Dense(v) => v[(k - start) as usize] = T::from_f64(s),
                    RowStore::Sparse(m) => m.set(k, T::from_f64(s)),
                }
            }
        }
        Ok(())
    }

    /// A read view of `row` for PS functions.
    pub fn row_ref(&self, row: u64) -> RowRef<'_, T> {
        RowRef {
            cols: self.cols.clone(),
            store: self.store(row),
        }
    }

    /// A write view of `row` for PS functions.
    pub fn row_mut(&mut self, row: u64) -> RowMut<'_, T> {
        RowMut {
            cols: self.cols.clone(),
            store: self.store_mut(row),
        }
    }

    /// Every row as a snapshot stores it (dense: the values; sparse: stored keys and values).
    pub fn to_rows(&self) -> Vec<SnapshotRow> {
        (self.rows.clone())
            .zip(&self.data)
            .map(|(row, store)| {
                let (keys, values) = self.pull(row, None);
                debug_assert!(matches!(store, RowStore::Sparse(_)) || keys.is_empty());
                SnapshotRow { row, keys, values }
            })
            .collect()
    }

    /// A block of `storage` rebuilt from a snapshot's `rows`, after checking they fill exactly
    /// this rectangle: DATA_LOSS naming the first row that does not.
    pub fn from_rows(
        rows: Range<u64>,
        cols: Range<u64>,
        storage: StorageKind,
        snapshot: &[SnapshotRow],
    ) -> Result<Self> {
        let mut block = Self::new(rows.clone(), cols.clone(), storage)?;
        if snapshot.len() as u64 != rows.end - rows.start {
            return Err(PsError::DataLoss(format!(
                "{} rows for a block of rows {rows:?}",
                snapshot.len()
            )));
        }
        for (expected, r) in rows.clone().zip(snapshot) {
            let bad = |why: String| PsError::DataLoss(format!("row {}: {why}", r.row));
            if r.row != expected {
                return Err(bad(format!("expected row {expected}")));
            }
            let values: Vec<T> = wire::decode_values(&r.values, "snapshot values")?;
            match block.store_mut(r.row) {
                RowStore::Dense(v) if r.keys.is_empty() && values.len() == v.len() => {
                    v.copy_from_slice(&values)
                }
                RowStore::Sparse(m) => {
                    let keys = wire::decode_keys(&r.keys, "snapshot keys")?;
                    if keys.len() != values.len() {
                        return Err(bad(format!("{} keys, {} values", keys.len(), values.len())));
                    }
                    if let Some(k) = keys.iter().find(|k| !cols.contains(k)) {
                        return Err(bad(format!("key {k} outside columns {cols:?}")));
                    }
                    m.reserve(keys.len());
                    keys.into_iter().zip(values).for_each(|(k, v)| m.set(k, v));
                    m.fill_within(cols.clone());
                }
                RowStore::Dense(v) => {
                    return Err(bad(format!(
                        "{} values (with {} key bytes) for a dense row of {}",
                        values.len(),
                        r.keys.len(),
                        v.len()
                    )));
                }
            }
        }
        Ok(block)
    }

    /// Bytes `rows` hold together (a row named twice counts once).
    pub fn rows_bytes(&self, rows: &[u64]) -> u64 {
        let mut rows = rows.to_vec();
        rows.sort_unstable();
        rows.dedup();
        rows.iter()
            .map(|&r| self.store(r).memory_bytes() as u64)
            .sum()
    }

    /// Bytes `row` may take on top of what it holds while a push adds `values` at `keys`
    /// (None: across the whole row, where only non-zero values are stored): a table that
    /// grows is built while the old one is held. With `exact` only the keys the row does
    /// not hold count; without, every key counts as new: a bound that needs no lookups.
    pub fn push_growth(
        &self,
        row: u64,
        keys: Option<&[u64]>,
        values: &[u8],
        exact: bool,
    ) -> Result<Growth> {
        let RowStore::Sparse(m) = self.store(row) else {
            return Ok(Growth::default());
        };
        let (named, new) = match keys {
            Some(keys) => (keys.len(), if exact { m.absent(keys) } else { keys.len() }),
            None => {
                let values: Vec<T> = wire::decode_values(values, "push values")?;
                let columns = (self.cols.start..).zip(values);
                let nonzero = columns.filter(|(_, v)| *v != T::default());
                let new = nonzero.filter(|(c, _)| !exact || m.get(*c).is_none());
                (0, new.count())
            }
        };
        Ok(growth(m, named, new))
    }

    /// Bytes the rows of an optimizer group (`row` and the `width - 1` after it) may take
    /// while [`Block::update`] sets `keys` in each; `exact` as in [`Block::push_growth`].
    pub fn update_growth(&self, (row, width): (u64, usize), keys: &[u64], exact: bool) -> Growth {
        (row..row + width as u64)
            .filter_map(|r| match self.store(r) {
                RowStore::Sparse(m) => Some(growth(
                    m,
                    0,
                    if exact { m.absent(keys) } else { keys.len() },
                )),
                RowStore::Dense(_) => None,
            })
            .fold(Growth::default(), Growth::and)
    }

    /// Bytes `row` may take while a PS function stores at most `keys` more keys in it.
    pub fn write_growth(&self, row: u64, keys: usize) -> Growth {
        match self.store(row) {
            RowStore::Sparse(m) => growth(m, 0, keys),
            RowStore::Dense(_) => Growth::default(),
        }
    }

    /// (stored elements, bytes held) over all rows.
    pub fn usage(&self) -> (u64, u64) {
        self.data.iter().fold((0, 0), |(n, b), r| {
            (n + r.stored() as u64, b + r.memory_bytes() as u64)
        })
    }
}

/// What map `m` takes while `new` keys are added by a write naming `named` keys.
fn growth<T: Element>(m: &SparseMap<T>, named: usize, new: usize) -> Growth {
    let (before, after) = (m.memory_bytes() as u64, m.bytes_after(named, new) as u64);
    // A table grows by 1.5x a step.
    Growth::of_table(before, after, after / 3 * 2)
}

/// A block of any value type.
#[derive(Debug, Clone)]
pub enum AnyBlock {
    /// f32 elements.
    F32(Block<f32>),
    /// f64 elements.
    F64(Block<f64>),
    /// i64 elements (counts).
    I64(Block<i64>),
}

/// Runs `$body` with `$b` bound to the typed block inside an [`AnyBlock`] (or `&`/`&mut` to it).
#[macro_export]
macro_rules! with_block {
    ($any:expr, $b:ident => $body:expr) => {
        match $any {
            $crate::blocks::AnyBlock::F32($b) => $body,
            $crate::blocks::AnyBlock::F64($b) => $body,
            $crate::blocks::AnyBlock::I64($b) => $body,
        }
    };
}

impl AnyBlock {
    /// Allocates a zeroed block of `value_type`.
    pub fn new(
        value_type: ValueType,
        rows: Range<u64>,
        cols: Range<u64>,
        storage: StorageKind,
    ) -> Result<Self> {
        Ok(match value_type {
            ValueType::F32 => AnyBlock::F32(Block::new(rows, cols, storage)?),
            ValueType::F64 => AnyBlock::F64(Block::new(rows, cols, storage)?),
            ValueType::I64 => AnyBlock::I64(Block::new(rows, cols, storage)?),
            ValueType::Unspecified => {
                return Err(PsError::InvalidArgument("value type is unspecified".into()));
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blocks::RowViewMut;

    #[test]
    fn dense_and_sparse_blocks_answer_pulls_and_pushes_alike() {
        for storage in [StorageKind::Dense, StorageKind::Sparse] {
            let mut block = Block::<f32>::new(2..4, 100..110, storage).unwrap();
            block
                .push(3, Some(&[101, 105]), &wire::encode_values(&[1.5f32, -2.0]))
                .unwrap();
            block
                .push(3, Some(&[105]), &wire::encode_values(&[0.5f32]))
                .unwrap();
            let (_, values) = block.pull(3, Some(&[105, 101, 109]));
            let values: Vec<f32> = wire::decode_values(&values, "v").unwrap();
            assert_eq!(values, vec![-1.5, 1.5, 0.0], "{storage:?}");
            let (keys, _) = block.pull(2, None);
            assert!(keys.is_empty());
        }
    }

    #[test]
    fn a_block_survives_its_snapshot_rows_and_refuses_rows_that_do_not_fit() {
        for storage in [StorageKind::Dense, StorageKind::Sparse] {
            let mut block = Block::<f64>::new(0..2, 10..20, storage).unwrap();
            block
                .push(1, Some(&[12, 19]), &wire::encode_values(&[2.0f64, -1.0]))
                .unwrap();
            let rows = block.to_rows();
            let back = Block::<f64>::from_rows(0..2, 10..20, storage, &rows).unwrap();
            for row in 0..2 {
                assert_eq!(
                    back.pull(row, Some(&[12, 19, 15])),
                    block.pull(row, Some(&[12, 19, 15]))
                );
            }
            let err = Block::<f64>::from_rows(0..3, 10..20, storage, &rows).unwrap_err();
            assert!(matches!(err, PsError::DataLoss(_)), "{err}");
        }
        let sparse = Block::<f64>::new(0..1, 0..100, StorageKind::Sparse).unwrap();
        let mut rows = sparse.to_rows();
        rows[0].keys = wire::encode_keys(&[500]);
        rows[0].values = wire::encode_values(&[1.0f64]);
        let err = Block::<f64>::from_rows(0..1, 0..10, StorageKind::Sparse, &rows).unwrap_err();
        assert!(err.to_string().contains("key 500"), "{err}");
    }

    #[test]
    fn a_sparse_row_that_fills_up_holds_a_value_per_column_and_snapshots_as_sparse() {
        let mut block = Block::<f64>::new(0..1, 1000..1100, StorageKind::Sparse).unwrap();
        let keys: Vec<u64> = (1000..1090).collect();
        let values: Vec<f64> = (0..90).map(|k| f64::from(k % 7)).collect();
        block
            .push(0, Some(&keys[..10]), &wire::encode_values(&values[..10]))
            .unwrap();
        assert!(block.usage().1 < 800, "ten keys stay a table");
        block
            .push(0, Some(&keys), &wire::encode_values(&values))
            .unwrap();
        let (stored, bytes) = block.usage();
        assert_eq!(
            (stored, bytes),
            (77, 800),
            "90 keys: 100 columns of 8 bytes"
        );
        let (_, pulled) = block.pull(0, Some(&[1003, 1009, 1095]));
        let pulled: Vec<f64> = wire::decode_values(&pulled, "v").unwrap();
        assert_eq!(pulled, [2.0 * 3.0, 2.0 * 2.0, 0.0]);
        let rows = block.to_rows();
        let written = wire::decode_keys(&rows[0].keys, "k").unwrap();
        assert_eq!(written.len(), 77, "the snapshot has the non-zero keys");
        let back = Block::<f64>::from_rows(0..1, 1000..1100, StorageKind::Sparse, &rows).unwrap();
        assert_eq!(back.pull(0, Some(&keys)), block.pull(0, Some(&keys)));
        block.row_mut(0).clear();
        assert_eq!(block.usage(), (0, 0), "cleared, it is an empty table again");
    }

    #[test]
    fn an_impossible_dense_block_is_an_error_not_an_abort() {
        let err = Block::<f64>::new(0..1, 0..(1 << 62), StorageKind::Dense).unwrap_err();
        assert!(matches!(err, PsError::TooLarge(_)), "{err}");
    }
}

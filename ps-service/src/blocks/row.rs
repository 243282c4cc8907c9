//! One row of a block, and the views PS functions use to read and write rows of any value
//! type and storage kind through one interface (values as f64, columns as global keys).

use std::ops::Range;

use angel_proto::{Element, PsError, Result};

use super::SparseMap;

/// The storage of one row inside one block.
#[derive(Debug, Clone)]
pub enum RowStore<T> {
    /// One value per column of the block, index = column - block start.
    Dense(Vec<T>),
    /// Stored keys are global column numbers.
    Sparse(SparseMap<T>),
}

impl<T: Element> RowStore<T> {
    /// Bytes held by this row.
    pub fn memory_bytes(&self) -> usize {
        match self {
            RowStore::Dense(v) => v.capacity() * std::mem::size_of::<T>(),
            RowStore::Sparse(m) => m.memory_bytes(),
        }
    }

    /// Stored elements (dense: every column).
    pub fn stored(&self) -> usize {
        match self {
            RowStore::Dense(v) => v.len(),
            RowStore::Sparse(m) => m.len(),
        }
    }
}

/// Read access to one row of one block, for PS functions.
pub trait RowView {
    /// The block's column range.
    fn cols(&self) -> Range<u64>;
    /// True for dense storage, where every column is stored.
    fn is_dense(&self) -> bool;
    /// The value at global column `col` (zero when absent or outside the block).
    fn get(&self, col: u64) -> f64;
    /// True when `col` is stored (always, in range, for dense rows).
    fn contains(&self, col: u64) -> bool;
    /// Calls `f(col, value)` for every stored element.
    fn for_each(&self, f: &mut dyn FnMut(u64, f64));
    /// Number of stored elements.
    fn stored(&self) -> u64;
}

/// Write access to one row of one block, for PS functions.
pub trait RowViewMut: RowView {
    /// Sets global column `col`, or OUT_OF_RANGE when the block does not hold it.
    fn set(&mut self, col: u64, value: f64) -> Result<()>;
    /// Adds `delta` at global column `col`, or OUT_OF_RANGE when the block does not hold it.
    fn add(&mut self, col: u64, delta: f64) -> Result<()>;
    /// Replaces every stored value `v` at `col` by `f(col, v)`.
    fn map(&mut self, f: &mut dyn FnMut(u64, f64) -> f64);
    /// Zeroes the row (sparse rows release their keys).
    fn clear(&mut self);
    /// Makes room for `additional` more stored elements at once (a sparse row about to take
    /// many keys grows once rather than step by step; a dense row holds every column).
    fn reserve(&mut self, additional: usize);
}

/// A row of type `T` seen through [`RowView`].
pub struct RowRef<'a, T> {
    pub(crate) cols: Range<u64>,
    pub(crate) store: &'a RowStore<T>,
}

/// A row of type `T` seen through [`RowViewMut`].
pub struct RowMut<'a, T> {
    pub(crate) cols: Range<u64>,
    pub(crate) store: &'a mut RowStore<T>,
}

impl<T: Element> RowView for RowRef<'_, T> {
    fn cols(&self) -> Range<u64> {
        self.cols.clone()
    }

    fn is_dense(&self) -> bool {
        matches!(self.store, RowStore::Dense(_))
    }

    fn get(&self, col: u64) -> f64 {
        if !self.cols.contains(&col) {
            return 0.0;
        }
        match self.store {
            RowStore::Dense(v) => v[(col - self.cols.start) as usize].to_f64(),
            RowStore::Sparse(m) => m.get(col).map_or(0.0, Element::to_f64),
        }
    }

    fn contains(&self, col: u64) -> bool {
        self.cols.contains(&col)
            && match self.store {
                RowStore::Dense(_) => true,
                RowStore::Sparse(m) => m.get(col).is_some(),
            }
    }

    fn for_each(&self, f: &mut dyn FnMut(u64, f64)) {
        match self.store {
            RowStore::Dense(v) => {
                for (col, x) in self.cols.clone().zip(v) {
                    f(col, x.to_f64());
                }
            }
            RowStore::Sparse(m) => m.iter().for_each(|(k, v)| f(k, v.to_f64())),
        }
    }

    fn stored(&self) -> u64 {
        self.store.stored() as u64
    }
}

impl<'a, T: Element> RowMut<'a, T> {
    fn as_ref(&self) -> RowRef<'_, T> {
        RowRef {
            cols: self.cols.clone(),
            store: self.store,
        }
    }

    fn check(&self, col: u64) -> Result<()> {
        if self.cols.contains(&col) {
            return Ok(());
        }
        Err(PsError::OutOfRange(format!(
            "column {col} is outside this block's columns {:?}",
            self.cols
        )))
    }
}

impl<T: Element> RowView for RowMut<'_, T> {
    fn cols(&self) -> Range<u64> {
        self.cols.clone()
    }
    fn is_dense(&self) -> bool {
        self.as_ref().is_dense()
    }
    fn get(&self, col: u64) -> f64 {
        self.as_ref().get(col)
    }
    fn contains(&self, col: u64) -> bool {
        self.as_ref().contains(col)
    }
    fn for_each(&self, f: &mut dyn FnMut(u64, f64)) {
        self.as_ref().for_each(f)
    }
    fn stored(&self) -> u64 {
        self.as_ref().stored()
    }
}

impl<T: Element> RowViewMut for RowMut<'_, T> {
    fn set(&mut self, col: u64, value: f64) -> Result<()> {
        self.check(col)?;
        match self.store {
            RowStore::Dense(v) => v[(col - self.cols.start) as usize] = T::from_f64(value),
            RowStore::Sparse(m) => m.set(col, T::from_f64(value)),
        }
        Ok(())
    }

    fn add(&mut self, col: u64, delta: f64) -> Result<()> {
        self.check(col)?;
        match self.store {
            RowStore::Dense(v) => {
                let x = &mut v[(col - self.cols.start) as usize];
                *x = T::from_f64(x.to_f64() + delta);
            }
            RowStore::Sparse(m) => m.add(col, T::from_f64(delta)),
        }
        Ok(())
    }

    fn map(&mut self, f: &mut dyn FnMut(u64, f64) -> f64) {
        match self.store {
            RowStore::Dense(v) => {
                for (col, x) in self.cols.clone().zip(v.iter_mut()) {
                    *x = T::from_f64(f(col, x.to_f64()));
                }
            }
            RowStore::Sparse(m) => m.for_each_mut(|k, x| *x = T::from_f64(f(k, x.to_f64()))),
        }
    }

    fn clear(&mut self) {
        match self.store {
            RowStore::Dense(v) => v.fill(T::default()),
            RowStore::Sparse(m) => m.clear(),
        }
    }

    fn reserve(&mut self, additional: usize) {
        if let RowStore::Sparse(m) = self.store {
            m.reserve(additional);
        }
    }
}

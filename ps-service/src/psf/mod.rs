//! PS functions: operators that run on the servers, next to the data.
//!
//! A PS function implements [`PsFunction`]. The client sends its name, operands (rows of
//! matrices that share a partition layout) and scalar arguments; each server runs it once per
//! block it holds, through a [`PsfContext`], and the client merges the per-block results with
//! the function's [`Merge`]. Users add functions by registering them in a [`PsfRegistry`] when
//! they build a server: no server code changes.
//!
//! - [`aggregate`]: sum, asum, nnz, norm2, min, max, dot, lgamma_sum.
//! - [`elementwise`]: axpy, copy, add, sub, mul, div, scale.
//! - [`init`]: fill, zero, random uniform and normal initialisation.
//! - [`best_split`]: best_split, a tree node's best split from its gradient/hessian histogram.
//! - [`orthant`]: pseudo_gradient, orthant_direction, orthant_project: OWL-QN's steps.
//! - [`nonzeros`]: a row's elements that are not zero in a column range.

pub mod aggregate;
pub mod best_split;
pub mod elementwise;
pub mod init;
pub mod nonzeros;
pub mod orthant;

use std::ops::Range;
use std::sync::Arc;

use angel_proto::{Merge, PsError, Result};

use crate::blocks::{RowView, RowViewMut, SparseMap};
use crate::registry::Registry;
use crate::server::partition::Partition;
use crate::with_block;

/// A server-side operator over rows of one or more matrices.
pub trait PsFunction: Send + Sync + 'static {
    /// The name clients call it by.
    fn name(&self) -> &str;

    /// How results from different blocks combine (default: element-wise sum).
    fn merge(&self) -> Merge {
        Merge::Sum
    }

    /// Runs on one block. Returns this block's partial result (empty for pure updates).
    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>>;
}

/// What a PS function sees of one block: its operands' rows and the call's arguments.
///
/// Each access locks only the partition it touches, for as long as the closure runs, so a
/// function never holds two locks and cannot deadlock; a function that reads one operand and
/// writes another reads into a [`RowCopy`] first.
pub struct PsfContext<'a> {
    name: &'a str,
    operands: Vec<(Arc<Partition>, u64)>,
    args: &'a [f64],
    /// Set by [`PsfContext::write`]: the server snapshots what a function changed before
    /// answering, since a function call is not replayed after a recovery.
    wrote: std::sync::atomic::AtomicBool,
}

impl<'a> PsfContext<'a> {
    pub(crate) fn new(
        name: &'a str,
        operands: Vec<(Arc<Partition>, u64)>,
        args: &'a [f64],
    ) -> Self {
        PsfContext {
            name,
            operands,
            args,
            wrote: Default::default(),
        }
    }

    /// True once the function wrote a row.
    pub(crate) fn wrote(&self) -> bool {
        self.wrote.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Checks the number of operands, naming them in the error.
    pub fn expect_operands(&self, names: &[&str]) -> Result<()> {
        if self.operands.len() == names.len() {
            return Ok(());
        }
        Err(PsError::InvalidArgument(format!(
            "PS function '{}' takes {} operand(s) ({}), got {}",
            self.name,
            names.len(),
            names.join(", "),
            self.operands.len()
        )))
    }

    /// Argument `i`, or INVALID_ARGUMENT naming it.
    pub fn arg(&self, i: usize, what: &str) -> Result<f64> {
        self.args.get(i).copied().ok_or_else(|| {
            PsError::InvalidArgument(format!(
                "PS function '{}' needs argument {i} ({what})",
                self.name
            ))
        })
    }

    /// Number of operands.
    pub fn operand_count(&self) -> usize {
        self.operands.len()
    }

    /// Column range of this block.
    pub fn cols(&self) -> Range<u64> {
        self.operands[0].0.cols.clone()
    }

    /// The seed of a random stream for this block of operand 0 (matrix, partition, row) from
    /// a user's `seed`: the same seed and layout give the same values, and no two blocks, nor
    /// two seeds that differ only where the block's numbers do (`seed ^ row`), share a stream.
    pub fn block_seed(&self, seed: u64) -> u64 {
        let (part, row) = &self.operands[0];
        let block = (u64::from(part.matrix.id) << 48) ^ (u64::from(part.id) << 32) ^ row;
        [seed, block]
            .iter()
            .fold(0x9e37_79b9_7f4a_7c15, |h, &x| mix(h ^ x))
    }

    /// Name of the matrix of operand `i`.
    pub fn matrix_name(&self, i: usize) -> &str {
        &self.operands[i].0.matrix.name
    }

    /// Reads operand `i`'s row under a read lock.
    pub fn read<R>(&self, i: usize, f: impl FnOnce(&dyn RowView) -> R) -> R {
        let (part, row) = &self.operands[i];
        let block = part.data.read();
        with_block!(&*block, b => f(&b.row_ref(*row)))
    }

    /// Writes operand `i`'s row under a write lock.
    pub fn write<R>(&self, i: usize, f: impl FnOnce(&mut dyn RowViewMut) -> R) -> R {
        let (part, row) = &self.operands[i];
        let mut block = part.data.write();
        part.applied.lock().version += 1;
        self.wrote.store(true, std::sync::atomic::Ordering::Relaxed);
        with_block!(&mut *block, b => {
            let written = f(&mut b.row_mut(*row));
            b.settle(*row);
            written
        })
    }

    /// A copy of operand `i`'s row, for functions that read one operand and write another.
    pub fn copy(&self, i: usize) -> RowCopy {
        self.read(i, RowCopy::of)
    }
}

/// An owned copy of one row of one block.
#[derive(Debug, Clone)]
pub struct RowCopy {
    cols: Range<u64>,
    data: RowCopyData,
}

#[derive(Debug, Clone)]
enum RowCopyData {
    Dense(Vec<f64>),
    Sparse(SparseMap<f64>),
}

impl RowCopy {
    /// Copies a row.
    pub fn of(row: &dyn RowView) -> Self {
        let data = if row.is_dense() {
            let mut values = Vec::with_capacity(row.stored() as usize);
            row.for_each(&mut |_, v| values.push(v));
            RowCopyData::Dense(values)
        } else {
            let mut map = SparseMap::default();
            map.reserve(row.stored() as usize);
            row.for_each(&mut |k, v| map.add(k, v));
            RowCopyData::Sparse(map)
        };
        RowCopy {
            cols: row.cols(),
            data,
        }
    }
}

impl RowView for RowCopy {
    fn cols(&self) -> Range<u64> {
        self.cols.clone()
    }

    fn is_dense(&self) -> bool {
        matches!(self.data, RowCopyData::Dense(_))
    }

    fn get(&self, col: u64) -> f64 {
        match &self.data {
            RowCopyData::Dense(v) if self.cols.contains(&col) => {
                v[(col - self.cols.start) as usize]
            }
            RowCopyData::Dense(_) => 0.0,
            RowCopyData::Sparse(m) => m.get(col).unwrap_or(0.0),
        }
    }

    fn contains(&self, col: u64) -> bool {
        match &self.data {
            RowCopyData::Dense(_) => self.cols.contains(&col),
            RowCopyData::Sparse(m) => m.get(col).is_some(),
        }
    }

    fn for_each(&self, f: &mut dyn FnMut(u64, f64)) {
        match &self.data {
            RowCopyData::Dense(v) => self.cols.clone().zip(v).for_each(|(c, &x)| f(c, x)),
            RowCopyData::Sparse(m) => m.iter().for_each(|(c, x)| f(c, x)),
        }
    }

    fn stored(&self) -> u64 {
        match &self.data {
            RowCopyData::Dense(v) => v.len() as u64,
            RowCopyData::Sparse(m) => m.len() as u64,
        }
    }
}

/// The PS functions a server can run, by name.
#[derive(Clone)]
pub struct PsfRegistry {
    functions: Registry<dyn PsFunction>,
}

impl PsfRegistry {
    /// A registry holding every built-in function.
    pub fn builtin() -> Self {
        let mut registry = PsfRegistry {
            functions: Registry::new("PS function"),
        };
        aggregate::register(&mut registry);
        elementwise::register(&mut registry);
        init::register(&mut registry);
        best_split::register(&mut registry);
        orthant::register(&mut registry);
        nonzeros::register(&mut registry);
        registry
    }

    /// Adds (or replaces) a function under its name.
    pub fn register(&mut self, function: impl PsFunction) -> &mut Self {
        self.functions
            .insert(function.name().to_string(), Arc::new(function));
        self
    }

    /// The function named `name`, or NOT_FOUND listing what is registered.
    pub fn get(&self, name: &str) -> Result<Arc<dyn PsFunction>> {
        self.functions.get(name)
    }
}

impl Default for PsfRegistry {
    fn default() -> Self {
        Self::builtin()
    }
}

/// SplitMix64's finaliser: every input bit changes about half the output bits.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

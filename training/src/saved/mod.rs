//! A kind's saved format: the tables a saved model holds beside its `model.json`, as the kind
//! writes them from the servers (`Trains::save`) and checks and pushes them back
//! (`Trains::load`). The SQL layer keeps the files: Parquet, versions, the JSON.
//!
//! - [`weights`]: the default, `weights.parquet`: every weight and its optimizer state.
//! - [`dictionary`]: the counter a model's features are indexed by, rebuilt on load.

pub mod dictionary;
pub mod weights;

use std::fmt::Display;

use arrow::array::{ArrayRef, RecordBatch};
use arrow::datatypes::{DataType, SchemaRef};

use crate::error::{Error, Result};

/// One table of a saved model.
#[derive(Debug, Clone)]
pub struct SavedTable {
    /// Its name, as `read_model(dir, table)` takes it.
    pub name: &'static str,
    /// Its file in the model's directory.
    pub file: &'static str,
    /// Its columns.
    pub schema: SchemaRef,
}

/// Where a kind writes the tables of a model it saves, batch by batch as it reads them from
/// the servers: the SQL layer streams each table to its file, so a model larger than the
/// client's memory saves in bounded memory.
#[async_trait::async_trait]
pub trait TableSink: Send {
    /// Adds `batch` to table `table` (its position in `Trains::saved_tables`), after the
    /// table's batches written before.
    async fn write(&mut self, table: usize, batch: RecordBatch) -> Result<()>;
}

/// What `model.json` keeps of a saved model beside its tables.
#[derive(Debug, Default)]
pub struct Saved {
    /// A boosted model's margin before its trees.
    pub base_margin: Option<f64>,
}

/// A saved model as read back, for its kind to check and load.
#[derive(Debug)]
pub struct ReadBack {
    /// The model's directory (its version), as errors name it.
    pub at: String,
    /// Each table of `Trains::saved_tables`, in order.
    pub tables: Vec<TableRead>,
    /// The dimension `model.json` states.
    pub dim: u64,
    /// What `model.json` keeps of a boosted model: its margin before its trees.
    pub base_margin: Option<f64>,
}

/// One table read back: its rows, and the file they came from.
#[derive(Debug)]
pub struct TableRead {
    /// The file, as errors name it.
    pub path: String,
    /// Its rows.
    pub batches: Vec<RecordBatch>,
}

/// An error naming `at` (a file or directory of a saved model) and what is wrong there.
pub fn file_error(at: &impl Display, e: impl Display) -> Error {
    Error::Input(format!("{at}: {e}"))
}

/// Column `name` of `batch` (read from `path`) as type `t`, or an error naming the file and
/// the column.
pub fn column_as(path: &str, batch: &RecordBatch, name: &str, t: &DataType) -> Result<ArrayRef> {
    let c = (batch.column_by_name(name))
        .ok_or_else(|| file_error(&path, format!("no column '{name}'")))?;
    arrow::compute::cast(c, t)
        .map_err(|_| file_error(&path, format!("column '{name}' is not of type {t}")))
}

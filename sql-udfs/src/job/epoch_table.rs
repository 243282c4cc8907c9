//! An epoch table from its rows: each column a name and a function of a row, so a statement
//! lists its columns once; and its registration as the table `<model>_epochs`.

use std::sync::Arc;

use datafusion::arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::Result;
use datafusion::prelude::SessionContext;

/// One column of an epoch table of rows `R`.
pub(super) enum Column<R> {
    Int(&'static str, fn(&R) -> i64),
    Float(&'static str, fn(&R) -> f64),
    /// A figure some rows lack (NULL there).
    Optional(&'static str, fn(&R) -> Option<f64>),
}

/// The table of `rows` with `columns`.
pub(super) fn batch<R>(rows: &[R], columns: &[Column<R>]) -> Result<RecordBatch> {
    let (fields, arrays): (Vec<Field>, Vec<ArrayRef>) = columns
        .iter()
        .map(|column| match *column {
            Column::Int(name, f) => (
                Field::new(name, DataType::Int64, false),
                Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) as ArrayRef,
            ),
            Column::Float(name, f) => (
                Field::new(name, DataType::Float64, false),
                Arc::new(Float64Array::from_iter_values(rows.iter().map(f))) as ArrayRef,
            ),
            Column::Optional(name, f) => (
                Field::new(name, DataType::Float64, true),
                Arc::new(Float64Array::from_iter(rows.iter().map(f))) as ArrayRef,
            ),
        })
        .unzip();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

/// Registers `batch` as model `model`'s epoch table `<model>_epochs`, replacing the last
/// statement's; returns it.
pub(super) fn register(
    ctx: &SessionContext,
    model: &str,
    batch: RecordBatch,
) -> Result<RecordBatch> {
    let name = format!("{model}_epochs");
    ctx.deregister_table(&name)?;
    ctx.register_batch(&name, batch.clone())?;
    Ok(batch)
}

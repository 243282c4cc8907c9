//! An epoch table from its rows: each column a name and a function of a row, so a driver
//! lists its columns once.

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, Int64Array, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema};

use crate::error::Result;

/// One column of an epoch table of rows `R`.
pub enum Column<R> {
    /// A whole number.
    Int(&'static str, fn(&R) -> i64),
    /// A figure every row has.
    Float(&'static str, fn(&R) -> f64),
    /// A figure some rows lack (NULL there).
    Optional(&'static str, fn(&R) -> Option<f64>),
    /// Words (the slow workers of an epoch).
    Text(&'static str, fn(&R) -> String),
}

/// The table of `rows` with `columns`.
pub fn batch<R>(rows: &[R], columns: &[Column<R>]) -> Result<RecordBatch> {
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
            Column::Text(name, f) => (
                Field::new(name, DataType::Utf8, false),
                Arc::new(StringArray::from_iter_values(rows.iter().map(f))) as ArrayRef,
            ),
        })
        .unzip();
    Ok(RecordBatch::try_new(Arc::new(Schema::new(fields)), arrays)?)
}

//! Readers that bring raw data into Arrow for angel-ps SQL pipelines.
//!
//! # Layout
//!
//! - [`csv`]: CSV with or without a header, any delimiter, null tokens, trimmed values,
//!   typed columns.
//! - [`libsvm`]: sparse `label index:value ...` files.
//! - [`features`]: SQL functions for feature extraction: `ps_feature`, `ps_bucket`,
//!   `ps_quantile_bucket`, `ps_cross`, `ps_tokens`.
//! - [`bad_rows`]: what happens to rows that do not parse (fail, or skip and report).
//! - [`source`]: text input as numbered lines, each valid UTF-8 or the reason it is not.
//! - [`udf_args`]: argument checks and planning errors shared by every SQL function.

pub mod bad_rows;
pub mod csv;
pub mod features;
pub mod libsvm;
pub mod source;
pub mod udf_args;

use bad_rows::BadRow;
use datafusion::arrow::error::ArrowError;

/// Why reading failed.
#[derive(Debug, thiserror::Error)]
pub enum EtlError {
    /// The file could not be found, fetched or decompressed.
    #[error(transparent)]
    Storage(#[from] angel_storage::StorageError),
    /// The CSV layer failed (invalid UTF-8, for example).
    #[error("{0}: {1}")]
    Csv(String, String),
    /// A row did not parse and the policy is to fail.
    #[error("{0} (set bad_rows=skip to skip such rows)")]
    BadRow(BadRow),
    /// Reader options were wrong.
    #[error("{0}")]
    Options(String),
    /// Arrow refused the data.
    #[error(transparent)]
    Arrow(#[from] ArrowError),
}

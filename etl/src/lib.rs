//! Readers that bring raw data into Arrow for angel-ps SQL pipelines.
//!
//! # Layout
//!
//! - [`csv`]: CSV with or without a header, any delimiter, null tokens, trimmed values,
//!   typed columns.
//! - [`libsvm`]: sparse `label index:value ...` files.
//! - [`features`]: SQL functions for feature extraction: `ps_feature`, `ps_bucket`,
//!   `ps_quantile_bucket`, `ps_cross`, `ps_tokens`.
//! - [`ctr_data`]: a generator of Criteo-like click logs for demos and benchmarks.
//! - [`ratings_data`]: a generator of ratings from a known low-rank model (matrix
//!   factorization tests, `bench mf`).
//! - [`corpus_data`]: a generator of documents from known topics (topic model tests, `bench
//!   lda`).
//! - [`sparse_data`]: a generator of wide sparse rows (`bench gbdt`).
//! - [`blobs_data`]: a generator of points around hidden centres, for k-means's figures.
//! - [`interaction_data`]: a generator of rows whose label depends on pairs of features
//!   (factorization machine tests).
//! - [`split_files`]: the training and holdout files the generators write.
//! - [`bad_rows`]: what happens to rows that do not parse (fail, or skip and report).
//! - [`source`]: text input as numbered lines, each valid UTF-8 or the reason it is not.
//! - [`udf_args`]: argument checks and planning errors shared by every SQL function.

pub mod bad_rows;
pub mod blobs_data;
pub mod corpus_data;
pub mod csv;
pub mod ctr_data;
pub mod features;
pub mod interaction_data;
pub mod libsvm;
pub mod ratings_data;
pub mod source;
pub mod sparse_data;
pub mod split_files;
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

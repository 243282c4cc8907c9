//! Synthetic data sets of known structure, written as files the SQL readers take, for the
//! demo, the tests and the benchmarks: each generator draws from a model it also returns (or
//! states), so a test can compare what training finds with the truth.
//!
//! # Layout
//!
//! - [`ctr_data`]: Criteo-like click logs for demos and benchmarks.
//! - [`ratings_data`]: ratings from a known low-rank model (matrix factorization tests,
//!   `bench mf`).
//! - [`corpus_data`]: documents from known topics (topic model tests, `bench lda`).
//! - [`sparse_data`]: wide sparse rows (`bench gbdt`).
//! - [`blobs_data`]: points around hidden centres, for k-means's figures.
//! - [`interaction_data`]: rows whose label depends on pairs of features (factorization
//!   machine tests).
//! - [`split_files`]: the training and holdout files the generators write.

pub mod blobs_data;
pub mod corpus_data;
pub mod ctr_data;
pub mod interaction_data;
pub mod ratings_data;
pub mod sparse_data;
pub mod split_files;

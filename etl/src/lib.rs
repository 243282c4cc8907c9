//! Readers (CSV, Parquet, libsvm) and feature extraction for angel-ps SQL pipelines.
//!
//! Empty until the SQL pipeline work lands; the crate exists so the workspace layout is the
//! one every later change builds on.

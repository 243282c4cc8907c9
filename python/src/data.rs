//! `angel_ps.generate_click_logs`: the Criteo-like click logs `angel-ps demo` trains on, for
//! examples and notebooks.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::errors::Error;

/// Writes ``rows`` rows of generated click logs to the CSV file ``path`` and returns it: an
/// id, a 0/1 ``label``, 13 long-tailed counts ``i1..i13`` and 26 categorical columns
/// ``c1..c26``, the label drawn from a hidden logistic model. Same seed, same file
/// (``examples/ctr/job.sql`` reads it).
#[pyfunction]
#[pyo3(signature = (path, rows = 1_000_000, seed = 7))]
pub fn generate_click_logs(
    py: Python<'_>,
    path: PathBuf,
    rows: u64,
    seed: u64,
) -> PyResult<PathBuf> {
    py.detach(|| angel_datagen::ctr_data::generate(&path, rows, seed))
        .map_err(|e| {
            Error::new_err(format!(
                "cannot write click logs to {}: {e}",
                path.display()
            ))
        })?;
    Ok(path)
}

//! A k-means model's rows, read from the columns after the id: `point` (a list of numbers)
//! or `idx, val` (sparse coordinates), checked against the model's dimension.

use arrow::array::ArrayRef;

use crate::error::{Result, input_err};
use crate::rows::SparseRows;

/// The rows of `inputs` (`point`, or `idx, val`) of `function`'s call on model `model` of
/// `dim` coordinates.
pub fn read(function: &str, model: &str, dim: u64, inputs: &[ArrayRef]) -> Result<SparseRows> {
    let rows = match inputs {
        [points] => SparseRows::from_points(function, points)?,
        [indices, values] => SparseRows::from_arrays(function, None, indices, Some(values))?,
        _ => {
            return input_err(format!(
                "{function}: a k-means model's rows are a point (a list of numbers) or indices \
                 and values, got {} columns",
                inputs.len()
            ));
        }
    };
    rows.check(function, model, dim)?;
    Ok(rows)
}

//! A k-means model's rows, read from the columns after the id: `point` (a list of numbers)
//! or `idx, val` (sparse coordinates), checked against the model's dimension.
//!
//! [`Points`] keeps a batch of points that all have the model's `dim` coordinates as the
//! column's own buffer, so training reads them without a copy and measures distances with
//! dense dot products; other rows become [`SparseRows`].

use arrow::array::{Array, ArrayRef, AsArray};
use arrow::buffer::ScalarBuffer;
use arrow::datatypes::{DataType, Field, Float64Type};

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

/// A batch of rows to assign.
#[derive(Debug)]
pub enum Points {
    /// Points of exactly `dim` finite coordinates each, one after the other.
    Dense {
        /// Coordinates, row after row.
        values: ScalarBuffer<f64>,
        /// Coordinates per row.
        dim: usize,
    },
    /// Any other rows.
    Sparse(SparseRows),
}

impl Points {
    /// The rows of `inputs`, as [`read`] takes them; dense when every row is a point of `dim`
    /// finite coordinates.
    pub fn read(function: &str, model: &str, dim: u64, inputs: &[ArrayRef]) -> Result<Points> {
        if let [points] = inputs
            && let Some(values) = dense(points, dim as usize)
        {
            return Ok(Points::Dense {
                values,
                dim: dim as usize,
            });
        }
        read(function, model, dim, inputs).map(Points::Sparse)
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        match self {
            Points::Dense { values, dim } => values.len() / (*dim).max(1),
            Points::Sparse(rows) => rows.len(),
        }
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The coordinates of `points` when it is a list of `dim` finite numbers in every row.
fn dense(points: &ArrayRef, dim: usize) -> Option<ScalarBuffer<f64>> {
    let element = Field::new_list_field(DataType::Float64, true);
    if points.data_type() != &DataType::List(element.into()) || points.null_count() > 0 {
        return None;
    }
    let list = points.as_list::<i32>();
    let offsets = list.value_offsets();
    let first = offsets[0] as usize;
    let regular = (offsets.iter().enumerate()).all(|(r, &o)| o as usize == first + r * dim);
    let values = list.values().as_primitive::<Float64Type>();
    if !regular || values.null_count() > 0 {
        return None;
    }
    let values = values.values().slice(first, list.len() * dim);
    values.iter().all(|v| v.is_finite()).then_some(values)
}

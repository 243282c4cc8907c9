//! Numbers read from a query's answer (a pass's mean and count, a holdout's figures).

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::cast;
use arrow::datatypes::{DataType, Float64Type};

use crate::error::{Result, input_err};

/// The value in column `column` of the first row of `batches`, as f64; `None` for NULL or a
/// value that is not a number. Fails when the answer has no row.
pub fn first_number(batches: &[RecordBatch], column: usize) -> Result<Option<f64>> {
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return input_err("a query that answers one row answered none");
    };
    Ok(number(batch.column(column), 0))
}

/// Row `row` of `array` as f64; `None` for NULL or a value that is not a number.
pub fn number(array: &dyn Array, row: usize) -> Option<f64> {
    let one = array.slice(row, 1);
    let as_float = cast(&one, &DataType::Float64).ok()?;
    let as_float = as_float.as_primitive::<Float64Type>();
    as_float.is_valid(0).then(|| as_float.value(0))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};

    use super::*;

    #[test]
    fn numbers_are_read_from_any_numeric_type() {
        let batch = RecordBatch::try_from_iter([
            ("n", Arc::new(Int64Array::from(vec![Some(7), None])) as _),
            ("s", Arc::new(StringArray::from(vec!["x", "y"])) as _),
        ])
        .unwrap();
        assert_eq!(
            first_number(std::slice::from_ref(&batch), 0).unwrap(),
            Some(7.0)
        );
        assert_eq!(number(batch.column(0), 1), None);
        assert_eq!(first_number(&[batch], 1).unwrap(), None);
        assert!(first_number(&[], 0).is_err());
    }
}

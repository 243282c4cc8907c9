//! Reading UDF arguments (constant strings and integers, feature lists, numbers) and the
//! result types functions share.

use std::ops::Range;
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray, StringArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Field};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::ColumnarValue;

/// The constant string argument `i` of `function` (a model or counter name).
pub fn const_str(function: &str, args: &[ColumnarValue], i: usize, what: &str) -> Result<String> {
    let value = match args.get(i) {
        Some(ColumnarValue::Scalar(s)) => s.clone(),
        Some(ColumnarValue::Array(a)) if !a.is_empty() => ScalarValue::try_from_array(a, 0)?,
        _ => return exec_err!("{function}: argument {i} ({what}) is missing"),
    };
    match value.cast_to(&DataType::Utf8)? {
        ScalarValue::Utf8(Some(s)) => Ok(s),
        other => exec_err!("{function}: argument {i} ({what}) must be a string, got {other:?}"),
    }
}

/// The constant integer argument `i` of `function`.
pub fn const_i64(function: &str, args: &[ColumnarValue], i: usize, what: &str) -> Result<i64> {
    let value = match args.get(i) {
        Some(ColumnarValue::Scalar(s)) => s.clone(),
        Some(ColumnarValue::Array(a)) if !a.is_empty() => ScalarValue::try_from_array(a, 0)?,
        _ => return exec_err!("{function}: argument {i} ({what}) is missing"),
    };
    match value.cast_to(&DataType::Int64)? {
        ScalarValue::Int64(Some(v)) => Ok(v),
        other => exec_err!("{function}: argument {i} ({what}) must be an integer, got {other:?}"),
    }
}

/// Features per row: a list of strings per row, or one string per row. Null rows and null
/// elements carry no feature.
pub struct Features {
    /// Row r owns `values[rows[r]]` (empty for null rows).
    rows: Vec<Range<usize>>,
    /// Every feature, as UTF-8.
    values: StringArray,
}

impl Features {
    /// Reads a feature column of `function`.
    pub fn from_array(function: &str, array: &ArrayRef) -> Result<Self> {
        match array.data_type() {
            DataType::List(_) => {
                let list = array.as_list::<i32>();
                let offsets = list.value_offsets();
                let rows = (0..list.len())
                    .map(|r| match list.is_null(r) {
                        true => 0..0,
                        false => offsets[r] as usize..offsets[r + 1] as usize,
                    })
                    .collect();
                Ok(Features {
                    rows,
                    values: as_strings(function, list.values())?,
                })
            }
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => Ok(Features {
                rows: (0..array.len()).map(|r| r..r + 1).collect(),
                values: as_strings(function, array)?,
            }),
            other => {
                exec_err!("{function}: features must be strings or a list of strings, got {other}")
            }
        }
    }

    /// Number of feature slots over all rows (an upper bound on the features), for sizing
    /// outputs up front.
    pub fn slots(&self) -> usize {
        self.values.len()
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows.len()
    }

    /// The non-null features of row `r`.
    pub fn row(&self, r: usize) -> impl Iterator<Item = &str> {
        self.rows[r]
            .clone()
            .filter(|&i| self.values.is_valid(i))
            .map(|i| self.values.value(i))
    }

    /// Every non-null feature of every row.
    pub fn all(&self) -> impl Iterator<Item = &str> {
        (0..self.rows()).flat_map(|r| self.row(r))
    }
}

fn as_strings(function: &str, array: &ArrayRef) -> Result<StringArray> {
    let Ok(utf8) = cast(array, &DataType::Utf8) else {
        return exec_err!(
            "{function}: features must be strings, got {}",
            array.data_type()
        );
    };
    Ok(utf8.as_string::<i32>().clone())
}

/// A numeric argument column as f64, nulls included.
pub fn floats(array: &ArrayRef) -> Result<ArrayRef> {
    Ok(cast(array, &DataType::Float64)?)
}

/// The type every index-list function (`ps_hash`, `ps_index`) returns.
pub fn index_list_type() -> DataType {
    DataType::List(Arc::new(Field::new_list_field(DataType::UInt64, true)))
}

/// Wraps an array as a UDF result.
pub fn array_result(array: impl Array + 'static) -> ColumnarValue {
    ColumnarValue::Array(Arc::new(array))
}

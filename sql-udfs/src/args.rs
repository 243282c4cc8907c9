//! Reading UDF arguments (constant names and integers, feature lists, numbers), the argument
//! types the PS-bound functions accept, the result types they share and their documentation
//! section. [`Arg`] (an argument named in errors, its type checks, where its value is) and
//! [`arity`] come from [`angel_etl::udf_args`], shared with the feature functions.

use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{ColumnarValue, DocSection};

pub use angel_etl::udf_args::{Arg, arity, return_field};
use angel_etl::udf_args::{list_element, list_of};

/// The documentation section of the functions that work with the parameter servers, and of
/// the evaluation aggregates.
pub const DOC_SECTION: DocSection = DocSection {
    include: true,
    label: "angel-ps functions",
    description: Some(
        "Count and index features with the distributed counter, train and apply models on \
         the angel-ps parameter servers, evaluate predictions.",
    ),
};

/// How the model functions document their shared arguments.
pub const MODEL_DOC: &str = "The model's name: a constant string.";
/// See [`MODEL_DOC`].
pub const INDICES_DOC: &str = "The row's feature indices: a list of integers.";
/// See [`MODEL_DOC`].
pub const USER_ITEM_DOC: &str = "A matrix factorization model's user and item ids: integers \
                                 from 0 to the model's users - 1 and items - 1.";
/// See [`MODEL_DOC`].
pub const VALUES_DOC: &str = "Optional: the features' values, a list of numbers as long as \
                              the indices (1.0 each when absent).";

/// The type of a constant string argument (a model or counter name): kept as it is, since a
/// cast would hide at planning that the argument is a constant.
pub fn name_type(arg: Arg, t: &DataType) -> Result<DataType> {
    match t.is_string() {
        true => Ok(t.clone()),
        false => arg.error("a string", t),
    }
}

/// The type of a constant integer argument, kept as it is (see [`name_type`]).
pub fn integer_type(arg: Arg, t: &DataType) -> Result<DataType> {
    match t.is_integer() {
        true => Ok(t.clone()),
        false => arg.error("an integer", t),
    }
}

/// The value of the constant string argument `arg`: `value` is where it was found (see
/// [`Arg::literal`], [`Arg::scalar`], [`Arg::literal_expr`]), `None` when it is no constant.
pub fn const_str(arg: Arg, value: Option<&ScalarValue>) -> Result<String> {
    let value = arg.constant(value, "string")?;
    match value.try_as_str() {
        Some(Some(s)) => Ok(s.to_string()),
        _ => arg.error("a non-null string", value),
    }
}

/// The value of the constant integer argument `arg` (see [`const_str`]).
pub fn const_i64(arg: Arg, value: Option<&ScalarValue>) -> Result<i64> {
    let value = arg.constant(value, "integer")?;
    match value.data_type().is_integer() {
        true => match value.cast_to(&DataType::Int64) {
            Ok(ScalarValue::Int64(Some(v))) => Ok(v),
            _ => arg.error("a non-null 64-bit integer", value),
        },
        false => arg.error("an integer", value),
    }
}

/// Feature indices: a list of integers per row, computed on as List<UInt64>, or kept as
/// List<UInt32> (what `ps_index` returns) with no cast.
pub fn indices_type(arg: Arg, t: &DataType) -> Result<DataType> {
    match list_element(t) {
        Some(DataType::UInt32) => Ok(compact_index_list_type()),
        // Signed lists stay signed: a negative index is then the function's error, naming it,
        // not a failed cast while the plan is optimised.
        Some(e) if e.is_signed_integer() => Ok(list_of(DataType::Int64)),
        Some(e) if e.is_integer() || e.is_null() => Ok(index_list_type()),
        None if t.is_null() => Ok(index_list_type()),
        _ => arg.error("a list of integers", t),
    }
}

/// Whether `t` is a list of floating-point numbers: a k-means model's point.
pub fn is_point_type(t: &DataType) -> bool {
    list_element(t).is_some_and(DataType::is_floating)
}

/// A label: a number or a boolean per row, computed on as Float64.
pub fn label_type(arg: Arg, t: &DataType) -> Result<DataType> {
    match t {
        DataType::Boolean => Ok(DataType::Float64),
        t => arg.number(t),
    }
}

/// A numeric argument column as f64, nulls included.
pub fn floats(array: &ArrayRef) -> Result<ArrayRef> {
    Ok(cast(array, &DataType::Float64)?)
}

/// The (label, score) pairs of an evaluation aggregate's batch, skipping rows where either is
/// NULL. A NaN in either, or an infinite label, is an error naming the argument and row, as
/// scikit-learn refuses them: sorting and averaging cannot give NaN a meaning.
pub fn scored(label: Arg, score: Arg, values: &[ArrayRef]) -> Result<Vec<(f64, f64)>> {
    let labels = floats(label.column(values)?)?;
    let scores = floats(score.column(values)?)?;
    let (labels, scores) = (
        labels.as_primitive::<Float64Type>(),
        scores.as_primitive::<Float64Type>(),
    );
    let mut pairs = Vec::with_capacity(labels.len());
    for r in (0..labels.len()).filter(|&r| labels.is_valid(r) && scores.is_valid(r)) {
        let (l, s) = (labels.value(r), scores.value(r));
        if !l.is_finite() {
            return exec_err!(
                "{}: the {} is {l} in row {r} of the batch; it must be a finite number",
                label.function,
                label.role
            );
        }
        if s.is_nan() {
            return exec_err!(
                "{}: the {} is NaN in row {r} of the batch (label {l}); filter such rows out",
                score.function,
                score.role
            );
        }
        pairs.push((l, s));
    }
    Ok(pairs)
}

/// The type `ps_hash` returns, and indices other than 32-bit ones are read as.
pub fn index_list_type() -> DataType {
    list_of(DataType::UInt64)
}

/// The type `ps_index` returns: a counter's compact indices fit 32 bits, so training tables
/// hold half the bytes they would as 64-bit indices.
pub fn compact_index_list_type() -> DataType {
    list_of(DataType::UInt32)
}

/// Wraps an array as a UDF result.
pub fn array_result(array: impl Array + 'static) -> ColumnarValue {
    ColumnarValue::Array(Arc::new(array))
}

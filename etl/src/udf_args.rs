//! Argument checks every angel-ps SQL function shares (the feature functions here and the
//! PS-bound ones of `angel-sql`): [`Arg`] names an argument in planning errors, coerces its
//! type and finds its value (a constant at planning or execution, or an array); [`arity`]
//! checks the number of arguments.

use std::fmt::Display;
use std::ops::RangeInclusive;
use std::sync::Arc;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::compute::can_cast_types;
use datafusion::arrow::datatypes::{DataType, Field, FieldRef};
use datafusion::common::{Result, ScalarValue, exec_err, plan_err};
use datafusion::logical_expr::{ColumnarValue, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl};
use datafusion::physical_expr::PhysicalExpr;
use datafusion::physical_expr::expressions::Literal;

/// Argument `index` (0-based; errors count from 1) of `function`, with its `role` in the
/// call, for type checks and errors that name both.
#[derive(Debug, Clone, Copy)]
pub struct Arg {
    /// The SQL function.
    pub function: &'static str,
    /// Position in the call, from 0.
    pub index: usize,
    /// What the argument is, e.g. `"indices"`.
    pub role: &'static str,
}

impl Arg {
    /// Argument `index` (from 0) of `function`, playing `role`.
    pub const fn new(function: &'static str, index: usize, role: &'static str) -> Self {
        Arg {
            function,
            index,
            role,
        }
    }

    /// The planning error "`function`: argument n (`role`) must be `expected`, got `got`".
    pub fn error<T>(&self, expected: &str, got: impl Display) -> Result<T> {
        plan_err!(
            "{}: argument {} ({}) must be {expected}, got {got}",
            self.function,
            self.index + 1,
            self.role
        )
    }

    /// The argument's constant `value`, or a planning error when it is not one (`None`: a
    /// column or an expression); `expected` says what constant, e.g. `"string"`.
    pub fn constant<'a>(
        &self,
        value: Option<&'a ScalarValue>,
        expected: &str,
    ) -> Result<&'a ScalarValue> {
        match value {
            Some(v) => Ok(v),
            None => plan_err!(
                "{}: argument {} ({}) must be a constant {expected}, not a column or expression",
                self.function,
                self.index + 1,
                self.role
            ),
        }
    }

    /// The argument's value in a scalar function call at planning, if it is a literal.
    pub fn literal<'a>(&self, args: &ReturnFieldArgs<'a>) -> Option<&'a ScalarValue> {
        args.scalar_arguments.get(self.index).copied().flatten()
    }

    /// The argument's value in a scalar function call at execution, if it is a constant.
    pub fn scalar<'a>(&self, args: &'a ScalarFunctionArgs) -> Option<&'a ScalarValue> {
        match args.args.get(self.index) {
            Some(ColumnarValue::Scalar(s)) => Some(s),
            _ => None,
        }
    }

    /// The argument's value among an aggregate's argument expressions, if it is a literal.
    pub fn literal_expr<'a>(&self, exprs: &'a [Arc<dyn PhysicalExpr>]) -> Option<&'a ScalarValue> {
        Some(exprs.get(self.index)?.downcast_ref::<Literal>()?.value())
    }

    /// The argument in a scalar function call at execution, as an array of the batch's rows.
    pub fn array(&self, args: &ScalarFunctionArgs) -> Result<ArrayRef> {
        match args.args.get(self.index) {
            Some(value) => value.to_array(args.number_rows),
            None => self.missing(),
        }
    }

    /// The argument among the columns an aggregate receives.
    pub fn column<'a>(&self, values: &'a [ArrayRef]) -> Result<&'a ArrayRef> {
        match values.get(self.index) {
            Some(column) => Ok(column),
            None => self.missing(),
        }
    }

    // Planning checks the number of arguments: only a corrupt plan gets here.
    fn missing<T>(&self) -> Result<T> {
        exec_err!(
            "{}: argument {} ({}) is missing",
            self.function,
            self.index + 1,
            self.role
        )
    }

    /// A number per row (or NULL), computed on as Float64.
    pub fn number(&self, t: &DataType) -> Result<DataType> {
        match t.is_numeric() || t.is_null() {
            true => Ok(DataType::Float64),
            false => self.error("a number", t),
        }
    }

    /// A list of numbers per row (List, LargeList or FixedSizeList), computed on as
    /// List<Float64>.
    pub fn numbers(&self, t: &DataType) -> Result<DataType> {
        match list_element(t) {
            Some(e) if e.is_numeric() || e.is_null() => Ok(list_of(DataType::Float64)),
            _ if t.is_null() => Ok(list_of(DataType::Float64)),
            _ => self.error("a list of numbers", t),
        }
    }

    /// A string per row (or NULL), computed on as Utf8.
    pub fn string(&self, t: &DataType) -> Result<DataType> {
        match is_string(t) || t.is_null() {
            true => Ok(DataType::Utf8),
            false => self.error("a string", t),
        }
    }

    /// Any value with a text form, computed on as that text (Utf8).
    pub fn text(&self, t: &DataType) -> Result<DataType> {
        match can_cast_types(t, &DataType::Utf8) {
            true => Ok(DataType::Utf8),
            false => self.error("a value convertible to text", t),
        }
    }
}

/// Checks that `function` got a number of arguments in `range`; `usage` shows the call.
pub fn arity(
    function: &str,
    usage: &str,
    args: &[DataType],
    range: RangeInclusive<usize>,
) -> Result<()> {
    if range.contains(&args.len()) {
        return Ok(());
    }
    let expected = match (*range.start(), *range.end()) {
        (min, max) if min == max => format!("{min}"),
        (min, usize::MAX) => format!("{min} or more"),
        (min, max) if max == min + 1 => format!("{min} or {max}"),
        (min, max) => format!("{min} to {max}"),
    };
    plan_err!(
        "{function} takes {expected} arguments ({usage}), got {}",
        args.len()
    )
}

/// True for the string types, dictionary-encoded or not.
pub fn is_string(t: &DataType) -> bool {
    match t {
        DataType::Dictionary(_, values) => values.is_string(),
        t => t.is_string(),
    }
}

/// The element type of a list type (List, LargeList or FixedSizeList).
pub fn list_element(t: &DataType) -> Option<&DataType> {
    match t {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) => {
            Some(f.data_type())
        }
        _ => None,
    }
}

/// The List type of `element`s (nullable), as `make_array` builds it.
pub fn list_of(element: DataType) -> DataType {
    DataType::List(Arc::new(Field::new_list_field(element, true)))
}

/// The field `udf` returns, nullable, as DataFusion's default `return_field_from_args`
/// builds it: for functions that override that method only to check constant arguments.
pub fn return_field(udf: &impl ScalarUDFImpl, args: &ReturnFieldArgs) -> Result<FieldRef> {
    let types: Vec<DataType> = args
        .arg_fields
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    Ok(Arc::new(Field::new(
        udf.name(),
        udf.return_type(&types)?,
        true,
    )))
}

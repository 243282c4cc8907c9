//! `ps_bucket(x, width) -> Int64`: `floor(x / width)`, fixed-width buckets; and
//! `ps_bucket(x, 'log2') -> Int64`: the bit length of `floor(|x|)` with x's sign (0 for
//! |x| < 1, 1 for 1, 2 for 2..3, 3 for 4..7, ...), for long-tailed counts. NULL for NULL.
//! The width is a constant, checked at planning.

use std::sync::LazyLock;

use datafusion::arrow::array::{Array, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use super::DOC_SECTION;
use crate::udf_args::{Arg, arity, is_string, return_field};

const X: Arg = Arg::new("ps_bucket", 0, "x");
const WIDTH: Arg = Arg::new("ps_bucket", 1, "width");
/// What the width must be.
const WIDTH_IS: &str = "positive number or 'log2'";

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsBucket {
    signature: Signature,
}

impl Default for PsBucket {
    fn default() -> Self {
        PsBucket {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// The log2 bucket of `x`.
pub fn log2_bucket(x: f64) -> i64 {
    let bits = 64 - (x.abs().floor() as u64).leading_zeros();
    if x < 0.0 {
        -i64::from(bits)
    } else {
        i64::from(bits)
    }
}

fn width_error<T>(got: impl std::fmt::Display) -> Result<T> {
    WIDTH.error(&format!("a {WIDTH_IS}"), got)
}

/// How values are bucketed, read from the constant width argument.
enum Rule {
    Width(f64),
    Log2,
}

impl Rule {
    /// The rule of a width argument (`None` when it is not a constant).
    fn of(width: Option<&ScalarValue>) -> Result<Self> {
        let width = WIDTH.constant(width, WIDTH_IS)?;
        match width.try_as_str() {
            Some(Some(s)) if s.eq_ignore_ascii_case("log2") => return Ok(Rule::Log2),
            Some(_) => return width_error(width),
            None => {}
        }
        match width.cast_to(&DataType::Float64) {
            Ok(ScalarValue::Float64(Some(w))) if w > 0.0 => Ok(Rule::Width(w)),
            _ => width_error(width),
        }
    }

    fn bucket(&self, x: f64) -> i64 {
        match self {
            Rule::Width(w) => (x / w).floor() as i64,
            Rule::Log2 => log2_bucket(x),
        }
    }
}

impl ScalarUDFImpl for PsBucket {
    fn name(&self) -> &str {
        "ps_bucket"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_bucket(x, width | 'log2')", args, 2..=2)?;
        // The width keeps its type: a cast would hide that it is a constant.
        let width = match args[1].is_numeric() || is_string(&args[1]) {
            true => args[1].clone(),
            false => return width_error(&args[1]),
        };
        Ok(vec![X.number(&args[0])?, width])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        Rule::of(WIDTH.literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rule = Rule::of(WIDTH.scalar(&args))?;
        let x = cast(&X.array(&args)?, &DataType::Float64)?;
        let x = x.as_primitive::<Float64Type>();
        let out: Int64Array = (0..x.len())
            .map(|r| x.is_valid(r).then(|| rule.bucket(x.value(r))))
            .collect();
        Ok(ColumnarValue::Array(std::sync::Arc::new(out)))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "Fixed-width buckets `floor(x / width)`; with 'log2', the bit length of \
                 `floor(|x|)` with x's sign (0 for |x| < 1, 1 for 1, 2 for 2..3, 3 for 4..7, \
                 ...), for long-tailed counts. NULL for NULL.",
                "ps_bucket(x, width)",
            )
            .with_argument("x", "The value to bucket: a number.")
            .with_argument(
                "width",
                "A constant: the bucket width (a positive number), or 'log2'.",
            )
            .with_sql_example("SELECT ps_feature('i1', ps_bucket(i1, 'log2')) FROM logs")
            .build()
        });
        Some(&DOC)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    use super::log2_bucket;
    use crate::features::test_util::{planning_error, query};

    #[tokio::test]
    async fn buckets_by_width_and_by_powers_of_two() {
        let b = query(
            "SELECT ps_bucket(37, 5) AS w, ps_bucket(-1.5, 1) AS n, ps_bucket(5, 'log2') AS l",
        )
        .await
        .unwrap();
        let v = |c: usize| b[0].column(c).as_primitive::<Int64Type>().value(0);
        assert_eq!((v(0), v(1), v(2)), (7, -2, 3));
        assert_eq!(
            [0.5, 1.0, 3.0, 4.0, -9.0].map(log2_bucket),
            [0, 1, 2, 3, -4]
        );
        let err = query("SELECT ps_bucket(3, 0)").await.unwrap_err();
        assert!(
            err.to_string().contains("positive number or 'log2'"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn planning_rejects_a_column_width_and_a_text_value() {
        let err =
            planning_error("SELECT ps_bucket(x, w) FROM (VALUES (1.0, 2.0)) AS t(x, w)").await;
        assert!(
            err.contains("ps_bucket: argument 2 (width) must be a constant positive number"),
            "{err}"
        );
        let err = planning_error("SELECT ps_bucket('3', 2)").await;
        assert!(
            err.contains("ps_bucket: argument 1 (x) must be a number, got Utf8"),
            "{err}"
        );
        let err = planning_error("SELECT ps_bucket(3, 'log10')").await;
        assert!(err.contains("argument 2 (width)"), "{err}");
    }
}

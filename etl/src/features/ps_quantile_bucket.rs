//! `ps_quantile_bucket(x, splits) -> Int64`: the number of split points at or below x, so
//! quantile splits make buckets of equal population. The splits are a list, typically from
//! a scalar subquery over `approx_percentile_cont`:
//!
//! ```sql
//! ps_quantile_bucket(age, (SELECT make_array(approx_percentile_cont(0.25) WITHIN GROUP (ORDER BY age),
//!                                            approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY age),
//!                                            approx_percentile_cont(0.75) WITHIN GROUP (ORDER BY age)) FROM t))
//! ```

use std::sync::LazyLock;

use datafusion::arrow::array::{Array, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::DOC_SECTION;
use crate::udf_args::{Arg, arity, list_of};

const X: Arg = Arg::new("ps_quantile_bucket", 0, "x");
const SPLITS: Arg = Arg::new("ps_quantile_bucket", 1, "splits");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsQuantileBucket {
    signature: Signature,
}

impl Default for PsQuantileBucket {
    fn default() -> Self {
        PsQuantileBucket {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PsQuantileBucket {
    fn name(&self) -> &str {
        "ps_quantile_bucket"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_quantile_bucket(x, splits)", args, 2..=2)?;
        Ok(vec![X.number(&args[0])?, SPLITS.numbers(&args[1])?])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let n = args.number_rows;
        let Ok(splits) = cast(&SPLITS.array(&args)?, &list_of(DataType::Float64)) else {
            return exec_err!("ps_quantile_bucket: the splits must be a list of numbers");
        };
        let splits = splits.as_list::<i32>();
        let x = cast(&X.array(&args)?, &DataType::Float64)?;
        let x = x.as_primitive::<Float64Type>();
        let mut out = Int64Array::builder(n);
        for r in 0..n {
            // NaN is a missing value, as NULL is: it belongs to no bucket.
            if !x.is_valid(r) || !splits.is_valid(r) || x.value(r).is_nan() {
                out.append_null();
                continue;
            }
            let s = splits.value(r);
            let s = s.as_primitive::<Float64Type>();
            if let Some(i) = s.values().iter().position(|p| p.is_nan()) {
                return exec_err!(
                    "ps_quantile_bucket: split point {} of row {} is NaN; splits must be numbers",
                    i + 1,
                    r + 1
                );
            }
            out.append_value(s.values().partition_point(|&p| p <= x.value(r)) as i64);
        }
        Ok(ColumnarValue::Array(std::sync::Arc::new(out.finish())))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The number of split points at or below x, so quantile splits make buckets \
                 of equal population. NULL when x is NULL or NaN (a missing value) or the \
                 splits are NULL; a NaN split point is an error.",
                "ps_quantile_bucket(x, splits)",
            )
            .with_argument("x", "The value to bucket: a number.")
            .with_argument(
                "splits",
                "Ascending split points: a list of numbers, typically from a scalar subquery \
                 over approx_percentile_cont.",
            )
            .with_sql_example(
                "SELECT ps_quantile_bucket(age, (SELECT make_array(\
                 approx_percentile_cont(0.5) WITHIN GROUP (ORDER BY age)) FROM adult)) FROM adult",
            )
            .build()
        });
        Some(&DOC)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};
    use datafusion::arrow::datatypes::Int64Type;

    use crate::features::test_util::{planning_error, query};

    #[tokio::test]
    async fn counts_the_splits_at_or_below_each_value() {
        let b = query("SELECT ps_quantile_bucket(x, make_array(2.0, 3.5)) AS q FROM (VALUES (1.0), (2.0), (3.0), (4.0)) AS t(x) ORDER BY x")
            .await
            .unwrap();
        let q = b[0].column(0).as_primitive::<Int64Type>();
        assert_eq!(q.values().to_vec(), vec![0, 1, 1, 2]);
    }

    #[tokio::test]
    async fn nan_is_missing_and_a_nan_split_is_an_error() {
        let b = query("SELECT ps_quantile_bucket(x, make_array(2.0)) AS q FROM (VALUES (1.0), ('NaN'::double)) AS t(x)")
            .await
            .unwrap();
        let q = b[0].column(0).as_primitive::<Int64Type>();
        assert_eq!((q.is_valid(0), q.is_null(1)), (true, true), "{q:?}");
        let err = query("SELECT ps_quantile_bucket(1.0, make_array(2.0, 'NaN'::double))")
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("split point 2 of row 1 is NaN"), "{err}");
    }

    #[tokio::test]
    async fn planning_wants_a_list_of_numbers_as_splits() {
        let err = planning_error("SELECT ps_quantile_bucket(1.0, 2.0)").await;
        assert!(
            err.contains(
                "ps_quantile_bucket: argument 2 (splits) must be a list of numbers, got Float64"
            ),
            "{err}"
        );
    }
}

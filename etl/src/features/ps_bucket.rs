//! `ps_bucket(x, width) -> Int64`: `floor(x / width)`, fixed-width buckets; and
//! `ps_bucket(x, 'log2') -> Int64`: the bit length of `floor(|x|)` with x's sign (0 for
//! |x| < 1, 1 for 1, 2 for 2..3, 3 for 4..7, ...), for long-tailed counts. NULL for NULL.

use datafusion::arrow::array::{Array, AsArray, Int64Array};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsBucket {
    signature: Signature,
}

impl Default for PsBucket {
    fn default() -> Self {
        PsBucket {
            signature: Signature::any(2, Volatility::Immutable),
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

impl ScalarUDFImpl for PsBucket {
    fn name(&self) -> &str {
        "ps_bucket"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Int64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let rule: Box<dyn Fn(f64) -> i64> = match &args.args[1] {
            ColumnarValue::Scalar(ScalarValue::Utf8(Some(s))) if s.eq_ignore_ascii_case("log2") => {
                Box::new(log2_bucket)
            }
            ColumnarValue::Scalar(width) => match width.cast_to(&DataType::Float64)? {
                ScalarValue::Float64(Some(w)) if w > 0.0 => {
                    Box::new(move |x: f64| (x / w).floor() as i64)
                }
                _ => {
                    return exec_err!(
                        "ps_bucket: the width must be a positive number or 'log2', got {width}"
                    );
                }
            },
            ColumnarValue::Array(_) => return exec_err!("ps_bucket: the width must be a constant"),
        };
        let x = cast(
            &args.args[0].to_array(args.number_rows)?,
            &DataType::Float64,
        )?;
        let x = x.as_primitive::<Float64Type>();
        let out: Int64Array = (0..x.len())
            .map(|r| x.is_valid(r).then(|| rule(x.value(r))))
            .collect();
        Ok(ColumnarValue::Array(std::sync::Arc::new(out)))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::Int64Type;

    use super::log2_bucket;
    use crate::features::test_util::query;

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
}

//! `ps_feature(name, value) -> Utf8`: the categorical feature `name=value`, with the value
//! cast to text and trimmed; NULL when the value is NULL.

use std::fmt::Write;

use datafusion::arrow::array::{Array, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsFeature {
    signature: Signature,
}

impl Default for PsFeature {
    fn default() -> Self {
        PsFeature {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PsFeature {
    fn name(&self) -> &str {
        "ps_feature"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let (names, values) = (
            cast(&arrays[0], &DataType::Utf8)?,
            cast(&arrays[1], &DataType::Utf8)?,
        );
        let (names, values) = (names.as_string::<i32>(), values.as_string::<i32>());
        let mut out = StringBuilder::with_capacity(values.len(), values.value_data().len() * 2);
        for r in 0..values.len() {
            if names.is_null(r) || values.is_null(r) {
                out.append_null();
                continue;
            }
            // Written straight into the builder: no allocation per feature.
            let _ = out.write_str(names.value(r).trim());
            let _ = out.write_char('=');
            let _ = out.write_str(values.value(r).trim());
            out.append_value("");
        }
        Ok(ColumnarValue::Array(std::sync::Arc::new(out.finish())))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;

    use crate::features::test_util::query;

    #[tokio::test]
    async fn names_values_and_keeps_nulls_null() {
        let b = query("SELECT ps_feature('age', 39) AS a, ps_feature('w', ' Private ') AS b, ps_feature('x', NULL) AS c").await.unwrap();
        assert_eq!(b[0].column(0).as_string::<i32>().value(0), "age=39");
        assert_eq!(b[0].column(1).as_string::<i32>().value(0), "w=Private");
        assert!(b[0].column(2).is_null(0));
    }
}

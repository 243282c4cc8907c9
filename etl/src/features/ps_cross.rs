//! `ps_cross(f1, f2, ...) -> Utf8`: the cross feature `f1&f2&...` of two or more features
//! (any values, cast to text); NULL when any input is NULL.

use std::sync::LazyLock;

use datafusion::arrow::array::{Array, AsArray, StringArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::DOC_SECTION;
use crate::udf_args::{Arg, arity};

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsCross {
    signature: Signature,
}

impl Default for PsCross {
    fn default() -> Self {
        PsCross {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PsCross {
    fn name(&self) -> &str {
        "ps_cross"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_cross(f1, f2, ...)", args, 2..=usize::MAX)?;
        args.iter()
            .enumerate()
            .map(|(i, t)| Arg::new("ps_cross", i, "feature").text(t))
            .collect()
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let arrays = ColumnarValue::values_to_arrays(&args.args)?;
        let texts = arrays
            .iter()
            .map(|a| cast(a, &DataType::Utf8))
            .collect::<Result<Vec<_>, _>>()?;
        let texts: Vec<&StringArray> = texts.iter().map(|a| a.as_string::<i32>()).collect();
        let mut out = StringBuilder::new();
        let mut buf = String::new();
        for r in 0..args.number_rows {
            if texts.iter().any(|t| t.is_null(r)) {
                out.append_null();
                continue;
            }
            buf.clear();
            for (i, t) in texts.iter().enumerate() {
                if i > 0 {
                    buf.push('&');
                }
                buf.push_str(t.value(r).trim());
            }
            out.append_value(&buf);
        }
        Ok(ColumnarValue::Array(std::sync::Arc::new(out.finish())))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The cross feature `f1&f2&...` of two or more features (any values, cast to \
                 text and trimmed); NULL when any input is NULL.",
                "ps_cross(f1, f2, ...)",
            )
            .with_argument(
                "f1, f2, ...",
                "Two or more features: any types with a text form.",
            )
            .with_sql_example("SELECT ps_cross(education, occupation) FROM adult")
            .build()
        });
        Some(&DOC)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, AsArray};

    use crate::features::test_util::query;

    #[tokio::test]
    async fn joins_features_and_needs_two() {
        let b = query("SELECT ps_cross('edu=BS', 'sex=F', 3) AS x, ps_cross('a', NULL) AS y")
            .await
            .unwrap();
        assert_eq!(b[0].column(0).as_string::<i32>().value(0), "edu=BS&sex=F&3");
        assert!(b[0].column(1).is_null(0));
        let err = query("SELECT ps_cross('a')").await.unwrap_err();
        assert!(
            err.to_string().contains("ps_cross takes 2 or more"),
            "{err}"
        );
    }
}

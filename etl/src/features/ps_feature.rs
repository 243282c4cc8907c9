//! `ps_feature(name, value) -> Utf8`: the categorical feature `name=value`, with the value
//! cast to text and trimmed; NULL when the value is NULL.

use std::fmt::Write;
use std::sync::LazyLock;

use datafusion::arrow::array::{Array, AsArray, StringBuilder};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use super::DOC_SECTION;
use crate::udf_args::{Arg, arity};

const NAME: Arg = Arg::new("ps_feature", 0, "name");
const VALUE: Arg = Arg::new("ps_feature", 1, "value");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsFeature {
    signature: Signature,
}

impl Default for PsFeature {
    fn default() -> Self {
        PsFeature {
            signature: Signature::user_defined(Volatility::Immutable),
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

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_feature(name, value)", args, 2..=2)?;
        Ok(vec![NAME.string(&args[0])?, VALUE.text(&args[1])?])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Utf8)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (names, values) = (
            cast(&NAME.array(&args)?, &DataType::Utf8)?,
            cast(&VALUE.array(&args)?, &DataType::Utf8)?,
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

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The categorical feature `name=value`, with the value cast to text and \
                 trimmed; NULL when the name or the value is NULL.",
                "ps_feature(name, value)",
            )
            .with_argument("name", "The feature's name: a string.")
            .with_argument("value", "Its value: any type with a text form.")
            .with_sql_example("SELECT ps_feature('workclass', workclass) FROM adult")
            .build()
        });
        Some(&DOC)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;

    use crate::features::test_util::{planning_error, query};

    #[tokio::test]
    async fn names_values_and_keeps_nulls_null() {
        let b = query("SELECT ps_feature('age', 39) AS a, ps_feature('w', ' Private ') AS b, ps_feature('x', NULL) AS c").await.unwrap();
        assert_eq!(b[0].column(0).as_string::<i32>().value(0), "age=39");
        assert_eq!(b[0].column(1).as_string::<i32>().value(0), "w=Private");
        assert!(b[0].column(2).is_null(0));
    }

    #[tokio::test]
    async fn planning_names_the_wrong_argument() {
        let err = planning_error("SELECT ps_feature(1, 'x')").await;
        assert!(
            err.contains("ps_feature: argument 1 (name) must be a string, got Int64"),
            "{err}"
        );
        let err = planning_error("SELECT ps_feature('x')").await;
        assert!(err.contains("ps_feature takes 2 arguments"), "{err}");
    }
}

//! `ps_feature(name, value) -> Dictionary(Int32, Utf8)`: the categorical feature
//! `name=value`, with the value cast to text and trimmed; NULL when the value is NULL.
//!
//! The result is dictionary-encoded: with a constant name, each distinct value of a batch is
//! turned into its feature string once, and `make_array` of such columns, `ps_counter_add`,
//! `ps_index` and `ps_hash` then work per distinct feature, not per cell.

use std::fmt::Write;
use std::sync::LazyLock;

use datafusion::arrow::array::{
    Array, ArrayRef, AsArray, DictionaryArray, StringArray, StringBuilder, StringDictionaryBuilder,
};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Int32Type};
use datafusion::common::Result;
use datafusion::common::ScalarValue;
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
        let value = match &args[1] {
            // Kept encoded: a cast to text would build every cell's string.
            DataType::Dictionary(_, v) if VALUE.text(v).is_ok() => dictionary(),
            t => VALUE.text(t)?,
        };
        Ok(vec![NAME.string(&args[0])?, value])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(dictionary())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        // One string per distinct value of the batch, and a key per row.
        let values = cast(&VALUE.array(&args)?, &dictionary())?;
        let values = values.as_dictionary::<Int32Type>();
        let out: ArrayRef = match NAME.scalar(&args) {
            Some(
                ScalarValue::Utf8(name)
                | ScalarValue::LargeUtf8(name)
                | ScalarValue::Utf8View(name),
            ) => {
                let strings = named(name.as_deref(), values.values().as_string::<i32>());
                std::sync::Arc::new(DictionaryArray::try_new(values.keys().clone(), strings)?)
            }
            _ => std::sync::Arc::new(per_row(
                &cast(&NAME.array(&args)?, &DataType::Utf8)?,
                values,
            )),
        };
        Ok(ColumnarValue::Array(out))
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

/// The type of the result, and of a dictionary-encoded value.
fn dictionary() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// `name=value` for each of `values` (all NULL when the name is NULL).
fn named(name: Option<&str>, values: &StringArray) -> ArrayRef {
    let mut out = StringBuilder::with_capacity(values.len(), values.value_data().len() * 2);
    for i in 0..values.len() {
        match name {
            Some(name) if values.is_valid(i) => {
                // Written straight into the builder: no allocation per feature.
                let _ = out.write_str(name.trim());
                let _ = out.write_char('=');
                let _ = out.write_str(values.value(i).trim());
                out.append_value("");
            }
            _ => out.append_null(),
        }
    }
    std::sync::Arc::new(out.finish())
}

/// The features of a batch whose names differ by row: built and encoded row by row.
fn per_row(names: &ArrayRef, values: &DictionaryArray<Int32Type>) -> DictionaryArray<Int32Type> {
    let names = names.as_string::<i32>();
    let strings = values.values().as_string::<i32>();
    let mut out = StringDictionaryBuilder::<Int32Type>::new();
    let mut feature = String::new();
    for (r, key) in values.keys().iter().enumerate() {
        match key.map(|k| k as usize) {
            Some(k) if names.is_valid(r) && strings.is_valid(k) => {
                feature.clear();
                let _ = write!(
                    feature,
                    "{}={}",
                    names.value(r).trim(),
                    strings.value(k).trim()
                );
                out.append_value(&feature);
            }
            _ => out.append_null(),
        }
    }
    out.finish()
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::{Array, ArrayRef, AsArray};
    use datafusion::arrow::compute::cast;
    use datafusion::arrow::datatypes::{DataType, Int32Type};

    use crate::features::test_util::{planning_error, query};

    fn text(column: &ArrayRef, r: usize) -> Option<String> {
        let strings = cast(column, &DataType::Utf8).unwrap();
        let strings = strings.as_string::<i32>();
        strings.is_valid(r).then(|| strings.value(r).to_string())
    }

    #[tokio::test]
    async fn builds_each_distinct_value_once_and_names_rows_that_differ() {
        let b = query(
            "SELECT ps_feature('c', v) AS f, ps_feature(n, v) AS g, ps_feature('d', arrow_cast(v, 'Dictionary(Int8, Utf8)')) AS h \
             FROM (VALUES ('a', 'x'), ('b ', 'y'), ('a', 'x'), (NULL, 'x'), ('a', NULL)) AS t(v, n)",
        )
        .await
        .unwrap();
        let f = b[0].column(0);
        let expected = [Some("c=a"), Some("c=b"), Some("c=a"), None, Some("c=a")];
        for (r, e) in expected.iter().enumerate() {
            assert_eq!(text(f, r).as_deref(), *e, "row {r}");
        }
        assert_eq!(
            f.as_dictionary::<Int32Type>().values().len(),
            2,
            "a and b once"
        );
        let g = b[0].column(1);
        let expected = [Some("x=a"), Some("y=b"), Some("x=a"), None, None];
        for (r, e) in expected.iter().enumerate() {
            assert_eq!(text(g, r).as_deref(), *e, "row {r}");
        }
        assert_eq!(text(b[0].column(2), 1).as_deref(), Some("d=b"));
    }

    #[tokio::test]
    async fn names_values_and_keeps_nulls_null() {
        let b = query("SELECT ps_feature('age', 39) AS a, ps_feature('w', ' Private ') AS b, ps_feature('x', NULL) AS c").await.unwrap();
        assert_eq!(text(b[0].column(0), 0), Some("age=39".into()));
        assert_eq!(text(b[0].column(1), 0), Some("w=Private".into()));
        assert_eq!(text(b[0].column(2), 0), None);
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

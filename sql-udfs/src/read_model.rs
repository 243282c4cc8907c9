//! `read_model(dir)`: the parameters of the model saved in `dir` (a path or URL) as a table,
//! read from the committed version (see [`crate::job::saved`]), so a saved model can be
//! queried in SQL wherever it lives. Its weights (`feature, index, output, weight, state`):
//!
//! ```sql
//! SELECT feature, weight FROM read_model('s3://models/ctr') ORDER BY abs(weight) DESC LIMIT 10;
//! ```
//!
//! A topic model's counts (`feature, index, topic, count, word_probability,
//! topic_probability`, see `angel_training::kinds::lda::saved`), for instance its top words:
//!
//! ```sql
//! SELECT topic, feature, word_probability FROM (SELECT *, row_number() OVER (PARTITION BY
//!   topic ORDER BY word_probability DESC) AS rank FROM read_model('topics')) WHERE rank <= 10;
//! ```
//!
//! A boosted model's trees (`tree, node, feature, index, bin, threshold, default_left, left,
//! right, value, cover, gain`) and, as its second table, each feature's importance
//! (`feature, index, splits, gain, gain_share, cover`; see `angel_training::kinds::gbdt::saved`):
//!
//! ```sql
//! SELECT feature, gain_share, splits FROM read_model('gb', 'importance') LIMIT 10;
//! ```

use std::sync::Arc;

use angel_storage::list;
use datafusion::catalog::{TableFunctionArgs, TableFunctionImpl, TableProvider};
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::logical_expr::Expr;

use crate::ballista::stage::parquet_table;
use crate::job::saved::saved_data;
use crate::read_file::tagged_schema;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct ReadModel;

impl ReadModel {
    /// The SQL name.
    pub const NAME: &str = "read_model";
}

impl TableFunctionImpl for ReadModel {
    fn call_with_args(&self, args: TableFunctionArgs) -> Result<Arc<dyn TableProvider>> {
        let text = |e: &Expr| match e {
            Expr::Literal(
                ScalarValue::Utf8(Some(s))
                | ScalarValue::LargeUtf8(Some(s))
                | ScalarValue::Utf8View(Some(s)),
                _,
            ) => Some(s.clone()),
            _ => None,
        };
        let texts: Option<Vec<String>> = args.exprs().iter().map(text).collect();
        let (dir, table) = match texts.as_deref() {
            Some([dir]) => (dir.clone(), None),
            Some([dir, table]) => (dir.clone(), Some(table.clone())),
            _ => {
                return plan_err!(
                    "{}: the arguments are the model directory and, optionally, a table of it \
                     (as strings)",
                    Self::NAME
                );
            }
        };
        let plan = |e: &dyn std::fmt::Display| {
            let name = Self::NAME;
            DataFusionError::Plan(format!("{name}: cannot read the model saved at {dir}: {e}"))
        };
        let (data, schema) = saved_data(&dir, table.as_deref()).map_err(|e| plan(&e))?;
        // A missing file would read as an empty table: check it is there.
        list::files(&data).map_err(|e| plan(&e))?;
        // Tagged with its source, so two models read in one query stay apart.
        let schema = tagged_schema(&schema, &format!("read_model('{dir}')"));
        parquet_table(&data.url(), schema)
    }
}

#[cfg(test)]
mod tests {
    use datafusion::prelude::SessionContext;

    use super::*;

    #[tokio::test]
    async fn a_directory_without_a_model_is_a_planning_error_naming_it() {
        let ctx = SessionContext::new();
        ctx.register_udtf(ReadModel::NAME, Arc::new(ReadModel));
        let dir = tempfile::tempdir().unwrap();
        let sql = format!("SELECT * FROM read_model('{}/none')", dir.path().display());
        let err = match ctx.sql(&sql).await {
            Ok(df) => df.collect().await.unwrap_err(),
            Err(e) => e,
        };
        assert!(
            err.to_string().contains("cannot read the model saved at"),
            "{err}"
        );
        let err = ctx.sql("SELECT * FROM read_model(1)").await.unwrap_err();
        assert!(err.to_string().contains("model directory"), "{err}");
        let err = ctx
            .sql("SELECT * FROM read_model('a', 'b', 'c')")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("optionally, a table"), "{err}");
    }
}

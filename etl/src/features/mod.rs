//! SQL functions for the usual feature extraction, each in its own file:
//!
//! - [`ps_feature`]: `ps_feature(name, value)` -> `'name=value'`, a categorical feature.
//! - [`ps_bucket`]: `ps_bucket(x, width)` (fixed width) or `ps_bucket(x, 'log2')`.
//! - [`ps_quantile_bucket`]: `ps_quantile_bucket(x, splits)`, buckets between quantiles.
//! - [`ps_cross`]: `ps_cross(f1, f2, ...)` -> `'f1&f2&...'`, a cross feature.
//! - [`ps_tokens`]: `ps_tokens(text [, options])` -> a text's words, for bags of words.
//!
//! All return NULL where an input is NULL, and feature lists drop NULLs, so missing values
//! simply contribute no feature.
//!
//! Their argument checks, shared with `angel-sql`'s functions, are in [`crate::udf_args`].

pub mod ps_bucket;
pub mod ps_cross;
pub mod ps_feature;
pub mod ps_quantile_bucket;
pub mod ps_tokens;

use datafusion::logical_expr::{DocSection, ScalarUDF};

/// The documentation section of the feature-extraction functions.
pub const DOC_SECTION: DocSection = DocSection {
    include: true,
    label: "angel-ps feature functions",
    description: Some(
        "Feature extraction in SQL: categorical features, fixed-width, logarithmic and \
         quantile buckets, cross features, a text's words.",
    ),
};

/// Every feature-extraction function.
pub fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::from(ps_feature::PsFeature::default()),
        ScalarUDF::from(ps_bucket::PsBucket::default()),
        ScalarUDF::from(ps_quantile_bucket::PsQuantileBucket::default()),
        ScalarUDF::from(ps_cross::PsCross::default()),
        ScalarUDF::from(ps_tokens::PsTokens::default()),
    ]
}

#[cfg(test)]
pub(crate) mod test_util {
    use datafusion::arrow::array::RecordBatch;
    use datafusion::prelude::SessionContext;

    fn context() -> SessionContext {
        let ctx = SessionContext::new();
        for f in super::functions() {
            ctx.register_udf(f);
        }
        ctx
    }

    /// Runs `sql` with every feature function registered.
    pub async fn query(sql: &str) -> datafusion::common::Result<Vec<RecordBatch>> {
        context().sql(sql).await?.collect().await
    }

    /// The error planning `sql` fails with (before any row is read).
    pub async fn planning_error(sql: &str) -> String {
        match context().sql(sql).await {
            Ok(_) => panic!("{sql} planned"),
            Err(e) => e.to_string(),
        }
    }
}

//! SQL functions for the usual feature extraction, each in its own file:
//!
//! - [`ps_feature`]: `ps_feature(name, value)` -> `'name=value'`, a categorical feature.
//! - [`ps_bucket`]: `ps_bucket(x, width)` (fixed width) or `ps_bucket(x, 'log2')`.
//! - [`ps_quantile_bucket`]: `ps_quantile_bucket(x, splits)`, buckets between quantiles.
//! - [`ps_cross`]: `ps_cross(f1, f2, ...)` -> `'f1&f2&...'`, a cross feature.
//!
//! All return NULL where an input is NULL, and feature lists drop NULLs, so missing values
//! simply contribute no feature.

pub mod ps_bucket;
pub mod ps_cross;
pub mod ps_feature;
pub mod ps_quantile_bucket;

use datafusion::logical_expr::ScalarUDF;

/// Every feature-extraction function.
pub fn functions() -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::from(ps_feature::PsFeature::default()),
        ScalarUDF::from(ps_bucket::PsBucket::default()),
        ScalarUDF::from(ps_quantile_bucket::PsQuantileBucket::default()),
        ScalarUDF::from(ps_cross::PsCross::default()),
    ]
}

#[cfg(test)]
pub(crate) mod test_util {
    use datafusion::arrow::array::RecordBatch;
    use datafusion::prelude::SessionContext;

    /// Runs `sql` with every feature function registered.
    pub async fn query(sql: &str) -> datafusion::common::Result<Vec<RecordBatch>> {
        let ctx = SessionContext::new();
        for f in super::functions() {
            ctx.register_udf(f);
        }
        ctx.sql(sql).await?.collect().await
    }
}

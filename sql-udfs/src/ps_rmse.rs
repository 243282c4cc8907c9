//! `ps_rmse(label, predicted) -> Float64`: the root mean squared error of predictions (a
//! matrix factorization model's ratings, a linear regression's values), as scikit-learn's
//! `root_mean_squared_error` and Spark's `RegressionEvaluator(metricName="rmse")`.

use std::sync::LazyLock;

use datafusion::logical_expr::Documentation;

use crate::args::DOC_SECTION;
use crate::scored_aggregate::ScoredAggregate;

/// See the module documentation.
pub fn ps_rmse() -> ScoredAggregate {
    ScoredAggregate::new(
        "ps_rmse",
        "predicted",
        |label, predicted| (label - predicted).powi(2),
        documentation,
    )
    .finished_by(f64::sqrt)
}

fn documentation() -> &'static Documentation {
    static DOC: LazyLock<Documentation> = LazyLock::new(|| {
        Documentation::builder(
            DOC_SECTION,
            "The root mean squared error of the predictions, as scikit-learn's \
             root_mean_squared_error. Rows with a NULL label or prediction are skipped; a \
             NaN or infinite one is an error.",
            "ps_rmse(label, predicted)",
        )
        .with_argument("label", "The true value (a rating): a number.")
        .with_argument("predicted", "The predicted value: a number.")
        .with_sql_example("SELECT ps_rmse(rating, ps_predict('recs', user, item)) FROM holdout")
        .build()
    });
    &DOC
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Float64Array};
    use datafusion::common::ScalarValue;
    use datafusion::logical_expr::Accumulator;

    use super::*;

    #[test]
    fn the_root_of_the_mean_squared_error_skipping_nulls() {
        let mut acc = ps_rmse().mean();
        let labels: ArrayRef = Arc::new(Float64Array::from(vec![Some(1.0), Some(2.0), None]));
        let predicted: ArrayRef = Arc::new(Float64Array::from(vec![3.0, 2.0, 9.0]));
        acc.update_batch(&[labels, predicted]).unwrap();
        // Errors 2 and 0: sqrt((4 + 0) / 2).
        assert_eq!(
            acc.evaluate().unwrap(),
            ScalarValue::Float64(Some(2f64.sqrt()))
        );
    }
}

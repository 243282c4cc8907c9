//! `ps_rmse(label, predicted) -> Float64`: the root mean squared error of predictions (a
//! matrix factorization model's ratings, a linear regression's values), as scikit-learn's
//! `root_mean_squared_error` and Spark's `RegressionEvaluator(metricName="rmse")`.

use std::sync::LazyLock;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{Arg, DOC_SECTION, arity, label_type};
use crate::mean::{Mean, ScoredMean};

const LABEL: Arg = Arg::new("ps_rmse", 0, "label");
const PREDICTED: Arg = Arg::new("ps_rmse", 1, "predicted");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsRmse {
    signature: Signature,
}

impl Default for PsRmse {
    fn default() -> Self {
        PsRmse {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for PsRmse {
    fn name(&self) -> &str {
        "ps_rmse"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_rmse(label, predicted)", args, 2..=2)?;
        Ok(vec![
            label_type(LABEL, &args[0])?,
            PREDICTED.number(&args[1])?,
        ])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(rmse()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(Mean::state_fields(args.name))
    }

    fn documentation(&self) -> Option<&Documentation> {
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
        Some(&DOC)
    }
}

/// The root of the mean of the squared errors.
fn rmse() -> ScoredMean {
    let squared = |label: f64, predicted: f64| (label - predicted).powi(2);
    ScoredMean::new(LABEL, PREDICTED, squared).finished_by(f64::sqrt)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::{ArrayRef, Float64Array};
    use datafusion::common::ScalarValue;

    use super::*;

    #[test]
    fn the_root_of_the_mean_squared_error_skipping_nulls() {
        let mut acc = rmse();
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

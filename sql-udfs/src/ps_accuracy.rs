//! `ps_accuracy(label, predicted) -> Float64`: the share of rows whose predicted class equals
//! the label (a softmax model's `ps_predict`, say), as scikit-learn's `accuracy_score`.

use std::sync::LazyLock;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{Arg, DOC_SECTION, arity, label_type};
use crate::mean::{Mean, ScoredMean};

const LABEL: Arg = Arg::new("ps_accuracy", 0, "label");
const PREDICTED: Arg = Arg::new("ps_accuracy", 1, "predicted");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsAccuracy {
    signature: Signature,
}

impl Default for PsAccuracy {
    fn default() -> Self {
        PsAccuracy {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for PsAccuracy {
    fn name(&self) -> &str {
        "ps_accuracy"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_accuracy(label, predicted)", args, 2..=2)?;
        Ok(vec![
            label_type(LABEL, &args[0])?,
            PREDICTED.number(&args[1])?,
        ])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ScoredMean::new(
            LABEL,
            PREDICTED,
            |label, predicted| f64::from(label == predicted),
        )))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(Mean::state_fields(args.name))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The share of rows whose predicted class equals the label, as scikit-learn's \
                 accuracy_score. Rows with a NULL label or prediction are skipped; a NaN or \
                 infinite one is an error.",
                "ps_accuracy(label, predicted)",
            )
            .with_argument("label", "The true class: a number.")
            .with_argument("predicted", "The predicted class: a number.")
            .with_sql_example("SELECT ps_accuracy(label, ps_predict('digits', idx, val)) FROM test")
            .build()
        });
        Some(&DOC)
    }
}

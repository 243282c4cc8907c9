//! `ps_logloss(label, probability) -> Float64`: mean log loss, with probabilities clipped to
//! [1e-15, 1 - 1e-15] as scikit-learn does. Labels > 0 are positive.

use std::sync::LazyLock;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{
    Accumulator, AggregateUDFImpl, Documentation, Signature, Volatility,
};

use crate::args::{Arg, DOC_SECTION, arity, label_type};
use crate::mean::{Mean, ScoredMean};

const LABEL: Arg = Arg::new("ps_logloss", 0, "label");
const PROBABILITY: Arg = Arg::new("ps_logloss", 1, "probability");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsLogloss {
    signature: Signature,
}

impl Default for PsLogloss {
    fn default() -> Self {
        PsLogloss {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

impl AggregateUDFImpl for PsLogloss {
    fn name(&self) -> &str {
        "ps_logloss"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_logloss(label, probability)", args, 2..=2)?;
        Ok(vec![
            label_type(LABEL, &args[0])?,
            PROBABILITY.number(&args[1])?,
        ])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(ScoredMean::new(LABEL, PROBABILITY, |label, p| {
            let p = p.clamp(1e-15, 1.0 - 1e-15);
            -if label > 0.0 { p.ln() } else { (1.0 - p).ln() }
        })))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(Mean::state_fields(args.name))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "Mean log loss of predicted probabilities, clipped to [1e-15, 1 - 1e-15] as \
                 scikit-learn does. Labels > 0 are positive; rows with a NULL label or \
                 probability are skipped; a NaN probability or a NaN or infinite label is an \
                 error.",
                "ps_logloss(label, probability)",
            )
            .with_argument("label", "The true label: a number (or a boolean).")
            .with_argument(
                "probability",
                "The predicted probability of the positive class: a number.",
            )
            .with_sql_example("SELECT ps_logloss(label, ps_predict('a9a', idx, val)) FROM test")
            .build()
        });
        Some(&DOC)
    }
}

//! `ps_logloss(label, probability) -> Float64`: mean log loss, with probabilities clipped to
//! [1e-15, 1 - 1e-15] as scikit-learn does. Labels > 0 are positive.

use datafusion::arrow::array::{Array, ArrayRef, AsArray};
use datafusion::arrow::datatypes::{DataType, FieldRef, Float64Type};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::function::{AccumulatorArgs, StateFieldsArgs};
use datafusion::logical_expr::{Accumulator, AggregateUDFImpl, Signature, Volatility};

use crate::args::floats;
use crate::mean::Mean;

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsLogloss {
    signature: Signature,
}

impl Default for PsLogloss {
    fn default() -> Self {
        PsLogloss {
            signature: Signature::any(2, Volatility::Immutable),
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

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn accumulator(&self, _args: AccumulatorArgs) -> Result<Box<dyn Accumulator>> {
        Ok(Box::new(Logloss::default()))
    }

    fn state_fields(&self, args: StateFieldsArgs) -> Result<Vec<FieldRef>> {
        Ok(Mean::state_fields(args.name))
    }
}

#[derive(Debug, Default)]
struct Logloss {
    mean: Mean,
}

impl Accumulator for Logloss {
    fn update_batch(&mut self, values: &[ArrayRef]) -> Result<()> {
        let (labels, probs) = (floats(&values[0])?, floats(&values[1])?);
        let (labels, probs) = (
            labels.as_primitive::<Float64Type>(),
            probs.as_primitive::<Float64Type>(),
        );
        for r in (0..labels.len()).filter(|&r| labels.is_valid(r) && probs.is_valid(r)) {
            let p = probs.value(r).clamp(1e-15, 1.0 - 1e-15);
            self.mean.sum -= if labels.value(r) > 0.0 {
                p.ln()
            } else {
                (1.0 - p).ln()
            };
            self.mean.rows += 1;
        }
        Ok(())
    }

    fn state(&mut self) -> Result<Vec<ScalarValue>> {
        Ok(self.mean.state())
    }

    fn merge_batch(&mut self, states: &[ArrayRef]) -> Result<()> {
        self.mean.merge(states);
        Ok(())
    }

    fn evaluate(&mut self) -> Result<ScalarValue> {
        Ok(self.mean.evaluate())
    }

    fn size(&self) -> usize {
        std::mem::size_of_val(self)
    }
}

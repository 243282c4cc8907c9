//! `ps_predict(model, indices[, values]) -> Float64`: the model's prediction per row: a
//! probability for logistic models, the margin `w . x + b` for linear models and SVMs.
//!
//! Per record batch, one pruned pull of the weights of the batch's distinct keys.

use datafusion::arrow::array::Float64Array;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, TypeSignature, Volatility,
};

use crate::args::{array_result, const_str};
use crate::model::Model;
use crate::sparse::SparseRows;

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsPredict {
    master: String,
    signature: Signature,
}

impl PsPredict {
    /// The master address this function is bound to; it travels with plans to Ballista
    /// executors ([`crate::cluster::codec`]).
    pub fn master(&self) -> &str {
        &self.master
    }

    /// The function for the service whose master is at `master`.
    pub fn new(master: &str) -> Self {
        PsPredict {
            master: master.to_string(),
            signature: Signature::one_of(
                vec![TypeSignature::Any(2), TypeSignature::Any(3)],
                Volatility::Volatile,
            ),
        }
    }
}

impl ScalarUDFImpl for PsPredict {
    fn name(&self) -> &str {
        "ps_predict"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = const_str("ps_predict", &args.args, 0, "model")?;
        let model = Model::open(&self.master, &name)?;
        let arrays = ColumnarValue::values_to_arrays(&args.args[1..])?;
        let rows = SparseRows::from_arrays("ps_predict", None, &arrays[0], arrays.get(1))?;
        let g = rows.gather(0..rows.len(), model.spec.bias_key());
        let weights = model.weights(&g.keys)?;
        let kind = model.spec.kind;
        let out: Float64Array = (0..rows.len())
            .map(|r| kind.predict(rows.margin(r, &g, &weights)))
            .collect();
        Ok(array_result(out))
    }
}

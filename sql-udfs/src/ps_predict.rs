//! `ps_predict(model, indices[, values]) -> Float64`: the model's prediction per row: a
//! probability for logistic models, the margin `w . x + b` for linear models and SVMs, the
//! most likely class for softmax models.
//!
//! Per record batch, one pruned pull of the weights of the batch's distinct keys. The model
//! name is a constant, checked at planning.

use std::sync::LazyLock;

use datafusion::arrow::array::Float64Array;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{
    DOC_SECTION, INDICES_DOC, MODEL_DOC, VALUES_DOC, array_result, const_str, return_field,
};
use crate::binding::{Binding, PsBound};
use crate::bridge::train_error;
use crate::model_rows::ModelRows;

const ARGS: ModelRows = ModelRows::new(
    "ps_predict",
    "ps_predict(model, indices[, values]) or ps_predict(model, user, item)",
    false,
);

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsPredict {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsPredict {
    fn bind(binding: Binding) -> Self {
        PsPredict {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsPredict {
    fn name(&self) -> &str {
        "ps_predict"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        ARGS.coerce_types(args)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(ARGS.model(), ARGS.model().literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (model, rows) = ARGS.open(&self.binding, &args)?;
        let predicted = model.predict(self.name(), &rows).map_err(train_error)?;
        Ok(array_result(Float64Array::from(predicted)))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The model's prediction per row: a probability for logistic models, the \
                 margin w . x + b for linear models and SVMs, the most likely class (0 to \
                 classes - 1) for softmax models. Per record batch, one pruned pull of the \
                 weights of the batch's distinct keys.",
                "ps_predict(model, indices[, values])",
            )
            .with_argument("model", MODEL_DOC)
            .with_argument("indices", INDICES_DOC)
            .with_argument("values", VALUES_DOC)
            .with_sql_example("SELECT label, ps_predict('a9a', idx, val) AS p FROM test")
            .with_related_udf("ps_train")
            .with_related_udf("ps_predict_proba")
            .build()
        });
        Some(&DOC)
    }
}

//! `ps_predict_proba(model, indices[, values]) -> List<Float64>`: the class probabilities
//! per row: one per class for softmax models, the positive class's one for logistic models.
//! Models that predict no probabilities (linear regression, SVM) are refused by name.
//!
//! Per record batch, one pruned pull of the weights of the batch's distinct keys. The model
//! name is a constant, checked at planning.

use std::sync::LazyLock;

use datafusion::arrow::array::ListArray;
use datafusion::arrow::datatypes::{DataType, FieldRef, Float64Type};
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
    "ps_predict_proba",
    "ps_predict_proba(model, indices[, values])",
    false,
);

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsPredictProba {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsPredictProba {
    fn bind(binding: Binding) -> Self {
        PsPredictProba {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsPredictProba {
    fn name(&self) -> &str {
        "ps_predict_proba"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        ARGS.coerce_types(args)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::new_list(DataType::Float64, true))
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(ARGS.model(), ARGS.model().literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let (model, rows) = ARGS.open(&self.binding, &args)?;
        let predicted = model
            .probabilities(self.name(), &rows)
            .map_err(train_error)?;
        let lists = predicted
            .into_iter()
            .map(|p| Some(p.into_iter().map(Some).collect::<Vec<_>>()));
        Ok(array_result(ListArray::from_iter_primitive::<
            Float64Type,
            _,
            _,
        >(lists)))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The class probabilities per row, as a list: one per class (0 to classes - 1) \
                 for softmax models, the positive class's one for logistic models. Linear \
                 regressions and SVMs predict no probabilities and are refused. Per record \
                 batch, one pruned pull of the weights of the batch's distinct keys.",
                "ps_predict_proba(model, indices[, values])",
            )
            .with_argument("model", MODEL_DOC)
            .with_argument("indices", INDICES_DOC)
            .with_argument("values", VALUES_DOC)
            .with_sql_example(
                "SELECT label, ps_predict_proba('digits', idx, val)[label + 1] AS p_true FROM test",
            )
            .with_related_udf("ps_predict")
            .build()
        });
        Some(&DOC)
    }
}

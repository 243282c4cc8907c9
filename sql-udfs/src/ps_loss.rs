//! `ps_loss(model, label, indices[, values]) -> Float64`: the loss of each row under the
//! model, the one its training minimises (log loss, half the squared error, hinge,
//! cross-entropy): `avg(ps_loss(...))` over a holdout table is comparable with the epoch
//! table's `train_loss`.
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
    "ps_loss",
    "ps_loss(model, label, indices[, values]) or ps_loss(model, rating, user, item)",
    true,
);

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsLoss {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsLoss {
    fn bind(binding: Binding) -> Self {
        PsLoss {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsLoss {
    fn name(&self) -> &str {
        "ps_loss"
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
        let losses = model.losses(self.name(), &rows).map_err(train_error)?;
        Ok(array_result(Float64Array::from(losses)))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The loss of each row under the model, the one its training minimises: log \
                 loss (logistic), half the squared error (linear), hinge (SVM), cross-entropy \
                 (softmax). Its mean over a holdout table compares with the epoch table's \
                 train_loss. Per record batch, one pruned pull.",
                "ps_loss(model, label, indices[, values])",
            )
            .with_argument("model", MODEL_DOC)
            .with_argument("label", "The row's label: a number.")
            .with_argument("indices", INDICES_DOC)
            .with_argument("values", VALUES_DOC)
            .with_sql_example("SELECT avg(ps_loss('a9a', label, idx, val)) FROM test")
            .with_related_udf("ps_predict")
            .build()
        });
        Some(&DOC)
    }
}

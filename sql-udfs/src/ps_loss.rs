//! `ps_loss(model, label, indices[, values]) -> Float64`: the loss of each row under the
//! model, the one its training minimises (log loss, half the squared error, hinge,
//! cross-entropy): `avg(ps_loss(...))` over a holdout table is comparable with the epoch
//! table's `train_loss`.
//!
//! Per record batch, one pruned pull of the weights of the batch's distinct keys. The model
//! name is a constant, checked at planning.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, Float64Array};
use datafusion::common::Result;
use datafusion::logical_expr::{Documentation, ScalarFunctionArgs};

use crate::args::{DOC_SECTION, INDICES_DOC, MODEL_DOC, VALUES_DOC};
use crate::binding::Binding;
use crate::bridge::train_error;
use crate::model_function::{Answer, ModelFunction};
use crate::model_rows::ModelRows;

/// See the module documentation.
pub type PsLoss = ModelFunction<Loss>;

/// What `PsLoss` answers.
#[derive(Debug)]
pub struct Loss;

impl Answer for Loss {
    const ARGS: ModelRows = ModelRows::new(
        "ps_loss",
        "ps_loss(model, label, indices[, values]) or ps_loss(model, rating, user, item)",
        true,
    );

    fn answer(binding: &Binding, args: &ScalarFunctionArgs) -> Result<ArrayRef> {
        let (model, rows) = Self::ARGS.open(binding, args)?;
        let losses = model.losses(Self::ARGS.model().function, &rows);
        Ok(Arc::new(Float64Array::from(losses.map_err(train_error)?)))
    }

    fn documentation() -> &'static Documentation {
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
        &DOC
    }
}

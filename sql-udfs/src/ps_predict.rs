//! `ps_predict(model, indices[, values]) -> Float64`: the model's prediction per row: a
//! probability for logistic models, the margin `w . x + b` for linear models and SVMs, the
//! most likely class for softmax models.
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
pub type PsPredict = ModelFunction<Prediction>;

/// What `PsPredict` answers.
#[derive(Debug)]
pub struct Prediction;

impl Answer for Prediction {
    const ARGS: ModelRows = ModelRows::new(
        "ps_predict",
        "ps_predict(model, indices[, values]) or ps_predict(model, user, item)",
        false,
    );

    fn answer(binding: &Binding, args: &ScalarFunctionArgs) -> Result<ArrayRef> {
        let (model, rows) = Self::ARGS.open(binding, args)?;
        let predicted = model.predict(Self::ARGS.model().function, &rows);
        Ok(Arc::new(Float64Array::from(
            predicted.map_err(train_error)?,
        )))
    }

    fn documentation() -> &'static Documentation {
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
        &DOC
    }
}

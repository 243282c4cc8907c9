//! `ps_predict_proba(model, indices[, values]) -> List<Float64>`: the class probabilities
//! per row: one per class for softmax models, the positive class's one for logistic models.
//! Models that predict no probabilities (linear regression, SVM) are refused by name.
//!
//! Per record batch, one pruned pull of the weights of the batch's distinct keys. The model
//! name is a constant, checked at planning.

use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{ArrayRef, ListArray};
use datafusion::arrow::datatypes::{DataType, Float64Type};
use datafusion::common::Result;
use datafusion::logical_expr::{Documentation, ScalarFunctionArgs};

use crate::args::{DOC_SECTION, INDICES_DOC, MODEL_DOC, VALUES_DOC};
use crate::binding::Binding;
use crate::bridge::train_error;
use crate::model_function::{Answer, ModelFunction};
use crate::model_rows::ModelRows;

/// See the module documentation.
pub type PsPredictProba = ModelFunction<Probabilities>;

/// What `PsPredictProba` answers.
#[derive(Debug)]
pub struct Probabilities;

impl Answer for Probabilities {
    const ARGS: ModelRows = ModelRows::new(
        "ps_predict_proba",
        "ps_predict_proba(model, indices[, values])",
        false,
    );

    fn return_type() -> DataType {
        DataType::new_list(DataType::Float64, true)
    }

    fn answer(binding: &Binding, args: &ScalarFunctionArgs) -> Result<ArrayRef> {
        let (model, rows) = Self::ARGS.open(binding, args)?;
        let predicted = model.probabilities(Self::ARGS.model().function, &rows);
        let lists = (predicted.map_err(train_error)?.into_iter())
            .map(|p| Some(p.into_iter().map(Some).collect::<Vec<_>>()));
        Ok(Arc::new(
            ListArray::from_iter_primitive::<Float64Type, _, _>(lists),
        ))
    }

    fn documentation() -> &'static Documentation {
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
        &DOC
    }
}

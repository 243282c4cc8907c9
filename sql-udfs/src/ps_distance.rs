//! `ps_distance(model, point) -> Float64` or `ps_distance(model, indices, values)`: a k-means
//! model's Euclidean distance from each row to its nearest centre (the centre `ps_predict`
//! names). Per record batch, one pull of the centres. The model name is a constant, checked
//! at planning.

use std::sync::{Arc, LazyLock};

use angel_training::kinds::kmeans;
use datafusion::arrow::array::{ArrayRef, Float64Array};
use datafusion::common::Result;
use datafusion::logical_expr::{Documentation, ScalarFunctionArgs};

use crate::args::{DOC_SECTION, MODEL_DOC};
use crate::binding::Binding;
use crate::bridge::train_error;
use crate::model_function::{Answer, ModelFunction};
use crate::model_rows::ModelRows;

/// See the module documentation.
pub type PsDistance = ModelFunction<Distance>;

/// What `PsDistance` answers.
#[derive(Debug)]
pub struct Distance;

impl Answer for Distance {
    const ARGS: ModelRows = ModelRows::new(
        "ps_distance",
        "ps_distance(model, point) or ps_distance(model, indices, values)",
        false,
    );

    fn answer(binding: &Binding, args: &ScalarFunctionArgs) -> Result<ArrayRef> {
        let (model, rows) = Self::ARGS.open(binding, args)?;
        let nearest = kmeans::predict::nearest(&model, Self::ARGS.model().function, &rows);
        let distances = nearest.map_err(train_error)?.into_iter().map(|(_, d)| d);
        Ok(Arc::new(Float64Array::from_iter_values(distances)))
    }

    fn documentation() -> &'static Documentation {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "A k-means model's Euclidean distance from each row to its nearest centre (the \
                 one ps_predict names). Per record batch, one pull of the centres.",
                "ps_distance(model, point) or ps_distance(model, indices, values)",
            )
            .with_argument("model", MODEL_DOC)
            .with_argument(
                "point",
                "The row's coordinates: a list of numbers, or indices and values.",
            )
            .with_sql_example("SELECT id, ps_predict('km', point) AS cluster, ps_distance('km', point) AS distance FROM blobs")
            .with_related_udf("ps_predict")
            .build()
        });
        &DOC
    }
}

//! `ps_distance(model, point) -> Float64` or `ps_distance(model, indices, values)`: a k-means
//! model's Euclidean distance from each row to its nearest centre (the centre `ps_predict`
//! names). Per record batch, one pull of the centres. The model name is a constant, checked
//! at planning.

use std::sync::LazyLock;

use angel_training::kinds::kmeans;
use datafusion::arrow::array::Float64Array;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{DOC_SECTION, MODEL_DOC, array_result, const_str, return_field};
use crate::binding::{Binding, PsBound};
use crate::bridge::train_error;
use crate::model_rows::ModelRows;

const ARGS: ModelRows = ModelRows::new(
    "ps_distance",
    "ps_distance(model, point) or ps_distance(model, indices, values)",
    false,
);

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsDistance {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsDistance {
    fn bind(binding: Binding) -> Self {
        PsDistance {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsDistance {
    fn name(&self) -> &str {
        "ps_distance"
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
        let nearest = kmeans::predict::nearest(&model, self.name(), &rows).map_err(train_error)?;
        let distances = nearest.into_iter().map(|(_, d)| d);
        Ok(array_result(Float64Array::from_iter_values(distances)))
    }

    fn documentation(&self) -> Option<&Documentation> {
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
        Some(&DOC)
    }
}

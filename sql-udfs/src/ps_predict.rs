//! `ps_predict(model, indices[, values]) -> Float64`: the model's prediction per row: a
//! probability for logistic models, the margin `w . x + b` for linear models and SVMs.
//!
//! Per record batch, one pruned pull of the weights of the batch's distinct keys. The model
//! name is a constant, checked at planning.

use std::sync::LazyLock;

use angel_training::Model;
use angel_training::rows::SparseRows;

use datafusion::arrow::array::Float64Array;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{
    Arg, DOC_SECTION, INDICES_DOC, MODEL_DOC, VALUES_DOC, arity, array_result, const_str,
    indices_type, name_type, return_field,
};
use crate::binding::{Binding, PsBound};
use crate::bridge::train_error;

const MODEL: Arg = Arg::new("ps_predict", 0, "model");
const INDICES: Arg = Arg::new("ps_predict", 1, "indices");
const VALUES: Arg = Arg::new("ps_predict", 2, "values");

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
        arity(
            self.name(),
            "ps_predict(model, indices[, values])",
            args,
            2..=3,
        )?;
        let mut types = vec![
            name_type(MODEL, &args[0])?,
            indices_type(INDICES, &args[1])?,
        ];
        if let Some(values) = args.get(2) {
            types.push(VALUES.numbers(values)?);
        }
        Ok(types)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::Float64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(MODEL, MODEL.literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let name = const_str(MODEL, MODEL.scalar(&args))?;
        let model = Model::open(self.binding.client()?, &name).map_err(train_error)?;
        let values = args.args.get(VALUES.index);
        let values = values.map(|v| v.to_array(args.number_rows)).transpose()?;
        let indices = INDICES.array(&args)?;
        let rows = SparseRows::from_arrays(self.name(), None, &indices, values.as_ref());
        let predicted = rows
            .and_then(|rows| model.predict(self.name(), &rows))
            .map_err(train_error)?;
        Ok(array_result(Float64Array::from(predicted)))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The model's prediction per row: a probability for logistic models, the \
                 margin w . x + b for linear models and SVMs. Per record batch, one pruned pull \
                 of the weights of the batch's distinct keys.",
                "ps_predict(model, indices[, values])",
            )
            .with_argument("model", MODEL_DOC)
            .with_argument("indices", INDICES_DOC)
            .with_argument("values", VALUES_DOC)
            .with_sql_example("SELECT label, ps_predict('a9a', idx, val) AS p FROM test")
            .with_related_udf("ps_train")
            .build()
        });
        Some(&DOC)
    }
}

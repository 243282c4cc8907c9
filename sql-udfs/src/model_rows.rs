//! The arguments of the functions that score rows with a model, `(model, [label,] indices[,
//! values])` (`ps_predict`, `ps_predict_proba`, `ps_loss`): their types, and the model and
//! rows they name in a call.

use angel_training::Model;
use angel_training::rows::SparseRows;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::ScalarFunctionArgs;

use crate::args::{Arg, arity, const_str, indices_type, label_type, name_type};
use crate::binding::Binding;
use crate::bridge::train_error;

/// Where a function's arguments are.
pub struct ModelRows {
    model: Arg,
    label: Option<Arg>,
    indices: Arg,
    values: Arg,
    syntax: &'static str,
}

impl ModelRows {
    /// The arguments of `function`, written as `syntax`; `labelled` when a label comes
    /// second.
    pub const fn new(function: &'static str, syntax: &'static str, labelled: bool) -> Self {
        let first = if labelled { 2 } else { 1 };
        ModelRows {
            model: Arg::new(function, 0, "model"),
            label: if labelled {
                Some(Arg::new(function, 1, "label"))
            } else {
                None
            },
            indices: Arg::new(function, first, "indices"),
            values: Arg::new(function, first + 1, "values"),
            syntax,
        }
    }

    /// The model argument.
    pub fn model(&self) -> Arg {
        self.model
    }

    /// The types the arguments `args` are coerced to.
    pub fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        let first = self.indices.index;
        arity(
            self.model.function,
            self.syntax,
            args,
            first + 1..=first + 2,
        )?;
        let mut types = vec![name_type(self.model, &args[0])?];
        if let Some(label) = self.label {
            types.push(label_type(label, &args[1])?);
        }
        types.push(indices_type(self.indices, &args[first])?);
        if let Some(values) = args.get(first + 1) {
            types.push(self.values.numbers(values)?);
        }
        Ok(types)
    }

    /// The model a call names, opened with `binding`'s client, and the call's rows.
    pub fn open(
        &self,
        binding: &Binding,
        args: &ScalarFunctionArgs,
    ) -> Result<(Model, SparseRows)> {
        let name = const_str(self.model, self.model.scalar(args))?;
        let model = Model::open(binding.client()?, &name).map_err(train_error)?;
        let values = args.args.get(self.values.index);
        let values = values.map(|v| v.to_array(args.number_rows)).transpose()?;
        let labels = self.label.map(|l| l.array(args)).transpose()?;
        let indices = self.indices.array(args)?;
        let function = self.model.function;
        let rows = SparseRows::from_arrays(function, labels.as_ref(), &indices, values.as_ref());
        Ok((model, rows.map_err(train_error)?))
    }
}

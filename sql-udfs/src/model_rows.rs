//! The arguments of the functions that score rows with a model, `(model, [label,] indices[,
//! values])`, or `(model, [rating,] user, item)` for matrix factorization (`ps_predict`,
//! `ps_predict_proba`, `ps_loss`): their types, and the model and rows they name in a call.

use angel_training::Model;
use angel_training::kinds::Inputs;
use angel_training::rows::SparseRows;
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::ScalarFunctionArgs;

use crate::args::{
    Arg, arity, const_str, indices_type, integer_type, is_point_type, label_type, name_type,
};
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
        if args[first].is_integer() {
            let item = Arg::new(self.model.function, first + 1, "item");
            let Some(t) = args.get(first + 1) else {
                return item.error("an integer (user, item)", &DataType::Null);
            };
            types.push(integer_type(
                Arg::new(self.model.function, first, "user"),
                &args[first],
            )?);
            types.push(integer_type(item, t)?);
            return Ok(types);
        }
        if args.len() == first + 1 && is_point_type(&args[first]) {
            let point = Arg::new(self.model.function, first, "point");
            types.push(point.numbers(&args[first])?);
            return Ok(types);
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
        let inputs = (args.args[self.indices.index..].iter())
            .map(|v| v.to_array(args.number_rows))
            .collect::<Result<Vec<_>>>()?;
        let pairs = inputs[0].data_type().is_integer();
        let function = self.model.function;
        if let Some(read) = model.spec.kind.read_points(function, &model, &inputs) {
            return Ok((model, read.map_err(train_error)?));
        }
        // A list of floats is a point only for a kind that reads points.
        if inputs.len() == 1 && is_point_type(inputs[0].data_type()) {
            return self
                .indices
                .error("a list of integers", inputs[0].data_type());
        }
        let kind = (model.spec.gradient(function, &name)).map_err(train_error)?;
        let spec_kind = &model.spec.kind;
        if pairs != (spec_kind.inputs() == Inputs::Pairs) {
            return exec_err!(
                "{}: model '{name}' is a {} model, which takes {}; see {}",
                self.model.function,
                spec_kind.name(),
                match spec_kind.inputs() {
                    Inputs::Pairs => "a user and an item (integers)",
                    Inputs::Features | Inputs::Documents | Inputs::Points => {
                        "a list of feature indices"
                    }
                },
                self.syntax
            );
        }
        let labels = self.label.map(|l| l.array(args)).transpose()?;
        let rows = (kind.read_rows(function, labels.as_ref(), &inputs)).map_err(train_error)?;
        Ok((model, rows))
    }
}

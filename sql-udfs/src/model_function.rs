//! [`ModelFunction`]: the one implementation of the scalar functions that answer a value per
//! row from a model (`ps_predict`, `ps_predict_proba`, `ps_loss`, `ps_distance`,
//! `ps_topics`): bound to a service, their model name a constant checked at planning, their
//! rows read as [`ModelRows`] says. What differs between them, their arguments, answer and
//! documentation, is an [`Answer`], one small struct per function in its own file.

use std::fmt;
use std::hash::{Hash, Hasher};
use std::marker::PhantomData;

use datafusion::arrow::array::ArrayRef;
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{const_str, return_field};
use crate::binding::{Binding, PsBound};
use crate::model_rows::ModelRows;

/// What one model function answers per row.
pub trait Answer: fmt::Debug + Send + Sync + 'static {
    /// Its arguments, its name among them.
    const ARGS: ModelRows;

    /// The type of its answer for one row.
    fn return_type() -> DataType {
        DataType::Float64
    }

    /// Its answers for the rows of a call, one per row, with the service `binding` names.
    fn answer(binding: &Binding, args: &ScalarFunctionArgs) -> Result<ArrayRef>;

    /// Its documentation.
    fn documentation() -> &'static Documentation;
}

/// See the module documentation.
pub struct ModelFunction<A> {
    binding: Binding,
    signature: Signature,
    answer: PhantomData<A>,
}

impl<A: Answer> PsBound for ModelFunction<A> {
    fn bind(binding: Binding) -> Self {
        ModelFunction {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
            answer: PhantomData,
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl<A: Answer> ScalarUDFImpl for ModelFunction<A> {
    fn name(&self) -> &str {
        A::ARGS.model().function
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        A::ARGS.coerce_types(args)
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(A::return_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(A::ARGS.model(), A::ARGS.model().literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        Ok(ColumnarValue::Array(A::answer(&self.binding, &args)?))
    }

    fn documentation(&self) -> Option<&Documentation> {
        Some(A::documentation())
    }
}

// DataFusion compares and hashes functions; two of the same answer bound alike are equal.
impl<A> fmt::Debug for ModelFunction<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ModelFunction")
            .field("answer", &std::any::type_name::<A>())
            .field("binding", &self.binding)
            .finish()
    }
}

impl<A> PartialEq for ModelFunction<A> {
    fn eq(&self, other: &Self) -> bool {
        self.binding == other.binding
    }
}

impl<A> Eq for ModelFunction<A> {}

impl<A> Hash for ModelFunction<A> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.binding.hash(state);
    }
}

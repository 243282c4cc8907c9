//! `ps_counter_clean(counter) -> UInt64`: frees a counter's keys on the servers (its CLEAN
//! phase) and returns how many features it had indexed, the dimension of models trained on
//! its indices, which stay valid.
//!
//! Run it once nothing needs the counter's dictionary any more: after the last `ps_index`
//! query and `SAVE MODEL` of a model indexed by it (which saves the dictionary). The counter's
//! name stays taken until `angel-ps drop`. The argument is a constant, checked at planning.

use std::sync::LazyLock;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{Arg, DOC_SECTION, arity, const_str, name_type, return_field};
use crate::binding::{Binding, PsBound};
use crate::bridge::block_on;

const COUNTER: Arg = Arg::new("ps_counter_clean", 0, "counter");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsCounterClean {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsCounterClean {
    fn bind(binding: Binding) -> Self {
        PsCounterClean {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsCounterClean {
    fn name(&self) -> &str {
        "ps_counter_clean"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_counter_clean(counter)", args, 1..=1)?;
        Ok(vec![name_type(COUNTER, &args[0])?])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(COUNTER, COUNTER.literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let counter = const_str(COUNTER, COUNTER.scalar(&args))?;
        let client = self.binding.client()?;
        let size = block_on(client.counter(&counter))?.meta.size;
        block_on(client.counter_clean(&counter))?;
        Ok(ColumnarValue::Scalar(ScalarValue::UInt64(Some(size))))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "Frees a counter's keys on the servers and returns how many features it had \
                 indexed (the indices given stay valid). Run it once nothing needs the \
                 dictionary: after the last ps_index query and SAVE MODEL of a model indexed \
                 by it.",
                "ps_counter_clean(counter)",
            )
            .with_argument("counter", "The counter's name: a constant string.")
            .with_sql_example("SELECT ps_counter_clean('adult_features') AS dim")
            .with_related_udf("ps_counter_seal")
            .with_related_udf("ps_index")
            .build()
        });
        Some(&DOC)
    }
}

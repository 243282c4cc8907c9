//! `ps_counter_seal(counter, min_count) -> UInt64`: the counter barrier.
//!
//! Gives the features counted at least `min_count` times the compact indices 0..n-1 and
//! returns n, the model dimension. Run it once, after the counting query, in a `SELECT`
//! without `FROM`: a second seal of the same counter is an error. Both arguments are
//! constants, checked at planning.

use std::sync::LazyLock;

use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{
    Arg, DOC_SECTION, arity, const_i64, const_str, integer_type, name_type, return_field,
};
use crate::binding::{Binding, PsBound};
use crate::bridge::block_on;

const COUNTER: Arg = Arg::new("ps_counter_seal", 0, "counter");
const MIN_COUNT: Arg = Arg::new("ps_counter_seal", 1, "min_count");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsCounterSeal {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsCounterSeal {
    fn bind(binding: Binding) -> Self {
        PsCounterSeal {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsCounterSeal {
    fn name(&self) -> &str {
        "ps_counter_seal"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(
            self.name(),
            "ps_counter_seal(counter, min_count)",
            args,
            2..=2,
        )?;
        Ok(vec![
            name_type(COUNTER, &args[0])?,
            integer_type(MIN_COUNT, &args[1])?,
        ])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(COUNTER, COUNTER.literal(&args))?;
        const_i64(MIN_COUNT, MIN_COUNT.literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let counter = const_str(COUNTER, COUNTER.scalar(&args))?;
        let min_count = const_i64(MIN_COUNT, MIN_COUNT.scalar(&args))?;
        let client = self.binding.client()?;
        let sealed = block_on(client.counter_seal(&counter, min_count))?;
        Ok(ColumnarValue::Scalar(ScalarValue::UInt64(Some(
            sealed.meta.size,
        ))))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The counter barrier: gives the features counted at least `min_count` times \
                 the compact indices 0..n-1 and returns n, the model dimension. Run it once, \
                 after the counting query, in a SELECT without FROM: a second seal of the same \
                 counter is an error.",
                "ps_counter_seal(counter, min_count)",
            )
            .with_argument("counter", "The counter's name: a constant string.")
            .with_argument(
                "min_count",
                "A constant integer: features counted fewer times get no index.",
            )
            .with_sql_example("SELECT ps_counter_seal('adult_features', 2) AS dim")
            .with_related_udf("ps_counter_add")
            .with_related_udf("ps_index")
            .build()
        });
        Some(&DOC)
    }
}

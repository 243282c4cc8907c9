//! `ps_counter_seal(counter, min_count) -> UInt64`: the counter barrier.
//!
//! Gives the features counted at least `min_count` times the compact indices 0..n-1 and
//! returns n, the model dimension. Run it once, after the counting query, in a `SELECT`
//! without `FROM`: a second seal of the same counter is an error.

use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::args::{const_i64, const_str};
use crate::bridge::{block_on, client};

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsCounterSeal {
    master: String,
    signature: Signature,
}

impl PsCounterSeal {
    /// The master address this function is bound to; it travels with plans to Ballista
    /// executors ([`crate::cluster::codec`]).
    pub fn master(&self) -> &str {
        &self.master
    }

    /// The function for the service whose master is at `master`.
    pub fn new(master: &str) -> Self {
        PsCounterSeal {
            master: master.to_string(),
            signature: Signature::any(2, Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for PsCounterSeal {
    fn name(&self) -> &str {
        "ps_counter_seal"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(DataType::UInt64)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let counter = const_str("ps_counter_seal", &args.args, 0, "counter")?;
        let min_count = const_i64("ps_counter_seal", &args.args, 1, "min_count")?;
        let client = client(&self.master)?;
        let sealed = block_on(client.counter_seal(&counter, min_count))?;
        Ok(ColumnarValue::Scalar(ScalarValue::UInt64(Some(
            sealed.meta.size,
        ))))
    }
}

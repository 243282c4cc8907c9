//! `ps_index(counter, features) -> List<UInt64>`: features to compact indices.
//!
//! For each record batch, the batch's distinct features are looked up once in the sealed
//! counter; each row gets the indices of its known features, in order. Features without an
//! index (never counted, or under `min_count`) are dropped.

use std::collections::HashMap;

use datafusion::arrow::array::{ListBuilder, UInt64Builder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::args::{Features, array_result, const_str};
use crate::bridge::{block_on, client};
use crate::ps_hash::index_list_type;

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsIndex {
    master: String,
    signature: Signature,
}

impl PsIndex {
    /// The function for the service whose master is at `master`.
    pub fn new(master: &str) -> Self {
        PsIndex {
            master: master.to_string(),
            signature: Signature::any(2, Volatility::Volatile),
        }
    }
}

impl ScalarUDFImpl for PsIndex {
    fn name(&self) -> &str {
        "ps_index"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(index_list_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let counter = const_str("ps_index", &args.args, 0, "counter")?;
        let arrays = ColumnarValue::values_to_arrays(&args.args[1..])?;
        let features = Features::from_array("ps_index", &arrays[0])?;
        let mut distinct: HashMap<&str, Option<u64>> = features.all().map(|f| (f, None)).collect();
        let keys: Vec<&str> = distinct.keys().copied().collect();
        let client = client(&self.master)?;
        let found = block_on(client.counter_get(&counter, &keys))?;
        for (k, (_, index)) in keys.iter().zip(found) {
            distinct.insert(k, index);
        }
        let mut out = ListBuilder::new(UInt64Builder::new());
        for r in 0..features.rows() {
            for f in features.row(r) {
                if let Some(i) = distinct[f] {
                    out.values().append_value(i);
                }
            }
            out.append(true);
        }
        Ok(array_result(out.finish()))
    }
}

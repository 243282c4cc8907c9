//! `ps_hash(features, bits) -> List<UInt64>`: the hashing trick, an alternative to the counter.
//!
//! Each feature string maps to `hash(feature) mod 2^bits` with the counter's stable hash, so
//! the same feature gets the same column in every task and every run, with no PS round trip.
//! Collisions are possible; the counter gives collision-free compact indices instead.

use datafusion::arrow::array::{ListBuilder, UInt64Builder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use angel_client::counter::key_hash;

use crate::args::{Features, array_result, const_i64, index_list_type};

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsHash {
    signature: Signature,
}

impl Default for PsHash {
    fn default() -> Self {
        PsHash {
            signature: Signature::any(2, Volatility::Immutable),
        }
    }
}

impl ScalarUDFImpl for PsHash {
    fn name(&self) -> &str {
        "ps_hash"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(index_list_type())
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let bits = const_i64("ps_hash", &args.args, 1, "bits")?;
        if !(1..=63).contains(&bits) {
            return exec_err!("ps_hash: bits must be between 1 and 63, got {bits}");
        }
        let mask = (1u64 << bits) - 1;
        let arrays = ColumnarValue::values_to_arrays(&args.args[..1])?;
        let features = Features::from_array("ps_hash", &arrays[0])?;
        let mut out = ListBuilder::with_capacity(
            UInt64Builder::with_capacity(features.slots()),
            features.rows(),
        );
        for r in 0..features.rows() {
            for f in features.row(r) {
                out.values().append_value(key_hash(f) & mask);
            }
            out.append(true);
        }
        Ok(array_result(out.finish()))
    }
}

#[cfg(test)]
mod tests {
    use datafusion::arrow::array::AsArray;
    use datafusion::arrow::datatypes::UInt64Type;
    use datafusion::logical_expr::ScalarUDF;
    use datafusion::prelude::SessionContext;

    use super::*;

    #[tokio::test]
    async fn hashes_each_feature_into_the_requested_bits() {
        let ctx = SessionContext::new();
        ctx.register_udf(ScalarUDF::from(PsHash::default()));
        let batches = ctx
            .sql("SELECT ps_hash(make_array('a=1', 'b=2'), 10) AS h, ps_hash('a=1', 10) AS one")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap();
        let h = batches[0].column(0).as_list::<i32>().value(0);
        let h = h.as_primitive::<UInt64Type>();
        assert_eq!(h.len(), 2);
        assert_eq!(h.value(0), key_hash("a=1") & 1023);
        assert!(h.values().iter().all(|&v| v < 1024));
        let one = batches[0].column(1).as_list::<i32>().value(0);
        assert_eq!(one.as_primitive::<UInt64Type>().value(0), h.value(0));
        let err = ctx
            .sql("SELECT ps_hash('a', 64)")
            .await
            .unwrap()
            .collect()
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains("bits must be between 1 and 63"),
            "{err}"
        );
    }
}

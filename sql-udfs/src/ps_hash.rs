//! `ps_hash(features, bits) -> List<UInt64>`: the hashing trick, an alternative to the counter.
//!
//! Each feature string maps to `hash(feature) mod 2^bits` with the counter's stable hash, so
//! the same feature gets the same column in every task and every run, with no PS round trip.
//! Collisions are possible; the counter gives collision-free compact indices instead. `bits`
//! is a constant between 1 and 63, checked at planning.

use std::sync::LazyLock;

use datafusion::arrow::array::{ListBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, ScalarValue};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use angel_proto::counter_keys::key_hash;

use crate::args::{
    Arg, DOC_SECTION, arity, array_result, const_i64, index_list_type, integer_type, return_field,
};
use crate::features::{Features, features_type};

const FEATURES: Arg = Arg::new("ps_hash", 0, "features");
const BITS: Arg = Arg::new("ps_hash", 1, "bits");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsHash {
    signature: Signature,
}

impl Default for PsHash {
    fn default() -> Self {
        PsHash {
            signature: Signature::user_defined(Volatility::Immutable),
        }
    }
}

/// The mask keeping the low `bits` bits, from the constant `bits` argument.
fn mask(bits: Option<&ScalarValue>) -> Result<u64> {
    match const_i64(BITS, bits)? {
        bits @ 1..=63 => Ok((1u64 << bits) - 1),
        bits => BITS.error("between 1 and 63", bits),
    }
}

impl ScalarUDFImpl for PsHash {
    fn name(&self) -> &str {
        "ps_hash"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_hash(features, bits)", args, 2..=2)?;
        Ok(vec![
            features_type(FEATURES, &args[0])?,
            integer_type(BITS, &args[1])?,
        ])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(index_list_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        mask(BITS.literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let mask = mask(BITS.scalar(&args))?;
        let features = Features::from_array(self.name(), &FEATURES.array(&args)?)?;
        let mut out = ListBuilder::with_capacity(
            UInt64Builder::with_capacity(features.slots()),
            features.rows(),
        );
        let hashes: Vec<u64> = (features.counts().into_iter().enumerate())
            .map(|(c, n)| match n {
                0 => 0,
                _ => key_hash(features.string(c)) & mask,
            })
            .collect();
        for r in 0..features.rows() {
            for c in features.row(r) {
                out.values().append_value(hashes[c]);
            }
            out.append(true);
        }
        Ok(array_result(out.finish()))
    }

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "The hashing trick, an alternative to the counter: each feature maps to \
                 hash(feature) mod 2^bits with the counter's stable hash, so the same feature \
                 gets the same column in every task and every run, with no PS round trip. \
                 Collisions are possible; the counter gives collision-free compact indices.",
                "ps_hash(features, bits)",
            )
            .with_argument("features", "A string or a list of strings per row.")
            .with_argument(
                "bits",
                "A constant integer between 1 and 63: indices are below 2^bits.",
            )
            .with_sql_example("SELECT label, ps_hash(features, 20) AS idx FROM people")
            .build()
        });
        Some(&DOC)
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
        let err = ctx.sql("SELECT ps_hash('a', 64)").await.unwrap_err();
        assert!(
            err.to_string()
                .contains("ps_hash: argument 2 (bits) must be between 1 and 63, got 64"),
            "{err}"
        );
    }
}

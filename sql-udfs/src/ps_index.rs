//! `ps_index(counter, features) -> List<UInt64>`: features to compact indices.
//!
//! For each record batch, the batch's distinct features are looked up once in the sealed
//! counter (only those no task of this process looked up before: see [`IndexCache`]); each
//! row gets the indices of its known features, in order. Features without an index (never
//! counted, or under `min_count`) are dropped.

use std::collections::{HashMap, HashSet};

use ahash::RandomState;
use datafusion::arrow::array::{ListArray, ListBuilder, UInt64Builder};
use datafusion::arrow::datatypes::DataType;
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, ScalarFunctionArgs, ScalarUDFImpl, Signature, Volatility,
};

use crate::args::{Features, array_result, const_str, index_list_type};
use crate::bridge::{block_on, client};
use crate::index_cache::IndexCache;

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsIndex {
    master: String,
    signature: Signature,
}

impl PsIndex {
    /// The master address this function is bound to; it travels with plans to Ballista
    /// executors ([`crate::cluster::codec`]).
    pub fn master(&self) -> &str {
        &self.master
    }

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
        let client = client(&self.master)?;
        let sealed = block_on(client.counter(&counter))?;
        let cache = IndexCache::of(&self.master, sealed.meta.id);
        let missing: Vec<&str> = {
            let known = cache.read();
            // Fast path: every feature answered before, one cache lookup per feature.
            if let Some(out) = indices(&features, |f| known.get(f).copied()) {
                return Ok(array_result(out));
            }
            let mut seen: HashSet<&str, RandomState> = HashSet::default();
            features
                .all()
                .filter(|f| !known.contains_key(*f) && seen.insert(*f))
                .collect()
        };
        let found = block_on(client.counter_get(&counter, &missing))?;
        let found: Vec<Option<u64>> = found.into_iter().map(|(_, index)| index).collect();
        cache.remember(&missing, &found);
        let fresh: HashMap<&str, Option<u64>, RandomState> =
            missing.iter().copied().zip(found).collect();
        let known = cache.read();
        let out = indices(&features, |f| {
            known.get(f).or_else(|| fresh.get(f)).copied()
        });
        Ok(array_result(out.expect("every feature was looked up")))
    }
}

/// Each row's feature indices (features without one dropped), or `None` when `index_of`
/// has no answer for some feature.
fn indices(
    features: &Features,
    index_of: impl Fn(&str) -> Option<Option<u64>>,
) -> Option<ListArray> {
    let mut out = ListBuilder::with_capacity(
        UInt64Builder::with_capacity(features.slots()),
        features.rows(),
    );
    for r in 0..features.rows() {
        for f in features.row(r) {
            if let Some(i) = index_of(f)? {
                out.values().append_value(i);
            }
        }
        out.append(true);
    }
    Some(out.finish())
}

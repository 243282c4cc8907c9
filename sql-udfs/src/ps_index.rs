//! `ps_index(counter, features) -> List<UInt64>`: features to compact indices.
//!
//! For each record batch, the batch's distinct features are looked up once in the sealed
//! counter (only those no task of this process looked up before: see [`IndexCache`]); each
//! row gets the indices of its known features, in order. Features without an index (never
//! counted, or under `min_count`) are dropped. The counter name is a constant, checked at
//! planning.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use ahash::RandomState;
use datafusion::arrow::array::{ListArray, ListBuilder, UInt64Builder};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::Result;
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{
    Arg, DOC_SECTION, Features, arity, array_result, const_str, features_type, index_list_type,
    name_type, return_field,
};
use crate::binding::{Binding, PsBound};
use crate::bridge::block_on;
use crate::index_cache::IndexCache;

const COUNTER: Arg = Arg::new("ps_index", 0, "counter");
const FEATURES: Arg = Arg::new("ps_index", 1, "features");

/// See the module documentation.
#[derive(Debug, PartialEq, Eq, Hash)]
pub struct PsIndex {
    binding: Binding,
    signature: Signature,
}

impl PsBound for PsIndex {
    fn bind(binding: Binding) -> Self {
        PsIndex {
            binding,
            signature: Signature::user_defined(Volatility::Volatile),
        }
    }

    fn binding(&self) -> &Binding {
        &self.binding
    }
}

impl ScalarUDFImpl for PsIndex {
    fn name(&self) -> &str {
        "ps_index"
    }

    fn signature(&self) -> &Signature {
        &self.signature
    }

    fn coerce_types(&self, args: &[DataType]) -> Result<Vec<DataType>> {
        arity(self.name(), "ps_index(counter, features)", args, 2..=2)?;
        Ok(vec![
            name_type(COUNTER, &args[0])?,
            features_type(FEATURES, &args[1])?,
        ])
    }

    fn return_type(&self, _args: &[DataType]) -> Result<DataType> {
        Ok(index_list_type())
    }

    fn return_field_from_args(&self, args: ReturnFieldArgs) -> Result<FieldRef> {
        const_str(COUNTER, COUNTER.literal(&args))?;
        return_field(self, &args)
    }

    fn invoke_with_args(&self, args: ScalarFunctionArgs) -> Result<ColumnarValue> {
        let counter = const_str(COUNTER, COUNTER.scalar(&args))?;
        let features = Features::from_array(self.name(), &FEATURES.array(&args)?)?;
        let client = self.binding.client()?;
        let sealed = block_on(client.counter(&counter))?;
        let cache = IndexCache::of(self.binding.master(), sealed.meta.id);
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

    fn documentation(&self) -> Option<&Documentation> {
        static DOC: LazyLock<Documentation> = LazyLock::new(|| {
            Documentation::builder(
                DOC_SECTION,
                "Features to compact indices: each row gets the indices its features have in \
                 the sealed counter, in order. Features without an index (never counted, or \
                 under min_count) are dropped. Each batch's distinct features are looked up \
                 once, and only those this process has not looked up before.",
                "ps_index(counter, features)",
            )
            .with_argument("counter", "The sealed counter's name: a constant string.")
            .with_argument("features", "A string or a list of strings per row.")
            .with_sql_example(
                "SELECT label, ps_index('adult_features', features) AS idx FROM people",
            )
            .with_related_udf("ps_counter_seal")
            .build()
        });
        Some(&DOC)
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

//! `ps_index(counter, features) -> List<UInt32>`: features to compact indices.
//!
//! For each record batch, the batch's distinct features are looked up once in the sealed
//! counter (only those no task of this process looked up before: see [`IndexCache`]); each
//! row gets the indices of its known features, in order. Features without an index (never
//! counted, or under `min_count`) are dropped. The counter name is a constant, checked at
//! planning.

use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;

use ahash::RandomState;
use datafusion::arrow::array::{ListArray, ListBuilder, UInt32Builder};
use datafusion::arrow::datatypes::{DataType, FieldRef};
use datafusion::common::{Result, exec_err};
use datafusion::logical_expr::{
    ColumnarValue, Documentation, ReturnFieldArgs, ScalarFunctionArgs, ScalarUDFImpl, Signature,
    Volatility,
};

use crate::args::{
    Arg, DOC_SECTION, arity, array_result, compact_index_list_type, const_str, name_type,
    return_field,
};
use crate::binding::{Binding, PsBound};
use crate::bridge::block_on;
use crate::features::{Features, features_type};
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
        Ok(compact_index_list_type())
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
        // Per code of the batch: its index (None: not indexed), once known.
        let mut answers: Vec<Option<Option<u64>>> = vec![None; features.distinct()];
        let used: Vec<usize> = (features.counts().into_iter().enumerate())
            .filter(|&(_, n)| n > 0)
            .map(|(c, _)| c)
            .collect();
        let missing: Vec<&str> = {
            let known = cache.read();
            let mut seen: HashSet<&str, RandomState> = HashSet::default();
            let mut missing = Vec::new();
            for &c in &used {
                let f = features.string(c);
                match known.get(f) {
                    Some(&index) => answers[c] = Some(index),
                    None if seen.insert(f) => missing.push(f),
                    None => {}
                }
            }
            missing
        };
        if !missing.is_empty() {
            let found = block_on(client.counter_get(&counter, &missing))?;
            let found: Vec<Option<u64>> = found.into_iter().map(|(_, index)| index).collect();
            cache.remember(&missing, &found);
            let fresh: HashMap<&str, Option<u64>, RandomState> =
                missing.iter().copied().zip(found).collect();
            for &c in &used {
                if answers[c].is_none() {
                    answers[c] = fresh.get(features.string(c)).copied();
                }
            }
        }
        Ok(array_result(indices(&counter, &features, &answers)?))
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

/// Each row's feature indices, features without one dropped; `answers` holds every used
/// code's index.
fn indices(
    counter: &str,
    features: &Features,
    answers: &[Option<Option<u64>>],
) -> Result<ListArray> {
    let mut out = ListBuilder::with_capacity(
        UInt32Builder::with_capacity(features.slots()),
        features.rows(),
    );
    for r in 0..features.rows() {
        for c in features.row(r) {
            if let Some(Some(i)) = answers[c] {
                let Ok(i) = u32::try_from(i) else {
                    return exec_err!(
                        "ps_index: counter '{counter}' gave index {i}, past the 2^32 features \
                         ps_index lists; hash such features (ps_hash) instead"
                    );
                };
                out.values().append_value(i);
            }
        }
        out.append(true);
    }
    Ok(out.finish())
}

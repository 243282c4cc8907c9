//! [`KeyLists`]: Angel's key-list caching, for training passes.
//!
//! When `CREATE MODEL` holds the training rows in memory, every epoch hands `ps_train` the
//! very same record batches. The first epoch reads each batch into [`MiniBatches`]: its rows,
//! and for each mini-batch the distinct keys to pull (sorted) and where each non-zero's weight
//! sits among them. Later epochs find those here, by the identity of the batch's arrays, and
//! go straight to pull, compute and push: no list decoding, no index check, no key gathering.
//!
//! An entry holds the arrays it was read from, so their buffers stay alive: no other batch can
//! reuse their addresses while the entry exists, and Arrow buffers never change, so equal
//! addresses mean equal data. Caching is off unless the job turns it on for a model, and the
//! entries go when it turns it off: on a Ballista executor, or with tables on disk, the
//! batches are new at every epoch and would never be found again. The job seals a model's
//! entries after the first epoch, so they never hold more than one epoch's batches, even when
//! a cast in the training query makes new arrays at every epoch (and nothing is found).

use std::collections::HashMap;
use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::{Array, ArrayData, ArrayRef};

use crate::error::Result;
use crate::rows::MiniBatches;

/// The cached mini-batches of the models being trained, per model.
#[derive(Debug, Default, Clone)]
pub struct KeyLists {
    models: Arc<Mutex<HashMap<String, Entries>>>,
}

/// One model's entries, by a hash of their arrays' addresses.
#[derive(Debug, Default)]
struct Entries {
    by_hash: HashMap<u64, Vec<Entry>>,
    /// No more entries are added.
    sealed: bool,
    /// Batches found.
    hits: u64,
}

#[derive(Debug)]
struct Entry {
    arrays: Vec<ArrayData>,
    batches: Arc<MiniBatches>,
}

impl KeyLists {
    /// Starts caching the batches `ps_train` reads for `model`.
    pub fn enable(&self, model: &str) {
        self.lock().insert(model.to_string(), Entries::default());
    }

    /// Keeps `model`'s entries but adds no more.
    pub fn seal(&self, model: &str) {
        if let Some(entries) = self.lock().get_mut(model) {
            entries.sealed = true;
        }
    }

    /// How many batches of `model` were found cached.
    pub fn hits(&self, model: &str) -> u64 {
        self.lock().get(model).map_or(0, |e| e.hits)
    }

    /// Stops caching for `model` and drops its entries.
    pub fn disable(&self, model: &str) {
        self.lock().remove(model);
    }

    /// The mini-batches of the batch made of `arrays`: cached when `model` caches and the
    /// batch was read before, else made by `read` (and kept when `model` caches).
    pub fn get_or_read(
        &self,
        model: &str,
        arrays: &[ArrayRef],
        read: impl FnOnce() -> Result<MiniBatches>,
    ) -> Result<Arc<MiniBatches>> {
        let data: Vec<ArrayData> = arrays.iter().map(|a| a.to_data()).collect();
        let key = fingerprint(&data);
        if let Some(entries) = self.lock().get_mut(model) {
            let found = entries.by_hash.get(&key).and_then(|list| {
                list.iter()
                    .find(|e| same_arrays(&e.arrays, &data))
                    .map(|e| e.batches.clone())
            });
            if let Some(batches) = found {
                entries.hits += 1;
                return Ok(batches);
            }
        }
        let batches = Arc::new(read()?);
        if let Some(entries) = self.lock().get_mut(model)
            && !entries.sealed
        {
            let entry = Entry {
                arrays: data,
                batches: batches.clone(),
            };
            entries.by_hash.entry(key).or_default().push(entry);
        }
        Ok(batches)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entries>> {
        // A panic elsewhere while holding the lock leaves the map consistent: every change
        // is one insert or removal.
        self.models.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A hash of the arrays' lengths, offsets and first buffer addresses.
pub(crate) fn fingerprint(arrays: &[ArrayData]) -> u64 {
    let mut hasher = ahash::RandomState::with_seeds(1, 2, 3, 4).build_hasher();
    for a in arrays {
        (a.len(), a.offset()).hash(&mut hasher);
        let first = a
            .buffers()
            .first()
            .or_else(|| a.child_data().first().and_then(|c| c.buffers().first()));
        first.map(|b| b.as_ptr() as usize).hash(&mut hasher);
    }
    hasher.finish()
}

/// True when both lists hold arrays over the same buffers.
pub(crate) fn same_arrays(a: &[ArrayData], b: &[ArrayData]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.ptr_eq(y))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Float64Array, ListArray};
    use arrow::datatypes::UInt64Type;

    use crate::rows::SparseRows;

    fn arrays(first: u64) -> Vec<ArrayRef> {
        let idx: ArrayRef = Arc::new(ListArray::from_iter_primitive::<UInt64Type, _, _>(vec![
            Some(vec![Some(first), Some(2)]),
            Some(vec![Some(2)]),
        ]));
        let labels: ArrayRef = Arc::new(Float64Array::from(vec![1.0, 0.0]));
        vec![labels, idx]
    }

    fn read(arrays: &[ArrayRef], reads: &mut usize) -> Result<MiniBatches> {
        *reads += 1;
        let rows = SparseRows::from_arrays("t", Some(&arrays[0]), &arrays[1], None)?;
        Ok(rows.into_mini_batches(1, 10))
    }

    #[test]
    fn batches_are_read_once_while_caching_and_again_after() {
        let lists = KeyLists::default();
        let (a, b) = (arrays(5), arrays(5));
        let mut reads = 0;
        lists.get_or_read("m", &a, || read(&a, &mut reads)).unwrap();
        lists.get_or_read("m", &a, || read(&a, &mut reads)).unwrap();
        assert_eq!(reads, 2, "nothing is cached unless the model caches");

        lists.enable("m");
        let first = lists.get_or_read("m", &a, || read(&a, &mut reads)).unwrap();
        let again = lists.get_or_read("m", &a, || read(&a, &mut reads)).unwrap();
        assert_eq!(reads, 3);
        assert!(Arc::ptr_eq(&first, &again));
        assert_eq!(again.batches[0].1.keys, vec![2, 5, 10]);

        let copy: Vec<ArrayRef> = a.iter().map(|x| x.slice(0, x.len())).collect();
        lists
            .get_or_read("m", &copy, || read(&copy, &mut reads))
            .unwrap();
        assert_eq!(reads, 3, "a slice over the same buffers is the same batch");
        let cut: Vec<ArrayRef> = a.iter().map(|x| x.slice(1, 1)).collect();
        lists
            .get_or_read("m", &cut, || read(&cut, &mut reads))
            .unwrap();
        lists.get_or_read("m", &b, || read(&b, &mut reads)).unwrap();
        lists
            .get_or_read("other", &a, || read(&a, &mut reads))
            .unwrap();
        assert_eq!(
            reads, 6,
            "other rows, equal data elsewhere, another model: read"
        );
        assert_eq!(lists.hits("m"), 2);

        lists.seal("m");
        let c = arrays(7);
        lists.get_or_read("m", &c, || read(&c, &mut reads)).unwrap();
        lists.get_or_read("m", &c, || read(&c, &mut reads)).unwrap();
        lists.get_or_read("m", &a, || read(&a, &mut reads)).unwrap();
        assert_eq!(
            reads, 8,
            "sealed: what was cached is found, nothing new is kept"
        );

        lists.disable("m");
        lists.get_or_read("m", &a, || read(&a, &mut reads)).unwrap();
        assert_eq!(reads, 9, "disabling drops the entries");
    }
}

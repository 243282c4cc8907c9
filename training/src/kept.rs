//! [`Kept`]: what a statement's workers keep in the process from round to round: a rotation
//! worker's blocks and users' factors, a topic model worker's documents and their topics, a
//! boosted model worker's bins and margins (Harp's long-lived workers with local state).
//!
//! `CREATE MODEL` runs one round per epoch, and each round's tasks are new. Their rows come as
//! the very same record batches every epoch (the statement holds them in memory), so a task
//! finds what the previous round's task with those batches left, by the identity of the
//! batches' arrays as [`crate::key_lists`] does: no decoding, no split into blocks, no pull.
//! The job turns keeping on for a model for the statement and off at its end; an entry not
//! taken back in the next round goes. What is kept is each kind's own state, of a type only
//! that kind's task knows: the store holds it as [`Any`] and hands it back by its type.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use arrow::array::ArrayData;

use crate::key_lists::{fingerprint, same_arrays};

/// The kept workers of the models being trained, per model.
#[derive(Default, Clone)]
pub struct Kept {
    models: Arc<Mutex<HashMap<String, Entries>>>,
}

/// One model's workers, by a hash of their batches' arrays, and the round being run.
#[derive(Default)]
struct Entries {
    round: u32,
    workers: HashMap<u64, Entry>,
}

struct Entry {
    arrays: Vec<ArrayData>,
    /// The round that put it.
    round: u32,
    worker: Box<dyn Any + Send>,
}

impl std::fmt::Debug for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let models: Vec<String> = self.lock().keys().cloned().collect();
        f.debug_struct("Kept").field("models", &models).finish()
    }
}

impl Kept {
    /// Starts keeping `model`'s workers.
    pub fn enable(&self, model: &str) {
        self.lock().insert(model.to_string(), Entries::default());
    }

    /// Stops keeping `model`'s workers and drops them.
    pub fn disable(&self, model: &str) {
        self.lock().remove(model);
    }

    /// Sets the round `model`'s workers run now (for workers that count rounds themselves:
    /// the topic model's).
    pub fn start_round(&self, model: &str, round: u32) {
        if let Some(entries) = self.lock().get_mut(model) {
            entries.round = round;
        }
    }

    /// The round set by [`Kept::start_round`]; `None` when `model`'s workers are not kept.
    pub fn round(&self, model: &str) -> Option<u32> {
        self.lock().get(model).map(|e| e.round)
    }

    /// The worker of type `W` the previous round left for rows read from `arrays`, if any.
    pub fn take<W: Any>(&self, model: &str, arrays: &[ArrayData]) -> Option<W> {
        let mut models = self.lock();
        let workers = &mut models.get_mut(model)?.workers;
        let key = fingerprint(arrays);
        match workers.get(&key) {
            Some(e) if same_arrays(&e.arrays, arrays) && e.worker.is::<W>() => {
                let worker = workers.remove(&key)?.worker;
                worker.downcast().ok().map(|w| *w)
            }
            _ => None,
        }
    }

    /// Keeps `worker`, of rows read from `arrays`, for the round after `round` (when `model`'s
    /// workers are kept); drops what rounds before the previous one left and nobody took (the
    /// previous round's stay: a slower worker of this round may not have taken its own yet).
    pub fn put<W: Any + Send>(&self, model: &str, round: u32, arrays: Vec<ArrayData>, worker: W) {
        if let Some(entries) = self.lock().get_mut(model) {
            entries.workers.retain(|_, e| e.round + 1 >= round);
            let entry = Entry {
                arrays,
                round,
                worker: Box::new(worker),
            };
            entries.workers.insert(fingerprint(&entry.arrays), entry);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entries>> {
        // Every change is one insert or removal: a panic elsewhere leaves the map consistent.
        self.models.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{Array, Int64Array};

    fn arrays(values: Vec<i64>) -> Vec<ArrayData> {
        vec![Int64Array::from(values).to_data()]
    }

    #[test]
    fn a_worker_is_found_by_the_very_arrays_it_was_read_from_once() {
        let kept = Kept::default();
        let (a, b) = (arrays(vec![1, 2]), arrays(vec![1, 2]));
        kept.put("m", 1, a.clone(), 7);
        assert_eq!(
            kept.take::<i32>("m", &a),
            None,
            "not kept: the model is not enabled"
        );
        kept.enable("m");
        kept.put("m", 1, a.clone(), 7);
        assert_eq!(
            kept.take::<i32>("m", &b),
            None,
            "equal values in other arrays"
        );
        assert_eq!(kept.take::<i32>("other", &a), None);
        assert_eq!(kept.take::<u64>("m", &a), None, "another type");
        assert_eq!(kept.take::<i32>("m", &a), Some(7));
        assert_eq!(kept.take::<i32>("m", &a), None, "taken");
        kept.put("m", 1, a.clone(), 8);
        kept.disable("m");
        assert_eq!(kept.take::<i32>("m", &a), None);
    }

    #[test]
    fn what_a_round_left_and_nobody_took_goes_after_the_next_round() {
        let kept = Kept::default();
        assert_eq!(kept.round("m"), None);
        kept.enable("m");
        kept.start_round("m", 3);
        assert_eq!(kept.round("m"), Some(3));
        let (a, b, c) = (arrays(vec![1]), arrays(vec![2]), arrays(vec![3]));
        kept.put("m", 1, a.clone(), 1);
        kept.put("m", 1, b.clone(), 2);
        assert_eq!(kept.take::<i32>("m", &a), Some(1));
        kept.put("m", 2, a.clone(), 1);
        kept.put("m", 2, c.clone(), 3);
        assert_eq!(kept.take::<i32>("m", &a), Some(1));
        kept.put("m", 3, a.clone(), 1);
        assert_eq!(
            kept.take::<i32>("m", &b),
            None,
            "left by round 1, not taken in round 2"
        );
        assert_eq!(
            kept.take::<i32>("m", &c),
            Some(3),
            "left by round 2, taken in round 3"
        );
    }
}

//! Feature -> index answers of sealed counters, kept per process so each task asks the PS
//! only for features no task of this process has looked up yet. A sealed counter's indices
//! never change, and a counter id is never reused by its master, so answers never go stale.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use ahash::RandomState;
use parking_lot::{RwLock, RwLockReadGuard};

/// Entries kept per counter; past this, new answers are used but not kept, bounding memory.
const MAX_ENTRIES: usize = 4 << 20;

/// The caches of this process, by (master address, counter id).
type Caches = Mutex<HashMap<(String, u32), Arc<IndexCache>>>;

/// The cached answers of one counter: the index of a feature, or `None` for a feature the
/// counter did not index.
#[derive(Debug, Default)]
pub struct IndexCache {
    known: RwLock<HashMap<Box<str>, Option<u64>, RandomState>>,
}

impl IndexCache {
    /// The cache of counter `counter_id` of the service at `master`.
    pub fn of(master: &str, counter_id: u32) -> Arc<IndexCache> {
        static CACHES: OnceLock<Caches> = OnceLock::new();
        let mut caches = CACHES
            .get_or_init(Default::default)
            .lock()
            .expect("index caches");
        caches
            .entry((master.to_string(), counter_id))
            .or_default()
            .clone()
    }

    /// Read access to the answers kept so far.
    pub fn read(&self) -> RwLockReadGuard<'_, HashMap<Box<str>, Option<u64>, RandomState>> {
        self.known.read()
    }

    /// Keeps the PS's answers for `features`.
    pub fn remember(&self, features: &[&str], indices: &[Option<u64>]) {
        let mut known = self.known.write();
        for (f, &index) in features.iter().zip(indices) {
            if known.len() >= MAX_ENTRIES {
                break;
            }
            known.insert((*f).into(), index);
        }
    }
}

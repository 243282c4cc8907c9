//! Boosted-model workers kept in a process from round to round when their rows come as new
//! record batches every round (in Ballista's executors, or with tables on disk), where
//! [`crate::kept::Kept`], which finds a worker by its batches' identity, finds none.
//! A worker is found here by its statement and its rows' content instead.
//!
//! The task of the next round that holds the same rows may run in another process, so a
//! worker found here can be several rounds old; [`super::worker::TreeWorker::catch_up`] brings it
//! forward from the trees on the servers, which costs the trees since it was kept rather than
//! binning the rows and replaying every tree. At most [`MAX_WORKERS`] workers are kept, none
//! longer than [`MAX_IDLE`] unused.

use std::sync::{LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use super::worker::TreeWorker;

/// Most workers a process keeps (for all statements).
const MAX_WORKERS: usize = 64;
/// How long a worker no task took is kept.
const MAX_IDLE: Duration = Duration::from_secs(600);

/// Which worker: its statement (the model's qualified name and the id of the statement's
/// totals matrix, new at every `CREATE MODEL`) and a hash of its rows' content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub model: String,
    pub statement: u32,
    pub content: u64,
}

struct Entry {
    key: Key,
    worker: TreeWorker,
    kept: Instant,
}

static WORKERS: LazyLock<Mutex<Vec<Entry>>> = LazyLock::new(Mutex::default);

fn workers() -> std::sync::MutexGuard<'static, Vec<Entry>> {
    // Every change is one push or removal: a panic elsewhere leaves the list consistent.
    WORKERS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Takes the worker kept for `key`, if any.
pub fn take(key: &Key) -> Option<TreeWorker> {
    let mut workers = workers();
    let at = workers.iter().position(|e| e.key == *key)?;
    Some(workers.swap_remove(at).worker)
}

/// Drops the workers kept for model `model` (qualified): its statement ended. Executors have
/// no word of that and drop them once idle for [`MAX_IDLE`].
pub fn forget(model: &str) {
    workers().retain(|e| e.key.model != model);
}

/// Keeps `worker` for `key`, dropping workers idle too long and, beyond the limit, the
/// longest kept.
pub fn put(key: Key, worker: TreeWorker) {
    let mut workers = workers();
    workers.retain(|e| e.kept.elapsed() < MAX_IDLE && e.key != key);
    if workers.len() >= MAX_WORKERS {
        let oldest = (0..workers.len()).min_by_key(|&i| workers[i].kept);
        oldest.map(|i| workers.swap_remove(i));
    }
    workers.push(Entry {
        key,
        worker,
        kept: Instant::now(),
    });
}

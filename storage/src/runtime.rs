//! The runtime every store's I/O runs on, apart from any caller's: object store clients keep
//! pooled connections on the runtime that opened them, so one long-lived runtime serves them
//! all (the stores are built to spawn their I/O here), and blocking callers such as the
//! parsers wait on it.

use std::future::Future;
use std::sync::mpsc::sync_channel;
use std::sync::{Arc, OnceLock};

use object_store::ObjectStore;
use object_store::path::Path;

use crate::{Location, Result, StorageError, stores};

/// The storage I/O runtime, started on first use.
pub(crate) fn io_runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("angel-storage-io")
            .enable_all()
            .build()
            .expect("the storage I/O runtime starts")
    })
}

/// Calls `call` with the store of `location` and `path` on the I/O runtime and waits for it,
/// blocking this thread; a failure is the store's error at `location`, with what to check.
/// Callable from any thread except the I/O runtime's own.
pub(crate) fn on_store<T, Fut>(
    location: &Location,
    path: Path,
    call: impl FnOnce(Arc<dyn ObjectStore>, Path) -> Fut,
) -> Result<T>
where
    T: Send + 'static,
    Fut: Future<Output = object_store::Result<T>> + Send + 'static,
{
    let work = call(stores().get(location)?, path);
    let at = location.clone();
    let (send, receive) = sync_channel(1);
    io_runtime().spawn(async move {
        let _ = send.send(work.await.map_err(|e| StorageError::store(&at, e)));
    });
    receive.recv().unwrap_or_else(|_| {
        Err(StorageError::Io(
            location.to_string(),
            std::io::Error::other("the storage task stopped before answering"),
        ))
    })
}

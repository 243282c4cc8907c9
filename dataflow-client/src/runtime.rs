//! The runtime the process-wide clients run on, apart from any caller's.
//!
//! A client's connections live on the runtime that opened them. SQL functions call the service
//! from DataFusion's runtime, which a test or an embedding program may drop while a sibling task
//! of a failed statement is still waiting for an answer; with the connections on that runtime
//! nothing would drive the answer and the drop would wait forever. So shared clients connect
//! here, and synchronous callers wait here.

use std::future::Future;
use std::sync::OnceLock;

use angel_proto::{PsError, Result};
use tokio::runtime::RuntimeFlavor;

/// The client runtime, started on first use.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("angel-ps-client")
            .enable_all()
            .build()
            .expect("the PS client runtime starts")
    })
}

/// Runs `future` to completion on the client runtime's I/O, blocking this thread. Call it
/// from synchronous code only: from inside a tokio task, wrap it in
/// `tokio::task::block_in_place`.
pub fn wait<F: Future>(future: F) -> F::Output {
    runtime().block_on(future)
}

/// Runs a client call to completion from synchronous code (a SQL function, a training step):
/// inside a task of a multi-threaded runtime, `block_in_place` first tells that runtime to
/// move its other tasks elsewhere. A current-thread runtime cannot, and is refused.
pub fn block_on<T>(future: impl Future<Output = Result<T>>) -> Result<T> {
    match tokio::runtime::Handle::try_current() {
        Err(_) => wait(future),
        Ok(handle) if handle.runtime_flavor() == RuntimeFlavor::CurrentThread => Err(
            PsError::WrongState("angel-ps functions need a multi-threaded tokio runtime".into()),
        ),
        Ok(_) => tokio::task::block_in_place(|| wait(future)),
    }
}

/// Runs `future` as a task of the client runtime and awaits it from any runtime, so what it
/// opens outlives the caller's runtime.
pub(crate) async fn spawn<T: Send + 'static>(
    future: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    runtime().spawn(future).await.map_err(stopped)?
}

fn stopped(e: tokio::task::JoinError) -> PsError {
    PsError::Unavailable(format!("the PS client task stopped: {e}"))
}

/// A call started on the client runtime, to be awaited later: a training task's pull of its
/// next mini-batch, in flight while the task computes the current one. Dropped unawaited (the
/// task failed meanwhile), the call is cancelled.
#[derive(Debug)]
pub struct Started<T>(tokio::task::JoinHandle<Result<T>>);

/// Starts `future` on the client runtime now.
pub fn start<T: Send + 'static>(
    future: impl Future<Output = Result<T>> + Send + 'static,
) -> Started<T> {
    Started(runtime().spawn(future))
}

impl<T> Started<T> {
    /// The call's result, once it ends.
    pub async fn join(mut self) -> Result<T> {
        (&mut self.0).await.map_err(stopped)?
    }
}

impl<T> Drop for Started<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

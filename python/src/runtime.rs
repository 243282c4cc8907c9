//! The runtime the package's calls run on, and [`wait`]: run a call with the GIL released,
//! so other Python threads go on, while Ctrl-C still interrupts it.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use pyo3::prelude::*;

/// How often a waiting call looks for a pending signal (Ctrl-C).
const SIGNAL_TICK: Duration = Duration::from_millis(100);

/// The package's multi-threaded runtime, started on first use. Its threads have the
/// `angel-ps` command's stack size: DataFusion plans expressions by recursion.
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(runtime) = RUNTIME.get() {
        return Ok(runtime);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("angel-ps")
        .thread_stack_size(16 << 20)
        .build()
        .map_err(|e| crate::errors::Error::new_err(format!("cannot start the runtime: {e}")))?;
    Ok(RUNTIME.get_or_init(|| runtime))
}

/// Runs `future` on the package's runtime and returns its output, without the GIL. Every
/// [`SIGNAL_TICK`] it takes the GIL back to run Python's signal handlers: a
/// `KeyboardInterrupt` drops (cancels) the future and is raised.
pub fn wait<T: Send>(py: Python<'_>, future: impl Future<Output = T> + Send) -> PyResult<T> {
    let runtime = runtime()?;
    let mut future = std::pin::pin!(future);
    loop {
        let step = py.detach(|| {
            runtime.block_on(async { tokio::time::timeout(SIGNAL_TICK, future.as_mut()).await })
        });
        if let Ok(output) = step {
            return Ok(output);
        }
        py.check_signals()?;
    }
}

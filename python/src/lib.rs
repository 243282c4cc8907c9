//! The `angel_ps` Python package's native module: SQL jobs as `pyarrow.Table`s ([`job`]),
//! the PS verbs on NumPy arrays ([`client`]), and an in-process service ([`standalone`]).
//!
//! # Layout
//!
//! - [`job`]: `angel_ps.run`, what `angel-ps run` does, results as pyarrow tables.
//! - [`client`]: `angel_ps.connect` and `Client`: matrices, pull, push, counters, PS
//!   functions, status; [`matrix`] says which rows a call addresses, [`arrays`] converts
//!   keys and values, [`status`] the status reply.
//! - [`standalone`]: `angel_ps.Standalone`, a master and servers in this process.
//! - [`data`]: `angel_ps.generate_click_logs`, the demo's click logs.
//! - [`access`]: token and TLS from arguments or the environment.
//! - [`errors`]: the exceptions, one per kind of failure a caller handles apart.
//! - [`runtime`]: the tokio runtime calls run on, with the GIL released.

mod access;
mod arrays;
mod client;
mod data;
mod errors;
mod job;
mod matrix;
mod runtime;
mod standalone;
mod status;

use pyo3::prelude::*;

// As in the `angel-ps` binary: glibc's allocator returns freed blocks of this size to the OS
// and pays page faults on every request; the package's Rust allocations use mimalloc.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Logs through `tracing` go to stderr, warnings only unless `RUST_LOG` says more, as the
/// command's do.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Another extension of the process may have installed one already: keep it.
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    init_logging();
    m.add_function(wrap_pyfunction!(job::run, m)?)?;
    m.add_function(wrap_pyfunction!(client::connect, m)?)?;
    m.add_function(wrap_pyfunction!(data::generate_click_logs, m)?)?;
    m.add_class::<client::Client>()?;
    m.add_class::<standalone::Standalone>()?;
    errors::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

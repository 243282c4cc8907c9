//! `angel_ps.Standalone`: a master and servers in this process, on 127.0.0.1, for notebooks
//! and tests; a context manager that stops them.

use std::sync::Mutex;

use angel_ps_service::snapshot::SnapshotDir;
use angel_ps_service::standalone::{Standalone as Service, StandaloneConfig};
use pyo3::prelude::*;

use crate::access;
use crate::client::{Client, connect};
use crate::errors::{Error, Raise};
use crate::runtime::wait;

/// A master and ``servers`` parameter servers running in this process on free ports of
/// 127.0.0.1, without TLS; with ``token``, every call must carry it (``connect(...,
/// token=...)``); with ``snapshot_dir`` (a path or URL) the servers snapshot what changed
/// there every ``snapshot_interval_secs``. ``master`` is the address to give ``connect`` and
/// ``run``. Stop it with ``stop()`` or use it in a ``with`` block.
#[pyclass(module = "angel_ps", frozen)]
pub struct Standalone {
    service: Mutex<Option<Service>>,
    master: String,
}

#[pymethods]
impl Standalone {
    /// Starts the master and the servers; returns once every server has registered.
    #[new]
    #[pyo3(signature = (servers = 2, *, token = None, snapshot_dir = None, snapshot_interval_secs = 10.0))]
    fn new(
        py: Python<'_>,
        servers: usize,
        token: Option<&str>,
        snapshot_dir: Option<&str>,
        snapshot_interval_secs: f64,
    ) -> PyResult<Self> {
        if servers == 0 {
            return Err(crate::errors::InvalidArgumentError::new_err(
                "a service needs at least one server (servers=0)",
            ));
        }
        let mut config = StandaloneConfig::new(servers);
        config.security.token = access::token(token)?;
        if let Some(dir) = snapshot_dir {
            config.snapshots.dir = Some(SnapshotDir::parse(dir).py()?);
        }
        if !(snapshot_interval_secs.is_finite() && snapshot_interval_secs > 0.0) {
            return Err(crate::errors::InvalidArgumentError::new_err(format!(
                "snapshot_interval_secs must be a positive number of seconds, got \
                 {snapshot_interval_secs}"
            )));
        }
        config.snapshots.interval = std::time::Duration::from_secs_f64(snapshot_interval_secs);
        let service = wait(py, Service::start(config))?.py()?;
        Ok(Standalone {
            master: service.master_addr(),
            service: Mutex::new(Some(service)),
        })
    }

    /// The master's address, ``127.0.0.1:PORT``.
    #[getter]
    fn master(&self) -> String {
        self.master.clone()
    }

    /// A client of this service (with ``token`` if it has one), its names in ``namespace``
    /// if given.
    #[pyo3(signature = (*, token = None, namespace = None))]
    fn connect(
        &self,
        py: Python<'_>,
        token: Option<&str>,
        namespace: Option<String>,
    ) -> PyResult<Client> {
        connect(py, &self.master, token, None, namespace)
    }

    /// Stops the master and servers (their values are gone); calling it again does nothing.
    fn stop(&self, py: Python<'_>) -> PyResult<()> {
        let service = self
            .service
            .lock()
            .map_err(|_| Error::new_err("service lock poisoned"))?
            .take();
        match service {
            Some(service) => wait(py, service.shutdown())?.py(),
            None => Ok(()),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<&Bound<'_, PyAny>>,
        _value: Option<&Bound<'_, PyAny>>,
        _traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        self.stop(py)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("angel_ps.Standalone(master='{}')", self.master)
    }
}

impl Drop for Standalone {
    /// A service nobody stopped stops with its object: its tasks are told to end.
    fn drop(&mut self) {
        if let Some(service) = self.service.get_mut().ok().and_then(Option::take) {
            service.shutdown_token().cancel();
        }
    }
}

//! `Client.status()`: the service's status as a dict of lists, plus the text
//! `angel-ps status` prints.

use angel_proto::StatusReply;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::matrix::dtype_name;

/// Servers, matrices and counters of `status` as lists of dicts, and the status as text.
pub fn dict<'py>(py: Python<'py>, status: &StatusReply) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    let servers = (status.servers.iter())
        .map(|s| {
            let d = PyDict::new(py);
            d.set_item("id", s.server_id)?;
            d.set_item("addr", &s.addr)?;
            d.set_item("reachable", s.reachable)?;
            d.set_item("standby", s.standby)?;
            d.set_item("partitions", s.partitions.len())?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    out.set_item("servers", servers)?;
    let map = status.map.clone().unwrap_or_default();
    let matrices = (map.matrices.iter())
        .map(|m| {
            let d = PyDict::new(py);
            d.set_item("name", &m.name)?;
            d.set_item("rows", m.rows)?;
            d.set_item("cols", m.cols)?;
            d.set_item("dtype", dtype_name(m.value_type()))?;
            d.set_item("storage", m.storage().as_str_name().to_ascii_lowercase())?;
            d.set_item("partitions", m.partitions.len())?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    out.set_item("matrices", matrices)?;
    let counters = (map.counters.iter())
        .map(|c| {
            let d = PyDict::new(py);
            d.set_item("name", &c.name)?;
            d.set_item("state", c.state().as_str_name().to_ascii_lowercase())?;
            d.set_item("size", c.size)?;
            Ok(d)
        })
        .collect::<PyResult<Vec<_>>>()?;
    out.set_item("counters", counters)?;
    out.set_item("text", angel_runner::status::render(status))?;
    Ok(out)
}

//! `angel_ps.run`: a SQL job, as `angel-ps run` runs it, with each statement's result as a
//! `pyarrow.Table`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use angel_runner::run::{RunOptions, run_job, run_text};
use angel_sql::job::StatementReport;
use angel_sql::storage_level::StorageLevel;
use datafusion::arrow::datatypes::Schema;
use datafusion::arrow::ipc::writer::StreamWriter;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::access;
use crate::errors;
use crate::runtime::wait;

/// Schema metadata of each result table: where its statement starts, and its first words.
const LINE_KEY: &str = "angel_ps.line";
const STATEMENT_KEY: &str = "angel_ps.statement";

/// Runs a SQL job and returns each statement's result as a ``pyarrow.Table``, in order (an
/// empty table for a statement without rows, such as ``CREATE TABLE``).
///
/// ``job`` is a job file (a ``pathlib.Path``, or a string ending in ``.sql`` on one line) or
/// the SQL text itself. ``vars`` fills ``${name}`` in it. Without ``master`` the job starts an
/// embedded service of ``servers`` servers and stops it after; with ``master`` it runs against
/// that service in ``namespace`` (default: a fresh one), and with ``ballista`` on that
/// Ballista cluster. ``memory_limit`` ("2GB" or bytes) and ``storage_level`` ("memory",
/// "disk", "memory-and-disk") are the command's flags. Each table's schema metadata names
/// its statement (``angel_ps.line``, ``angel_ps.statement``).
///
/// Raises ``angel_ps.Error`` (or a subclass) with the message ``angel-ps run`` prints, such as
/// the file and line of a statement that failed. Ctrl-C stops the job.
#[pyfunction]
#[pyo3(signature = (
    job, vars = None, *, master = None, namespace = None, servers = 2, partitions = 0,
    ballista = None, stage = None, memory_limit = None, storage_level = None, token = None,
    tls_ca = None
))]
#[allow(clippy::too_many_arguments)]
pub fn run(
    py: Python<'_>,
    job: &Bound<'_, PyAny>,
    vars: Option<HashMap<String, Bound<'_, PyAny>>>,
    master: Option<String>,
    namespace: Option<String>,
    servers: usize,
    partitions: usize,
    ballista: Option<String>,
    stage: Option<String>,
    memory_limit: Option<&Bound<'_, PyAny>>,
    storage_level: Option<&str>,
    token: Option<&str>,
    tls_ca: Option<PathBuf>,
) -> PyResult<Vec<Py<PyAny>>> {
    let (file, text) = job_source(job)?;
    let mut args = RunOptions::embedded(file, partitions);
    args.vars = match vars {
        Some(vars) => (vars.into_iter())
            .map(|(k, v)| Ok((k, v.str()?.to_string())))
            .collect::<PyResult<_>>()?,
        None => Vec::new(),
    };
    args.master = master;
    args.namespace = namespace;
    args.servers = servers;
    args.ballista = ballista;
    args.stage = stage;
    args.memory.memory_limit = memory_limit.map(byte_size).transpose()?;
    args.memory.storage_level = storage_level
        .map(|level| level.parse::<StorageLevel>().map_err(PyValueError::new_err))
        .transpose()?;
    args.access.token = access::token(token)?;
    args.access.tls_ca = tls_ca;
    let reports = wait(py, async {
        let ignore = |_: &StatementReport| {};
        let result = match &text {
            Some(text) => run_text(&args, text, ignore).await,
            None => run_job(&args, ignore).await,
        };
        result.map_err(|e| errors::from_any(e.as_ref()))
    })??;
    reports.iter().map(|r| table(py, r)).collect()
}

/// The job's file name and, for SQL given as text, the text (named `<sql>` in errors).
fn job_source(job: &Bound<'_, PyAny>) -> PyResult<(PathBuf, Option<String>)> {
    if let Ok(text) = job.cast::<PyString>() {
        let text = text.to_string();
        let one_line = !text.contains('\n');
        if one_line && text.trim_end().to_ascii_lowercase().ends_with(".sql") {
            return Ok((PathBuf::from(text.trim_end()), None));
        }
        return Ok((PathBuf::from("<sql>"), Some(text)));
    }
    match job.extract::<PathBuf>() {
        Ok(path) => Ok((path, None)),
        Err(_) => Err(PyTypeError::new_err(format!(
            "run() takes the job as SQL text or a path to a .sql file, not {}",
            job.get_type().name()?
        ))),
    }
}

/// A size given as bytes (an int) or as text such as "2GB" or "512MiB".
fn byte_size(size: &Bound<'_, PyAny>) -> PyResult<bytesize::ByteSize> {
    if let Ok(bytes) = size.extract::<u64>() {
        return Ok(bytesize::ByteSize(bytes));
    }
    let text: String = size.extract()?;
    text.parse().map_err(|e| {
        PyValueError::new_err(format!(
            "memory_limit='{text}': {e} (give a size such as 2GB)"
        ))
    })
}

/// A statement's result as a `pyarrow.Table`: written as an Arrow IPC stream here, read by
/// pyarrow there (one copy; arrow needs no Python feature).
fn table(py: Python<'_>, report: &StatementReport) -> PyResult<Py<PyAny>> {
    let schema = match report.output.first() {
        Some(batch) => batch.schema().as_ref().clone(),
        None => Schema::empty(),
    };
    let mut metadata = schema.metadata().clone();
    metadata.insert(LINE_KEY.into(), report.line.to_string());
    metadata.insert(STATEMENT_KEY.into(), report.label.clone());
    let schema = Arc::new(schema.with_metadata(metadata));
    let ipc = (|| {
        let mut writer = StreamWriter::try_new(Vec::new(), &schema)?;
        for batch in &report.output {
            writer.write(&batch.clone().with_schema(schema.clone())?)?;
        }
        writer.into_inner()
    })()
    .map_err(|e| errors::Error::new_err(format!("result of line {}: {e}", report.line)))?;
    let ipc_module = py.import("pyarrow.ipc")?;
    let reader = ipc_module.call_method1("open_stream", (PyBytes::new(py, &ipc),))?;
    Ok(reader.call_method0("read_all")?.unbind())
}

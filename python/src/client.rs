//! `angel_ps.Client` (from `angel_ps.connect`): the PS verbs on NumPy arrays — matrices,
//! pull and push, counters, PS functions, status.

use std::path::PathBuf;
use std::sync::Arc;

use angel_client::{Element, PsClient, PushOptions, ValueType};
use numpy::PyArray1;
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::access;
use crate::arrays;
use crate::errors::Raise;
use crate::matrix::{self, Creation, Outputs};
use crate::runtime::wait;
use crate::status;

/// `counter_index`'s answer: the keys' counts and indices.
type CountsAndIndices<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>);

/// A connection to a running service: create and drop matrices, pull and push NumPy arrays,
/// count keys, run PS functions. Names are taken in its namespace (``NAMESPACE/name`` on
/// the service) unless they hold a ``/``. Every call releases the GIL while it waits.
#[pyclass(module = "angel_ps", frozen)]
pub struct Client {
    client: Arc<PsClient>,
}

/// Connects to the master at ``master`` (``host:port``). ``token`` (or ``ANGEL_TOKEN`` /
/// ``ANGEL_TOKEN_FILE``) is sent with every call; ``tls_ca`` (or ``ANGEL_TLS_CA``), a PEM
/// file, turns on TLS; ``namespace`` qualifies the names this client uses. Raises
/// ``AccessError`` for a token the service refuses, ``UnavailableError`` when nobody answers.
#[pyfunction]
#[pyo3(signature = (master, *, token = None, tls_ca = None, namespace = None))]
pub fn connect(
    py: Python<'_>,
    master: &str,
    token: Option<&str>,
    tls_ca: Option<PathBuf>,
    namespace: Option<String>,
) -> PyResult<Client> {
    let config = access::config(token, tls_ca.as_deref(), namespace)?;
    let client = wait(py, PsClient::connect_with(master, config))?.py()?;
    Ok(Client { client })
}

impl Client {
    /// The outputs of `matrix`, and the rows a call of output `row` (or all) addresses.
    fn outputs(
        &self,
        py: Python<'_>,
        matrix: &str,
        row: Option<usize>,
    ) -> PyResult<(Outputs, Vec<u64>)> {
        let outputs = wait(py, Outputs::of(&self.client, matrix))?.py()?;
        let rows = outputs.select(matrix, row)?;
        Ok((outputs, rows))
    }

    fn pull_as<'py, T: Element + numpy::Element>(
        &self,
        py: Python<'py>,
        matrix: &str,
        rows: &[u64],
        keys: &[u64],
        one_row: bool,
    ) -> PyResult<Bound<'py, PyAny>> {
        let pull = self.client.pull_at::<T>(matrix, rows, keys, None);
        let (values, _) = wait(py, pull)?.py()?;
        match one_row {
            true => Ok(PyArray1::from_vec(py, values).into_any()),
            false => arrays::table(py, values, keys.len(), rows.len()),
        }
    }

    fn push_as<T: Element + numpy::Element + for<'py> FromPyObjectOwned<'py>>(
        &self,
        py: Python<'_>,
        matrix: &str,
        (rows, keys): (&[u64], &[u64]),
        values: &Bound<'_, PyAny>,
        how: PushOptions<'_>,
    ) -> PyResult<()> {
        let values = arrays::values::<T>(values, keys.len(), rows.len())?;
        let push = self.client.push_with(matrix, rows, keys, &values, how);
        wait(py, push)?.py()
    }
}

#[pymethods]
impl Client {
    /// The master this client talks to.
    #[getter]
    fn master(&self) -> String {
        self.client.master_addr().to_string()
    }

    /// The namespace names are taken in ('' for none).
    #[getter]
    fn namespace(&self) -> String {
        self.client.namespace().to_string()
    }

    /// Creates matrix ``name`` of ``rows`` output rows and ``cols`` columns (keys 0..cols).
    ///
    /// ``dtype`` is float32, float64 or int64; ``sparse`` stores hash maps (for up to 2^63
    /// columns) instead of arrays. With ``optimizer`` ("sgd", "adagrad", "adam", "ftrl"),
    /// pushes are gradients and the servers apply the optimizer with ``learning_rate``,
    /// ``l1``, ``l2``, ``beta1``, ``beta2`` and ``epsilon``, keeping its state beside each
    /// output row. ``compression`` ("sketchml" or "sketchml(bits=...)") compresses sparse
    /// pushes. ``init_std`` > 0 draws the (dense) rows from N(0, init_std²) with ``seed``.
    #[pyo3(signature = (
        name, rows, cols, *, dtype = None, sparse = false, optimizer = None,
        learning_rate = 0.01, l1 = 0.0, l2 = 0.0, beta1 = 0.9, beta2 = 0.999, epsilon = 1e-8,
        compression = None, init_std = 0.0, seed = 0
    ))]
    #[allow(clippy::too_many_arguments)]
    fn create_matrix(
        &self,
        py: Python<'_>,
        name: &str,
        rows: u64,
        cols: u64,
        dtype: Option<&Bound<'_, PyAny>>,
        sparse: bool,
        optimizer: Option<String>,
        learning_rate: f64,
        l1: f64,
        l2: f64,
        beta1: f64,
        beta2: f64,
        epsilon: f64,
        compression: Option<String>,
        init_std: f64,
        seed: u64,
    ) -> PyResult<()> {
        let value_type = match dtype {
            Some(dtype) => matrix::value_type(dtype)?,
            None => ValueType::F32,
        };
        let creation = Creation {
            name: name.to_string(),
            rows,
            cols,
            value_type,
            sparse,
            optimizer: optimizer.map(|o| (o, [learning_rate, l1, l2, beta1, beta2, epsilon])),
            compression,
        };
        wait(py, creation.create(&self.client))?.py()?;
        if init_std > 0.0 {
            let (outputs, _) = self.outputs(py, name, None)?;
            let args = [0.0, init_std, seed as f64];
            for row in outputs.rows {
                wait(py, self.client.psf("random_normal", &[(name, row)], &args))?.py()?;
            }
        }
        Ok(())
    }

    /// Matrix ``name`` as a dict: name, rows (outputs), cols, dtype, storage, optimizer,
    /// learning_rate, compression, server_rows, partitions, servers, attrs.
    fn describe<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyDict>> {
        let found = wait(py, async {
            let matrix = self.client.describe(name).await?;
            let outputs = Outputs::of(&self.client, name).await?;
            Ok((matrix, outputs))
        })?
        .py()?;
        matrix::describe(py, &found.0, &found.1)
    }

    /// Removes matrix ``name`` and its values from the servers.
    fn drop_matrix(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        wait(py, self.client.drop_matrix(name))?.py()
    }

    /// The values of ``keys`` (column numbers) in every output row of ``matrix``, as an
    /// array of shape (len(keys), rows) and the matrix's dtype; with ``row``, that output
    /// row's values alone, shape (len(keys),). A sparse matrix reads 0 for keys never pushed.
    #[pyo3(signature = (matrix, keys, row = None))]
    fn pull<'py>(
        &self,
        py: Python<'py>,
        matrix: &str,
        keys: &Bound<'py, PyAny>,
        row: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let keys = arrays::keys(keys)?;
        let (outputs, rows) = self.outputs(py, matrix, row)?;
        let one = row.is_some();
        match outputs.value_type {
            ValueType::F64 => self.pull_as::<f64>(py, matrix, &rows, &keys, one),
            ValueType::I64 => self.pull_as::<i64>(py, matrix, &rows, &keys, one),
            _ => self.pull_as::<f32>(py, matrix, &rows, &keys, one),
        }
    }

    /// Pushes ``values`` for ``keys``: shape (len(keys), rows), or (len(keys),) for one
    /// output row (``row``) or a matrix of one. Values are added, unless the matrix has an
    /// optimizer: then they are gradients, and the servers apply the optimizer
    /// (``gradients=False`` adds them anyway). Duplicate keys are summed first.
    #[pyo3(signature = (matrix, keys, values, row = None, gradients = None))]
    fn push(
        &self,
        py: Python<'_>,
        matrix: &str,
        keys: &Bound<'_, PyAny>,
        values: &Bound<'_, PyAny>,
        row: Option<usize>,
        gradients: Option<bool>,
    ) -> PyResult<()> {
        let keys = arrays::keys(keys)?;
        let (outputs, rows) = self.outputs(py, matrix, row)?;
        let how = PushOptions {
            gradients: gradients.unwrap_or(outputs.optimizer),
            ..Default::default()
        };
        let at = (rows.as_slice(), keys.as_slice());
        match outputs.value_type {
            ValueType::F64 => self.push_as::<f64>(py, matrix, at, values, how),
            ValueType::I64 => self.push_as::<i64>(py, matrix, at, values, how),
            _ => self.push_as::<f32>(py, matrix, at, values, how),
        }
    }

    /// Runs PS function ``name`` (such as "sum", "dot", "axpy", "random_normal") on the
    /// servers over ``operands``, pairs of (matrix, server row), with scalar ``args``;
    /// returns its combined result.
    #[pyo3(signature = (name, operands, args = Vec::new()))]
    fn psf<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        operands: Vec<(String, u64)>,
        args: Vec<f64>,
    ) -> PyResult<Bound<'py, PyArray1<f64>>> {
        let operands: Vec<(&str, u64)> = operands.iter().map(|(m, r)| (m.as_str(), *r)).collect();
        let result = wait(py, self.client.psf(name, &operands, &args))?.py()?;
        Ok(PyArray1::from_vec(py, result))
    }

    /// Creates counter ``name`` (WRITE state); ``replace`` removes one of that name first.
    #[pyo3(signature = (name, *, replace = false))]
    fn create_counter(&self, py: Python<'_>, name: &str, replace: bool) -> PyResult<()> {
        let created = match replace {
            true => wait(py, self.client.replace_counter(name))?,
            false => wait(py, self.client.create_counter(name))?,
        };
        created.py().map(drop)
    }

    /// Adds ``counts`` (default: 1 each) to string ``keys`` of counter ``name``.
    #[pyo3(signature = (name, keys, counts = None))]
    fn counter_add(
        &self,
        py: Python<'_>,
        name: &str,
        keys: Vec<String>,
        counts: Option<Vec<i64>>,
    ) -> PyResult<()> {
        let counts = counts.unwrap_or_else(|| vec![1; keys.len()]);
        if counts.len() != keys.len() {
            return Err(crate::errors::InvalidArgumentError::new_err(format!(
                "counter '{name}': {} keys but {} counts",
                keys.len(),
                counts.len()
            )));
        }
        wait(py, self.client.counter_increase(name, &keys, &counts))?.py()
    }

    /// Seals counter ``name``: keys counted at least ``min_count`` times get the indices
    /// 0..n-1 (by count, then key). Returns n.
    #[pyo3(signature = (name, min_count = 1))]
    fn counter_seal(&self, py: Python<'_>, name: &str, min_count: i64) -> PyResult<u64> {
        let sealed = wait(py, self.client.counter_seal(name, min_count))?.py()?;
        Ok(sealed.meta.size)
    }

    /// The counts and indices of ``keys`` in sealed counter ``name``: two int64 arrays, the
    /// index -1 for a key without one (unknown, or counted too rarely).
    fn counter_index<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        keys: Vec<String>,
    ) -> PyResult<CountsAndIndices<'py>> {
        let found = wait(py, self.client.counter_get(name, &keys))?.py()?;
        let counts = found.iter().map(|&(count, _)| count).collect();
        let indices = (found.iter())
            .map(|&(_, index)| index.map_or(-1, |i| i as i64))
            .collect();
        Ok((
            PyArray1::from_vec(py, counts),
            PyArray1::from_vec(py, indices),
        ))
    }

    /// Every indexed key of sealed counter ``name`` as (key, count, index), by index: the
    /// feature dictionary.
    fn counter_keys(&self, py: Python<'_>, name: &str) -> PyResult<Vec<(String, i64, u64)>> {
        wait(py, self.client.counter_indexed(name))?.py()
    }

    /// Removes counter ``name`` from the service.
    fn drop_counter(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        wait(py, self.client.drop_counter(name))?.py()
    }

    /// The service as a dict: ``servers`` (id, addr, reachable, partitions, standby),
    /// ``matrices`` (name, rows, cols, dtype, storage, partitions) and ``text``, the tables
    /// ``angel-ps status`` prints.
    fn status<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let reply = wait(py, self.client.status())?.py()?;
        status::dict(py, &reply)
    }

    /// Has the servers snapshot what changed of this client's namespace's matrices and
    /// counters (every one, without a namespace) and waits until it is written: then the
    /// changes survive the loss of a server once this writer, whose replay buffer held them,
    /// is gone (a SQL job does it at its end). Returns ``{"partitions": n, "bytes": b}``
    /// written; nothing is written when the service keeps no snapshots. A ``with`` block
    /// calls it on leaving.
    fn make_durable<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let reply = wait(py, self.client.make_durable())?.py()?;
        let out = PyDict::new(py);
        out.set_item("partitions", reply.partitions)?;
        out.set_item("bytes", reply.bytes)?;
        Ok(out)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Leaving a ``with`` block makes the client's changes durable (``make_durable``), also
    /// when the block raised; an error of that call is raised only when the block's own
    /// did not.
    fn __exit__(
        &self,
        py: Python<'_>,
        _kind: Option<Bound<'_, PyAny>>,
        error: Option<Bound<'_, PyAny>>,
        _traceback: Option<Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        match (self.make_durable(py), error) {
            (Err(e), None) => Err(e),
            _ => Ok(false),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "angel_ps.Client(master='{}', namespace='{}')",
            self.client.master_addr(),
            self.client.namespace()
        )
    }
}

//! A matrix as the package's verbs see it ([`Outputs`]), and what `create_matrix` asks for
//! ([`Creation`]).

use angel_client::{MatrixSpec, PsClient, Result, Training, ValueType, optimizer_params};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::errors::InvalidArgumentError;

/// A matrix as pulls and pushes see it: its element type, and its output rows, the rows a
/// pull reads and a push writes. Those are every row of a plain matrix; of a matrix with an
/// optimizer, the first of each group of `1 + state` rows (the servers keep the optimizer's
/// state in the others), as in the SQL models.
pub struct Outputs {
    pub value_type: ValueType,
    pub rows: Vec<u64>,
    /// Whether the servers apply an optimizer to gradient pushes.
    pub optimizer: bool,
}

impl Outputs {
    /// The outputs of matrix `name`.
    pub async fn of(client: &PsClient, name: &str) -> Result<Self> {
        let m = client.matrix(name).await?;
        let optimizer = m.meta.training.as_ref().and_then(|t| t.optimizer.as_ref());
        let group = match optimizer {
            Some(o) => 1 + client.optimizer(&o.name).await?.state_rows as usize,
            None => 1,
        };
        Ok(Outputs {
            value_type: m.value_type(),
            rows: (0..m.meta.rows).step_by(group).collect(),
            optimizer: optimizer.is_some(),
        })
    }

    /// The rows a call names: output `row` alone, or every output.
    pub fn select(&self, matrix: &str, row: Option<usize>) -> PyResult<Vec<u64>> {
        match row {
            None => Ok(self.rows.clone()),
            Some(r) => self.rows.get(r).map(|&at| vec![at]).ok_or_else(|| {
                InvalidArgumentError::new_err(format!(
                    "matrix '{matrix}' has {} output rows; row={r} is not one of them",
                    self.rows.len()
                ))
            }),
        }
    }
}

/// What `create_matrix` asks for.
pub struct Creation {
    pub name: String,
    pub rows: u64,
    pub cols: u64,
    pub value_type: ValueType,
    pub sparse: bool,
    /// The optimizer, its learning rate, L1, L2, Adam's decays and epsilon.
    pub optimizer: Option<(String, [f64; 6])>,
    pub compression: Option<String>,
}

impl Creation {
    /// Creates the matrix: with an optimizer, `rows` output rows each followed by the
    /// optimizer's state rows, kept together in every block (as the servers require).
    pub async fn create(self, client: &PsClient) -> Result<()> {
        let mut training = None;
        let mut rows = self.rows;
        if let Some((name, [learning_rate, l1, l2, beta1, beta2, epsilon])) = &self.optimizer {
            let state = client.optimizer(name).await?.state_rows;
            rows *= 1 + u64::from(state);
            let params = angel_client::OptimizerParams {
                l1: *l1,
                l2: *l2,
                beta1: *beta1,
                beta2: *beta2,
                epsilon: *epsilon,
                ..optimizer_params(name, *learning_rate)
            };
            training = Some(Training::for_optimizer(params));
        }
        if let Some(compression) = &self.compression {
            let t = training.get_or_insert_with(Training::default);
            t.compression = compression.clone();
        }
        let spec = match self.sparse {
            true => MatrixSpec::sparse(&self.name, rows, self.cols),
            false => MatrixSpec::dense(&self.name, rows, self.cols),
        };
        let mut spec = spec.value_type(self.value_type);
        if let Some(training) = training {
            spec = spec.block_shape(rows, 0).training(training);
        }
        client.create_matrix(spec).await.map(drop)
    }
}

/// The element type of a NumPy dtype, or anything `numpy.dtype` takes ("float32", "f4",
/// `numpy.float32`): float32, float64 or int64.
pub fn value_type(dtype: &Bound<'_, PyAny>) -> PyResult<ValueType> {
    let numpy = dtype.py().import("numpy")?;
    let name: Option<String> = numpy
        .call_method1("dtype", (dtype,))
        .and_then(|d| d.getattr("name")?.extract())
        .ok();
    match name.as_deref() {
        Some("float32") => Ok(ValueType::F32),
        Some("float64") => Ok(ValueType::F64),
        Some("int64") => Ok(ValueType::I64),
        _ => Err(InvalidArgumentError::new_err(format!(
            "dtype {}: matrices hold float32, float64 or int64",
            dtype.repr()?
        ))),
    }
}

/// The NumPy name of an element type.
pub fn dtype_name(value_type: ValueType) -> &'static str {
    match value_type {
        ValueType::F64 => "float64",
        ValueType::I64 => "int64",
        _ => "float32",
    }
}

/// A matrix's description as a dict: its name, shape in outputs, element type, storage,
/// optimizer, compression, and partitions with their servers.
pub fn describe<'py>(
    py: Python<'py>,
    matrix: &angel_client::matrix::Matrix,
    outputs: &Outputs,
) -> PyResult<Bound<'py, PyDict>> {
    let meta = &matrix.meta;
    let d = PyDict::new(py);
    d.set_item("name", &meta.name)?;
    d.set_item("rows", outputs.rows.len())?;
    d.set_item("cols", meta.cols)?;
    d.set_item("dtype", dtype_name(matrix.value_type()))?;
    d.set_item("storage", meta.storage().as_str_name().to_ascii_lowercase())?;
    let training = meta.training.as_ref();
    let optimizer = training.and_then(|t| t.optimizer.as_ref());
    d.set_item("optimizer", optimizer.map(|o| o.name.clone()))?;
    d.set_item("learning_rate", optimizer.map(|o| o.learning_rate))?;
    let compression = training
        .map(|t| t.compression.clone())
        .filter(|c| !c.is_empty());
    d.set_item("compression", compression)?;
    d.set_item("server_rows", meta.rows)?;
    let servers: Vec<u32> = meta.partitions.iter().map(|p| p.server_id).collect();
    d.set_item("partitions", meta.partitions.len())?;
    d.set_item("servers", servers)?;
    d.set_item("attrs", meta.attrs.clone())?;
    Ok(d)
}

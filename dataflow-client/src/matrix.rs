//! What a caller asks for when it creates a matrix, and the handle it gets back.

use std::collections::HashMap;
use std::sync::Arc;

use angel_proto::codec::{Compression, CompressionMode};
use angel_proto::{
    CreateMatrixRequest, Layout, MatrixMeta, Result, StorageKind, Training, ValueType,
};

use crate::codec_choice::CodecChoice;

/// A request to create a matrix: shape, element type, storage and partitioning.
///
/// ```
/// use angel_client::{MatrixSpec, ValueType};
/// let spec = MatrixSpec::sparse("weights", 1, 1 << 40).value_type(ValueType::F64);
/// assert_eq!(spec.cols, 1 << 40);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSpec {
    /// Unique name; matrices are addressed by it.
    pub name: String,
    /// Number of rows (a vector has one).
    pub rows: u64,
    /// Number of columns, up to 2^63 for sparse storage.
    pub cols: u64,
    /// Element type.
    pub value_type: ValueType,
    /// Dense arrays or sparse hash maps.
    pub storage: StorageKind,
    /// Partitioner registered on the master; `None` selects "range".
    pub partitioner: Option<String>,
    /// Block shape hints (rows, cols) for the partitioner; 0 lets it choose.
    pub block_shape: (u64, u64),
    /// Attributes stored with the matrix and returned in its metadata.
    pub attrs: HashMap<String, String>,
    /// How it is trained and pushed to (a model's description, or just an optimizer or a
    /// compression); stored with the matrix.
    pub training: Option<Training>,
}

impl MatrixSpec {
    /// A dense f32 matrix.
    pub fn dense(name: impl Into<String>, rows: u64, cols: u64) -> Self {
        Self::new(name, rows, cols, StorageKind::Dense)
    }

    /// A sparse f32 matrix.
    pub fn sparse(name: impl Into<String>, rows: u64, cols: u64) -> Self {
        Self::new(name, rows, cols, StorageKind::Sparse)
    }

    fn new(name: impl Into<String>, rows: u64, cols: u64, storage: StorageKind) -> Self {
        MatrixSpec {
            name: name.into(),
            rows,
            cols,
            value_type: ValueType::F32,
            storage,
            partitioner: None,
            block_shape: (0, 0),
            attrs: HashMap::new(),
            training: None,
        }
    }

    /// Sets the element type.
    pub fn value_type(mut self, value_type: ValueType) -> Self {
        self.value_type = value_type;
        self
    }

    /// Selects a partitioner registered on the master by name.
    pub fn partitioner(mut self, name: impl Into<String>) -> Self {
        self.partitioner = Some(name.into());
        self
    }

    /// Asks for blocks of about `rows` x `cols` elements (0 = let the partitioner choose).
    pub fn block_shape(mut self, rows: u64, cols: u64) -> Self {
        self.block_shape = (rows, cols);
        self
    }

    /// Stores `key = value` with the matrix: a note for its users; the service reads none.
    pub fn attr(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.attrs.insert(key.into(), value.into());
        self
    }

    /// Stores how the matrix is trained: its optimizer (applied by the servers to gradient
    /// pushes), update rule, sync options and compression.
    pub fn training(mut self, training: Training) -> Self {
        self.training = Some(training);
        self
    }

    /// The wire request.
    pub fn to_request(&self) -> CreateMatrixRequest {
        CreateMatrixRequest {
            name: self.name.clone(),
            rows: self.rows,
            cols: self.cols,
            value_type: self.value_type as i32,
            storage: self.storage as i32,
            partitioner: self.partitioner.clone().unwrap_or_default(),
            block_rows: self.block_shape.0,
            block_cols: self.block_shape.1,
            attrs: self.attrs.clone(),
            training: self.training.clone(),
        }
    }
}

/// A matrix as the client knows it: its metadata and the routing layout derived from it.
#[derive(Debug, Clone)]
pub struct Matrix {
    /// Metadata from the master, including each partition's server.
    pub meta: MatrixMeta,
    /// Which partition holds which (row, column).
    pub layout: Layout,
    /// How sparse pushes to it are encoded (its training description's `compression`).
    pub compression: Compression,
    /// With compression under `compression_mode = 'auto'` (the default): this process's
    /// measurements deciding, push by push, whether compressing pays.
    pub choice: Option<Arc<CodecChoice>>,
}

impl Matrix {
    /// Builds the handle, validating that the partitions tile the matrix and the compression
    /// of its training description, if any.
    pub fn new(meta: MatrixMeta) -> Result<Self> {
        let layout = Layout::new(&meta)?;
        let (compression, mode) = match &meta.training {
            Some(training) => training.codec()?,
            None => (Compression::None, CompressionMode::Auto),
        };
        // Only float pushes are ever sketched (`codec::encode_slice`).
        let float = matches!(meta.value_type(), ValueType::F32 | ValueType::F64);
        let choice = (compression != Compression::None && mode == CompressionMode::Auto && float)
            .then(Arc::default);
        Ok(Matrix {
            meta,
            layout,
            compression,
            choice,
        })
    }

    /// Keeps the push measurements of `before`, this matrix's handle from an older partition
    /// map, so that refreshing the map does not start them over.
    pub fn keep_measurements(&mut self, before: Option<&Matrix>) {
        let old = before.and_then(|b| b.choice.as_ref());
        if let (Some(choice), Some(old)) = (&mut self.choice, old) {
            *choice = old.clone();
        }
    }

    /// The compression of the next push: the matrix's, unless [`Matrix::choice`] says raw.
    pub fn push_compression(&self) -> Compression {
        match self.choice.as_ref().is_none_or(|c| c.compress()) {
            true => self.compression,
            false => Compression::None,
        }
    }

    /// The compression of a pull's keys: the matrix's, unless raw pushes measured cheaper.
    pub fn pull_compression(&self) -> Compression {
        match self.choice.as_ref().is_none_or(|c| c.prefers_compressed()) {
            true => self.compression,
            false => Compression::None,
        }
    }

    /// The matrix name.
    pub fn name(&self) -> &str {
        &self.meta.name
    }

    /// The element type.
    pub fn value_type(&self) -> ValueType {
        self.meta.value_type()
    }
}

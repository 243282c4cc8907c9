//! The files of saved models: Parquet bytes read back into batches, and errors naming the
//! file.

use angel_storage::Location;
use bytes::Bytes;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// An error naming `at` (a file or directory of a saved model) and what is wrong there.
pub(super) fn io(at: &impl std::fmt::Display, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{at}: {e}"))
}

/// The batches of Parquet file `parquet` (read from `path`), or an error naming it.
pub(super) fn batches(path: &Location, parquet: Bytes) -> Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(parquet)
        .map_err(|e| io(path, format!("not a readable Parquet file: {e}")))?;
    (reader.build()?)
        .map(|b| b.map_err(|e| io(path, format!("cannot be read whole: {e}"))))
        .collect()
}

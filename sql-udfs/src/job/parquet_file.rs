//! The files of saved models: a batch written as Parquet bytes, Parquet bytes read back into
//! batches, and errors naming the file.

use angel_storage::Location;
use bytes::Bytes;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

/// An error naming `at` (a file or directory of a saved model) and what is wrong there.
pub(super) fn io(at: &impl std::fmt::Display, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{at}: {e}"))
}

/// `batch` as the bytes of a Parquet file.
pub(super) fn parquet_bytes(batch: &RecordBatch) -> Result<Bytes> {
    let mut writer = ArrowWriter::try_new(Vec::new(), batch.schema(), None)?;
    writer.write(batch)?;
    Ok(Bytes::from(writer.into_inner()?))
}

/// The batches of Parquet file `parquet` (read from `path`), or an error naming it.
pub(super) fn batches(path: &Location, parquet: Bytes) -> Result<Vec<RecordBatch>> {
    let reader = ParquetRecordBatchReaderBuilder::try_new(parquet)
        .map_err(|e| io(path, format!("not a readable Parquet file: {e}")))?;
    (reader.build()?)
        .map(|b| b.map_err(|e| io(path, format!("cannot be read whole: {e}"))))
        .collect()
}

//! The staging directory of a job on Ballista: where its tables live as Parquet.
//!
//! A Ballista cluster cannot ship in-memory tables, so on a cluster `CREATE TABLE t AS ...` is
//! written by the executors with `COPY ... TO` into a directory here and registered as an
//! external table over it, and `read_csv` / `read_libsvm` write what they parse here as one
//! Parquet file per partition. Every executor must see the directory at the same path: a
//! local path on one machine, a shared file system across machines.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::parquet::arrow::ArrowWriter;

/// See the module documentation.
#[derive(Debug)]
pub struct Stage {
    dir: PathBuf,
    next: AtomicUsize,
    /// Removes a stage this job created when the job ends.
    _temporary: Option<tempfile::TempDir>,
}

impl Stage {
    /// A stage in `dir`, created if missing and kept after the job.
    pub fn at(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, e))?;
        Ok(Stage {
            dir: dir.to_path_buf(),
            next: AtomicUsize::new(0),
            _temporary: None,
        })
    }

    /// A stage in a fresh temporary directory, removed when the stage is dropped. Only
    /// executors on this machine can read it.
    pub fn temporary() -> Result<Self> {
        let temp = tempfile::Builder::new()
            .prefix("angel-ps-stage-")
            .tempdir()
            .map_err(|e| io_error(&std::env::temp_dir(), e))?;
        Ok(Stage {
            dir: temp.path().to_path_buf(),
            next: AtomicUsize::new(0),
            _temporary: Some(temp),
        })
    }

    /// A new, empty directory for table `name` (a running number keeps names unique), as a
    /// path ending in `/` so DataFusion reads it as a directory.
    pub fn table_dir(&self, name: &str) -> Result<String> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let clean: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let dir = self.dir.join(format!("{n:04}-{clean}"));
        std::fs::create_dir_all(&dir).map_err(|e| io_error(&dir, e))?;
        Ok(format!("{}/", dir.display()))
    }

    /// Writes `partitions` as one Parquet file each into a new directory and returns a table
    /// over them, so executors scan the partitions in parallel.
    pub fn write(
        &self,
        name: &str,
        partitions: &[Vec<RecordBatch>],
    ) -> Result<Arc<dyn TableProvider>> {
        let dir = self.table_dir(name)?;
        let schema = partitions
            .iter()
            .flatten()
            .next()
            .map(|b| b.schema())
            .ok_or_else(|| DataFusionError::Plan(format!("{name}: nothing to stage")))?;
        for (p, batches) in partitions.iter().enumerate() {
            let path = PathBuf::from(format!("{dir}part-{p:04}.parquet"));
            let file = std::fs::File::create(&path).map_err(|e| io_error(&path, e))?;
            let mut writer = ArrowWriter::try_new(file, schema.clone(), None)?;
            for batch in batches {
                writer.write(batch)?;
            }
            writer.close()?;
        }
        listing_table(&dir, schema)
    }
}

/// A Parquet table over every file in `dir`.
fn listing_table(
    dir: &str,
    schema: datafusion::arrow::datatypes::SchemaRef,
) -> Result<Arc<dyn TableProvider>> {
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new(ListingTableUrl::parse(dir)?)
        .with_listing_options(options)
        .with_schema(schema);
    Ok(Arc::new(ListingTable::try_new(config)?))
}

fn io_error(path: &Path, e: std::io::Error) -> DataFusionError {
    DataFusionError::Execution(format!("staging directory {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::Int64Array;
    use datafusion::prelude::SessionContext;

    #[tokio::test]
    async fn staged_partitions_read_back_as_one_table() {
        let stage = Stage::temporary().unwrap();
        let batch = |v: Vec<i64>| {
            RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(v)) as _)]).unwrap()
        };
        let table = stage
            .write("t", &[vec![batch(vec![1, 2])], vec![batch(vec![3])]])
            .unwrap();
        let ctx = SessionContext::new();
        ctx.register_table("t", table).unwrap();
        let rows = ctx.sql("SELECT sum(x) AS s FROM t").await.unwrap();
        let out = rows.collect().await.unwrap();
        let sum = out[0]
            .column(0)
            .as_any()
            .downcast_ref::<Int64Array>()
            .unwrap();
        assert_eq!(sum.value(0), 6);
        let dir = stage.dir.clone();
        drop(stage);
        assert!(!dir.exists(), "a temporary stage is removed with the job");
    }
}

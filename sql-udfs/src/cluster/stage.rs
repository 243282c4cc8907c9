//! The staging directory of a job on Ballista: where its tables live as Parquet.
//!
//! A Ballista cluster cannot ship in-memory tables, so on a cluster `CREATE TABLE t AS ...` is
//! written by the executors with `COPY ... TO` into a directory here and registered as an
//! external table over it, and `read_csv` / `read_libsvm` write what they parse here as one
//! Parquet file per partition. Every executor must reach the directory by the same name: a
//! local path on one machine; across machines an `s3://` or `hdfs://` URL (the executors
//! exchange the tables through the object store) or a shared mount.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use angel_storage::Location;
use angel_storage::write::put;
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
    dir: Location,
    next: AtomicUsize,
    /// Removes a stage this job created when the job ends.
    _temporary: Option<tempfile::TempDir>,
}

impl Stage {
    /// A stage at `dir` (a path or URL), kept after the job.
    pub fn at(dir: &str) -> Result<Self> {
        let dir =
            Location::parse(dir).map_err(|e| DataFusionError::Plan(format!("--stage: {e}")))?;
        Ok(Stage {
            dir,
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
            .map_err(|e| {
                let dir = std::env::temp_dir();
                DataFusionError::Execution(format!("staging directory in {}: {e}", dir.display()))
            })?;
        let dir = Location::parse(&temp.path().display().to_string())
            .map_err(|e| DataFusionError::Execution(e.to_string()))?;
        Ok(Stage {
            dir,
            next: AtomicUsize::new(0),
            _temporary: Some(temp),
        })
    }

    /// The URL of a new directory for table `name` (a running number keeps names unique),
    /// ending in `/` so DataFusion reads it as a directory.
    pub fn table_dir(&self, name: &str) -> String {
        format!("{}/", self.table_location(name).url())
    }

    fn table_location(&self, name: &str) -> Location {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let clean: String = name
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        self.dir.child(&format!("{n:04}-{clean}"))
    }

    /// Writes `partitions` as one Parquet file each into a new directory and returns a table
    /// over them, so executors scan the partitions in parallel.
    pub fn write(
        &self,
        name: &str,
        partitions: &[Vec<RecordBatch>],
    ) -> Result<Arc<dyn TableProvider>> {
        let dir = self.table_location(name);
        let schema = partitions
            .iter()
            .flatten()
            .next()
            .map(|b| b.schema())
            .ok_or_else(|| DataFusionError::Plan(format!("{name}: nothing to stage")))?;
        // Encoding is most of the time: the partitions encode at once, one thread each.
        let write = |p: usize, batches: &[RecordBatch]| -> Result<()> {
            let mut writer = ArrowWriter::try_new(Vec::new(), schema.clone(), None)?;
            for batch in batches {
                writer.write(batch)?;
            }
            let file = dir.child(&format!("part-{p:04}.parquet"));
            put(&file, writer.into_inner()?.into())
                .map_err(|e| DataFusionError::Execution(format!("staging {name}: {e}")))
        };
        std::thread::scope(|scope| {
            let threads: Vec<_> = (partitions.iter().enumerate())
                .map(|(p, batches)| scope.spawn(move || write(p, batches)))
                .collect();
            threads.into_iter().try_for_each(|t| {
                t.join().unwrap_or_else(|_| {
                    Err(DataFusionError::Execution(format!(
                        "staging {name}: a writer thread panicked"
                    )))
                })
            })
        })?;
        parquet_table(&format!("{}/", dir.url()), schema)
    }
}

/// A Parquet table over the file at URL `dir`, or every Parquet file below it, with `schema`.
pub fn parquet_table(
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
        let dir = std::path::PathBuf::from(format!("/{}", stage.dir.path));
        assert!(dir.join("0000-t/part-0001.parquet").is_file());
        drop(stage);
        assert!(!dir.exists(), "a temporary stage is removed with the job");
    }
}

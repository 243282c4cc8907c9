//! The staging directory of a job on Ballista: where its tables live as Parquet.
//!
//! A Ballista cluster cannot ship in-memory tables, so on a cluster `CREATE TABLE t AS ...` is
//! written by the executors into a directory here ([`super::stage_write`]) and registered as a
//! table over it, and `read_csv` / `read_libsvm` write what they parse here as one
//! Arrow IPC file per partition ([`super::stage_write::write_file`]; encoding Parquet took
//! longer than parsing). Every executor must reach the directory by the same name: a
//! local path on one machine; across machines an `s3://` or `hdfs://` URL (the executors
//! exchange the tables through the object store) or a shared mount.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use angel_storage::Location;
use datafusion::arrow::array::RecordBatch;
use datafusion::catalog::TableProvider;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::file_format::arrow::ArrowFormat;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::LogicalPlan;

use super::stage_write::write_file;

/// See the module documentation.
#[derive(Debug)]
pub struct Stage {
    dir: Location,
    next: AtomicUsize,
    /// The tables [`Stage::write_once`] wrote, by what they were made from.
    written: Mutex<HashMap<String, Arc<dyn TableProvider>>>,
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
            written: Mutex::default(),
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
            written: Mutex::default(),
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

    /// The staged table `plan` reads whole, when that is all it does: `CREATE TABLE t AS
    /// SELECT * FROM read_csv(...)` then names the files `read_csv` staged rather than
    /// copying them.
    pub fn whole_table(&self, plan: &LogicalPlan) -> Option<Arc<dyn TableProvider>> {
        let LogicalPlan::TableScan(scan) = plan else {
            return None;
        };
        let columns = scan.source.schema().fields().len();
        let whole = (scan.projection.as_ref()).is_none_or(|p| p.iter().copied().eq(0..columns));
        if !whole || !scan.filters.is_empty() || scan.fetch.is_some() {
            return None;
        }
        let table = source_as_provider(&scan.source).ok()?;
        let files = table.downcast_ref::<ListingTable>()?;
        let root = format!("{}/", self.dir.url());
        (files.table_paths().iter())
            .all(|path| path.as_str().starts_with(&root))
            .then_some(table)
    }

    /// The table [`Stage::write`] made of the partitions `make` returns, written once per
    /// `source` (what the rows were made from, with the versions of the files read): a job
    /// plans a statement twice (once to find its counters), and reading a file twice would
    /// parse it twice.
    pub fn write_once(
        &self,
        source: &str,
        name: &str,
        make: impl FnOnce() -> Result<Vec<Vec<RecordBatch>>>,
    ) -> Result<Arc<dyn TableProvider>> {
        let mut written = self.written.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(table) = written.get(source) {
            return Ok(table.clone());
        }
        let table = self.write(name, &make()?)?;
        written.insert(source.to_string(), table.clone());
        Ok(table)
    }

    /// Writes `partitions` as one Arrow IPC file each into a new directory and returns a table
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
        // Compression is most of the time: the partitions encode at once, one thread each.
        let write = |p: usize, batches: &[RecordBatch]| -> Result<()> {
            let file = dir.child(&format!("part-{p:04}.arrow"));
            write_file(&file, &schema, batches).map(|_| ())
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
        arrow_table(&format!("{}/", dir.url()), schema)
    }
}

/// A table over the Arrow IPC files below URL `dir`, with `schema`: a staged table.
pub fn arrow_table(
    dir: &str,
    schema: datafusion::arrow::datatypes::SchemaRef,
) -> Result<Arc<dyn TableProvider>> {
    let options = ListingOptions::new(Arc::new(ArrowFormat)).with_file_extension(".arrow");
    listing_table(dir, options, schema)
}

/// A Parquet table over the file at URL `dir`, or every Parquet file below it, with `schema`.
pub fn parquet_table(
    dir: &str,
    schema: datafusion::arrow::datatypes::SchemaRef,
) -> Result<Arc<dyn TableProvider>> {
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    listing_table(dir, options, schema)
}

/// A table over the files at URL `dir` that `options` read.
fn listing_table(
    dir: &str,
    options: ListingOptions,
    schema: datafusion::arrow::datatypes::SchemaRef,
) -> Result<Arc<dyn TableProvider>> {
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
        assert!(dir.join("0000-t/part-0001.arrow").is_file());
        drop(stage);
        assert!(!dir.exists(), "a temporary stage is removed with the job");
    }

    /// One source is written once; a query that reads a staged table whole is that table,
    /// and one that does more is not.
    #[tokio::test]
    async fn a_source_is_staged_once_and_a_whole_scan_names_its_files() {
        let stage = Stage::temporary().unwrap();
        let batch =
            RecordBatch::try_from_iter([("x", Arc::new(Int64Array::from(vec![1, 2])) as _)])
                .unwrap();
        let made = AtomicUsize::new(0);
        let make = || {
            made.fetch_add(1, Ordering::Relaxed);
            Ok(vec![vec![batch.clone()]])
        };
        let table = stage.write_once("f.csv 1@2", "f", make).unwrap();
        let again = stage.write_once("f.csv 1@2", "f", make).unwrap();
        assert!(Arc::ptr_eq(&table, &again));
        stage.write_once("f.csv 3@4", "f", make).unwrap();
        assert_eq!(
            made.load(Ordering::Relaxed),
            2,
            "a changed file is read again"
        );

        let ctx = SessionContext::new();
        ctx.register_table("t", table.clone()).unwrap();
        let plan = |sql: &'static str| {
            let ctx = ctx.clone();
            async move { ctx.sql(sql).await.unwrap().into_optimized_plan().unwrap() }
        };
        let whole = stage.whole_table(&plan("SELECT * FROM t").await).unwrap();
        assert!(Arc::ptr_eq(&whole, &table));
        for more in [
            "SELECT x + 1 AS y FROM t",
            "SELECT * FROM t WHERE x > 1",
            "SELECT * FROM t LIMIT 1",
        ] {
            assert!(stage.whole_table(&plan(more).await).is_none(), "{more}");
        }
        let elsewhere = Stage::temporary().unwrap();
        assert!(
            elsewhere
                .whole_table(&plan("SELECT * FROM t").await)
                .is_none()
        );
    }
}

//! [`SpillingTable`]: a table a job created (`CREATE TABLE name AS query`), kept at the job's
//! storage level ([`crate::storage_level`]): each batch in memory while the budget allows,
//! else appended to its partition's Arrow IPC file in the job's spill directory, which every
//! scan reads back. The query runs on all its partitions at once and no partition is ever
//! held whole, so a table larger than memory is written and read in a fixed footprint.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::ipc::reader::StreamReader;
use datafusion::arrow::ipc::writer::StreamWriter;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::TableType;
use datafusion::execution::memory_pool::{MemoryConsumer, MemoryReservation};
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::PartitionStream;
use datafusion::physical_plan::{ExecutionPlan, execute_stream_partitioned};
use datafusion::prelude::SessionContext;
use futures::StreamExt;
use tempfile::TempDir;

use crate::file_table::scan_of;
use crate::storage_level::TableStorage;

/// See the module documentation.
#[derive(Debug)]
pub struct SpillingTable {
    schema: SchemaRef,
    parts: Vec<Arc<Part>>,
}

/// One partition: its batches in memory, then those in its file.
#[derive(Debug)]
struct Part {
    schema: SchemaRef,
    memory: Vec<RecordBatch>,
    /// Bytes of `memory`, counted against the storage's budget and the session's pool.
    reservation: MemoryReservation,
    storage: Arc<TableStorage>,
    file: Option<PathBuf>,
    /// The directory of `file`, kept while any table (or scan) still reads from it.
    _dir: Arc<TempDir>,
}

impl SpillingTable {
    /// Runs `query` on `ctx` and keeps its rows as table `name` in `storage`, spilling to
    /// files in `dir`.
    pub async fn create(
        ctx: &SessionContext,
        name: &str,
        query: &str,
        storage: Arc<TableStorage>,
        dir: Arc<TempDir>,
    ) -> Result<Self> {
        let plan = ctx.sql(query).await?.create_physical_plan().await?;
        let schema = plan.schema();
        let streams = execute_stream_partitioned(plan, ctx.task_ctx())?;
        let pool = &ctx.runtime_env().memory_pool;
        let mut tasks = tokio::task::JoinSet::new();
        for (p, stream) in streams.into_iter().enumerate() {
            let part = Part {
                schema: schema.clone(),
                memory: Vec::new(),
                reservation: MemoryConsumer::new(format!("table {name}, partition {p}"))
                    .register(pool),
                storage: storage.clone(),
                file: None,
                _dir: dir.clone(),
            };
            // Named by number: a table's name may hold any character.
            let file = dir.path().join(format!("{}.arrows", unique()));
            tasks.spawn(async move { (p, part.fill(stream, file).await) });
        }
        let mut parts = Vec::new();
        while let Some(done) = tasks.join_next().await {
            let (p, part) = done.map_err(|e| DataFusionError::External(Box::new(e)))?;
            parts.push((p, Arc::new(part?)));
        }
        parts.sort_by_key(|(p, _)| *p);
        Ok(SpillingTable {
            schema,
            parts: parts.into_iter().map(|(_, part)| part).collect(),
        })
    }

    /// Bytes of the table kept in memory.
    pub fn bytes_in_memory(&self) -> usize {
        self.parts.iter().map(|p| p.reservation.size()).sum()
    }

    /// The files holding what did not stay in memory.
    pub fn files(&self) -> Vec<&Path> {
        self.parts
            .iter()
            .filter_map(|p| p.file.as_deref())
            .collect()
    }
}

/// A number no other table of this process has used, so a replaced table's files never
/// collide with its successor's.
fn unique() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

impl Part {
    /// Keeps every batch of `stream`: in memory when the storage admits it, else in `file`.
    async fn fill(mut self, mut stream: SendableRecordBatchStream, file: PathBuf) -> Result<Self> {
        let mut writer = None;
        while let Some(batch) = stream.next().await {
            let batch = batch?;
            let bytes = batch.get_array_memory_size();
            if self.storage.admit(bytes) {
                self.reservation.grow(bytes);
                self.memory.push(batch);
                continue;
            }
            if writer.is_none() {
                let created = File::create(&file).map_err(|e| spill_error(&file, e.into()))?;
                self.file = Some(file.clone());
                let w = StreamWriter::try_new(BufWriter::new(created), &self.schema)
                    .map_err(|e| spill_error(&file, e.into()))?;
                writer = Some(w);
            }
            if let Some(w) = writer.as_mut() {
                w.write(&batch).map_err(|e| spill_error(&file, e.into()))?;
            }
        }
        if let Some(mut w) = writer {
            w.finish().map_err(|e| spill_error(&file, e.into()))?;
        }
        Ok(self)
    }
}

/// A failure writing or reading a table's file, naming it.
fn spill_error(file: &Path, e: DataFusionError) -> DataFusionError {
    DataFusionError::Execution(format!(
        "table file {}: {e} (tables beyond --memory-limit are kept in the spill directory; \
         check it has room)",
        file.display()
    ))
}

impl Drop for Part {
    fn drop(&mut self) {
        self.storage.release(self.reservation.size());
        if let Some(file) = &self.file {
            let _ = std::fs::remove_file(file);
        }
    }
}

#[async_trait]
impl TableProvider for SpillingTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let parts = (self.parts.iter())
            .map(|p| p.clone() as Arc<dyn PartitionStream>)
            .collect();
        scan_of(&self.schema, parts, projection, limit)
    }
}

impl PartitionStream for Part {
    fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let memory = futures::stream::iter(self.memory.clone().into_iter().map(Ok));
        let from_file = futures::stream::iter(self.file.clone())
            .flat_map(|file| futures::stream::iter(read_file(file)));
        Box::pin(RecordBatchStreamAdapter::new(
            self.schema.clone(),
            memory.chain(from_file),
        ))
    }
}

/// The batches of a partition's file, one at a time.
fn read_file(file: PathBuf) -> Box<dyn Iterator<Item = Result<RecordBatch>> + Send> {
    let reader = File::open(&file)
        .map_err(DataFusionError::from)
        .and_then(|f| Ok(StreamReader::try_new(BufReader::new(f), None)?));
    match reader {
        Ok(reader) => Box::new(reader.map(move |b| b.map_err(|e| spill_error(&file, e.into())))),
        Err(e) => Box::new(std::iter::once(Err(spill_error(&file, e)))),
    }
}

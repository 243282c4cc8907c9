//! [`FileTable`]: a table read from its files each time it is scanned, never held whole.
//!
//! One thread reads the files (the CSV parser spreads each block over every core) and every
//! partition of the scan takes the next batch it hands on, so the scan runs on as many tasks
//! as the session plans for while the files stream through once. A slow consumer slows the
//! reader: at most a few batches wait between them.

use std::sync::{Arc, OnceLock};

use angel_etl::EtlError;
use async_trait::async_trait;
use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::{Session, TableProvider};
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::TableType;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::Expr;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::streaming::{PartitionStream, StreamingTableExec};
use tokio::sync::{Mutex, mpsc};

/// Reads a table's files, handing each batch to `send` in order until it returns false.
pub type Read =
    Arc<dyn Fn(&mut dyn FnMut(RecordBatch) -> bool) -> Result<(), EtlError> + Send + Sync>;

/// Batches waiting between the reader and the scan's partitions.
const WAITING: usize = 2;

/// See the module documentation.
pub struct FileTable {
    schema: SchemaRef,
    read: Read,
    partitions: usize,
    /// The call that made the table, to name it in errors.
    source: String,
}

impl std::fmt::Debug for FileTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "FileTable({})", self.source)
    }
}

impl FileTable {
    /// A table of `schema` that `read` fills, scanned on `partitions` tasks; `source` (the
    /// call, such as `read_csv('x.csv', '')`) names it in errors.
    pub fn new(schema: SchemaRef, read: Read, partitions: usize, source: String) -> Self {
        FileTable {
            schema,
            read,
            partitions: partitions.max(1),
            source,
        }
    }
}

/// Every batch `read` hands on, at once (for staging a table on a cluster).
pub fn collect(read: &Read) -> Result<Vec<RecordBatch>, EtlError> {
    let mut out = Vec::new();
    read(&mut |batch| {
        out.push(batch);
        true
    })?;
    Ok(out)
}

#[async_trait]
impl TableProvider for FileTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Temporary
    }

    async fn scan(
        &self,
        _state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let scan = Arc::new(Scan {
            schema: self.schema.clone(),
            read: self.read.clone(),
            source: self.source.clone(),
            batches: OnceLock::new(),
        });
        let partitions = (0..self.partitions)
            .map(|_| Arc::new(Partition(scan.clone())) as Arc<dyn PartitionStream>)
            .collect();
        let exec = StreamingTableExec::try_new(
            self.schema.clone(),
            partitions,
            projection,
            Vec::new(),
            false,
            limit,
        )?;
        Ok(Arc::new(exec))
    }
}

/// One scan: its reader starts when a partition first asks for a batch.
struct Scan {
    schema: SchemaRef,
    read: Read,
    source: String,
    batches: OnceLock<Mutex<mpsc::Receiver<Result<RecordBatch>>>>,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scan({})", self.source)
    }
}

impl Scan {
    /// The batches the reader hands on, starting it on first use.
    fn batches(&self) -> &Mutex<mpsc::Receiver<Result<RecordBatch>>> {
        self.batches.get_or_init(|| {
            let (send, receive) = mpsc::channel(WAITING);
            let failed = send.clone();
            let (read, schema, source) =
                (self.read.clone(), self.schema.clone(), self.source.clone());
            let reader = std::thread::Builder::new()
                .name("angel-read".into())
                .spawn(move || {
                    let mut hand_on = |batch: RecordBatch| {
                        let batch = batch.with_schema(schema.clone()).map_err(Into::into);
                        send.blocking_send(batch).is_ok()
                    };
                    if let Err(e) = read(&mut hand_on) {
                        let e = DataFusionError::Execution(format!("{source}: {e}"));
                        let _ = send.blocking_send(Err(e));
                    }
                });
            if let Err(e) = reader {
                let e = format!("{}: cannot start a reader thread: {e}", self.source);
                let _ = failed.try_send(Err(DataFusionError::Execution(e)));
            }
            Mutex::new(receive)
        })
    }
}

/// One partition of a scan: it takes whichever batch is next.
#[derive(Debug)]
struct Partition(Arc<Scan>);

impl PartitionStream for Partition {
    fn schema(&self) -> &SchemaRef {
        &self.0.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let batches = futures::stream::unfold(self.0.clone(), |scan| async move {
            let next = scan.batches().lock().await.recv().await;
            next.map(|batch| (batch, scan))
        });
        Box::pin(RecordBatchStreamAdapter::new(
            self.0.schema.clone(),
            batches,
        ))
    }
}

//! [`FileTable`]: a table read from its files each time it is scanned, never held whole.
//!
//! One thread reads the files (the CSV parser spreads each block over every core) and cuts
//! each batch into one slice per partition of the scan: partition p gets the p-th slice of
//! every batch, in file order, as `split` did when tables were read whole. So the scan runs on
//! as many tasks as the session plans for, the files stream through once, and a table's
//! partitions hold the same rows at every run. A slow partition slows the reader (at most a
//! few slices wait for each), which relies on a scan's partitions being read together, as
//! DataFusion's operators read them.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

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
use tokio::sync::mpsc;

/// Reads a table's files, handing each batch to `send` in order until it returns false.
pub type Read =
    Arc<dyn Fn(&mut dyn FnMut(RecordBatch) -> bool) -> Result<(), EtlError> + Send + Sync>;

/// Batches waiting between the reader and each partition of a scan.
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
            table: FileTable {
                schema: self.schema.clone(),
                read: self.read.clone(),
                partitions: self.partitions,
                source: self.source.clone(),
            },
            round: parking_lot::Mutex::new(Vec::new()),
        });
        let partitions = (0..self.partitions)
            .map(|p| Arc::new(Partition(scan.clone(), p)) as Arc<dyn PartitionStream>)
            .collect();
        scan_of(&self.schema, partitions, projection, limit)
    }
}

/// The plan scanning `partitions` of a table of `schema` (for this module's and
/// [`crate::spilling_table`]'s tables).
pub(crate) fn scan_of(
    schema: &SchemaRef,
    partitions: Vec<Arc<dyn PartitionStream>>,
    projection: Option<&Vec<usize>>,
    limit: Option<usize>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let exec = StreamingTableExec::try_new(
        schema.clone(),
        partitions,
        projection,
        Vec::new(),
        false,
        limit,
    )?;
    Ok(Arc::new(exec))
}

/// `batch` cut into `parts` slices of nearly equal rows (sharing its memory), so even a
/// one-batch file spreads over every partition.
pub fn slices(batch: &RecordBatch, parts: usize) -> impl Iterator<Item = RecordBatch> + '_ {
    let size = batch.num_rows().div_ceil(parts.max(1)).max(1);
    (0..parts.max(1)).map(move |p| {
        let start = (p * size).min(batch.num_rows());
        batch.slice(start, size.min(batch.num_rows() - start))
    })
}

/// Batches on their way from a reader to one partition.
type Batches = mpsc::Receiver<Result<RecordBatch>>;

/// One scan of the table. Each execution of its partitions (a round) shares one reader,
/// started by the round's first partition, so a plan executed again reads the files again.
#[derive(Debug)]
struct Scan {
    table: FileTable,
    /// The current round's batches for each partition not started yet.
    round: parking_lot::Mutex<Vec<Option<Batches>>>,
}

impl Scan {
    /// The batches of partition `p` in the round it joins.
    fn join(&self, p: usize) -> Batches {
        let mut round = self.round.lock();
        if let Some(batches) = round.get_mut(p).and_then(Option::take) {
            return batches;
        }
        *round = self.start().into_iter().map(Some).collect();
        round[p].take().expect("a new round has every partition")
    }

    /// Starts a reader thread. Partition p gets the p-th slice of every batch, in file order,
    /// so a table's partitions hold the same rows at every run; then the reader's failure (a
    /// panic included). A partition that stopped listening gets nothing more.
    fn start(&self) -> Vec<Batches> {
        let FileTable {
            schema,
            read,
            partitions,
            source,
        } = &self.table;
        let (read, schema, source) = (read.clone(), schema.clone(), source.clone());
        let (sends, receives): (Vec<_>, Vec<_>) =
            (0..*partitions).map(|_| mpsc::channel(WAITING)).unzip();
        let failed = sends.clone();
        let reader = std::thread::Builder::new()
            .name("angel-read".into())
            .spawn(move || {
                let mut listening = vec![true; sends.len()];
                let mut hand_on = |batch: RecordBatch| {
                    for (p, slice) in slices(&batch, sends.len()).enumerate() {
                        let slice = slice.with_schema(schema.clone()).map_err(Into::into);
                        listening[p] = listening[p] && sends[p].blocking_send(slice).is_ok();
                    }
                    listening.contains(&true)
                };
                let read = std::panic::catch_unwind(AssertUnwindSafe(|| read(&mut hand_on)));
                let why = match read {
                    Ok(Ok(())) => return,
                    Ok(Err(e)) => e.to_string(),
                    Err(_) => "the reader stopped unexpectedly (a bug: please report it)".into(),
                };
                for send in &sends {
                    let e = DataFusionError::Execution(format!("{source}: {why}"));
                    let _ = send.blocking_send(Err(e));
                }
            });
        if let Err(e) = reader {
            for send in failed {
                let e = format!("{}: cannot start a reader thread: {e}", self.table.source);
                let _ = send.try_send(Err(DataFusionError::Execution(e)));
            }
        }
        receives
    }
}

/// Partition `.1` of a scan.
#[derive(Debug)]
struct Partition(Arc<Scan>, usize);

impl PartitionStream for Partition {
    fn schema(&self) -> &SchemaRef {
        &self.0.table.schema
    }

    fn execute(&self, _ctx: Arc<TaskContext>) -> SendableRecordBatchStream {
        let batches = futures::stream::unfold(self.0.join(self.1), |mut batches| async move {
            let next = batches.recv().await;
            next.map(|batch| (batch, batches))
        });
        Box::pin(RecordBatchStreamAdapter::new(
            self.0.table.schema.clone(),
            batches,
        ))
    }
}

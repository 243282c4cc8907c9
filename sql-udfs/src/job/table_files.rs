//! A saved model's tables written as its kind reads them from the servers: each batch goes
//! over a short channel to a blocking thread, which encodes each table's Parquet file row
//! group by row group into an upload (`angel_storage::upload`). What `SAVE MODEL` holds at
//! once is a few pages and a row group, whatever the size of the model.

use angel_storage::Location;
use angel_storage::upload::Upload;
use angel_training::saved::{SavedTable, TableSink};
use datafusion::arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::file::properties::WriterProperties;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::parquet_file::io;

/// Rows of a row group: what the writer buffers of a table before it encodes and uploads them.
const ROW_GROUP_ROWS: usize = 1 << 18;
/// Batches in flight between the kind and the writer.
const BATCHES_AHEAD: usize = 2;

/// What the kind sends the writer.
enum Message {
    Batch(usize, RecordBatch),
    /// Every batch was sent: publish the files.
    Finish,
}

/// The files of a saved model's tables in a version directory being written; see the module
/// documentation.
pub struct TableFiles {
    messages: mpsc::Sender<Message>,
    writer: JoinHandle<Result<()>>,
}

impl TableFiles {
    /// Starts writing `tables` into directory `dir`, each to its file.
    pub fn open(dir: Location, tables: Vec<SavedTable>) -> TableFiles {
        let (messages, received) = mpsc::channel(BATCHES_AHEAD);
        let writer = tokio::task::spawn_blocking(move || write(&dir, &tables, received));
        TableFiles { messages, writer }
    }

    /// Publishes every table's file (a table nothing was written to gets one without rows)
    /// when `publish`, else abandons them; answers the writer's error, if it failed.
    pub async fn finish(self, publish: bool) -> Result<()> {
        if publish {
            // A writer that failed has closed its end: its error is answered below.
            let _ = self.messages.send(Message::Finish).await;
        }
        drop(self.messages);
        (self.writer.await)
            .map_err(|e| DataFusionError::Execution(format!("the saving task failed: {e}")))?
    }
}

#[async_trait::async_trait]
impl TableSink for TableFiles {
    async fn write(&mut self, table: usize, batch: RecordBatch) -> angel_training::Result<()> {
        (self.messages.send(Message::Batch(table, batch)).await).map_err(|_| {
            angel_training::Error::Input("the model's files could not be written".into())
        })
    }
}

/// The writer's loop: each batch received into its table's file, opened on its first batch;
/// every file finished and published on [`Message::Finish`]; uploads dropped unfinished (and
/// so aborted) when the channel closes before it.
fn write(
    dir: &Location,
    tables: &[SavedTable],
    mut received: mpsc::Receiver<Message>,
) -> Result<()> {
    let mut files: Vec<Option<ArrowWriter<Upload>>> = tables.iter().map(|_| None).collect();
    while let Some(message) = received.blocking_recv() {
        let (t, batch) = match message {
            Message::Batch(t, batch) => (t, batch),
            Message::Finish => return finish(dir, tables, files),
        };
        let table = (tables.get(t)).ok_or_else(|| io(dir, format!("there is no table {t}")))?;
        let file = match &mut files[t] {
            Some(file) => file,
            none => none.insert(open(dir, table, &batch.schema())?),
        };
        file.write(&batch)
            .map_err(|e| io(&dir.child(table.file), e))?;
    }
    Ok(())
}

/// Every table's file finished: its footer written, then published.
fn finish(
    dir: &Location,
    tables: &[SavedTable],
    files: Vec<Option<ArrowWriter<Upload>>>,
) -> Result<()> {
    for (table, file) in tables.iter().zip(files) {
        let file = match file {
            Some(file) => file,
            None => open(dir, table, &table.schema)?,
        };
        let at = dir.child(table.file);
        let upload = file.into_inner().map_err(|e| io(&at, e))?;
        upload.finish().map_err(|e| io(&at, e))?;
    }
    Ok(())
}

/// A Parquet writer of `table`'s file in `dir`, of columns `schema`.
fn open(
    dir: &Location,
    table: &SavedTable,
    schema: &datafusion::arrow::datatypes::SchemaRef,
) -> Result<ArrowWriter<Upload>> {
    let at = dir.child(table.file);
    let upload = Upload::start(&at).map_err(|e| io(&at, e))?;
    let properties = WriterProperties::builder()
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .build();
    ArrowWriter::try_new(upload, schema.clone(), Some(properties)).map_err(|e| io(&at, e))
}

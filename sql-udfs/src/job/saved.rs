//! `SAVE MODEL` and `LOAD MODEL`: a model as a directory a person can read, at a path or URL
//! (`s3://`, `hdfs://`), changed only by whole versions (`angel_storage::versions`): each
//! save writes `v000001/`, `v000002/`, ... and then commits it in `_CURRENT`, so a save that
//! dies half-way leaves the previous model readable and nothing partly written. A version
//! directory holds:
//!
//! - `weights.parquet`: `feature` (the counter key, null for the intercept and for models
//!   without a counter), `index`, `output` (the class of a softmax model; 0 for one-output
//!   kinds), `weight`, and `state`, the optimizer's state of that weight (Adagrad's sum of
//!   squares, Adam's moments, FTRL's z and n) — every feature of the dictionary and every
//!   weight or state that is not zero; index `dim` is the intercept.
//! - `model.json`: name, kind, loss, optimizer and its settings, dimension, counter, and the
//!   last epoch's metrics when the model was trained in this job.
//!
//! Loading creates the model on the service and, for counter-indexed models, rebuilds the
//! counter from the saved dictionary. Counter indices follow (hash, key) order over the
//! indexed keys, so the rebuilt counter gives every feature its saved index; the load
//! checks this and fails rather than predict with shifted features. The optimizer state is
//! loaded too, so a loaded model trains on (`TRAIN MODEL`) where it stopped; a model saved
//! before the state was kept trains on with fresh state.
//!
//! Each kind names the tables it saves and writes and reads them
//! (`angel_training::ModelKind::save`, `load`; `angel_training::saved`): a topic model keeps
//! `counts.parquet` instead of `weights.parquet`, a boosted model `trees.parquet` and
//! `importance.parquet`; this file keeps the files.

use std::collections::HashMap;

use angel_client::PsClient;
use angel_proto::namespace;
use angel_storage::read::read_all;
use angel_storage::versions::Versions;
use angel_storage::write::put;
use angel_storage::{Location, StorageError};
use angel_training::ModelSpec;
use angel_training::registry;
use angel_training::saved::{ReadBack, TableRead};
use bytes::Bytes;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::common::{DataFusionError, Result, plan_err};
use datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};

use super::parquet_file::{batches, io};
use super::table_files::TableFiles;
use crate::bridge::{ps_error, train_error};

/// The contents of `model.json`.
#[derive(Debug, Serialize, Deserialize)]
struct Metadata {
    name: String,
    kind: String,
    loss: String,
    optimizer: String,
    dim: u64,
    counter: Option<String>,
    /// Every model option, as `CREATE MODEL` takes them: enough to rebuild the spec.
    options: HashMap<String, String>,
    /// The last row of the epoch table, when trained in this job.
    metrics: HashMap<String, f64>,
    /// A boosted model's margin before its trees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    base_margin: Option<f64>,
}

fn storage(e: StorageError) -> DataFusionError {
    DataFusionError::Execution(e.to_string())
}

/// The location `dir` names, or a planning error naming it.
pub fn location(dir: &str) -> Result<Location> {
    Location::parse(dir).map_err(|e| DataFusionError::Plan(e.to_string()))
}

/// Runs blocking storage work off the async workers.
async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| DataFusionError::Execution(format!("storage task failed: {e}")))?
}

/// The file of the model saved at `dir` (its committed version) holding table `table` (by
/// default its parameters), and its columns: what `read_model` reads.
pub fn saved_data(dir: &str, table: Option<&str>) -> Result<(Location, SchemaRef)> {
    let at = Versions::new(location(dir)?).current().map_err(storage)?;
    let json = read_all(&at.child("model.json"), MAX_JSON_BYTES)
        .map_err(|e| io(&at, format!("cannot read the saved model: {e}")))?;
    let metadata: Metadata =
        serde_json::from_slice(&json).map_err(|e| io(&at.child("model.json"), e))?;
    let tables = registry::by_name(&metadata.kind)
        .map_err(|e| io(&at.child("model.json"), e))?
        .saved_tables();
    let found = match table {
        None => tables.first(),
        Some(t) => tables.iter().find(|s| s.name.eq_ignore_ascii_case(t)),
    };
    match found {
        Some(saved) => Ok((at.child(saved.file), saved.schema.clone())),
        None => {
            let names: Vec<&str> = tables.iter().map(|t| t.name).collect();
            plan_err!(
                "a saved {} model has no table '{}'; it has {}",
                metadata.kind,
                table.unwrap_or_default(),
                names.join(", ")
            )
        }
    }
}

/// Most bytes `model.json` may hold: options, metrics and the dimension, never parameters.
const MAX_JSON_BYTES: u64 = 16 << 20;
/// What a saved table may hold beyond its values' share: schemas, footers, short tables.
const TABLE_BASE_BYTES: u64 = 64 << 20;
/// What a saved table may hold per value of its model: the value, its index and feature
/// name, as Parquet lays them out (uncompressed, with room to spare).
const TABLE_VALUE_BYTES: u64 = 64;

/// Reads file `file` whole, off the async workers, refusing past `max` bytes decompressed.
async fn read_bytes(file: &Location, max: u64) -> Result<Bytes> {
    let file = file.clone();
    off_runtime(move || Ok(Bytes::from(read_all(&file, max).map_err(storage)?))).await
}

/// Writes model `name` to directory `dir` as a new committed version.
pub async fn save(ctx: &SessionContext, client: &PsClient, name: &str, dir: &str) -> Result<()> {
    let dir = location(dir)?;
    let matrix = client.matrix(name).await.map_err(ps_error)?;
    let spec = ModelSpec::of_matrix(name, &matrix.meta).map_err(train_error)?;
    // Saved without its namespace: a job that loads it keeps the dictionary in its own.
    let local = ModelSpec {
        counter: (spec.counter.as_deref()).map(|c| namespace::split(c).1.to_string()),
        ..spec.clone()
    };
    let mut features: HashMap<u64, String> = HashMap::new();
    if let Some(counter) = &spec.counter {
        for (key, _, index) in client.counter_indexed(counter).await.map_err(ps_error)? {
            features.insert(index, key);
        }
    }
    let pending = off_runtime(move || Versions::new(dir).begin().map_err(storage)).await?;
    let mut files = TableFiles::open(pending.location().clone(), spec.kind.saved_tables());
    let saved = (spec.kind.save(client, (name, &spec), &features, &mut files)).await;
    // A writer that failed is why the kind could not write: its error comes first.
    let written = files.finish(saved.is_ok()).await;
    let saved = match (written, saved) {
        (Ok(()), Ok(saved)) => saved,
        (written, saved) => {
            // The unfinished version is removed as it drops, off the async workers.
            off_runtime(move || {
                drop(pending);
                Ok(())
            })
            .await?;
            written?;
            return saved.map(drop).map_err(train_error);
        }
    };
    let metadata = Metadata {
        name: name.to_string(),
        kind: spec.kind.name().to_string(),
        loss: spec.kind.loss_name().to_string(),
        optimizer: spec.optimizer.name.clone(),
        dim: spec.dim,
        counter: local.counter.clone(),
        options: local.to_options().into_iter().collect(),
        metrics: last_epoch(ctx, name).await,
        base_margin: saved.base_margin,
    };
    let json = serde_json::to_string_pretty(&metadata).map_err(|e| io(pending.location(), e))?;
    off_runtime(move || {
        put(&pending.location().child("model.json"), json.into()).map_err(storage)?;
        pending.commit().map_err(storage)
    })
    .await
}

/// The last row of `<name>_epochs`, if this job trained the model. The table is read in this
/// process (a memory table, which a Ballista session could not send to its cluster).
async fn last_epoch(ctx: &SessionContext, name: &str) -> HashMap<String, f64> {
    let Ok(table) = ctx.table_provider(format!("{name}_epochs")).await else {
        return HashMap::new();
    };
    let Ok(df) = SessionContext::new().read_table(table) else {
        return HashMap::new();
    };
    let batches = df.collect().await.unwrap_or_default();
    let Some(batch) = batches.iter().rev().find(|b| b.num_rows() > 0) else {
        return HashMap::new();
    };
    let last = batch.num_rows() - 1;
    let schema = batch.schema();
    let mut metrics = HashMap::new();
    for (field, column) in schema.fields().iter().zip(batch.columns()) {
        let Ok(column) = datafusion::arrow::compute::cast(column, &DataType::Float64) else {
            continue;
        };
        let column = column.as_primitive::<datafusion::arrow::datatypes::Float64Type>();
        if column.is_valid(last) {
            metrics.insert(field.name().clone(), column.value(last));
        }
    }
    metrics
}

/// Reads the model in `dir` (its committed version) onto the service as `name`.
pub async fn load(client: &PsClient, name: &str, dir: &str) -> Result<()> {
    let dir = location(dir)?;
    let (at, json) = off_runtime(move || {
        let at = Versions::new(dir.clone()).current().map_err(storage)?;
        let json = read_all(&at.child("model.json"), MAX_JSON_BYTES)
            .map_err(|e| io(&dir, format!("cannot read the saved model: {e}")))?;
        Ok((at, json))
    })
    .await?;
    let metadata: Metadata =
        serde_json::from_slice(&json).map_err(|e| io(&at.child("model.json"), e))?;
    let mut options = metadata.options.clone();
    // Options of the training statement (CREATE MODEL's), which a loaded model has no use for.
    options.retain(|key, _| !matches!(key.as_str(), "epochs" | "holdout"));
    let options: Vec<(String, String)> = options.into_iter().collect();
    let mut spec = ModelSpec::from_options(name, &options).map_err(train_error)?;
    spec.counter = spec.counter.map(|c| client.qualify(&c));
    // A table's file is capped in proportion to what a model of this spec holds, so a small
    // file cannot decompress into all of memory.
    let values = spec.kind.saved_values(spec.dim);
    let max = TABLE_BASE_BYTES.saturating_add(values.saturating_mul(TABLE_VALUE_BYTES));
    let mut tables = Vec::new();
    for table in spec.kind.saved_tables() {
        let file = at.child(table.file);
        let batches = batches(&file, read_bytes(&file, max).await?)?;
        tables.push(TableRead {
            path: file.to_string(),
            batches,
        });
    }
    let read = ReadBack {
        at: at.to_string(),
        tables,
        dim: metadata.dim,
        base_margin: metadata.base_margin,
    };
    (spec.kind.load(client, (name, &spec), &read).await).map_err(train_error)
}

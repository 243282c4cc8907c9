//! `SAVE MODEL` and `LOAD MODEL`: a model as a directory a person can read, at a path or URL
//! (`s3://`, `hdfs://`), changed only by whole versions (`angel_storage::versions`): each
//! save writes `v000001/`, `v000002/`, ... and then commits it in `_CURRENT`, so a save that
//! dies half-way leaves the previous model readable and nothing partly written. A version
//! directory holds:
//!
//! - `weights.parquet`: `feature` (the counter key, null for the intercept and for models
//!   without a counter), `index`, `weight` — every feature of the dictionary and every
//!   non-zero weight; index `dim` is the intercept.
//! - `model.json`: name, kind, loss, optimizer and its settings, dimension, counter, and the
//!   last epoch's metrics when the model was trained in this job.
//!
//! Loading creates the model on the service and, for counter-indexed models, rebuilds the
//! counter from the saved dictionary. Counter indices follow (hash, key) order over the
//! indexed keys, so the rebuilt counter gives every feature its saved index; the load
//! checks this and fails rather than predict with shifted features. Optimizer state is not
//! saved: a loaded model predicts, or trains on with fresh optimizer state.

use std::collections::HashMap;
use std::sync::Arc;

use angel_client::PsClient;
use angel_proto::namespace;
use angel_storage::read::read_all;
use angel_storage::versions::Versions;
use angel_storage::write::put;
use angel_storage::{Location, StorageError};
use angel_training::ModelSpec;
use bytes::Bytes;
use datafusion::arrow::array::{
    Array, AsArray, Float32Array, RecordBatch, StringArray, UInt64Array,
};
use datafusion::arrow::datatypes::{DataType, Field, Float32Type, Schema, SchemaRef, UInt64Type};
use datafusion::common::{DataFusionError, Result, exec_err};
use datafusion::parquet::arrow::ArrowWriter;
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};

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
    /// Every model option (the matrix attributes), enough to rebuild the spec.
    options: HashMap<String, String>,
    /// The last row of the epoch table, when trained in this job.
    metrics: HashMap<String, f64>,
}

/// The columns of `weights.parquet`.
pub fn weights_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("feature", DataType::Utf8, true),
        Field::new("index", DataType::UInt64, false),
        Field::new("weight", DataType::Float32, false),
    ]))
}

fn io(at: &impl std::fmt::Display, e: impl std::fmt::Display) -> DataFusionError {
    DataFusionError::Execution(format!("{at}: {e}"))
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

/// Writes model `name` to directory `dir` as a new committed version.
pub async fn save(ctx: &SessionContext, client: &PsClient, name: &str, dir: &str) -> Result<()> {
    let dir = location(dir)?;
    let matrix = client.matrix(name).await.map_err(ps_error)?;
    let spec = ModelSpec::from_attrs(name, &matrix.meta.attrs).map_err(train_error)?;
    // Saved without its namespace: a job that loads it keeps the dictionary in its own.
    let local = ModelSpec {
        counter: (spec.counter.as_deref()).map(|c| namespace::split(c).1.to_string()),
        ..spec.clone()
    };
    let weights: Vec<f32> = client
        .pull_rows(name, &[0])
        .await
        .map_err(ps_error)?
        .remove(0);
    let mut features: HashMap<u64, String> = HashMap::new();
    if let Some(counter) = &spec.counter {
        for (key, _, index) in client.counter_indexed(counter).await.map_err(ps_error)? {
            features.insert(index, key);
        }
    }
    let rows: Vec<u64> = (0..weights.len() as u64)
        .filter(|i| weights[*i as usize] != 0.0 || features.contains_key(i) || *i == spec.dim)
        .collect();
    let feature: StringArray = rows.iter().map(|i| features.get(i).cloned()).collect();
    let weight: Float32Array = rows.iter().map(|&i| weights[i as usize]).collect();
    let batch = RecordBatch::try_new(
        weights_schema(),
        vec![
            Arc::new(feature),
            Arc::new(UInt64Array::from(rows)),
            Arc::new(weight),
        ],
    )?;
    let mut writer = ArrowWriter::try_new(Vec::new(), batch.schema(), None)?;
    writer.write(&batch)?;
    let parquet = Bytes::from(writer.into_inner()?);
    let metadata = Metadata {
        name: name.to_string(),
        kind: spec.kind.to_string(),
        loss: spec.kind.loss_name().to_string(),
        optimizer: spec.update.optimizer.clone(),
        dim: spec.dim,
        counter: local.counter.clone(),
        options: local.to_attrs(),
        metrics: last_epoch(ctx, name).await,
    };
    let json = serde_json::to_string_pretty(&metadata).map_err(|e| io(&dir, e))?;
    off_runtime(move || {
        let pending = Versions::new(dir).begin().map_err(storage)?;
        put(&pending.location().child("weights.parquet"), parquet).map_err(storage)?;
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
    let (at, json, parquet) = off_runtime(move || {
        let at = Versions::new(dir.clone()).current().map_err(storage)?;
        let json = read_all(&at.child("model.json"))
            .map_err(|e| io(&dir, format!("cannot read the saved model: {e}")))?;
        let parquet = read_all(&at.child("weights.parquet")).map_err(storage)?;
        Ok((at, json, Bytes::from(parquet)))
    })
    .await?;
    let metadata: Metadata =
        serde_json::from_slice(&json).map_err(|e| io(&at.child("model.json"), e))?;
    let mut options = metadata.options.clone();
    // Options of the training statement (CREATE MODEL's), which a loaded model has no use for.
    options.retain(|key, _| !matches!(key.as_str(), "epochs" | "holdout"));
    let mut spec = ModelSpec::from_attrs(name, &options).map_err(train_error)?;
    spec.counter = spec.counter.map(|c| client.qualify(&c));
    let path = at.child("weights.parquet");
    let (mut features, mut indices, mut weights) =
        (Vec::new(), Vec::<u64>::new(), Vec::<f32>::new());
    let mut seen = std::collections::HashSet::new();
    let reader = ParquetRecordBatchReaderBuilder::try_new(parquet)
        .map_err(|e| io(&path, format!("not a readable Parquet file: {e}")))?;
    for batch in reader.build()? {
        let batch = batch.map_err(|e| io(&path, format!("cannot be read whole: {e}")))?;
        let column = |n: &str| {
            batch
                .column_by_name(n)
                .cloned()
                .ok_or_else(|| io(&path, format!("no column '{n}'")))
        };
        let typed = |n: &str, t: &str| io(&path, format!("column '{n}' is not of type {t}"));
        // Any string type (DataFusion's own COPY writes Utf8View).
        let f = datafusion::arrow::compute::cast(&column("feature")?, &DataType::Utf8)
            .map_err(|_| typed("feature", "string"))?;
        let f = f.as_string::<i32>();
        let i = column("index")?;
        let i = i
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| typed("index", "UInt64"))?;
        let w = column("weight")?;
        let w = w
            .as_primitive_opt::<Float32Type>()
            .ok_or_else(|| typed("weight", "Float32"))?;
        for r in 0..batch.num_rows() {
            let row = indices.len() + 1;
            if i.is_null(r) || w.is_null(r) {
                return exec_err!("{path}: row {row}: the index or the weight is NULL");
            }
            let (index, weight) = (i.value(r), w.value(r));
            if !weight.is_finite() {
                return exec_err!("{path}: row {row}: the weight of index {index} is {weight}");
            }
            if !seen.insert(index) {
                return exec_err!("{path}: row {row}: index {index} is given a second time");
            }
            if f.is_valid(r) {
                features.push((f.value(r).to_string(), index));
            }
            indices.push(index);
            weights.push(weight);
        }
    }
    check_dim(&at, &metadata, &spec, &indices, &features)?;
    if let Some(counter) = &spec.counter {
        restore_counter(client, counter, &features).await?;
        let size = client.counter(counter).await.map_err(ps_error)?.meta.size;
        if size > spec.dim {
            return exec_err!(
                "{at}: the model has dim {} but counter '{counter}' indexes {size} features",
                spec.dim
            );
        }
    }
    spec.create(client, name).await.map_err(train_error)?;
    client
        .push_keys(name, 0, &indices, &weights)
        .await
        .map_err(ps_error)
}

/// Checks the dimension agrees everywhere the saved model states it: `model.json`'s `dim`,
/// its options, and `weights.parquet`, whose last index is the intercept's, `dim`, and whose
/// dictionary features all lie below it. A model loaded with another dimension would read the
/// intercept from a feature's weight. Runs before anything is created on the service.
fn check_dim(
    dir: &Location,
    metadata: &Metadata,
    spec: &ModelSpec,
    indices: &[u64],
    features: &[(String, u64)],
) -> Result<()> {
    let intercept = indices.iter().max().copied();
    if metadata.dim != spec.dim || intercept != Some(spec.dim) {
        return exec_err!(
            "{dir}: the saved model disagrees on its dimension: model.json says dim {} (options: \
             {}), weights.parquet has the intercept at index {}; the files do not belong \
             together",
            metadata.dim,
            spec.dim,
            intercept.map_or("none".to_string(), |i| i.to_string())
        );
    }
    if let Some((feature, index)) = features.iter().find(|(_, i)| *i >= spec.dim) {
        return exec_err!(
            "{dir}: feature '{feature}' has index {index}, outside the model's dim {}",
            spec.dim
        );
    }
    Ok(())
}

/// Rebuilds `counter` from the saved (feature, index) pairs, or checks an existing one, and
/// fails unless every feature gets its saved index.
async fn restore_counter(
    client: &PsClient,
    counter: &str,
    features: &[(String, u64)],
) -> Result<()> {
    let keys: Vec<&str> = features.iter().map(|(f, _)| f.as_str()).collect();
    if client.counter(counter).await.is_err() {
        client.create_counter(counter).await.map_err(ps_error)?;
        client
            .counter_increase(counter, &keys, &vec![1; keys.len()])
            .await
            .map_err(ps_error)?;
        client.counter_seal(counter, 1).await.map_err(ps_error)?;
    }
    let found = client.counter_get(counter, &keys).await.map_err(ps_error)?;
    for ((feature, saved), (_, index)) in features.iter().zip(found) {
        if index != Some(*saved) {
            let index = index.map_or("no index".to_string(), |i| format!("index {i}"));
            return exec_err!(
                "counter '{counter}' gives feature '{feature}' {index}, the saved model has index \
                 {saved}; load the model into a service without a counter of that name"
            );
        }
    }
    Ok(())
}

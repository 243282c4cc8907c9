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
//! A topic model keeps `counts.parquet` instead of `weights.parquet` ([`super::saved_topics`]),
//! a boosted model `trees.parquet` and `importance.parquet` ([`super::saved_trees`]).

use std::collections::HashMap;
use std::sync::Arc;

use angel_client::PsClient;
use angel_proto::namespace;
use angel_storage::read::read_all;
use angel_storage::versions::Versions;
use angel_storage::write::put;
use angel_storage::{Location, StorageError};
use angel_training::ModelSpec;
use angel_training::kinds::gbdt::Gbdt;
use angel_training::kinds::lda::Lda;
use bytes::Bytes;
use datafusion::arrow::array::{
    Array, AsArray, Float32Array, ListArray, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use datafusion::arrow::datatypes::{
    DataType, Field, Float32Type, Schema, SchemaRef, UInt32Type, UInt64Type,
};
use datafusion::common::{DataFusionError, Result, exec_err, plan_err};
use datafusion::parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use datafusion::prelude::SessionContext;
use serde::{Deserialize, Serialize};

use super::parquet_file::{io, parquet_bytes};
use super::saved_topics::{counts_file, counts_schema, push_counts, read_counts};
use super::saved_trees::{
    importance_schema, push_trees, read_dictionary, read_trees, trees_files, trees_schema,
};
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

/// The columns of `weights.parquet`.
pub fn weights_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("feature", DataType::Utf8, true),
        Field::new("index", DataType::UInt64, false),
        // Nullable: files saved before these columns read them as NULL.
        Field::new("output", DataType::UInt32, true),
        Field::new("weight", DataType::Float32, false),
        Field::new(
            "state",
            DataType::List(Arc::new(Field::new_list_field(DataType::Float32, true))),
            true,
        ),
    ]))
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

const TREES: &str = "trees.parquet";
const IMPORTANCE: &str = "importance.parquet";

/// The tables a saved model of kind `kind` holds: their names, files and columns, the
/// parameters first.
fn tables(kind: &str) -> Vec<(&'static str, &'static str, SchemaRef)> {
    match kind {
        "lda" => vec![("counts", "counts.parquet", counts_schema())],
        "gbdt" => vec![
            ("trees", TREES, trees_schema()),
            ("importance", IMPORTANCE, importance_schema()),
        ],
        _ => vec![("weights", "weights.parquet", weights_schema())],
    }
}

/// The file of the model saved at `dir` (its committed version) holding table `table` (by
/// default its parameters), and its columns: what `read_model` reads.
pub fn saved_data(dir: &str, table: Option<&str>) -> Result<(Location, SchemaRef)> {
    let at = Versions::new(location(dir)?).current().map_err(storage)?;
    let json = read_all(&at.child("model.json"))
        .map_err(|e| io(&at, format!("cannot read the saved model: {e}")))?;
    let metadata: Metadata =
        serde_json::from_slice(&json).map_err(|e| io(&at.child("model.json"), e))?;
    let tables = tables(&metadata.kind);
    let found = match table {
        None => tables.first(),
        Some(t) => tables
            .iter()
            .find(|(name, ..)| name.eq_ignore_ascii_case(t)),
    };
    match found {
        Some((_, file, schema)) => Ok((at.child(file), schema.clone())),
        None => {
            let names: Vec<&str> = tables.iter().map(|t| t.0).collect();
            plan_err!(
                "a saved {} model has no table '{}'; it has {}",
                metadata.kind,
                table.unwrap_or_default(),
                names.join(", ")
            )
        }
    }
}

/// Reads file `file` whole, off the async workers.
async fn read_bytes(file: &Location) -> Result<Bytes> {
    let file = file.clone();
    off_runtime(move || Ok(Bytes::from(read_all(&file).map_err(storage)?))).await
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
    let mut base_margin = None;
    let files: Vec<(&str, Bytes)> = match (spec.kind.own::<Lda>(), spec.kind.own::<Gbdt>()) {
        (Some(lda), _) => {
            let counts = counts_file(client, name, &lda.priors(spec.dim), &features).await?;
            vec![(tables("lda")[0].1, counts)]
        }
        (_, Some(_)) => {
            let saved = trees_files(client, name, matrix.meta.rows, &features).await?;
            base_margin = Some(saved.base_margin);
            vec![(TREES, saved.trees), (IMPORTANCE, saved.importance)]
        }
        _ => {
            let all: Vec<u64> = (0..matrix.meta.rows).collect();
            let values: Vec<Vec<f32>> = client.pull_rows(name, &all).await.map_err(ps_error)?;
            let weights = parquet_bytes(&weights_batch(&spec, &values, &features)?)?;
            vec![(tables("")[0].1, weights)]
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
        base_margin,
    };
    let json = serde_json::to_string_pretty(&metadata).map_err(|e| io(&dir, e))?;
    off_runtime(move || {
        let pending = Versions::new(dir).begin().map_err(storage)?;
        for (file, bytes) in files {
            put(&pending.location().child(file), bytes).map_err(storage)?;
        }
        put(&pending.location().child("model.json"), json.into()).map_err(storage)?;
        pending.commit().map_err(storage)
    })
    .await
}

/// The rows of `weights.parquet` from the matrix's rows `values` (per output: the weights,
/// then the optimizer's state rows): every weight or state that is not zero, every feature
/// of the dictionary `features`, and every intercept.
fn weights_batch(
    spec: &ModelSpec,
    values: &[Vec<f32>],
    features: &HashMap<u64, String>,
) -> Result<RecordBatch> {
    let group = values.len() / spec.kind.weight_rows().max(1);
    let (mut index, mut output, mut weight) = (Vec::new(), Vec::new(), Vec::new());
    let mut state: Vec<Option<Vec<Option<f32>>>> = Vec::new();
    for (o, rows) in values.chunks(group.max(1)).enumerate() {
        // A full-batch model's history is worth nothing without the job's record of it.
        let rows = match spec.solver.method {
            Some(_) => &rows[..1],
            None => rows,
        };
        for i in 0..rows[0].len() {
            let kept = |r: &Vec<f32>| r[i] != 0.0;
            if rows.iter().any(kept) || features.contains_key(&(i as u64)) || i as u64 == spec.dim {
                index.push(i as u64);
                output.push(o as u32);
                weight.push(rows[0][i]);
                state.push(Some(rows[1..].iter().map(|r| Some(r[i])).collect()));
            }
        }
    }
    let feature: StringArray = index.iter().map(|i| features.get(i).cloned()).collect();
    Ok(RecordBatch::try_new(
        weights_schema(),
        vec![
            Arc::new(feature),
            Arc::new(UInt64Array::from(index)),
            Arc::new(UInt32Array::from(output)),
            Arc::new(Float32Array::from(weight)),
            Arc::new(ListArray::from_iter_primitive::<Float32Type, _, _>(state)),
        ],
    )?)
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
        let json = read_all(&at.child("model.json"))
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
    let file = at.child(tables(&metadata.kind)[0].1);
    let parquet = read_bytes(&file).await?;
    if let Some(gbdt) = spec.kind.own::<Gbdt>() {
        let trees = read_trees(&file, parquet, gbdt, spec.dim)?;
        let dictionary = at.child(IMPORTANCE);
        let features = read_dictionary(&dictionary, read_bytes(&dictionary).await?)?;
        check_features(&at, &features, spec.dim)?;
        if let Some(counter) = &spec.counter {
            restore_counter(client, counter, &features).await?;
            check_counter_size(client, &at, counter, spec.dim).await?;
        }
        spec.create(client, name).await.map_err(train_error)?;
        let base_margin = metadata.base_margin.unwrap_or_default();
        return push_trees(client, name, trees, base_margin).await;
    }
    match spec.kind.own::<Lda>() {
        Some(lda) => {
            let saved = read_counts(&file, parquet, &lda.priors(spec.dim))?;
            if let Some(counter) = &spec.counter {
                restore_counter(client, counter, &saved.features).await?;
                check_counter_size(client, &at, counter, spec.dim).await?;
            }
            spec.create(client, name).await.map_err(train_error)?;
            push_counts(client, name, &spec, saved).await
        }
        None => load_weights(client, name, (&at, &metadata), spec, (&file, parquet)).await,
    }
}

/// Loads `weights.parquet` (`parquet`, at `file`) of the model saved at `at` with `metadata`
/// onto the service as `name` of `spec`.
async fn load_weights(
    client: &PsClient,
    name: &str,
    (at, metadata): (&Location, &Metadata),
    spec: ModelSpec,
    (file, parquet): (&Location, Bytes),
) -> Result<()> {
    let saved = read_weights(file, parquet)?;
    let indices: Vec<u64> = saved.rows.iter().map(|r| r.index).collect();
    check_dim(at, metadata, &spec, &indices, &saved.features)?;
    if let Some(counter) = &spec.counter {
        restore_counter(client, counter, &saved.features).await?;
        check_counter_size(client, at, counter, spec.dim).await?;
    }
    let outputs = spec.kind.weight_rows();
    if let Some(r) = saved.rows.iter().find(|r| r.output as usize >= outputs) {
        return exec_err!(
            "{at}: weights.parquet has output {} for index {}; the {} model has {outputs}",
            r.output,
            r.index,
            spec.kind.name()
        );
    }
    let matrix = spec.create(client, name).await.map_err(train_error)?;
    let group = matrix.meta.rows as usize / outputs;
    if let Some(r) = saved
        .rows
        .iter()
        .find(|r| !r.state.is_empty() && r.state.len() != group - 1)
    {
        return exec_err!(
            "{at}: weights.parquet holds {} values of optimizer state for index {}, but \
             optimizer '{}' keeps {}",
            r.state.len(),
            r.index,
            spec.optimizer.name,
            group - 1
        );
    }
    for o in 0..outputs {
        let of_output: Vec<&SavedWeight> = saved
            .rows
            .iter()
            .filter(|r| r.output as usize == o)
            .collect();
        let keys: Vec<u64> = of_output.iter().map(|r| r.index).collect();
        for j in 0..group {
            let values: Vec<f32> = of_output
                .iter()
                .map(|r| match j {
                    0 => r.weight,
                    j => r.state.get(j - 1).copied().unwrap_or_default(),
                })
                .collect();
            if j > 0 && values.iter().all(|v| *v == 0.0) {
                continue;
            }
            let row = (o * group + j) as u64;
            client
                .push_keys(name, row, &keys, &values)
                .await
                .map_err(ps_error)?;
        }
    }
    Ok(())
}

/// One row of `weights.parquet`.
struct SavedWeight {
    index: u64,
    output: u32,
    weight: f32,
    state: Vec<f32>,
}

/// What `weights.parquet` holds: its rows, and the dictionary's (feature, index) pairs.
struct SavedWeights {
    rows: Vec<SavedWeight>,
    features: Vec<(String, u64)>,
}

/// Reads `weights.parquet` (`parquet`, from `path`), refusing what would load wrong with the
/// file and row named: a missing or mistyped column, a NULL or infinite value, an index
/// given twice for one output.
fn read_weights(path: &Location, parquet: Bytes) -> Result<SavedWeights> {
    let mut saved = SavedWeights {
        rows: Vec::new(),
        features: Vec::new(),
    };
    let mut seen = std::collections::HashSet::new();
    let reader = ParquetRecordBatchReaderBuilder::try_new(parquet)
        .map_err(|e| io(path, format!("not a readable Parquet file: {e}")))?;
    for batch in reader.build()? {
        let batch = batch.map_err(|e| io(path, format!("cannot be read whole: {e}")))?;
        let column = |n: &str| {
            batch
                .column_by_name(n)
                .cloned()
                .ok_or_else(|| io(path, format!("no column '{n}'")))
        };
        let typed = |n: &str, t: &str| io(path, format!("column '{n}' is not of type {t}"));
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
        // Absent in files saved before multi-output models and saved optimizer state.
        let o = batch.column_by_name("output");
        let o = match o {
            None => None,
            Some(o) => Some(
                o.as_primitive_opt::<UInt32Type>()
                    .ok_or_else(|| typed("output", "UInt32"))?,
            ),
        };
        let st = batch.column_by_name("state");
        let st = match st {
            None => None,
            Some(st) => Some(
                st.as_list_opt::<i32>()
                    .ok_or_else(|| typed("state", "a list of Float32"))?,
            ),
        };
        for r in 0..batch.num_rows() {
            let row = saved.rows.len() + 1;
            if i.is_null(r) || w.is_null(r) {
                return exec_err!("{path}: row {row}: the index or the weight is NULL");
            }
            let (index, weight) = (i.value(r), w.value(r));
            let output = o.filter(|o| o.is_valid(r)).map_or(0, |o| o.value(r));
            let state: Vec<f32> = match st.filter(|st| st.is_valid(r)) {
                None => Vec::new(),
                Some(st) => {
                    let values = st.value(r);
                    let values = values
                        .as_primitive_opt::<Float32Type>()
                        .ok_or_else(|| typed("state", "a list of Float32"))?;
                    values.iter().map(Option::unwrap_or_default).collect()
                }
            };
            if !weight.is_finite() {
                return exec_err!("{path}: row {row}: the weight of index {index} is {weight}");
            }
            if let Some(bad) = state.iter().find(|v| !v.is_finite()) {
                return exec_err!(
                    "{path}: row {row}: the optimizer state of index {index} holds {bad}"
                );
            }
            if !seen.insert((output, index)) {
                return exec_err!(
                    "{path}: row {row}: index {index} is given a second time (output {output})"
                );
            }
            if f.is_valid(r) && output == 0 {
                saved.features.push((f.value(r).to_string(), index));
            }
            saved.rows.push(SavedWeight {
                index,
                output,
                weight,
                state,
            });
        }
    }
    Ok(saved)
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
    check_features(dir, features, spec.dim)
}

/// Fails when a feature of the dictionary of the model saved at `dir` lies outside its
/// dimension `dim`.
fn check_features(dir: &Location, features: &[(String, u64)], dim: u64) -> Result<()> {
    match features.iter().find(|(_, i)| *i >= dim) {
        Some((feature, index)) => {
            exec_err!("{dir}: feature '{feature}' has index {index}, outside the model's dim {dim}")
        }
        None => Ok(()),
    }
}

/// Fails when `counter` indexes more features than the model saved at `at` has columns
/// (`dim`): its indices past the model would have nowhere to go.
async fn check_counter_size(
    client: &PsClient,
    at: &Location,
    counter: &str,
    dim: u64,
) -> Result<()> {
    let size = client.counter(counter).await.map_err(ps_error)?.meta.size;
    if size > dim {
        return exec_err!(
            "{at}: the model has dim {dim} but counter '{counter}' indexes {size} features"
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

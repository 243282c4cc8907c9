//! SQL functions that talk to the angel-ps parameter servers, for DataFusion and Ballista,
//! and the job runner that executes a whole SQL file. One file per function, DataFusion style.
//!
//! # Layout
//!
//! - [`ps_hash`]: `ps_hash(features, bits)`, the hashing trick (no PS round trip).
//! - [`ps_counter_add`]: `ps_counter_add(counter, features)`, counts features on the PS.
//! - [`ps_counter_seal`]: `ps_counter_seal(counter, min_count)`, the barrier assigning indices.
//! - [`ps_index`]: `ps_index(counter, features)`, features to compact indices.
//! - [`ps_counter_clean`]: `ps_counter_clean(counter)`, frees the counter's keys.
//! - [`ps_train`]: `ps_train(model, label, indices[, values])` (matrix factorization:
//!   `(model, user, item, rating)`; topic models: `(model, words[, counts])`), one training
//!   pass.
//! - [`ps_predict`]: `ps_predict(model, indices[, values])`, predictions;
//!   [`ps_predict_proba`]: class probabilities; [`ps_loss`]: each row's loss under a model;
//!   [`ps_distance`]: a k-means model's distance from each row to its nearest centre;
//!   [`model_rows`]: the arguments those share, [`model_function`]: the one implementation
//!   of them and `ps_topics`; [`ps_recommend`]: a matrix
//!   factorization model's top-k items for a user; [`ps_topics`]: a document's topic mixture
//!   under a topic model; [`ps_perplexity`]: a topic model's perplexity on documents.
//! - [`ps_logloss`], [`ps_auc`], [`ps_accuracy`], [`ps_rmse`]: evaluation aggregates; all but
//!   `ps_auc` are a [`scored_aggregate::ScoredAggregate`], a mean of a term of (label, score).
//! - [`read_file`]: `read_csv(path, options)` and `read_libsvm(path, options)` table functions;
//!   [`read_model`]: `read_model(dir)`, a saved model's weights as a table;
//!   [`file_table`]: the table those read, streamed from the files at each scan.
//! - [`object_stores`]: DataFusion sessions whose object stores are angel-storage's (file,
//!   S3, HDFS URLs in SQL).
//! - Models, their training steps, update rules and clock table live in the training layer
//!   (`angel-training`); `ps_train`, `ps_predict` and `CREATE MODEL` bind it to SQL.
//! - [`job`]: running a whole SQL file, with `CREATE MODEL` / `SAVE MODEL` / `LOAD MODEL`;
//!   [`spilling_table`]: the tables it creates, kept in memory or on disk at its
//!   [`storage_level`] within its memory limit.
//! - [`binding`]: what a PS-bound function is bound to (master, the job's reports), and
//!   [`binding::PsBound`], the base those functions share; [`bound_functions`]: the one list of
//!   them.
//! - [`reports`]: what one job's functions report: rows trained, input rows skipped.
//! - [`task_progress`]: a training task's rows, counted here and sent to the PS master, so
//!   tasks on Ballista executors move the job's progress bar.
//! - [`index_cache`]: feature indices already looked up, per process.
//! - [`mean`]: the (sum, rows) state of aggregates returning a mean.
//! - [`args`]: reading constant and feature arguments; [`bridge`]: calling the async client.
//! - [`ballista`]: running jobs on Ballista (codecs carrying the master address to executors,
//!   a staging directory for tables).
//!
//! [`register_all`] installs every function on a session, bound to a service and a job.

pub mod args;
pub mod ballista;
pub mod binding;
pub mod bound_functions;
pub mod bridge;
pub mod features;
pub mod file_table;
pub mod index_cache;
pub mod job;
pub mod mean;
pub mod model_function;
pub mod model_rows;
pub mod object_stores;
pub mod ps_accuracy;
pub mod ps_auc;
pub mod ps_counter_add;
pub mod ps_counter_clean;
pub mod ps_counter_seal;
pub mod ps_distance;
pub mod ps_hash;
pub mod ps_index;
pub mod ps_logloss;
pub mod ps_loss;
pub mod ps_perplexity;
pub mod ps_predict;
pub mod ps_predict_proba;
pub mod ps_recommend;
pub mod ps_rmse;
pub mod ps_topics;
pub mod ps_train;
pub mod read_file;
pub mod read_model;
pub mod reports;
pub mod scored_aggregate;
pub mod spilling_table;
pub mod storage_level;
pub mod task_progress;

use std::sync::Arc;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;

use binding::Binding;

/// Every angel-ps scalar function: the PS ones bound to `binding`, hashing and feature
/// helpers.
pub fn scalar_functions(binding: &Binding) -> Vec<ScalarUDF> {
    let mut all: Vec<ScalarUDF> = bound_functions::scalars()
        .iter()
        .map(|f| (f.make)(binding.clone()))
        .collect();
    all.push(ScalarUDF::from(ps_hash::PsHash::default()));
    all.extend(angel_etl::features::functions());
    all
}

/// Every angel-ps aggregate function: the PS ones bound to `binding`, and the evaluation ones.
pub fn aggregate_functions(binding: &Binding) -> Vec<AggregateUDF> {
    let mut all: Vec<AggregateUDF> = bound_functions::aggregates()
        .iter()
        .map(|f| (f.make)(binding.clone()))
        .collect();
    all.push(AggregateUDF::from(ps_logloss::ps_logloss()));
    all.push(AggregateUDF::from(ps_auc::PsAuc::default()));
    all.push(AggregateUDF::from(ps_accuracy::ps_accuracy()));
    all.push(AggregateUDF::from(ps_rmse::ps_rmse()));
    all
}

/// Registers every angel-ps function on `ctx`, bound to `binding` (a service and the job's
/// reports). With a `stage`, the file-reading table functions write what they read there as
/// Parquet, so a Ballista cluster's executors can scan it (see [`ballista`]).
pub fn register_all(ctx: &SessionContext, binding: &Binding, stage: Option<Arc<ballista::Stage>>) {
    for function in scalar_functions(binding) {
        ctx.register_udf(function);
    }
    for function in aggregate_functions(binding) {
        ctx.register_udaf(function);
    }
    for format in [read_file::Format::Csv, read_file::Format::Libsvm] {
        let skipped = binding.reports().bad_rows.clone();
        let function = read_file::ReadFile::new(format, stage.clone(), skipped);
        ctx.register_udtf(function.name(), Arc::new(function));
    }
    ctx.register_udtf(read_model::ReadModel::NAME, Arc::new(read_model::ReadModel));
}

//! SQL functions that talk to the angel-ps parameter servers, for DataFusion (and later
//! Ballista), and the job runner that executes a whole SQL file. One file per function,
//! DataFusion style.
//!
//! # Layout
//!
//! - [`ps_hash`]: `ps_hash(features, bits)`, the hashing trick (no PS round trip).
//! - [`ps_counter_add`]: `ps_counter_add(counter, features)`, counts features on the PS.
//! - [`ps_counter_seal`]: `ps_counter_seal(counter, min_count)`, the barrier assigning indices.
//! - [`ps_index`]: `ps_index(counter, features)`, features to compact indices.
//! - [`ps_train`]: `ps_train(model, label, indices[, values])`, one training pass.
//! - [`ps_predict`]: `ps_predict(model, indices[, values])`, predictions.
//! - [`ps_logloss`], [`ps_auc`]: evaluation aggregates.
//! - [`read_file`]: `read_csv(path, options)` and `read_libsvm(path)` table functions.
//! - [`model`]: [`model::ModelSpec`] (kind, optimizer, dimension) and the task-side
//!   [`model::Model`]; [`sparse`]: feature rows as a sparse design matrix.
//! - [`job`]: running a whole SQL file, with `CREATE MODEL` / `SAVE MODEL` / `LOAD MODEL`.
//! - [`progress`]: rows trained in this process, for progress bars.
//! - [`index_cache`]: feature indices already looked up, per process.
//! - [`mean`]: the (sum, rows) state of aggregates returning a mean.
//! - [`args`]: reading constant and feature arguments; [`bridge`]: calling the async client.
//! - [`cluster`]: running jobs on Ballista (codecs carrying the master address to executors,
//!   a staging directory for tables).
//!
//! [`register_all`] installs every function on a session for the service at a master address.

pub mod args;
pub mod bridge;
pub mod cluster;
pub mod index_cache;
pub mod job;
pub mod mean;
pub mod model;
pub mod progress;
pub mod ps_auc;
pub mod ps_counter_add;
pub mod ps_counter_seal;
pub mod ps_hash;
pub mod ps_index;
pub mod ps_logloss;
pub mod ps_predict;
pub mod ps_train;
pub mod read_file;
pub mod sparse;

use std::sync::Arc;

use datafusion::logical_expr::{AggregateUDF, ScalarUDF};
use datafusion::prelude::SessionContext;

/// Scalar functions that call the PS, bound to the service whose master is at `master`.
pub fn ps_scalar_functions(master: &str) -> Vec<ScalarUDF> {
    vec![
        ScalarUDF::from(ps_counter_seal::PsCounterSeal::new(master)),
        ScalarUDF::from(ps_index::PsIndex::new(master)),
        ScalarUDF::from(ps_predict::PsPredict::new(master)),
    ]
}

/// Aggregate functions that call the PS, bound to the service whose master is at `master`.
pub fn ps_aggregate_functions(master: &str) -> Vec<AggregateUDF> {
    vec![
        AggregateUDF::from(ps_counter_add::PsCounterAdd::new(master)),
        AggregateUDF::from(ps_train::PsTrain::new(master)),
    ]
}

/// Every angel-ps scalar function: the PS ones bound to `master`, hashing and feature helpers.
pub fn scalar_functions(master: &str) -> Vec<ScalarUDF> {
    let mut all = ps_scalar_functions(master);
    all.push(ScalarUDF::from(ps_hash::PsHash::default()));
    all.extend(angel_etl::features::functions());
    all
}

/// Every angel-ps aggregate function: the PS ones bound to `master`, and the evaluation ones.
pub fn aggregate_functions(master: &str) -> Vec<AggregateUDF> {
    let mut all = ps_aggregate_functions(master);
    all.push(AggregateUDF::from(ps_logloss::PsLogloss::default()));
    all.push(AggregateUDF::from(ps_auc::PsAuc::default()));
    all
}

/// Registers every angel-ps function on `ctx`, bound to the service whose master is at `master`.
/// With a `stage`, the file-reading table functions write what they read there as Parquet, so
/// a Ballista cluster's executors can scan it (see [`cluster`]).
pub fn register_all(ctx: &SessionContext, master: &str, stage: Option<Arc<cluster::Stage>>) {
    for function in scalar_functions(master) {
        ctx.register_udf(function);
    }
    for function in aggregate_functions(master) {
        ctx.register_udaf(function);
    }
    for format in [read_file::Format::Csv, read_file::Format::Libsvm] {
        let function = read_file::ReadFile::new(format, stage.clone());
        ctx.register_udtf(function.name(), Arc::new(function));
    }
}

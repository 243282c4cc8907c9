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
//!
//! [`register_all`] installs every function on a session for the service at a master address.

pub mod args;
pub mod bridge;
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

/// Registers every angel-ps function on `ctx`, bound to the service whose master is at `master`.
pub fn register_all(ctx: &SessionContext, master: &str) {
    ctx.register_udf(ScalarUDF::from(ps_hash::PsHash::default()));
    ctx.register_udf(ScalarUDF::from(ps_counter_seal::PsCounterSeal::new(master)));
    ctx.register_udf(ScalarUDF::from(ps_index::PsIndex::new(master)));
    ctx.register_udf(ScalarUDF::from(ps_predict::PsPredict::new(master)));
    ctx.register_udaf(AggregateUDF::from(ps_counter_add::PsCounterAdd::new(
        master,
    )));
    ctx.register_udaf(AggregateUDF::from(ps_train::PsTrain::new(master)));
    ctx.register_udaf(AggregateUDF::from(ps_logloss::PsLogloss::default()));
    ctx.register_udaf(AggregateUDF::from(ps_auc::PsAuc::default()));
    for function in angel_etl::features::functions() {
        ctx.register_udf(function);
    }
    for format in [read_file::Format::Csv, read_file::Format::Libsvm] {
        let function = read_file::ReadFile::new(format);
        ctx.register_udtf(function.name(), Arc::new(function));
    }
}

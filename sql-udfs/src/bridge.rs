//! Calling the async PS client from DataFusion's synchronous function hooks, and the PS's
//! and the training layer's errors as DataFusion's.
//!
//! UDFs run on DataFusion's tokio runtime, in a worker thread. `block_in_place` tells tokio the
//! thread will block so it moves other tasks elsewhere, then the PS call runs to completion on
//! the client's own runtime ([`angel_client::runtime`]), which outlives DataFusion's.

use std::future::Future;
use std::sync::Arc;

use angel_client::runtime;
use angel_client::{PsClient, PsError};
use angel_training::Error as TrainError;
use datafusion::common::{DataFusionError, Result};

/// Runs a PS call to completion from synchronous UDF code.
pub fn block_on<T>(future: impl Future<Output = Result<T, PsError>>) -> Result<T> {
    runtime::block_on(future).map_err(ps_error)
}

/// The process-wide client of the service at `master`, for the names of `namespace`.
/// Functions registered without a master (on a Ballista scheduler or executor) get theirs from
/// the plan; reaching here without one means the plan came from a client that is not angel-ps.
pub fn client(master: &str, namespace: &str) -> Result<Arc<PsClient>> {
    if master.is_empty() {
        return Err(DataFusionError::Execution(
            "angel-ps function called without a PS master address: submit jobs with \
             `angel-ps run --ballista URL --master HOST:PORT`"
                .into(),
        ));
    }
    block_on(PsClient::shared_in(master, namespace))
}

/// A PS error as a DataFusion execution error (the message keeps the PS's wording).
pub fn ps_error(err: PsError) -> DataFusionError {
    DataFusionError::Execution(format!("angel-ps: {err}"))
}

/// A training error as DataFusion's kind of it: a refused option fails the statement's
/// planning, bad input or a failed service its execution, a malformed setting its
/// configuration.
pub fn train_error(err: TrainError) -> DataFusionError {
    match err {
        TrainError::Option(why) => DataFusionError::Plan(why),
        TrainError::Input(why) => DataFusionError::Execution(why),
        TrainError::Setting(why) => DataFusionError::Configuration(why),
        TrainError::Ps(e) => ps_error(e),
        // The engine's own error, handed back as it came.
        TrainError::Engine(e) => match e.downcast::<DataFusionError>() {
            Ok(e) => *e,
            Err(e) => DataFusionError::External(e),
        },
    }
}

/// An error of the engine running a statement, as the kind's driver carries it (and
/// [`train_error`] gives it back).
pub fn engine_error(err: DataFusionError) -> TrainError {
    TrainError::Engine(Box::new(err))
}

//! Running jobs on a Ballista cluster.
//!
//! Only a function's name and bytes cross the network, so the client, the scheduler and every
//! executor are built with these functions (`angel-ps scheduler` / `angel-ps executor`), and
//! use the same plan [`codec`]s: they carry each PS-bound function's master address inside the plan,
//! so executors need no per-job flags. Each executor process keeps one PS client per master
//! ([`angel_client::PsClient::shared`]), shared by its tasks.
//!
//! - [`codec`]: logical and physical codecs (Ballista's, plus PS master addresses).
//! - [`stage`]: where a job's tables live as files, since a cluster cannot ship memory tables.
//! - [`stage_write`]: `CREATE TABLE` on a cluster: each task writes the partition it computed.
//! - [`task_names`]: names for the changes tasks send that a task run again repeats, so the
//!   servers apply them once (executors put them on each task's plan).
//! - [`resubmit`]: a job the scheduler cancelled as stalled, or that lost shuffle data with a
//!   dead executor, submitted again under the same names.
//! - [`slots`]: the executors' live task slots, which size a job's default parallelism.

pub mod codec;
pub mod resubmit;
pub mod slots;
pub mod stage;
pub mod stage_write;
pub mod task_names;

use std::sync::Arc;

use ballista::prelude::{SessionConfigExt, SessionContextExt};
use datafusion::common::{DataFusionError, Result};
use datafusion::execution::SessionStateBuilder;
use datafusion::physical_plan::ExecutionPlan;
use datafusion::prelude::{SessionConfig, SessionContext};

pub use codec::{AngelLogicalCodec, AngelPhysicalCodec};
pub use slots::live_slots;
pub use stage::Stage;
pub use stage_write::{AngelQueryPlanner, StageWriteNode};
pub use task_names::{TaskNamesExec, name_tasks, run_of};

/// A session whose queries run on the Ballista scheduler at `url` (`df://host:port`), with
/// `partitions` target partitions. Register the functions on it afterwards (Ballista 55
/// replaces the function lists of the state it is given).
pub async fn connect(url: &str, partitions: usize) -> Result<SessionContext> {
    let partitions = partitions.max(1);
    let config = SessionConfig::new_with_ballista()
        .with_target_partitions(partitions)
        .with_ballista_job_name("angel-ps job")
        .with_ballista_logical_extension_codec(Arc::new(AngelLogicalCodec::default()))
        .with_ballista_physical_extension_codec(Arc::new(AngelPhysicalCodec::default()));
    let state = SessionStateBuilder::new()
        .with_config(config)
        .with_runtime_env(crate::object_stores::runtime_env(None, None)?)
        .with_default_features()
        .build();
    let ctx = SessionContext::remote_with_state(url, state)
        .await
        .map_err(|e| {
            DataFusionError::Execution(format!(
                "Ballista scheduler at {url} is unreachable or refused the session: {e}"
            ))
        })?;
    let state = ctx.state();
    let planner = resubmit::RunAgainPlanner::new(state.query_planner().clone());
    let state = SessionStateBuilder::new_from_existing(state)
        .with_query_planner(Arc::new(planner))
        .build();
    Ok(SessionContext::new_with_state(state))
}

/// Rewrites Ballista's "codec is not provided for function X" into what to do about it: the
/// scheduler or executors were not started by `angel-ps` and lack our functions.
pub fn explain(err: DataFusionError) -> DataFusionError {
    let text = err.to_string();
    let Some(at) = text.find("is not provided for") else {
        return err;
    };
    let (side, function) = match text[..at].rfind("PhysicalExtensionCodec") {
        Some(_) => ("an executor", text[at..].split_whitespace().last()),
        None => ("the scheduler", text[at..].split_whitespace().last()),
    };
    let function = function
        .unwrap_or("?")
        .trim_end_matches(|c: char| !c.is_alphanumeric() && c != '_');
    DataFusionError::Execution(format!(
        "{side} of the Ballista cluster does not have the angel-ps function '{function}': start \
         the scheduler with `angel-ps scheduler` and the executors with `angel-ps executor` \
         (stock Ballista binaries lack our functions). Cause: {text}"
    ))
}

/// The one child `with_new_children` gives plan node `node`, which has one input.
fn one_child(
    node: &str,
    mut children: Vec<Arc<dyn ExecutionPlan>>,
) -> Result<Arc<dyn ExecutionPlan>> {
    let n = children.len();
    match (n, children.pop()) {
        (1, Some(child)) => Ok(child),
        _ => Err(DataFusionError::Internal(format!(
            "{node} has one child, got {n}"
        ))),
    }
}

//! Ballista jobs run again when they were lost to a dead executor, under the same change
//! names, so a lost executor costs time and never a hang, a failed job or a change applied
//! twice.
//!
//! Ballista 55 reruns a dead executor's tasks itself, but two cases escape it
//! (docs/cluster.md): its scheduler can stop scheduling the job (`angel-ps scheduler`'s stall
//! watchdog then cancels it), and a task whose read of the dead executor's shuffle output
//! broke off mid-stream fails the whole job. [`RunAgainPlanner`] puts every distributed query
//! under a [`RunAgainExec`], which gives each run of the query a token in its job name
//! ([`run_token`] reads it back on the executors, where [`super::task_names`] names the
//! tasks' changes after it rather than after the job's id). When a job ends so before any row
//! came back, it submits the same query again under the same token: the tasks of the new job
//! name their changes as the first job's did, so the servers refuse those already applied.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use angel_client::task_change::mix;
use async_trait::async_trait;
use ballista::prelude::SessionConfigExt;
use datafusion::catalog::Session;
use datafusion::common::tree_node::TreeNodeRecursion;
use datafusion::common::{DataFusionError, Result};
use datafusion::datasource::listing::ListingTableUrl;
use datafusion::execution::context::QueryPlanner;
use datafusion::execution::{SendableRecordBatchStream, TaskContext};
use datafusion::logical_expr::LogicalPlan;
use datafusion::physical_plan::stream::RecordBatchStreamAdapter;
use datafusion::physical_plan::{
    DisplayAs, DisplayFormatType, ExecutionPlan, PhysicalExpr, PlanProperties,
};
use datafusion::prelude::SessionConfig;
use futures::{StreamExt, TryStreamExt};
use object_store::ObjectStoreExt;

/// Runs of one query: the first, and at most this many more after cancellations.
const RUNS: usize = 3;

/// The job-name prefix that carries a run's token.
const PREFIX: &str = "angel-ps job #";

/// The run token in a task's session `config` (its job's name), if the client gave one.
pub fn run_token(config: &SessionConfig) -> Option<u64> {
    let entries = config.options().entries();
    let name = entries.iter().find(|e| e.key == "ballista.job.name")?;
    let hex = name.value.as_deref()?.strip_prefix(PREFIX)?;
    u64::from_str_radix(hex, 16).ok()
}

/// A fresh token: this process, a counter and the time, mixed.
fn fresh_token() -> u64 {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = (SystemTime::now().duration_since(UNIX_EPOCH)).map_or(0, |d| d.as_nanos() as u64);
    let count = COUNT.fetch_add(1, Ordering::Relaxed);
    mix(&[u64::from(std::process::id()), count, nanos])
}

/// Ballista's planner, with each distributed query under a [`RunAgainExec`].
#[derive(Debug)]
pub struct RunAgainPlanner {
    inner: Arc<dyn QueryPlanner + Send + Sync>,
}

impl RunAgainPlanner {
    /// Wraps `inner`, Ballista's query planner.
    pub fn new(inner: Arc<dyn QueryPlanner + Send + Sync>) -> Self {
        RunAgainPlanner { inner }
    }
}

#[async_trait]
impl QueryPlanner for RunAgainPlanner {
    async fn create_physical_plan(
        &self,
        logical_plan: &LogicalPlan,
        session: &dyn Session,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        let plan = self
            .inner
            .create_physical_plan(logical_plan, session)
            .await?;
        // A run of `COPY` (a staged `CREATE TABLE`) that was lost may have written some of
        // its files: the next run starts from an empty directory.
        let output = match logical_plan {
            LogicalPlan::Copy(copy) => Some(copy.output_url.clone()),
            _ => None,
        };
        Ok(match plan.name() {
            "DistributedQueryExec" => Arc::new(RunAgainExec {
                inner: plan,
                output,
            }),
            _ => plan,
        })
    }
}

/// A distributed query submitted again (at most [`RUNS`] runs) when its job was lost to a
/// dead executor ([`lost`]) before any row came back.
#[derive(Debug)]
pub struct RunAgainExec {
    inner: Arc<dyn ExecutionPlan>,
    /// Where the query writes its files, if it is a `COPY`.
    output: Option<String>,
}

impl DisplayAs for RunAgainExec {
    fn fmt_as(&self, _: DisplayFormatType, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "RunAgainExec: runs={RUNS}")
    }
}

impl ExecutionPlan for RunAgainExec {
    fn name(&self) -> &str {
        "RunAgainExec"
    }

    fn properties(&self) -> &Arc<PlanProperties> {
        self.inner.properties()
    }

    fn children(&self) -> Vec<&Arc<dyn ExecutionPlan>> {
        vec![&self.inner]
    }

    fn apply_expressions(
        &self,
        _f: &mut dyn FnMut(&Arc<dyn PhysicalExpr>) -> Result<TreeNodeRecursion>,
    ) -> Result<TreeNodeRecursion> {
        Ok(TreeNodeRecursion::Continue)
    }

    fn with_new_children(
        self: Arc<Self>,
        children: Vec<Arc<dyn ExecutionPlan>>,
    ) -> Result<Arc<dyn ExecutionPlan>> {
        Ok(Arc::new(RunAgainExec {
            inner: super::one_child("RunAgainExec", children)?,
            output: self.output.clone(),
        }))
    }

    fn execute(
        &self,
        partition: usize,
        context: Arc<TaskContext>,
    ) -> Result<SendableRecordBatchStream> {
        let name = format!("{PREFIX}{:016x}", fresh_token());
        let config = context
            .session_config()
            .clone()
            .with_ballista_job_name(&name);
        let context = Arc::new(renamed(&context, config));
        let (inner, output) = (self.inner.clone(), self.output.clone());
        let runs = futures::stream::once(async move {
            for run in 1..=RUNS {
                let mut stream = inner.execute(partition, context.clone())?;
                match stream.next().await {
                    Some(Err(e)) => match lost(&e) {
                        Some(why) if run < RUNS => {
                            tracing::warn!("job {name} {why}; run {run} again");
                            if let Some(url) = &output {
                                clear(&context, url).await?;
                            }
                        }
                        Some(why) => return Err(lost_every_run(&name, why, e)),
                        None => return Err(e),
                    },
                    first => return Ok(futures::stream::iter(first).chain(stream)),
                }
            }
            Err(DataFusionError::Internal("no run of the query".into()))
        })
        .try_flatten();
        Ok(Box::pin(RecordBatchStreamAdapter::new(self.schema(), runs)))
    }
}

/// Deletes every file below `url` (a lost `COPY`'s output directory).
async fn clear(context: &TaskContext, url: &str) -> Result<()> {
    let url = ListingTableUrl::parse(url)?;
    let store = context.runtime_env().object_store(&url)?;
    let files: Vec<_> = store.list(Some(url.prefix())).try_collect().await?;
    for file in files {
        store.delete(&file.location).await?;
    }
    Ok(())
}

/// `context` with session `config`.
fn renamed(context: &TaskContext, config: SessionConfig) -> TaskContext {
    TaskContext::new(
        context.task_id(),
        context.session_id(),
        config,
        context.scalar_functions().clone(),
        context.higher_order_functions().clone(),
        context.aggregate_functions().clone(),
        context.window_functions().clone(),
        context.runtime_env(),
    )
}

/// How a job that failed with `e` was lost to a dead executor, if it was: cancelled by the
/// stall watchdog, or a task's read of shuffle data (Arrow IPC over Flight) broke off. Our
/// functions' errors are never IPC errors, so a job failing on its data is not run again.
fn lost(e: &DataFusionError) -> Option<&'static str> {
    let text = e.to_string();
    if text.contains("Cancelled") {
        Some("was cancelled as stalled")
    } else if text.contains("IpcError") {
        Some("lost shuffle data it was reading from an executor")
    } else {
        None
    }
}

/// The error of a query whose every run was lost (`why`, the last time with `e`).
fn lost_every_run(name: &str, why: &str, e: DataFusionError) -> DataFusionError {
    DataFusionError::Execution(format!(
        "Ballista job '{name}' {why}, and so did each of its {RUNS} runs (executors kept \
         dying, or the scheduler stopped scheduling it: the scheduler's log names the stage; \
         `angel-ps scheduler --stall-secs` bounds the wait); no change was applied twice. See \
         docs/cluster.md. Last error: {e}"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A token written into a job's name is read back from the task's session; a name
    /// without one, or no name, gives none.
    #[test]
    fn a_run_token_travels_in_the_job_name() {
        let token = fresh_token();
        assert_ne!(token, fresh_token(), "two runs, two tokens");
        let named = SessionConfig::new_with_ballista()
            .with_ballista_job_name(&format!("{PREFIX}{token:016x}"));
        assert_eq!(run_token(&named), Some(token));
        let plain = SessionConfig::new_with_ballista().with_ballista_job_name("angel-ps job");
        assert_eq!(run_token(&plain), None);
        assert_eq!(run_token(&SessionConfig::new()), None);
    }
    /// The two ways Ballista loses a job to a dead executor run again, each named; a job
    /// failing on its own data or on the PS does not.
    #[test]
    fn only_a_job_lost_to_an_executor_runs_again() {
        let error = |text: &str| DataFusionError::Execution(text.to_string());
        let cancelled = error("Job 038H45ZYY4000 failed: Job was Cancelled");
        assert_eq!(lost(&cancelled), Some("was cancelled as stalled"));
        let shuffle = error(
            "Job 038H46V8Y6000 failed: Job failed due to stage 1 failed: Task failed due to \
             runtime execution error: DataFusionError(Shared(External(ArrowError(IpcError(\
             \"h2 protocol error: error reading a body from connection\")))))",
        );
        assert_eq!(
            lost(&shuffle),
            Some("lost shuffle data it was reading from an executor")
        );
        for own in [
            "ps_train: model 'm' not found",
            "PS server 127.0.0.1:7100: transport error",
            "table 'train' not found",
        ] {
            assert_eq!(lost(&error(own)), None, "{own}");
        }
        let given_up = lost_every_run("angel-ps job #1", "was cancelled as stalled", cancelled);
        assert!(given_up.to_string().contains("--stall-secs"), "{given_up}");
    }

    /// A lost `COPY`'s directory is emptied, files below it included, before the next run.
    #[tokio::test]
    async fn a_lost_copy_starts_from_an_empty_directory() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a_0.parquet"), b"x").unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b_1.parquet"), b"y").unwrap();
        let url = format!("{}/", dir.path().display());
        clear(&TaskContext::default(), &url).await.unwrap();
        let left: Vec<_> = walk(dir.path());
        assert!(left.is_empty(), "left: {left:?}");
    }

    /// Every file below `dir`.
    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        std::fs::read_dir(dir)
            .unwrap()
            .flat_map(|e| {
                let path = e.unwrap().path();
                match path.is_dir() {
                    true => walk(&path),
                    false => vec![path],
                }
            })
            .collect()
    }
}

//! The scheduler's watchdog: a job that Ballista's scheduler stopped scheduling is cancelled,
//! so its client ends instead of waiting forever.
//!
//! Ballista 55's scheduler can lose a job when an executor dies after a stage succeeded: it
//! resets the dead executor's finished tasks, rolls the next stage back, and then sometimes
//! never resolves that stage again, or never offers its tasks to the executors left
//! (docs/cluster.md, "A job Ballista's scheduler stops scheduling"; `ballista-stall-repro` in
//! `tests/` reproduces the second on a stock scheduler). Such a job has no task running, and
//! none waiting or tasks waiting on an idle cluster, while its stages are not all done: no
//! event will ever move it. The watchdog looks at every running job a few times per bound and
//! cancels one that stayed so for the whole bound, logging its stages. Clients run a
//! cancelled job again ([`angel_sql::ballista::resubmit`]), under the same change names, so
//! the servers apply each change once.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use ballista_core::serde::protobuf::job_status::Status;
use ballista_scheduler::scheduler_server::SchedulerServer;
use ballista_scheduler::state::execution_graph::ExecutionGraph;
use ballista_scheduler::state::execution_stage::ExecutionStage;
use datafusion_proto::protobuf::{LogicalPlanNode, PhysicalPlanNode};
use tokio_util::sync::CancellationToken;

/// The scheduler the watchdog watches.
pub type Scheduler = SchedulerServer<LogicalPlanNode, PhysicalPlanNode>;

/// Watches `scheduler`'s running jobs until `shutdown`, cancelling each that has had no task
/// running or waiting for `bound`.
pub async fn watch(scheduler: Scheduler, bound: Duration, shutdown: CancellationToken) {
    let mut idle_since: HashMap<String, Instant> = HashMap::new();
    let period = (bound / 4).max(Duration::from_millis(250));
    loop {
        tokio::select! {
            () = tokio::time::sleep(period) => {}
            () = shutdown.cancelled() => return,
        }
        let jobs = scheduler.state.task_manager.get_running_job_cache();
        idle_since.retain(|job, _| jobs.contains_key(job.as_str()));
        let executors =
            (scheduler.state.executor_manager.get_executors_state().await).map_or(0, |e| e.len());
        let mut graphs = Vec::with_capacity(jobs.len());
        for (job, info) in jobs.iter() {
            graphs.push((job.clone(), info.execution_graph.clone()));
        }
        let mut idle_cluster = executors > 0;
        for (_, graph) in &graphs {
            idle_cluster &= graph.read().await.running_tasks().is_empty();
        }
        for (job, graph) in graphs {
            let stages = {
                let graph = graph.read().await;
                match stalled(&**graph, idle_cluster) {
                    true => describe(graph.stages()),
                    false => {
                        idle_since.remove(job.as_str());
                        continue;
                    }
                }
            };
            let since = *idle_since
                .entry(job.to_string())
                .or_insert_with(Instant::now);
            if since.elapsed() < bound {
                continue;
            }
            tracing::warn!(
                "job {job} stalled: no task running for {:.0} s, its stages {stages}; \
                 cancelling it so its client can run it again",
                bound.as_secs_f64()
            );
            if let Err(e) = scheduler.cancel_job(job.clone()).await {
                tracing::warn!("cannot cancel stalled job {job}: {e}");
            }
            idle_since.remove(job.as_str());
        }
    }
}

/// Whether `graph`, a running job, can no longer move: some stage not done, no task running,
/// and either none waiting, or tasks waiting while the cluster is idle (`idle_cluster`: live
/// executors, and no job runs a task), so free slots are not being offered them. Ballista 55
/// leaves a job in either form after an executor dies (`ballista-stall-repro` shows the
/// second); a job waiting for slots other jobs hold is neither.
fn stalled(graph: &dyn ExecutionGraph, idle_cluster: bool) -> bool {
    let running = matches!(graph.status().status, Some(Status::Running(_)) | None);
    running
        && !graph.is_successful()
        && graph.running_tasks().is_empty()
        && (graph.available_tasks() == 0 || idle_cluster)
}

/// The stages of a job by state, as `stage 2 successful, stage 3 unresolved`.
fn describe(stages: &HashMap<usize, ExecutionStage>) -> String {
    let mut ids: Vec<&usize> = stages.keys().collect();
    ids.sort();
    let named: Vec<String> = ids
        .into_iter()
        .map(|id| {
            let state = match &stages[id] {
                ExecutionStage::UnResolved(_) => "unresolved",
                ExecutionStage::Resolved(_) => "resolved",
                ExecutionStage::Running(_) => "running",
                ExecutionStage::Successful(_) => "successful",
                ExecutionStage::Failed(_) => "failed",
            };
            format!("stage {id} {state}")
        })
        .collect();
    named.join(", ")
}

//! The task slots of the cluster, served by `angel-ps scheduler` beside Ballista's scheduler
//! service on the same port (`angel.v1.Cluster/Slots`), so a job sizes its parallelism by the
//! executors alive when it starts rather than by a fixed number.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use angel_proto::ballista_slots_server::BallistaSlots;
use angel_proto::{SlotsReply, SlotsRequest};
use tonic::{Request, Response, Status};

use crate::stall_watchdog::Scheduler;

/// Answers `Slots` from the scheduler's executor registry.
pub struct ClusterSlots {
    scheduler: Scheduler,
    /// An executor silent for longer is not counted (the scheduler's executor timeout).
    timeout: Duration,
}

impl ClusterSlots {
    /// Slots of `scheduler`'s executors heard from within `timeout` (or not yet due to be).
    pub fn new(scheduler: Scheduler, timeout: Duration) -> Self {
        ClusterSlots { scheduler, timeout }
    }
}

#[tonic::async_trait]
impl BallistaSlots for ClusterSlots {
    async fn slots(&self, _: Request<SlotsRequest>) -> Result<Response<SlotsReply>, Status> {
        let executors = (self
            .scheduler
            .state
            .executor_manager
            .get_executors_state()
            .await)
            .map_err(|e| Status::internal(format!("the scheduler's executors: {e}")))?;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        // One that registered and has not sent a heartbeat yet counts: the scheduler removes
        // an executor that stays silent.
        let alive: Vec<u32> = executors
            .iter()
            .filter(|(_, heartbeat, _)| {
                heartbeat.is_none_or(|at| now.saturating_sub(at) <= self.timeout)
            })
            .map(|(metadata, _, _)| metadata.specification.vcores)
            .collect();
        Ok(Response::new(SlotsReply {
            executors: alive.len() as u32,
            slots: alive.iter().sum(),
        }))
    }
}

//! The scheduler's probe of its executors: an executor whose data port accepted connections
//! and now refuses them has lost its process, so the scheduler removes it at once and runs its
//! tasks again elsewhere, instead of waiting `--executor-timeout-secs` for heartbeats that
//! will not come (Ballista 55 notices a dead executor only by that timeout).
//!
//! Only a refusal counts, and only after the port was once seen open: a port not yet open
//! (the executor registers before its data service listens), one that does not answer (a
//! frozen process, a cut network) or a probe that times out is left to the heartbeat timeout.

use std::collections::HashSet;
use std::io::ErrorKind;
use std::time::Duration;

use ballista_core::serde::protobuf::ExecutorStoppedParams;
use ballista_core::serde::protobuf::scheduler_grpc_server::SchedulerGrpc;
use tokio_util::sync::CancellationToken;

use crate::stall_watchdog::Scheduler;

/// How often every executor is probed.
const PERIOD: Duration = Duration::from_millis(500);
/// How long one probe waits for its connection.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);

/// What one probe of an executor's data port found.
enum Port {
    Open,
    Refused,
    /// No answer in time, or another error: nothing proven.
    Unknown,
}

/// Probes `scheduler`'s executors every [`PERIOD`] until `shutdown`, removing each whose
/// port, seen open before, refuses connections.
pub async fn watch(scheduler: Scheduler, shutdown: CancellationToken) {
    let mut seen_open: HashSet<String> = HashSet::new();
    loop {
        tokio::select! {
            () = tokio::time::sleep(PERIOD) => {}
            () = shutdown.cancelled() => return,
        }
        let Ok(executors) = scheduler.state.executor_manager.get_executors_state().await else {
            continue;
        };
        let listed: HashSet<&String> = executors.iter().map(|(m, _, _)| &m.id).collect();
        seen_open.retain(|id| listed.contains(id));
        // Probed at once, so an executor that does not answer delays no other.
        let probes: Vec<_> = (executors.iter())
            .map(|(m, _, _)| tokio::spawn(probe(m.host.clone(), m.port)))
            .collect();
        for ((metadata, _, _), probed) in executors.iter().zip(probes) {
            match probed.await.unwrap_or(Port::Unknown) {
                Port::Open => {
                    seen_open.insert(metadata.id.clone());
                }
                Port::Refused if seen_open.remove(&metadata.id) => {
                    let reason = format!(
                        "its data port {}:{} refuses connections: its process is gone",
                        metadata.host, metadata.port
                    );
                    remove(&scheduler, &metadata.id, reason).await;
                }
                Port::Refused | Port::Unknown => {}
            }
        }
    }
}

/// Tells `scheduler` that executor `id` stopped, as the executor itself would on shutdown:
/// Ballista removes it and runs its tasks again.
async fn remove(scheduler: &Scheduler, id: &str, reason: String) {
    tracing::warn!("executor {id} is lost: {reason}; its tasks run again on the others");
    let request = tonic::Request::new(ExecutorStoppedParams {
        executor_id: id.to_string(),
        reason,
    });
    if let Err(e) = SchedulerGrpc::executor_stopped(scheduler, request).await {
        tracing::warn!("cannot remove lost executor {id}: {}", e.message());
    }
}

/// Connects to `host:port` and lets go at once.
async fn probe(host: String, port: u16) -> Port {
    let connect = tokio::net::TcpStream::connect((host.as_str(), port));
    match tokio::time::timeout(CONNECT_TIMEOUT, connect).await {
        Ok(Ok(_)) => Port::Open,
        Ok(Err(e)) if e.kind() == ErrorKind::ConnectionRefused => Port::Refused,
        _ => Port::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listening port is open; once its listener is gone, the same port refuses.
    #[tokio::test]
    async fn a_port_is_open_while_listened_on_and_refused_after() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let here = || "127.0.0.1".to_string();
        assert!(matches!(probe(here(), port).await, Port::Open));
        drop(listener);
        assert!(matches!(probe(here(), port).await, Port::Refused));
    }
}

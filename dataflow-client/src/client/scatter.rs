//! Routing and scatter: slices of a call go to the servers holding their partitions, one
//! request per server, concurrently; a stale map is refreshed and only the refused parts
//! resent; a server that does not answer is reported and its parts resent to the new owners.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use angel_proto::{Ack, Caller, PsError, PullRequest, PushRequest, Result, RowSlice};
use parking_lot::Mutex;
use prost::Message;

use super::PsClient;
use crate::matrix::Matrix;
use crate::replay::Change;
use crate::routes::{Routing, SendError, ServerConn, server_of};
use crate::task_change::TaskChange;
use crate::worker_calls::{PushOptions, WorkerClock};

/// Retries after a stale-map answer before giving up.
const STALE_MAP_RETRIES: usize = 3;

/// How long a call keeps resending parts a server did not answer, while the master declares
/// it dead and restores its partitions elsewhere.
pub const RECOVERY_WAIT: Duration = Duration::from_secs(30);

impl PsClient {
    /// Pulls or pushes `slices` of matrix `m`; one reply slice per slice (empty for pushes).
    pub(super) async fn send_slices(
        &self,
        m: &Matrix,
        slices: Vec<RowSlice>,
        op: SliceOp<'_>,
    ) -> Result<Vec<RowSlice>> {
        let (matrix_id, value_type) = (m.meta.id, m.meta.value_type);
        let limit = self.config.max_message_bytes;
        let name = m.meta.name.as_str();
        let change = match op {
            SliceOp::Push(how) => how.change,
            SliceOp::Pull(..) => None,
        };
        self.scatter(
            slices,
            change,
            |routing, s: &RowSlice| server_of(routing, matrix_id, s.partition_id),
            |mut conn, slices, mut caller| async move {
                if let SliceOp::Push(how) = op {
                    let gradients = how.gradients;
                    let count = slices.len();
                    let bases = how
                        .bases
                        .iter()
                        .filter(|b| slices.iter().any(|s| s.partition_id == b.partition_id))
                        .cloned()
                        .collect();
                    let request = PushRequest {
                        caller: Some(caller),
                        matrix_id,
                        value_type,
                        slices: slices.clone(),
                        gradients,
                        bases,
                    };
                    check_size(&request, limit, "push to", name, &conn.addr)?;
                    let reply = conn.rpc.push(request).await?.into_inner();
                    for ack in &reply.acks {
                        let change = Change::Push {
                            matrix_id,
                            value_type,
                            gradients,
                            slices: slices
                                .iter()
                                .filter(|s| s.partition_id == ack.partition_id)
                                .cloned()
                                .collect(),
                        };
                        self.replays.keep(matrix_id, ack, &caller, change);
                    }
                    Ok(vec![RowSlice::default(); count])
                } else {
                    let (clock, versions) = match op {
                        SliceOp::Pull(clock, versions) => (clock, versions),
                        SliceOp::Push(_) => (None, None),
                    };
                    if let Some(clock) = clock {
                        caller.step_worker = clock.worker;
                        caller.clock = clock.clock;
                    }
                    let request = PullRequest {
                        caller: Some(caller),
                        matrix_id,
                        value_type,
                        slices,
                    };
                    check_size(&request, limit, "pull from", name, &conn.addr)?;
                    let reply = conn.rpc.pull(request).await?.into_inner();
                    if let Some(versions) = versions {
                        versions.lock().extend(reply.versions);
                    }
                    Ok(reply.slices)
                }
            },
        )
        .await
    }

    /// Sends `items` grouped by server, all servers concurrently, and returns one answer per
    /// item in input order. Items a server refuses as routed with a stale map are re-routed
    /// after a refresh; items a server never answered (it is unreachable, or gone from the map)
    /// are reported to the master, which probes the server and restores its partitions
    /// elsewhere, and are resent to the new owners for up to [`RECOVERY_WAIT`]. Resends keep
    /// the call's seq (or `change`'s name), so servers apply each part once; nothing a server
    /// accepted is resent.
    pub(crate) async fn scatter<I, R, Fut>(
        &self,
        items: Vec<I>,
        change: Option<TaskChange>,
        route: impl Fn(&Routing, &I) -> Result<u32>,
        send: impl Fn(ServerConn, Vec<I>, Caller) -> Fut,
    ) -> Result<Vec<R>>
    where
        I: Clone,
        Fut: Future<Output = std::result::Result<Vec<R>, SendError>>,
    {
        let mut answers: Vec<Option<R>> = items.iter().map(|_| None).collect();
        let mut pending: Vec<usize> = (0..items.len()).collect();
        let (task, seq) = match change {
            Some(c) => (c.task, c.seq),
            None => (0, self.seq.fetch_add(1, Ordering::Relaxed)),
        };
        let deadline = Instant::now() + RECOVERY_WAIT;
        let (mut stale_left, mut waits) = (STALE_MAP_RETRIES, 0u32);
        loop {
            let mut by_server: HashMap<u32, (ServerConn, Vec<usize>)> = HashMap::new();
            let mut down: HashMap<u32, String> = HashMap::new();
            let mut unrouted = Vec::new();
            {
                // Not while a new map's replays are under way: see `PsClient::recovering`.
                let _settled = self.recovering.read().await;
                let routing = self.routing.read();
                for &i in &pending {
                    let server = route(&routing, &items[i])?;
                    match routing.servers.get(&server) {
                        Some(conn) => by_server
                            .entry(server)
                            .or_insert_with(|| (conn.clone(), Vec::new()))
                            .1
                            .push(i),
                        None => {
                            down.insert(server, "not in the partition map".into());
                            unrouted.push(i);
                        }
                    }
                }
            }
            let calls = by_server.into_iter().map(|(server, (conn, idx))| {
                let addr = conn.addr.clone();
                let batch = idx.iter().map(|&i| items[i].clone()).collect();
                let fut = send(conn, batch, self.caller(task, seq));
                async move { (server, idx, addr, fut.await) }
            });
            pending = unrouted;
            let mut stale = None;
            for (server, idx, addr, result) in futures::future::join_all(calls).await {
                match result {
                    Ok(replies) if replies.len() == idx.len() => {
                        for (i, r) in idx.into_iter().zip(replies) {
                            answers[i] = Some(r);
                        }
                    }
                    Ok(replies) => {
                        return Err(PsError::Internal(format!(
                            "server {addr} answered {} parts for {} asked",
                            replies.len(),
                            idx.len()
                        )));
                    }
                    Err(SendError::Local(e)) => return Err(e),
                    Err(SendError::Remote(status)) => match PsError::from_status(status, &addr) {
                        PsError::StaleMap(msg) if stale_left > 0 => {
                            stale = Some(msg);
                            pending.extend(idx);
                        }
                        PsError::Unavailable(msg) => {
                            down.insert(server, msg);
                            pending.extend(idx);
                        }
                        e => return Err(e),
                    },
                }
            }
            if pending.is_empty() {
                break;
            }
            if !down.is_empty() {
                if Instant::now() >= deadline {
                    let (server, msg) = down.into_iter().next().expect("not empty");
                    return Err(PsError::Unavailable(format!(
                        "server {server} did not come back or get replaced within \
                         {RECOVERY_WAIT:?}: {msg}"
                    )));
                }
                let epoch = self.map_epoch();
                for (server, msg) in down {
                    tracing::info!(server, %msg, "server unreachable; reporting it");
                    self.report_unreachable(server, &msg).await?;
                }
                if self.map_epoch() == epoch {
                    let wait = Duration::from_millis(50 << waits.min(4));
                    tokio::time::sleep(wait).await;
                    waits += 1;
                }
            } else if let Some(msg) = stale {
                tracing::debug!(%msg, "partition map moved; refreshing");
                stale_left -= 1;
                self.refresh().await?;
            }
        }
        // Changes this call made may have filled the replay buffer: make room before the next.
        self.relieve().await;
        answers
            .into_iter()
            .map(|a| a.ok_or_else(|| PsError::Internal("a request part got no answer".into())))
            .collect()
    }

    pub(super) fn caller(&self, task: u64, seq: u64) -> Caller {
        Caller {
            worker_id: self.config.worker_id,
            task,
            seq,
            map_epoch: self.map_epoch(),
            ..Default::default()
        }
    }
}

/// What [`PsClient::send_slices`] does: pull, or push (adding, or through an optimizer).
#[derive(Debug, Clone, Copy)]
pub(super) enum SliceOp<'a> {
    /// A pull, by a training worker at its clock or not; collecting partition versions or not.
    Pull(Option<WorkerClock>, Option<&'a Mutex<Vec<Ack>>>),
    Push(PushOptions<'a>),
}

fn check_size(
    request: &impl Message,
    limit: usize,
    verb: &str,
    matrix: &str,
    addr: &str,
) -> Result<(), SendError> {
    let len = request.encoded_len();
    if len > limit {
        return Err(SendError::Local(PsError::TooLarge(format!(
            "{verb} matrix '{matrix}' on server {addr} would send {len} bytes, over the \
             {limit}-byte message limit; send fewer keys per call"
        ))));
    }
    Ok(())
}

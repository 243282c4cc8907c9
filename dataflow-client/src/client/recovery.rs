//! How a client follows the service through failures: it installs each new partition map,
//! finds the partitions restored on another server since the last one, and replays to them the
//! changes their snapshots do not hold (its replay buffer); a server that does not answer is
//! reported to the master, whose answer is such a map.

use std::collections::HashMap;
use std::sync::Arc;

use angel_proto::server_client::ServerClient;
use angel_proto::{
    Caller, CounterIncreaseRequest, GetPartitionMapRequest, PartitionMap, PsError, PushRequest,
    ReplayReport, ReportUnreachableRequest, Result,
};

use super::PsClient;
use super::config::endpoint;
use crate::counter_space::Counter;
use crate::matrix::Matrix;
use crate::replay::Change;
use crate::routes::{Routing, ServerConn, server_of};

impl PsClient {
    /// Reloads the partition map from the master.
    pub async fn refresh(&self) -> Result<()> {
        let map = self
            .on_master(GetPartitionMapRequest {}, |mut m, r| async move {
                m.get_partition_map(r).await
            })
            .await?;
        self.follow(map).await
    }

    /// Installs `map` and replays this client's changes to the partitions it shows restored,
    /// with every call's routing held meanwhile (see [`PsClient::recovering`]).
    async fn follow(&self, map: PartitionMap) -> Result<()> {
        let _routing_held = self.recovering.write().await;
        let moved = self.install(map)?;
        self.replay(moved).await
    }

    /// Installs `map` unless it is older than the cached one of the same service; returns the
    /// partitions it shows restored on another server since. A map of another service (a
    /// master started afresh at the cached one's address) replaces the cache whatever its
    /// epoch, and nothing of the old service is replayed into it.
    fn install(&self, map: PartitionMap) -> Result<Vec<Moved>> {
        let mut routing = self.routing.write();
        let same_service = map.service == routing.service;
        if same_service && map.epoch < routing.epoch {
            return Ok(Vec::new());
        }
        let moved = match same_service {
            true => moved_partitions(&routing, &map),
            false => {
                let forgotten = self.replays.clear();
                if routing.service != 0 {
                    tracing::warn!(
                        forgotten,
                        "another service answers at the master's address; the cached map and \
                         the changes held for replay to the old one are dropped"
                    );
                }
                Vec::new()
            }
        };
        let mut servers = HashMap::new();
        for s in &map.servers {
            let conn = match routing.servers.get(&s.id) {
                Some(conn) if conn.addr == s.addr => conn.clone(),
                _ => ServerConn {
                    addr: s.addr.clone(),
                    rpc: ServerClient::with_interceptor(
                        endpoint(&s.addr, &self.config)?.connect_lazy(),
                        self.config.credential(),
                    )
                    .max_decoding_message_size(usize::MAX)
                    .max_encoding_message_size(usize::MAX),
                },
            };
            servers.insert(s.id, conn);
        }
        let mut by_name = HashMap::new();
        let mut by_id = HashMap::new();
        for meta in map.matrices {
            let mut matrix = Matrix::new(meta)?;
            matrix.keep_measurements(routing.by_id.get(&matrix.meta.id).map(Arc::as_ref));
            let matrix = Arc::new(matrix);
            by_id.insert(matrix.meta.id, matrix.clone());
            by_name.insert(matrix.meta.name.clone(), matrix);
        }
        let mut counters = HashMap::new();
        for meta in map.counters {
            let counter = Arc::new(Counter::new(meta)?);
            by_id.insert(counter.space.meta.id, counter.space.clone());
            counters.insert(counter.meta.name.clone(), counter);
        }
        *routing = Routing {
            epoch: map.epoch,
            service: map.service,
            servers,
            by_name,
            by_id,
            counters,
            optimizers: map.optimizers,
        };
        Ok(moved)
    }

    /// Resends to each restored partition the changes this client made that its snapshot
    /// does not hold, marked as replays (the server refuses any it applied already), and
    /// tells the master how many it replayed and lost per dead server.
    async fn replay(&self, moved: Vec<Moved>) -> Result<()> {
        let mut by_server: HashMap<u32, (u64, u64)> = HashMap::new();
        for m in moved {
            let (replayed, lost) = self.replay_partition(&m).await?;
            let tally = by_server.entry(m.from_server).or_default();
            tally.0 += replayed;
            tally.1 += lost;
        }
        for (server_id, (replayed, lost)) in by_server {
            if replayed + lost == 0 {
                continue;
            }
            let report = ReplayReport {
                server_id,
                replayed,
                lost,
            };
            self.on_master(report, |mut m, r| async move { m.report_replay(r).await })
                .await?;
        }
        Ok(())
    }

    /// Resends the changes partition `m` needs again; returns how many it replayed and how
    /// many were lost. If a resend fails, the changes not yet resent are counted as lost and
    /// the error returned.
    async fn replay_partition(&self, m: &Moved) -> Result<(u64, u64)> {
        let (id, pid) = (m.id, m.pid);
        let (changes, dropped) = self.replays.take(id, pid, m.restored);
        if changes.is_empty() {
            return Ok((0, dropped));
        }
        let count = changes.len();
        let conn = {
            let routing = self.routing.read();
            let server = server_of(&routing, id, pid)?;
            routing.servers.get(&server).cloned()
        };
        let Some(mut conn) = conn else {
            self.replays.lose(count as u64, id, pid);
            return Ok((0, dropped + count as u64));
        };
        for (sent, (caller, change)) in changes.into_iter().enumerate() {
            let caller = Caller {
                replay: true,
                map_epoch: self.map_epoch(),
                ..caller
            };
            let acks = match change.clone() {
                Change::Push {
                    matrix_id,
                    value_type,
                    gradients,
                    slices,
                } => conn
                    .rpc
                    .push(PushRequest {
                        caller: Some(caller),
                        matrix_id,
                        value_type,
                        slices,
                        gradients,
                        // A replayed DynSGD update applies unscaled by staleness.
                        bases: Vec::new(),
                    })
                    .await
                    .map(|r| r.into_inner().acks),
                Change::Count { counter_id, part } => conn
                    .rpc
                    .counter_increase(CounterIncreaseRequest {
                        caller: Some(caller),
                        counter_id,
                        parts: vec![part],
                    })
                    .await
                    .map(|r| r.into_inner().acks),
            };
            let acks = match acks {
                Ok(acks) => acks,
                Err(status) => {
                    self.replays.lose((count - sent) as u64, id, pid);
                    return Err(PsError::from_status(status, &conn.addr));
                }
            };
            for ack in &acks {
                self.replays.keep(id, ack, &caller, change.clone());
            }
        }
        tracing::info!(id, pid, count, "changes replayed to a restored partition");
        Ok((count as u64, dropped))
    }

    /// Changes this client replayed to restored partitions, and changes it could not (its
    /// replay buffer had dropped them for room): lost.
    pub fn replay_counts(&self) -> (u64, u64) {
        self.replays.counts()
    }

    /// Tells the master `server` did not answer; installs the map it answers with (the
    /// server's partitions moved if it was dead), or fails with DATA_LOSS for lost partitions.
    pub(super) async fn report_unreachable(&self, server: u32, error: &str) -> Result<()> {
        let request = ReportUnreachableRequest {
            server_id: server,
            error: error.to_string(),
        };
        let map = self
            .on_master(
                request,
                |mut m, r| async move { m.report_unreachable(r).await },
            )
            .await?;
        self.follow(map).await
    }
}

/// A partition restored on another server: matrix or counter space `id`, partition `pid`,
/// the version its snapshot held, and the server it was on.
struct Moved {
    id: u32,
    pid: u32,
    restored: u64,
    from_server: u32,
}

/// The partitions of `map` that were restored on another server since `routing`'s map.
fn moved_partitions(routing: &Routing, map: &PartitionMap) -> Vec<Moved> {
    let spaces = map
        .matrices
        .iter()
        .chain(map.counters.iter().filter_map(|c| c.space.as_ref()));
    let mut moved = Vec::new();
    for meta in spaces {
        let Some(old) = routing.by_id.get(&meta.id) else {
            continue;
        };
        for (p, was) in meta.partitions.iter().zip(&old.meta.partitions) {
            if p.server_id != was.server_id {
                moved.push(Moved {
                    id: meta.id,
                    pid: p.id,
                    restored: p.restored_version,
                    from_server: was.server_id,
                });
            }
        }
    }
    moved
}

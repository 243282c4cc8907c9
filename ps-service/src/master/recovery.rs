//! Failure detection and server recovery.
//!
//! A server is declared dead when it has not heartbeat for `--server-timeout-secs` (with a
//! snapshot directory only), or sooner when a client reports it unreachable and the master's
//! own probe fails too. Its partitions
//! (of matrices and of counter key spaces) go to the live servers with the fewest partitions,
//! which load them from their newest snapshots; the map's epoch advances, and clients refresh
//! and resend what the dead server never answered. Without a snapshot directory, or when a
//! snapshot cannot be read, the partitions are lost: every client touching them gets DATA_LOSS
//! saying which and why.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use angel_proto::{
    CounterAdminOp, CounterAdminRequest, CounterMeta, CreatePartitionsRequest, MatrixMeta,
    PartitionMap, PsError, Recovery, ReplayReport, Result, StatsRequest,
};
use tonic::Request;

use super::service::{MasterService, ServerEntry};

/// How long the master's probe of a reported server may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// The partitions of one matrix or counter that lived on the dead server.
enum Orphans {
    Matrix(MatrixMeta, Vec<u32>),
    Counter(CounterMeta, Vec<u32>),
}

impl MasterService {
    /// A client could not reach `server_id`: probes it, and recovers it when the probe fails
    /// too. Answers the map to route with, or DATA_LOSS for partitions that are gone.
    pub(super) async fn report_unreachable(
        &self,
        server_id: u32,
        error: &str,
    ) -> Result<PartitionMap> {
        let entry = self.state.lock().servers.get(&server_id).cloned();
        if let Some(entry) = entry
            && let Err(probe) = probe(&entry).await
        {
            let cause = format!(
                "a client could not reach it ({error}) and the master's probe failed ({probe})"
            );
            self.recover(server_id, cause).await;
        }
        let state = self.state.lock();
        match state.lost.get(&server_id) {
            Some(why) => Err(PsError::DataLoss(why.clone())),
            None => Ok(state.map()),
        }
    }

    /// Adds what a client replayed to, and lost on, the partitions restored from dead server
    /// `report.server_id` to its latest recovery.
    pub(super) fn report_replay(&self, report: &ReplayReport) {
        let mut state = self.state.lock();
        let Some(recovery) = state
            .recoveries
            .iter_mut()
            .rev()
            .find(|r| r.server_id == report.server_id)
        else {
            return;
        };
        recovery.changes_replayed += report.replayed;
        recovery.changes_lost += report.lost;
        drop(state);
        self.persist();
    }

    /// Recovers every server silent for longer than the timeout; the master runs it a few
    /// times per timeout. Only with a snapshot directory: without one, declaring a slow server
    /// dead could only lose its partitions, so silence just keeps new partitions off it and a
    /// server is declared dead only when a client cannot reach it and the probe agrees.
    pub async fn check_heartbeats(&self) {
        if self.snapshots.dir.is_none() {
            return;
        }
        let silent: Vec<u32> = {
            let state = self.state.lock();
            let live = state.live_servers(self.server_timeout);
            let gone = state
                .awaiting
                .iter()
                .filter_map(|(&id, a)| (a.since.elapsed() > self.server_timeout).then_some(id));
            let silent = state
                .servers
                .keys()
                .filter(|id| !live.contains(id))
                .copied();
            silent.chain(gone).collect()
        };
        for id in silent {
            let cause = format!("no heartbeat for {:?}", self.server_timeout);
            self.recover(id, cause).await;
        }
    }

    /// Declares server `id` dead and restores its partitions elsewhere, recording what
    /// happened for the status (and, for partitions lost, for every client that asks).
    async fn recover(&self, id: u32, cause: String) {
        let _one_change = self.creating.lock().await;
        let started = Instant::now();
        let (dead, orphans, targets, epoch) = {
            let mut state = self.state.lock();
            let dead = match state.servers.remove(&id) {
                Some(entry) => entry.addr,
                None => match state.awaiting.remove(&id) {
                    Some(awaited) => awaited.addr,
                    None => return, // Recovered meanwhile.
                },
            };
            let orphans = state.orphans(id);
            // A standby takes the dead server's place whole; else the least loaded share.
            let targets = match state.by_load(self.server_timeout) {
                t if t.first().is_some_and(|f| state.servers[f].standby) => t[..1].to_vec(),
                t => t,
            };
            state.epoch += 1;
            (dead, orphans, targets, state.epoch)
        };
        tracing::warn!(id, addr = %dead, %cause, "server declared dead");
        let total: usize = orphans.iter().map(Orphans::len).sum();
        let held: Vec<String> = orphans
            .iter()
            .map(|o| format!("{} of '{}'", o.len(), o.name()))
            .collect();
        let held = held.join(", ");
        let mut errors = Vec::new();
        let mut restored = 0;
        if total > 0 {
            let why_not = match (&self.snapshots.dir, targets.is_empty()) {
                (None, _) => Some(
                    "the master runs without --snapshot-dir, so nothing was saved to restore \
                     them from; start the master with --snapshot-dir URL (a path, s3:// or \
                     hdfs://) to survive the loss of a server"
                        .to_string(),
                ),
                (Some(_), true) => Some("no live server is left to take them".to_string()),
                (Some(_), false) => None,
            };
            match why_not {
                Some(why) => errors.push(why),
                None => {
                    for orphan in orphans {
                        match self.restore(orphan, &targets, epoch).await {
                            Ok(n) => restored += n,
                            Err(e) => errors.push(e.to_string()),
                        }
                    }
                }
            }
        }
        let error = match errors.is_empty() {
            true => String::new(),
            false => format!(
                "server {id} ({}) died and {} of its {total} partitions ({}) are lost: {}",
                dead,
                total - restored,
                held,
                errors.join("; ")
            ),
        };
        let millis = started.elapsed().as_millis() as u64;
        match error.is_empty() {
            true => tracing::info!(id, restored, millis, "server recovered"),
            false => tracing::error!(id, "{error}"),
        }
        let mut state = self.state.lock();
        if !error.is_empty() {
            state.lost.insert(id, error.clone());
        }
        if restored > 0 {
            // A standby that took partitions serves like any other server from now on.
            for t in &targets {
                if let Some(server) = state.servers.get_mut(t) {
                    server.standby = false;
                }
            }
        }
        state.recoveries.push(Recovery {
            server_id: id,
            addr: dead,
            cause,
            at_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            restored: restored as u32,
            millis,
            error,
            ..Recovery::default()
        });
        drop(state);
        self.persist();
    }

    /// Loads one matrix's or counter's orphaned partitions on `targets` (round robin, least
    /// loaded first) and, once every target has them, points the map at them. Returns how
    /// many were restored.
    async fn restore(&self, orphans: Orphans, targets: &[u32], epoch: u64) -> Result<usize> {
        let pids = orphans.pids().to_vec();
        let mut meta = orphans.space().clone();
        let mut by_target: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
        for (i, &pid) in pids.iter().enumerate() {
            let target = targets[i % targets.len()];
            meta.partitions[pid as usize].server_id = target;
            by_target.entry(target).or_default().push(pid);
        }
        let entries: Vec<(ServerEntry, Vec<u32>)> = {
            let state = self.state.lock();
            by_target
                .into_iter()
                .filter_map(|(t, ids)| state.servers.get(&t).map(|e| (e.clone(), ids)))
                .collect()
        };
        let calls = entries.into_iter().map(|(entry, ids)| {
            let (meta, orphans) = (meta.clone(), &orphans);
            async move {
                let mut rpc = entry.rpc.clone();
                let done = match orphans {
                    Orphans::Matrix(..) => rpc
                        .create_partitions(CreatePartitionsRequest {
                            matrix: Some(meta),
                            partition_ids: ids,
                            epoch,
                            restore: true,
                        })
                        .await
                        .map(|r| r.into_inner().restored),
                    Orphans::Counter(counter, _) => rpc
                        .counter_admin(CounterAdminRequest {
                            op: CounterAdminOp::Create as i32,
                            counter: Some(CounterMeta {
                                space: Some(meta),
                                ..counter.clone()
                            }),
                            partition_ids: ids,
                            epoch,
                            restore: true,
                            ..Default::default()
                        })
                        .await
                        .map(|r| r.into_inner().restored),
                };
                done.map_err(|s| PsError::from_status(s, &format!("server {}", entry.addr)))
            }
        });
        let mut versions = BTreeMap::new();
        for done in futures::future::join_all(calls).await {
            versions.extend(done?.into_iter().map(|a| (a.partition_id, a.version)));
        }
        // Only the moved partitions change, and only if the matrix was not dropped meanwhile.
        let mut state = self.state.lock();
        let current = match &orphans {
            Orphans::Matrix(m, _) => state.matrices.get_mut(&m.name),
            Orphans::Counter(c, _) => state
                .counters
                .get_mut(&c.name)
                .and_then(|c| c.space.as_mut()),
        };
        if let Some(current) = current.filter(|c| c.id == meta.id) {
            for &pid in &pids {
                let moved = &mut current.partitions[pid as usize];
                moved.server_id = meta.partitions[pid as usize].server_id;
                moved.restored_version = versions.get(&pid).copied().unwrap_or_default();
            }
        }
        state.epoch = state.epoch.max(epoch);
        Ok(pids.len())
    }
}

impl Orphans {
    fn name(&self) -> &str {
        match self {
            Orphans::Matrix(m, _) => &m.name,
            Orphans::Counter(c, _) => &c.name,
        }
    }

    fn len(&self) -> usize {
        self.pids().len()
    }

    fn pids(&self) -> &[u32] {
        match self {
            Orphans::Matrix(_, pids) | Orphans::Counter(_, pids) => pids,
        }
    }

    /// The matrix whose partitions move: the matrix itself, or the counter's key space.
    fn space(&self) -> &MatrixMeta {
        match self {
            Orphans::Matrix(meta, _) => meta,
            Orphans::Counter(counter, _) => counter.space.as_ref().expect("a key space"),
        }
    }
}

impl super::service::State {
    /// The partitions of every matrix and counter that live on server `id`.
    fn orphans(&self, id: u32) -> Vec<Orphans> {
        let on = |meta: &MatrixMeta| -> Vec<u32> {
            let parts = meta.partitions.iter().filter(|p| p.server_id == id);
            parts.map(|p| p.id).collect()
        };
        let matrices = self.matrices.values().filter_map(|m| {
            let pids = on(m);
            (!pids.is_empty()).then(|| Orphans::Matrix(m.clone(), pids))
        });
        let counters = self.counters.values().filter_map(|c| {
            let pids = on(c.space.as_ref()?);
            (!pids.is_empty()).then(|| Orphans::Counter(c.clone(), pids))
        });
        matrices.chain(counters).collect()
    }

    /// The live servers: standbys first, then those holding the fewest partitions.
    fn by_load(&self, timeout: Duration) -> Vec<u32> {
        let mut load: BTreeMap<u32, usize> = self
            .live_servers(timeout)
            .into_iter()
            .map(|id| (id, 0))
            .collect();
        let spaces = self
            .matrices
            .values()
            .chain(self.counters.values().filter_map(|c| c.space.as_ref()));
        for p in spaces.flat_map(|m| &m.partitions) {
            if let Some(n) = load.get_mut(&p.server_id) {
                *n += 1;
            }
        }
        let mut ids: Vec<u32> = load.keys().copied().collect();
        ids.sort_by_key(|id| (!self.servers[id].standby, load[id], *id));
        ids
    }
}

/// Asks `server` for its statistics within [`PROBE_TIMEOUT`].
async fn probe(server: &ServerEntry) -> std::result::Result<(), String> {
    let mut request = Request::new(StatsRequest::default());
    request.set_timeout(PROBE_TIMEOUT);
    match tokio::time::timeout(PROBE_TIMEOUT, server.rpc.clone().stats(request)).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(status)) => Err(status.message().to_string()),
        Err(_) => Err(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

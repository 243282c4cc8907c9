//! Failure detection and server recovery.
//!
//! A server is declared dead when it has not heartbeat for `--server-timeout-secs` (with a
//! snapshot directory only), or sooner when a client reports it unreachable and the master's
//! own probe fails too: at once when nothing listens at its address, else once the lease of
//! its last heartbeat ran out (it may only be frozen, [`crate::server::lease`]). Its partitions (of matrices and of counter key spaces) go to the live
//! servers with the fewest partitions, which load them from their newest snapshots; the map's
//! epoch advances, and clients refresh and resend what the dead server never answered.
//!
//! A restore that fails on its target (that server died too, or is out of memory) is retried
//! on another live server; with none left, the partitions wait (clients are told to retry)
//! and are restored as soon as a server registers. A partition is lost only when its snapshot
//! cannot be read, or the master runs without a snapshot directory: every client touching it
//! then gets DATA_LOSS saying which and why. A master that doubts its own state
//! ([`super::membership`]) restores nothing.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use angel_proto::{
    CounterAdminOp, CounterAdminRequest, CounterMeta, CreatePartitionsRequest, MatrixMeta,
    PartitionMap, PsError, Recovery, ReplayReport, ReplayTally, Result, StatsRequest, namespace,
};
use tonic::Request;

use super::service::MasterService;
use super::state::ServerEntry;
use crate::access::Access;

/// Most changes one replay report may claim, replayed or lost: far more than a client's
/// replay buffer holds.
const MAX_REPORTED: u64 = 1 << 32;

/// Rounds of restores one recovery tries before leaving the rest to the next heartbeat
/// check.
const MAX_ROUNDS: usize = 16;

/// How long the master's probe of a reported server may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// The partitions of one matrix or counter that lived on the dead server.
#[derive(Clone)]
enum Orphans {
    Matrix(MatrixMeta, Vec<u32>),
    Counter(CounterMeta, Vec<u32>),
}

/// A partition lost for good: its matrix's or counter's name, and why.
type Lost = (String, String);

/// One round of restores: partitions placed, partitions whose snapshot failed, targets that
/// failed.
#[derive(Default)]
struct Restores {
    restored: usize,
    lost: Vec<((u32, u32), Lost)>,
    failed: BTreeSet<u32>,
}

impl MasterService {
    /// A client could not reach `server_id`: probes it, and recovers it when the probe fails
    /// too. Answers the map to route with, UNAVAILABLE while its partitions wait for a live
    /// server, or DATA_LOSS for partitions that are gone.
    pub(super) async fn report_unreachable(
        &self,
        server_id: u32,
        error: &str,
    ) -> Result<PartitionMap> {
        let entry = self.state.lock().servers.get(&server_id).cloned();
        if let Some(entry) = entry {
            let cause = |probe: &str| {
                format!(
                    "a client could not reach it ({error}) and the master's probe failed ({probe})"
                )
            };
            match probe_twice(&entry).await {
                Probe::Answered => {}
                Probe::Gone(why) => self.recover(server_id, cause(&why)).await,
                Probe::Silent(why) => {
                    self.recover_after_lease(server_id, cause(&why), entry.last_seen)
                        .await
                }
            }
        }
        let state = self.state.lock();
        if let Some(why) = state.restoring.get(&server_id) {
            return Err(PsError::Unavailable(why.clone()));
        }
        match state.lost.get(&server_id) {
            Some(why) => Err(PsError::DataLoss(why.clone())),
            None => Ok(state.map()),
        }
    }

    /// Adds what a client replayed to, and lost on, the partitions restored from dead server
    /// `report.server_id` to its latest recovery. A namespace token may report only to a
    /// recovery of a server that held something of its namespaces, and no report may claim
    /// more than a client can hold.
    pub(super) fn report_replay(&self, report: &ReplayReport, access: &Access) -> Result<()> {
        if report.replayed.max(report.lost) > MAX_REPORTED {
            return Err(PsError::InvalidArgument(format!(
                "replay report for server {}: {} replayed and {} lost is more than a client \
                 holds (at most {MAX_REPORTED} each)",
                report.server_id, report.replayed, report.lost
            )));
        }
        let mut state = self.state.lock();
        let Some(recovery) = state
            .recoveries
            .iter_mut()
            .rev()
            .find(|r| r.server_id == report.server_id)
        else {
            return Ok(());
        };
        let ours = |ns: &String| access.check("matrix", &format!("{ns}/")).is_ok();
        if *access != Access::All && !recovery.namespaces.iter().any(ours) {
            return Err(PsError::PermissionDenied(format!(
                "this token's namespaces had nothing on server {}: it may not report replays \
                 to its recovery",
                report.server_id
            )));
        }
        let add = |replayed: &mut u64, lost: &mut u64| {
            *replayed = replayed.saturating_add(report.replayed);
            *lost = lost.saturating_add(report.lost);
        };
        add(&mut recovery.changes_replayed, &mut recovery.changes_lost);
        if let Some(namespace) = (recovery.namespaces.iter()).find(|ns| ours(ns)).cloned()
            && *access != Access::All
        {
            let tallies = &mut recovery.by_namespace;
            let at = match tallies.iter().position(|t| t.namespace == namespace) {
                Some(at) => at,
                None => {
                    tallies.push(ReplayTally {
                        namespace,
                        ..ReplayTally::default()
                    });
                    tallies.len() - 1
                }
            };
            let tally = &mut tallies[at];
            add(&mut tally.replayed, &mut tally.lost);
        }
        drop(state);
        self.persist();
        Ok(())
    }

    /// Recovers every server silent for longer than the timeout, and retries the restores
    /// that found no live server; the master runs it a few times per timeout. Only with a
    /// snapshot directory: without one, declaring a slow server dead could only lose its
    /// partitions, so silence just keeps new partitions off it and a server is declared dead
    /// only when a client cannot reach it and the probe agrees.
    pub async fn check_heartbeats(&self) {
        if self.snapshots.dir.is_none() || self.check_trusted().is_err() {
            return;
        }
        let (silent, waiting): (Vec<u32>, Vec<u32>) = {
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
            let waiting = match live.is_empty() {
                true => Vec::new(),
                false => state.restoring.keys().copied().collect(),
            };
            (silent.chain(gone).collect(), waiting)
        };
        for id in silent {
            let cause = format!("no heartbeat for {:?}", self.server_timeout);
            self.recover(id, cause).await;
        }
        for id in waiting {
            let _one_change = self.creating.lock().await;
            self.relocate(id).await;
        }
    }

    /// Gives every server a fresh grace period: the master did not run for `paused`, so the
    /// servers' silence meanwhile was its own, and the heartbeats they sent are only now
    /// being read. A server that is really gone is declared dead a timeout later.
    pub fn grace_after_pause(&self, paused: Duration) {
        let now = Instant::now();
        let mut state = self.state.lock();
        for server in state.servers.values_mut() {
            server.last_seen = now;
        }
        for awaiting in state.awaiting.values_mut() {
            awaiting.since = now;
        }
        tracing::warn!(
            ?paused,
            "the master did not run for a while (frozen or starved); every server gets a \
             fresh grace period before its silence counts"
        );
    }

    /// Recovers server `id`, which stopped answering but may only be frozen or cut off, once
    /// the lease its last heartbeat (at `last_seen`) gave it has run out
    /// ([`crate::server::lease`]): until then it may still serve its copies. A heartbeat
    /// meanwhile means it is alive, and nothing is done.
    async fn recover_after_lease(&self, id: u32, cause: String, last_seen: Instant) {
        let end = last_seen + self.lease();
        tokio::time::sleep_until(end.into()).await;
        let alive = {
            let state = self.state.lock();
            let server = state.servers.get(&id);
            server.is_some_and(|s| s.last_seen > last_seen)
        };
        if alive {
            tracing::info!(
                id,
                "a server that did not answer heartbeat since; not recovered"
            );
            return;
        }
        self.recover(id, cause).await;
    }

    /// Declares server `id` dead and restores its partitions elsewhere, recording what
    /// happened for the status (and, for partitions lost, for every client that asks).
    pub(super) async fn recover(&self, id: u32, cause: String) {
        if let Err(e) = self.check_trusted() {
            tracing::warn!(id, %cause, "server not recovered: {e}");
            return;
        }
        let _one_change = self.creating.lock().await;
        {
            let mut state = self.state.lock();
            let (addr, nonce) = match state.servers.remove(&id) {
                Some(entry) => (entry.addr, entry.nonce),
                None => match state.awaiting.remove(&id) {
                    Some(awaited) => (awaited.addr, awaited.nonce),
                    None => return, // Recovered meanwhile.
                },
            };
            tracing::warn!(id, %addr, %cause, "server declared dead");
            let held = state.orphans(id, |_| true);
            let namespaces: BTreeSet<String> = held
                .iter()
                .filter_map(|o| namespace::split(o.name()).0.map(str::to_string))
                .collect();
            state
                .restoring
                .insert(id, format!("server {id} ({addr}) died; restoring"));
            state.recoveries.push(Recovery {
                server_id: id,
                addr,
                cause,
                at_unix_ms: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64),
                nonce,
                namespaces: namespaces.into_iter().collect(),
                ..Recovery::default()
            });
        }
        self.persist();
        self.relocate(id).await;
    }

    /// Restores what dead server `id` held and is still routed to it, on live servers, moving
    /// on from targets that fail; records the outcome in its recovery. The caller holds
    /// `creating`.
    async fn relocate(&self, id: u32) {
        let started = Instant::now();
        let mut excluded = BTreeSet::new();
        let mut lost: BTreeMap<(u32, u32), Lost> = BTreeMap::new();
        let mut restored = 0;
        let mut rounds = 0;
        let waiting = loop {
            // Each round places, loses or excludes something; the bound only keeps a call short.
            rounds += 1;
            if rounds > MAX_ROUNDS {
                break Some("restores kept failing; they are tried again shortly");
            }
            let (orphans, targets) = {
                let state = self.state.lock();
                let orphans = state.orphans(id, |key| !lost.contains_key(&key));
                let mut targets = state.by_load(self.server_timeout);
                targets.retain(|t| !excluded.contains(t));
                // A standby takes the dead server's place whole; else the least loaded share.
                if targets.first().is_some_and(|f| state.servers[f].standby) {
                    targets.truncate(1);
                }
                (orphans, targets)
            };
            if orphans.is_empty() {
                break None;
            }
            if self.snapshots.dir.is_none() {
                let why = "the master runs without --snapshot-dir, so nothing was saved to \
                           restore them from; start the master with --snapshot-dir URL (a \
                           path, s3:// or hdfs://) to survive the loss of a server";
                for o in &orphans {
                    lost.extend(
                        o.keys()
                            .map(|k| (k, (o.name().to_string(), why.to_string()))),
                    );
                }
                continue;
            }
            if targets.is_empty() {
                break Some(
                    "no live server is left to take them; they are restored as soon as one \
                     registers",
                );
            }
            let round = self.restore_round(&orphans, &targets).await;
            restored += round.restored;
            lost.extend(round.lost);
            excluded.extend(round.failed);
        };
        self.record(id, restored, &lost, waiting, started.elapsed());
    }

    /// Writes what [`Self::relocate`] did into the state and the dead server's recovery.
    fn record(
        &self,
        id: u32,
        restored: usize,
        lost: &BTreeMap<(u32, u32), Lost>,
        waiting: Option<&str>,
        took: Duration,
    ) {
        let mut state = self.state.lock();
        let (addr, left) = {
            let recovery = state.recoveries.iter().rev().find(|r| r.server_id == id);
            let addr = recovery.map_or_else(String::new, |r| r.addr.clone());
            (addr, state.orphans(id, |_| true))
        };
        let held: Vec<String> = left
            .iter()
            .map(|o| format!("{} of '{}'", o.pids().len(), o.name()))
            .collect();
        let mut errors: Vec<&str> = lost.values().map(|(_, why)| why.as_str()).collect();
        errors.dedup();
        let mut per_name: BTreeMap<&str, usize> = BTreeMap::new();
        for (name, _) in lost.values() {
            *per_name.entry(name).or_default() += 1;
        }
        let which: Vec<String> = per_name
            .iter()
            .map(|(name, n)| format!("{n} of '{name}'"))
            .collect();
        let error = match (lost.is_empty(), waiting) {
            (true, None) => String::new(),
            (false, _) => format!(
                "server {id} ({addr}) died and {} of its partitions are lost ({}): {}",
                lost.len(),
                which.join(", "),
                errors.join("; ")
            ),
            (true, Some(why)) => format!(
                "server {id} ({addr}) died and {} are not restored yet: {why}",
                held.join(", ")
            ),
        };
        match waiting {
            Some(_) => state.restoring.insert(id, error.clone()),
            None => state.restoring.remove(&id),
        };
        if !lost.is_empty() {
            tracing::error!(id, "{error}");
            state.lost.insert(id, error.clone());
        } else if waiting.is_some() {
            tracing::warn!(id, "{error}");
        } else {
            tracing::info!(
                id,
                restored,
                millis = took.as_millis() as u64,
                "server recovered"
            );
        }
        if let Some(recovery) = state
            .recoveries
            .iter_mut()
            .rev()
            .find(|r| r.server_id == id)
        {
            recovery.restored += restored as u32;
            recovery.millis += took.as_millis() as u64;
            recovery.error = error;
        }
        drop(state);
        self.persist();
    }

    /// Restores every orphan partition on `targets` (round robin, least loaded first), one
    /// call per partition, and points the map at those restored.
    async fn restore_round(&self, orphans: &[Orphans], targets: &[u32]) -> Restores {
        let epoch = self.next_epoch();
        let entries: BTreeMap<u32, ServerEntry> = {
            let state = self.state.lock();
            let known = targets
                .iter()
                .filter_map(|t| Some((*t, state.servers.get(t)?.clone())));
            known.collect()
        };
        let mut calls = Vec::new();
        let mut i = 0;
        for orphan in orphans {
            for &pid in orphan.pids() {
                let target = targets[i % targets.len()];
                i += 1;
                if let Some(entry) = entries.get(&target) {
                    calls.push(self.restore_one(orphan, pid, target, entry.clone(), epoch));
                }
            }
        }
        let mut round = Restores::default();
        let mut placed = Vec::new();
        for (orphan, pid, target, result) in futures::future::join_all(calls).await {
            match result {
                Ok(version) => placed.push((orphan, pid, target, version)),
                Err(PsError::DataLoss(why)) => {
                    let name = orphan.name().to_string();
                    round.lost.push(((orphan.space().id, pid), (name, why)));
                }
                Err(e) => {
                    tracing::warn!(
                        target,
                        "restoring on server {target} failed ({e}); trying another"
                    );
                    round.failed.insert(target);
                }
            }
        }
        round.restored = placed.len();
        self.place(placed);
        round
    }

    /// Loads partition `pid` of `orphan` from its snapshot on `target`; its restored version.
    async fn restore_one<'a>(
        &self,
        orphan: &'a Orphans,
        pid: u32,
        target: u32,
        entry: ServerEntry,
        epoch: u64,
    ) -> (&'a Orphans, u32, u32, Result<u64>) {
        let mut meta = orphan.space().clone();
        meta.partitions[pid as usize].server_id = target;
        let mut rpc = entry.rpc.clone();
        let done = match orphan {
            Orphans::Matrix(..) => rpc
                .create_partitions(CreatePartitionsRequest {
                    matrix: Some(meta),
                    partition_ids: vec![pid],
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
                    partition_ids: vec![pid],
                    epoch,
                    restore: true,
                    ..Default::default()
                })
                .await
                .map(|r| r.into_inner().restored),
        };
        let version = done
            .map_err(|s| PsError::from_status(s, &format!("server {}", entry.addr)))
            .map(|acks| acks.first().map_or(0, |a| a.version));
        (orphan, pid, target, version)
    }

    /// Points the map at restored partitions, unless their matrix was dropped meanwhile.
    fn place(&self, placed: Vec<(&Orphans, u32, u32, u64)>) {
        let mut state = self.state.lock();
        for (orphan, pid, target, version) in placed {
            let current = match orphan {
                Orphans::Matrix(m, _) => state.matrices.get_mut(&m.name),
                Orphans::Counter(c, _) => state
                    .counters
                    .get_mut(&c.name)
                    .and_then(|c| c.space.as_mut()),
            };
            if let Some(current) = current.filter(|c| c.id == orphan.space().id) {
                let moved = &mut current.partitions[pid as usize];
                moved.server_id = target;
                moved.restored_version = version;
            }
            // A standby that took partitions serves like any other server from now on.
            if let Some(server) = state.servers.get_mut(&target) {
                server.standby = false;
            }
        }
        state.epoch += 1;
    }
}

impl Orphans {
    fn name(&self) -> &str {
        match self {
            Orphans::Matrix(m, _) => &m.name,
            Orphans::Counter(c, _) => &c.name,
        }
    }

    /// (matrix or key-space id, partition id) of each orphan partition.
    fn keys(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        let id = self.space().id;
        self.pids().iter().map(move |&pid| (id, pid))
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

impl super::state::State {
    /// The partitions of every matrix and counter routed to server `id` that `wanted` keeps
    /// (by matrix or key-space id and partition id).
    fn orphans(&self, id: u32, wanted: impl Fn((u32, u32)) -> bool) -> Vec<Orphans> {
        let on = |meta: &MatrixMeta| -> Vec<u32> {
            let parts = meta.partitions.iter();
            let parts = parts.filter(|p| p.server_id == id && wanted((meta.id, p.id)));
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

/// What the master's probe of a reported server found.
enum Probe {
    Answered,
    /// Nothing listens at its address any more: the process is gone.
    Gone(String),
    /// No answer, or an error: it may be frozen or cut off, and may wake up.
    Silent(String),
}

/// [`probe`], and once more after a moment when it finds the server silent: a server killed
/// a moment ago can fail a connection in other ways than a refusal while its sockets close
/// (seen here: 1 kill in 3 waited out the server's whole lease for it), and the second probe
/// finds nothing listening.
async fn probe_twice(server: &ServerEntry) -> Probe {
    match probe(server).await {
        Probe::Silent(_) => {
            tokio::time::sleep(PROBE_TIMEOUT / 5).await;
            probe(server).await
        }
        found => found,
    }
}

/// Asks `server` for its statistics within [`PROBE_TIMEOUT`].
async fn probe(server: &ServerEntry) -> Probe {
    let mut request = Request::new(StatsRequest::default());
    request.set_timeout(PROBE_TIMEOUT);
    match tokio::time::timeout(PROBE_TIMEOUT, server.rpc.clone().stats(request)).await {
        Ok(Ok(_)) => Probe::Answered,
        Ok(Err(status)) if refused(&status) => Probe::Gone(status.message().to_string()),
        Ok(Err(status)) => Probe::Silent(status.message().to_string()),
        Err(_) => Probe::Silent(format!("no answer within {PROBE_TIMEOUT:?}")),
    }
}

/// Whether a call failed because its connection was refused (nothing listens there).
fn refused(status: &tonic::Status) -> bool {
    let mut source = std::error::Error::source(status);
    let mut text = status.message().to_string();
    while let Some(e) = source {
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        text.push_str(&e.to_string());
        source = e.source();
    }
    text.contains("onnection refused")
}

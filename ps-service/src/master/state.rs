//! [`State`]: what the master knows (servers, matrices, counters, the epoch of the partition
//! map), behind the handlers of [`super::service`] and read by the quotas, membership,
//! recovery and the state file.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use angel_proto::server_client::ServerClient;
use angel_proto::{
    CounterMeta, MatrixMeta, OptimizerInfo, PartitionMap, PsError, Recovery, Result, ServerInfo,
};
use tonic::codegen::InterceptedService;
use tonic::transport::Channel;

use super::optimizers;
use crate::admin::AdminToken;

/// The master's client of one server: every call carries the server's admin token.
pub(super) type ServerRpc = ServerClient<InterceptedService<Channel, AdminToken>>;

/// A registered server: where it listens, when it was last heard, the client to reach it.
#[derive(Debug, Clone)]
pub(super) struct ServerEntry {
    pub(super) addr: String,
    pub(super) last_seen: Instant,
    pub(super) rpc: ServerRpc,
    /// The optimizers it runs, as it reported them.
    pub(super) optimizers: Vec<OptimizerInfo>,
    /// Held in reserve for a dead server's partitions, until it takes some.
    pub(super) standby: bool,
    /// Its process's nonce ([`angel_proto::Incarnation`]).
    pub(super) nonce: u64,
}

/// Partition ids of one matrix or counter, grouped by the server that hosts them.
pub(super) type Placement = BTreeMap<u32, (ServerEntry, Vec<u32>)>;

/// What the master knows: the servers, matrices and counters, the partition map's epoch,
/// and what it learnt of dead servers and its own saved state.
#[derive(Debug, Default)]
pub(super) struct State {
    pub(super) epoch: u64,
    /// Which service this state is ([`PartitionMap::service`]).
    pub(super) service: u64,
    pub(super) next_server: u32,
    pub(super) next_matrix: u32,
    pub(super) servers: BTreeMap<u32, ServerEntry>,
    pub(super) matrices: BTreeMap<String, MatrixMeta>,
    pub(super) counters: BTreeMap<String, CounterMeta>,
    /// Dead servers whose partitions could not all be restored, and why.
    pub(super) lost: BTreeMap<u32, String>,
    /// Dead servers some of whose partitions wait for a live server to be restored on, and
    /// why.
    pub(super) restoring: BTreeMap<u32, String>,
    /// Every server declared dead, oldest first.
    pub(super) recoveries: Vec<Recovery>,
    /// Servers a restarted master knew, until they register again (or are declared dead
    /// `server_timeout` after the restart): their partitions stay routed to them.
    pub(super) awaiting: BTreeMap<u32, Awaiting>,
    /// The epoch of the saved state this master resumed; None when it started without one.
    pub(super) saved_epoch: Option<u64>,
    /// Why the master refuses changes: a server holds data its state does not know
    /// ([`super::membership`]).
    pub(super) doubt: Option<String>,
    /// Why the state is known to trail the service (a server saw a newer map), saved with it:
    /// a master resumed from it doubts at once, so restarting on the same stale state never
    /// clears the refusal and restores old snapshots over newer data.
    pub(super) stale: Option<String>,
    /// Why the last save of this state failed; None once one succeeds.
    pub(super) state_error: Option<String>,
}

/// A server known from the master's saved state that has not registered again yet.
#[derive(Debug, Clone)]
pub(super) struct Awaiting {
    pub(super) addr: String,
    pub(super) optimizers: Vec<OptimizerInfo>,
    pub(super) standby: bool,
    pub(super) since: Instant,
    /// The process's nonce; 0 in a state saved before nonces.
    pub(super) nonce: u64,
}

impl State {
    /// Every registered server, with no partition ids: where a dropped matrix or counter is
    /// freed, whichever servers hold its partitions now.
    pub(super) fn every_server(&self) -> Placement {
        let servers = self.servers.iter();
        servers
            .map(|(&id, s)| (id, (s.clone(), Vec::new())))
            .collect()
    }

    pub(super) fn map(&self) -> PartitionMap {
        let registered = self.servers.iter().map(|(&id, s)| (id, &s.addr));
        let awaiting = self.awaiting.iter().map(|(&id, a)| (id, &a.addr));
        PartitionMap {
            epoch: self.epoch,
            service: self.service,
            servers: registered
                .chain(awaiting)
                .map(|(id, addr)| ServerInfo {
                    id,
                    addr: addr.clone(),
                })
                .collect(),
            matrices: self.matrices.values().cloned().collect(),
            counters: self.counters.values().cloned().collect(),
            optimizers: self.optimizers(),
        }
    }

    /// The optimizers every registered server runs.
    pub(super) fn optimizers(&self) -> Vec<OptimizerInfo> {
        optimizers::common(self.servers.values().map(|s| &s.optimizers[..]))
    }

    /// Where each partition of `meta` lives; DATA_LOSS when some died with their server.
    pub(super) fn placement(&self, meta: &MatrixMeta) -> Result<Placement> {
        let mut servers = Placement::new();
        for p in &meta.partitions {
            let Some(entry) = self.servers.get(&p.server_id) else {
                if let Some(why) = self.restoring.get(&p.server_id) {
                    return Err(PsError::Unavailable(why.clone()));
                }
                if self.awaiting.contains_key(&p.server_id) {
                    return Err(PsError::Unavailable(format!(
                        "server {} has not registered again with the restarted master yet",
                        p.server_id
                    )));
                }
                let why = self.lost.get(&p.server_id).cloned();
                return Err(PsError::DataLoss(why.unwrap_or_else(|| {
                    format!("partition {} of '{}' has no live server", p.id, meta.name)
                })));
            };
            servers
                .entry(p.server_id)
                .or_insert_with(|| (entry.clone(), Vec::new()))
                .1
                .push(p.id);
        }
        Ok(servers)
    }

    /// The servers that heartbeat within `timeout`: the only ones given new partitions, so a
    /// server that went silent cannot fail every later creation before it is declared dead.
    pub(super) fn live_servers(&self, timeout: Duration) -> Vec<u32> {
        self.servers
            .iter()
            .filter(|(_, s)| s.last_seen.elapsed() <= timeout)
            .map(|(&id, _)| id)
            .collect()
    }

    /// Matrix `name`; NOT_FOUND lists the names of its namespace only (the caller was
    /// allowed that one; other namespaces are none of its business).
    pub(super) fn matrix(&self, name: &str) -> Result<&MatrixMeta> {
        self.matrices.get(name).ok_or_else(|| {
            let namespace = angel_proto::namespace::split(name).0;
            let known = self.matrices.keys().map(String::as_str);
            let known: Vec<&str> = known
                .filter(|n| angel_proto::namespace::split(n).0 == namespace)
                .collect();
            PsError::no_matrix(name, &known)
        })
    }
}

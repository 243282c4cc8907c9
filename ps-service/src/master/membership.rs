//! Who the servers are: registration, heartbeats, and the master's doubt about its own state.
//!
//! A server is one process: an id the master gave it and a nonce the process drew at start
//! ([`Incarnation`]). The master answers a heartbeat by what it knows of that pair:
//! - registered: the reply carries the map's epoch;
//! - awaited (a restarted master's saved state names it): "rejoin", and the server registers
//!   again keeping its partitions;
//! - declared dead (a recovery names it): NOT_FOUND, and the server drops its partitions, which
//!   were restored elsewhere, and registers as a new server;
//! - unknown: a server holding nothing registers as new; one holding partitions keeps them, and
//!   the master falls into **doubt** (below).
//!
//! No server discards data on a master's word alone: a master that started without its saved
//! state, or with an older one (servers report the newest map epoch they saw, which a state
//! saved after every change never trails), does not know what its servers hold. Then it refuses
//! every change (creations, drops, seals, recoveries) until an operator restarts it with its
//! state, or with `--start-empty`, which has the servers drop what they hold.
//!
//! A server registering at the address of a registered or awaited one with another nonce
//! means the earlier process is gone (one address, one listener): it is declared dead at once.

use std::time::Instant;

use angel_proto::limits::WINDOW;
use angel_proto::server_client::ServerClient;
use angel_proto::tls;
use angel_proto::{
    HeartbeatReply, HeartbeatRequest, Incarnation, OptimizerInfo, PsError, RegisterServerReply,
    RegisterServerRequest, Result, StatsRequest,
};
use std::time::Duration;

use super::optimizers;
use super::service::{MAX_ADDR, MAX_NAME, MasterService, SERVER_CALL_TIMEOUT};
use super::state::{ServerEntry, ServerRpc, State};
use crate::admin::AdminToken;

/// How long a registering server has to answer the master's call back to its address.
const REGISTER_PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Most optimizers a server may report.
const MAX_OPTIMIZERS: usize = 256;

/// What the master knows of a server process (an id and a nonce).
enum Standing {
    Registered,
    /// Named by the saved state the master resumed from.
    Awaited,
    /// Declared dead; its partitions were restored elsewhere.
    Dead,
    Unknown,
}

impl State {
    fn standing(&self, id: u32, nonce: u64) -> Standing {
        // Nonce 0: a state saved before nonces existed.
        let same = |known: u64| known == nonce || known == 0;
        if self.servers.get(&id).is_some_and(|s| s.nonce == nonce) {
            Standing::Registered
        } else if self.awaiting.get(&id).is_some_and(|a| same(a.nonce)) {
            Standing::Awaited
        } else if self
            .recoveries
            .iter()
            .any(|r| r.server_id == id && same(r.nonce))
        {
            Standing::Dead
        } else {
            Standing::Unknown
        }
    }

    /// Records the first reason to doubt the state; the master refuses changes from then on.
    fn doubt(&mut self, why: String) {
        if self.doubt.is_none() {
            tracing::error!("the master refuses changes: {why}");
            self.doubt = Some(why);
        }
    }

    /// What a server the master does not know, holding `seen.held` partitions, tells about
    /// the master's state.
    fn stranger(&self, id: u32, seen: &Incarnation) -> String {
        let started = match self.saved_epoch {
            None => "started without a saved state".to_string(),
            Some(epoch) => format!("resumed a saved state of map epoch {epoch}"),
        };
        format!(
            "server {id} at {} holds {} partitions this master does not know (it has seen map \
             epoch {}; this master {started})",
            seen.addr, seen.held, seen.seen_epoch
        )
    }
}

impl MasterService {
    /// How long a server may serve after a heartbeat the master answered
    /// ([`crate::server::lease`]): half the time after which a silent server is declared dead.
    pub(super) fn lease(&self) -> Duration {
        self.server_timeout / 2
    }

    /// FAILED_PRECONDITION while the master doubts its state, naming why and the way out.
    pub(super) fn check_trusted(&self) -> Result<()> {
        match &self.state.lock().doubt {
            None => Ok(()),
            Some(why) => Err(PsError::WrongState(format!(
                "the master refuses changes to protect data its servers hold: {why}. Restart \
                 the master with a --snapshot-dir holding its newest state (the same stale \
                 state keeps this refusal), or with --start-empty to have the servers drop \
                 what they hold"
            ))),
        }
    }

    /// Answers a server's heartbeat by what the master knows of it (module documentation).
    pub(super) fn heartbeat(&self, request: HeartbeatRequest) -> Result<HeartbeatReply> {
        let id = request.server_id;
        let seen = request.incarnation.unwrap_or_default();
        let mut state = self.state.lock();
        let reply = |state: &State| HeartbeatReply {
            epoch: state.epoch,
            ..HeartbeatReply::default()
        };
        match state.standing(id, seen.nonce) {
            Standing::Registered => {
                if let Some(server) = state.servers.get_mut(&id) {
                    server.last_seen = Instant::now();
                }
                Ok(reply(&state))
            }
            Standing::Awaited => {
                let stale = self.check_not_newer(&mut state, id, &seen);
                let answer = HeartbeatReply {
                    rejoin: true,
                    ..reply(&state)
                };
                drop(state);
                if stale {
                    self.persist();
                }
                Ok(answer)
            }
            Standing::Dead => Err(PsError::NotFound(format!(
                "server {id} was declared dead and its partitions restored elsewhere"
            ))),
            Standing::Unknown if seen.held == 0 || self.start_empty => Err(PsError::NotFound(
                format!("server {id} is not registered with this master"),
            )),
            Standing::Unknown => {
                let why = state.stranger(id, &seen);
                state.doubt(why.clone());
                Ok(HeartbeatReply {
                    unknown: why,
                    ..reply(&state)
                })
            }
        }
    }

    /// Doubts the state when an awaited server has seen a newer map than the saved state's,
    /// and marks it stale; true when it newly did, and the state is to be saved with the mark
    /// (once the lock is released).
    fn check_not_newer(&self, state: &mut State, id: u32, seen: &Incarnation) -> bool {
        let Some(saved) = state.saved_epoch else {
            return false;
        };
        if seen.seen_epoch > saved && state.stale.is_none() {
            let why = format!(
                "server {id} at {} has seen map epoch {}, newer than the saved state this \
                 master resumed (epoch {saved}): the state is older than the service (rolled \
                 back, or not saved since); routing by it would restore old snapshots over \
                 newer data",
                seen.addr, seen.seen_epoch
            );
            state.doubt(why.clone());
            state.stale = Some(why);
            return true;
        }
        false
    }

    /// Registers a server after checking what it sent (bounded sizes, its optimizers agree
    /// with the other servers') and that its address answers the master: a server no one can
    /// reach would fail every later matrix creation. A server that was at the same address
    /// before is declared dead (module documentation).
    pub(super) async fn register(
        &self,
        request: RegisterServerRequest,
    ) -> Result<RegisterServerReply> {
        let seen = request.incarnation.clone().unwrap_or_default();
        if request.rejoin {
            self.check_rejoin(&request, &seen)?;
        }
        check_registration(&request.addr, &request.optimizers)?;
        let rpc = self.probe_back(&request).await?;
        let (reply, replaced) = self.admit(request, rpc, &seen)?;
        self.persist();
        for old in replaced {
            let cause = "a new server process registered at its address".to_string();
            self.recover(old, cause).await;
        }
        Ok(reply)
    }

    /// Enters a checked server into the state; its reply, and the servers it replaces (at its
    /// address, of other processes).
    fn admit(
        &self,
        request: RegisterServerRequest,
        rpc: ServerRpc,
        seen: &Incarnation,
    ) -> Result<(RegisterServerReply, Vec<u32>)> {
        let (nonce, seen_epoch) = (seen.nonce, seen.seen_epoch);
        let RegisterServerRequest {
            addr,
            optimizers,
            rejoin,
            previous_id,
            standby,
            ..
        } = request;
        let mut state = self.state.lock();
        let registered = state.servers.values();
        optimizers::check_joining(
            &addr,
            &optimizers,
            registered.map(|s| (s.addr.as_str(), &s.optimizers[..])),
        )?;
        let (id, standby) = match rejoin {
            true => {
                let awaited = state.awaiting.remove(&previous_id).map(|a| a.standby);
                let registered = state.servers.get(&previous_id).map(|s| s.standby);
                (previous_id, awaited.or(registered).unwrap_or_default())
            }
            false => {
                state.next_server += 1;
                (state.next_server - 1, standby)
            }
        };
        let replaced = state.at_address(&addr, nonce);
        // Past any epoch the server saw: a master started empty never hands out a map that
        // clients holding a newer one would ignore.
        state.epoch = state.epoch.max(seen_epoch) + 1;
        state.servers.insert(
            id,
            ServerEntry {
                addr: addr.clone(),
                last_seen: Instant::now(),
                rpc,
                optimizers,
                standby,
                nonce,
            },
        );
        tracing::info!(id, %addr, rejoin, "server registered");
        let reply = RegisterServerReply {
            server_id: id,
            epoch: state.epoch,
            snapshot_dir: self.snapshot_url(),
            snapshot_interval_ms: self.snapshots.interval.as_millis() as u64,
            lease_ms: self.lease().as_millis() as u64,
            namespace_memory_share: self.quotas.memory_share,
        };
        Ok((reply, replaced))
    }

    /// A rejoin is for the awaited process only; NOT_FOUND tells a server declared dead to
    /// register as new, FAILED_PRECONDITION tells a stranger to keep its data.
    fn check_rejoin(&self, request: &RegisterServerRequest, seen: &Incarnation) -> Result<()> {
        let id = request.previous_id;
        let mut state = self.state.lock();
        let awaited_here = state
            .awaiting
            .get(&id)
            .is_some_and(|a| a.addr == request.addr);
        match state.standing(id, seen.nonce) {
            // Registered already: a retried rejoin whose first answer was lost.
            Standing::Registered => Ok(()),
            Standing::Awaited if awaited_here => {
                if self.check_not_newer(&mut state, id, seen) {
                    drop(state);
                    self.persist();
                }
                Ok(())
            }
            Standing::Unknown if seen.held > 0 && !self.start_empty => {
                let why = state.stranger(id, seen);
                state.doubt(why.clone());
                Err(PsError::WrongState(why))
            }
            _ => Err(PsError::NotFound(format!(
                "server {id} at {} is not awaited by this master (declared dead meanwhile?); \
                 register as a new server",
                request.addr
            ))),
        }
    }

    /// A client of the registering server, after checking that its address answers.
    async fn probe_back(&self, request: &RegisterServerRequest) -> Result<ServerRpc> {
        let addr = &request.addr;
        let endpoint = tls::endpoint(addr, self.trust.as_ref())?
            .timeout(SERVER_CALL_TIMEOUT)
            .connect_timeout(REGISTER_PROBE_TIMEOUT)
            .initial_stream_window_size(Some(WINDOW))
            .initial_connection_window_size(Some(WINDOW));
        let mut rpc = ServerClient::with_interceptor(
            endpoint.connect_lazy(),
            AdminToken::new(&request.admin_token, self.credential.clone())?,
        )
        .max_decoding_message_size(usize::MAX)
        .max_encoding_message_size(usize::MAX);
        let probe =
            tokio::time::timeout(REGISTER_PROBE_TIMEOUT, rpc.stats(StatsRequest::default())).await;
        if let Err(why) = probe.map_err(|_| "no answer".to_string()).and_then(|r| {
            r.map(drop)
                .map_err(|s| PsError::from_status(s, addr).to_string())
        }) {
            return Err(PsError::Unavailable(format!(
                "the registering server at '{addr}' did not answer the master's call back \
                 within {REGISTER_PROBE_TIMEOUT:?} ({why}); give the server an address the \
                 master can reach with --advertise"
            )));
        }
        Ok(rpc)
    }
}

impl State {
    /// Registered or awaited servers at `addr` of another process than `nonce`: gone, since
    /// the new process listens there now.
    fn at_address(&self, addr: &str, nonce: u64) -> Vec<u32> {
        let registered = self
            .servers
            .iter()
            .filter(|(_, s)| s.addr == addr && s.nonce != nonce)
            .map(|(&id, _)| id);
        let awaited = self
            .awaiting
            .iter()
            .filter(|(_, a)| a.addr == addr && a.nonce != nonce)
            .map(|(&id, _)| id);
        registered.chain(awaited).collect()
    }
}

/// Bounds what a registering server sends, which every partition map then carries.
fn check_registration(addr: &str, optimizers: &[OptimizerInfo]) -> Result<()> {
    if addr.is_empty() || addr.len() > MAX_ADDR {
        return Err(PsError::InvalidArgument(format!(
            "a server address must have 1 to {MAX_ADDR} bytes, got {}",
            addr.len()
        )));
    }
    if optimizers.len() > MAX_OPTIMIZERS || optimizers.iter().any(|o| o.name.len() > MAX_NAME) {
        return Err(PsError::InvalidArgument(format!(
            "server '{addr}' reports {} optimizers; at most {MAX_OPTIMIZERS} are accepted, \
             with names of at most {MAX_NAME} bytes",
            optimizers.len()
        )));
    }
    Ok(())
}

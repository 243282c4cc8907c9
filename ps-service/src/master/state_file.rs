//! The master's own durability: its state (servers, matrices and their partition map,
//! counters, the map's epoch, recoveries, rotation rounds, jobs' progress) is written to
//! `<snapshot dir>/master/` after every change, and a master started with a directory
//! holding one resumes from it.
//!
//! A restarted master does not know its servers' credentials, so it waits for them: their
//! partitions stay routed to them (clients keep pulling and pushing), their heartbeats are
//! answered "rejoin", and each registers again under its old id, keeping its partitions. One
//! that has not come back `--server-timeout-secs` after the restart is declared dead and its
//! partitions restored from their snapshots.
//!
//! Every epoch a server sees is saved first ([`MasterService::next_epoch`]), so a saved state
//! never trails what its servers saw unless it is stale: that is how a restarted master tells
//! (see [`super::membership`]). A save that fails is shown in the status until one succeeds.

use std::sync::atomic::Ordering;
use std::time::Instant;

use angel_proto::{MasterSnapshot, PsError, Result, ServerRecord};

use super::service::MasterService;
use super::state::{Awaiting, State};

impl MasterService {
    /// Writes the state to the snapshot directory, if there is one. A failure is logged and
    /// shown in the status, not returned: the change it records already happened on the
    /// servers, and a restart from the older state is refused (module documentation).
    pub(super) fn persist(&self) {
        let _shown = self.persist_or_fail();
    }

    /// Writes the state as [`Self::persist`] does, and returns the failure too: for an
    /// answer that must not be given unless the state holds it (model rotation's, jobs').
    pub(super) fn persist_or_fail(&self) -> Result<()> {
        self.try_persist().inspect_err(|e| {
            tracing::error!("cannot save the master's state: {e}");
            self.state.lock().state_error = Some(format!(
                "{e} (a master restarted now would find its state older than its servers' data \
                 and refuse changes)"
            ));
        })
    }

    /// Writes the state once it holds the caller's change. Group commit: callers that queue
    /// while a write runs are all covered by the next write, which takes the state after
    /// every one of their changes, so concurrent changes (the workers of a rotation round)
    /// share writes.
    fn try_persist(&self) -> Result<()> {
        let Some(dir) = &self.snapshots.dir else {
            return Ok(());
        };
        let change = self.state_changes.fetch_add(1, Ordering::AcqRel) + 1;
        let mut written = self.persisting.lock();
        if *written >= change {
            return Ok(());
        }
        let covered = self.state_changes.load(Ordering::Acquire);
        let mut snapshot = self.state.lock().to_snapshot();
        snapshot.rotations = self.rotations.records();
        snapshot.jobs = self.jobs.records();
        // A dropped model's schedule has nothing to resume.
        (snapshot.rotations).retain(|r| snapshot.matrices.iter().any(|m| m.name == r.model));
        dir.write_master(&snapshot)?;
        *written = covered;
        self.state.lock().state_error = None;
        Ok(())
    }

    /// Moves the map's epoch on and saves it, before any server sees it.
    pub(super) fn next_epoch(&self) -> u64 {
        let epoch = {
            let mut state = self.state.lock();
            state.epoch += 1;
            state.epoch
        };
        self.persist();
        epoch
    }

    /// Resumes from the state saved in the snapshot directory, if any (none with
    /// `--start-empty`), and saves it at once under its new epoch; a corrupt state is
    /// DATA_LOSS naming its file, a state that cannot be saved stops the start. Blocking.
    pub fn resume(&self) -> Result<bool> {
        let Some(dir) = &self.snapshots.dir else {
            return Ok(false);
        };
        let saved = match self.start_empty {
            true => None,
            false => dir.read_master()?,
        };
        let resumed = saved.is_some();
        if let Some(mut saved) = saved {
            self.jobs.resume(std::mem::take(&mut saved.jobs));
            let rotations = std::mem::take(&mut saved.rotations);
            self.rotations.resume(rotations).map_err(|e| {
                PsError::DataLoss(format!("the master's state in {}: {e}", dir.url()))
            })?;
            let mut state = self.state.lock();
            *state = State::from_snapshot(saved);
            tracing::info!(
                epoch = state.epoch,
                matrices = state.matrices.len(),
                counters = state.counters.len(),
                servers = state.awaiting.len(),
                "master resumed from its saved state; waiting for its servers to register again"
            );
        }
        self.try_persist().map_err(|e| {
            PsError::Unavailable(format!(
                "the master cannot save its state in {}: {e}",
                dir.url()
            ))
        })?;
        Ok(resumed)
    }
}

impl State {
    fn to_snapshot(&self) -> MasterSnapshot {
        let registered = self
            .servers
            .iter()
            .map(|(&id, s)| (id, &s.addr, &s.optimizers, s.standby, s.nonce));
        let awaiting = self
            .awaiting
            .iter()
            .map(|(&id, a)| (id, &a.addr, &a.optimizers, a.standby, a.nonce));
        MasterSnapshot {
            epoch: self.epoch,
            service: self.service,
            next_server: self.next_server,
            next_matrix: self.next_matrix,
            servers: registered
                .chain(awaiting)
                .map(|(id, addr, optimizers, standby, nonce)| ServerRecord {
                    id,
                    addr: addr.clone(),
                    optimizers: optimizers.clone(),
                    standby,
                    nonce,
                })
                .collect(),
            matrices: self.matrices.values().cloned().collect(),
            counters: self.counters.values().cloned().collect(),
            recoveries: self.recoveries.clone(),
            lost: self.lost.clone().into_iter().collect(),
            restoring: self.restoring.clone().into_iter().collect(),
            stale: self.stale.clone().unwrap_or_default(),
            // Kept beside the state, not in it: the writer adds them.
            rotations: Vec::new(),
            jobs: Vec::new(),
        }
    }

    /// The saved state, every server awaited from now; the epoch moves on so every client
    /// and server sees the restart as a change of map.
    fn from_snapshot(saved: MasterSnapshot) -> Self {
        let since = Instant::now();
        let stale = (!saved.stale.is_empty()).then_some(saved.stale);
        State {
            epoch: saved.epoch + 1,
            service: saved.service,
            saved_epoch: Some(saved.epoch),
            doubt: stale.as_ref().map(|why| {
                format!(
                    "{why} (found by an earlier run of this master, on the state it resumes \
                     again)"
                )
            }),
            stale,
            state_error: None,
            next_server: saved.next_server,
            next_matrix: saved.next_matrix,
            servers: Default::default(),
            matrices: saved
                .matrices
                .into_iter()
                .map(|m| (m.name.clone(), m))
                .collect(),
            counters: saved
                .counters
                .into_iter()
                .map(|c| (c.name.clone(), c))
                .collect(),
            lost: saved.lost.into_iter().collect(),
            restoring: saved.restoring.into_iter().collect(),
            recoveries: saved.recoveries,
            awaiting: saved
                .servers
                .into_iter()
                .map(|s| {
                    let awaited = Awaiting {
                        addr: s.addr,
                        optimizers: s.optimizers,
                        standby: s.standby,
                        since,
                        nonce: s.nonce,
                    };
                    (s.id, awaited)
                })
                .collect(),
        }
    }
}

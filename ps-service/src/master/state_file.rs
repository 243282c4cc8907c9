//! The master's own durability: its state (servers, matrices and their partition map,
//! counters, the map's epoch, recoveries) is written to `<snapshot dir>/master/` after every
//! change, and a master started with a directory holding one resumes from it.
//!
//! A restarted master does not know its servers' credentials, so it waits for them: their
//! partitions stay routed to them (clients keep pulling and pushing), their heartbeats are
//! answered "rejoin", and each registers again under its old id, keeping its partitions. One
//! that has not come back `--server-timeout-secs` after the restart is declared dead and its
//! partitions restored from their snapshots.

use std::time::Instant;

use angel_proto::{MasterSnapshot, Result, ServerRecord};

use super::service::{Awaiting, MasterService, State};

impl MasterService {
    /// Writes the state to the snapshot directory, if there is one. A failure is logged, not
    /// returned: the change it records already happened on the servers.
    pub(super) fn persist(&self) {
        let Some(dir) = &self.snapshots.dir else {
            return;
        };
        let _one_writer = self.persisting.lock();
        let snapshot = self.state.lock().to_snapshot();
        if let Err(e) = dir.write_master(&snapshot) {
            tracing::error!("cannot save the master's state (a restart would lose it): {e}");
        }
    }

    /// Resumes from the state saved in the snapshot directory, if any; a corrupt state is
    /// DATA_LOSS naming its file. Blocking.
    pub fn resume(&self) -> Result<bool> {
        let Some(dir) = &self.snapshots.dir else {
            return Ok(false);
        };
        let Some(saved) = dir.read_master()? else {
            return Ok(false);
        };
        let mut state = self.state.lock();
        *state = State::from_snapshot(saved);
        tracing::info!(
            epoch = state.epoch,
            matrices = state.matrices.len(),
            counters = state.counters.len(),
            servers = state.awaiting.len(),
            "master resumed from its saved state; waiting for its servers to register again"
        );
        Ok(true)
    }
}

impl State {
    fn to_snapshot(&self) -> MasterSnapshot {
        let registered = self
            .servers
            .iter()
            .map(|(&id, s)| (id, &s.addr, &s.optimizers, s.standby));
        let awaiting = self
            .awaiting
            .iter()
            .map(|(&id, a)| (id, &a.addr, &a.optimizers, a.standby));
        MasterSnapshot {
            epoch: self.epoch,
            next_server: self.next_server,
            next_matrix: self.next_matrix,
            servers: registered
                .chain(awaiting)
                .map(|(id, addr, optimizers, standby)| ServerRecord {
                    id,
                    addr: addr.clone(),
                    optimizers: optimizers.clone(),
                    standby,
                })
                .collect(),
            matrices: self.matrices.values().cloned().collect(),
            counters: self.counters.values().cloned().collect(),
            recoveries: self.recoveries.clone(),
            lost: self.lost.clone().into_iter().collect(),
        }
    }

    /// The saved state, every server awaited from now; the epoch moves on so every client
    /// and server sees the restart as a change of map.
    fn from_snapshot(saved: MasterSnapshot) -> Self {
        let since = Instant::now();
        State {
            epoch: saved.epoch + 1,
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
                    };
                    (s.id, awaited)
                })
                .collect(),
        }
    }
}

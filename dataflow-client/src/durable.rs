//! Snapshots a client asks for: `angel-ps snapshot`, a job's end ([`PsClient::make_durable`]),
//! and room in the replay buffer ([`PsClient::relieve`]), whose changes a snapshot makes
//! needless to keep.

use std::time::{Duration, Instant};

use angel_proto::{Result, SnapshotReply, SnapshotRequest};

use crate::client::PsClient;

/// After a failed snapshot for room, how long a client goes on without asking again (its
/// buffer may then grow to twice its size before it drops changes).
const RETRY_AFTER_FAILURE: Duration = Duration::from_secs(5);

impl PsClient {
    /// Has every server write a snapshot of the partitions that changed since their last one
    /// (`angel-ps snapshot`, SQL `SNAPSHOT`); WRONG_STATE when the service has no snapshot
    /// directory.
    pub async fn snapshot(&self) -> Result<SnapshotReply> {
        self.snapshot_of(Vec::new()).await
    }

    /// Has the servers snapshot what changed of this client's namespace's matrices and
    /// counters (every one, without a namespace) and waits until it is written: what a job does
    /// at its end, so its changes survive the loss of a server once no client is left to
    /// replay them. Writes nothing when the service runs without snapshots.
    pub async fn make_durable(&self) -> Result<SnapshotReply> {
        self.refresh().await?;
        let prefix = self.qualify("");
        let ours = self.names_where(|name, _| name.starts_with(&prefix));
        match ours.is_empty() {
            true => Ok(SnapshotReply::default()),
            false => self.snapshot_of(ours).await,
        }
    }

    /// Keeps the replay buffer within its size: past it, has the servers snapshot the
    /// matrices and counters it holds changes of and forgets what the snapshots hold. The
    /// call that found the buffer full waits meanwhile (back-pressure), so changes are
    /// dropped, and counted lost, only past twice the size, when snapshots fail.
    pub(crate) async fn relieve(&self) {
        if !self.replays.over_limit() {
            return;
        }
        let mut failed_at = self.relieving.lock().await;
        let recently = failed_at.is_some_and(|t: Instant| t.elapsed() < RETRY_AFTER_FAILURE);
        if !self.replays.over_limit() || recently {
            return;
        }
        let held = self.replays.held_ids();
        let names = self.names_where(|_, id| held.contains(&id));
        match self.snapshot_of(names).await {
            Ok(reply) => {
                for d in reply.durable {
                    self.replays.forget(d.id, d.partition_id, d.version);
                }
                *failed_at = None;
            }
            Err(e) => {
                tracing::warn!("the replay buffer is full and a snapshot to empty it failed: {e}");
                *failed_at = Some(Instant::now());
            }
        }
    }

    /// The full names of the matrices and counters in the cached map that `keep` takes (by
    /// name and id).
    fn names_where(&self, keep: impl Fn(&str, u32) -> bool) -> Vec<String> {
        let routing = self.routing.read();
        let matrices = routing.by_name.iter().map(|(n, m)| (n, m.meta.id));
        let counters = routing.counters.iter().map(|(n, c)| (n, c.space.meta.id));
        matrices
            .chain(counters)
            .filter(|(name, id)| keep(name, *id))
            .map(|(name, _)| name.clone())
            .collect()
    }

    async fn snapshot_of(&self, names: Vec<String>) -> Result<SnapshotReply> {
        self.on_master(SnapshotRequest { names }, |mut m, r| async move {
            m.snapshot(r).await
        })
        .await
    }
}

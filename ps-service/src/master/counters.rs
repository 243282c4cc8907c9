//! The master's side of distributed counters: create, seal, clean.
//!
//! Sealing is the barrier of Angel's counter flow and runs in two phases: every server ranks
//! its qualifying keys per partition in (hash, key) order and reports how many there are; the
//! master turns those counts into per-partition offsets in hash order and sends them back. No
//! key string passes through the master, and the indices do not depend on how many servers or
//! partitions there are.

use std::collections::HashMap;

use angel_proto::{
    CounterAdminOp, CounterAdminReply, CounterAdminRequest, CounterMeta, CounterState,
    CreateMatrixRequest, PsError, Result, StorageKind, ValueType,
};

use super::service::{MAX_COLS, MasterService};
use super::state::Placement;

impl MasterService {
    /// Creates counter `name` in the WRITE state; with `replace`, an existing one of that
    /// name is removed first.
    pub(super) async fn create_counter(&self, name: &str, replace: bool) -> Result<CounterMeta> {
        let _creating = self.creating.lock().await;
        if self.state.lock().counters.contains_key(name) {
            if !replace {
                return Err(PsError::AlreadyExists(format!(
                    "counter '{name}' already exists"
                )));
            }
            self.remove_counter(name).await?;
        }
        let space_request = CreateMatrixRequest {
            name: format!("counter:{name}"),
            rows: 1,
            cols: MAX_COLS,
            value_type: ValueType::I64 as i32,
            storage: StorageKind::Sparse as i32,
            ..Default::default()
        };
        let (space, servers) = self.plan(&space_request)?;
        let meta = CounterMeta {
            id: space.id,
            name: name.to_string(),
            state: CounterState::Write as i32,
            min_count: 0,
            size: 0,
            space: Some(space),
        };
        let epoch = self.next_epoch();
        let created = self
            .admin(&servers, |ids| {
                request(CounterAdminOp::Create, &meta, ids, epoch)
            })
            .await;
        if let Err(e) = created {
            let _ = self
                .admin(&servers, |ids| {
                    request(CounterAdminOp::CleanUp, &meta, ids, epoch)
                })
                .await;
            return Err(e);
        }
        let mut state = self.state.lock();
        state.epoch += 1;
        state.counters.insert(name.to_string(), meta.clone());
        drop(state);
        self.persist();
        tracing::info!(%name, "counter created");
        Ok(meta)
    }

    pub(super) async fn seal_counter(&self, name: &str, min_count: i64) -> Result<CounterMeta> {
        if min_count < 1 {
            return Err(PsError::InvalidArgument(format!(
                "seal of counter '{name}': min_count must be 1 or more, got {min_count}"
            )));
        }
        let _creating = self.creating.lock().await;
        let (mut meta, servers, epoch) = self.counter_in(name, &[CounterState::Write], "seal")?;
        let ranked = self
            .admin(&servers, |ids| CounterAdminRequest {
                min_count,
                ..request(CounterAdminOp::Seal, &meta, ids, epoch)
            })
            .await?;
        let mut qualifying: HashMap<u32, u64> = HashMap::new();
        for (ids, reply) in ranked {
            if reply.qualifying.len() != ids.len() {
                return Err(PsError::Internal(format!(
                    "counter '{name}': a server ranked {} of {} partitions",
                    reply.qualifying.len(),
                    ids.len()
                )));
            }
            qualifying.extend(ids.into_iter().zip(reply.qualifying));
        }
        let mut parts = meta.space.clone().unwrap_or_default().partitions;
        parts.sort_by_key(|p| p.col_start);
        let mut offsets: HashMap<u32, u64> = HashMap::new();
        let mut size = 0u64;
        for p in &parts {
            offsets.insert(p.id, size);
            size += qualifying.get(&p.id).copied().unwrap_or(0);
        }
        self.admin(&servers, |ids| CounterAdminRequest {
            offsets: ids.iter().map(|id| offsets[id]).collect(),
            ..request(CounterAdminOp::Assign, &meta, ids, epoch)
        })
        .await?;
        meta.state = CounterState::Read as i32;
        meta.min_count = min_count;
        meta.size = size;
        self.store(meta)
    }

    pub(super) async fn clean_counter(&self, name: &str) -> Result<CounterMeta> {
        let _creating = self.creating.lock().await;
        let allowed = [CounterState::Write, CounterState::Read];
        let (mut meta, servers, epoch) = self.counter_in(name, &allowed, "clean")?;
        self.admin(&servers, |ids| {
            request(CounterAdminOp::CleanUp, &meta, ids, epoch)
        })
        .await?;
        meta.state = CounterState::Clean as i32;
        self.store(meta)
    }

    /// Removes counter `name`, in any state.
    pub(super) async fn drop_counter(&self, name: &str) -> Result<()> {
        let _creating = self.creating.lock().await;
        self.remove_counter(name).await
    }

    /// Removes counter `name`, in any state: from the state first (saved), then from every
    /// server that answers, as a dropped matrix is. A partition lost with a dead server does
    /// not keep the counter alive, and a master stopped halfway never resumes a counter whose
    /// partitions are gone.
    async fn remove_counter(&self, name: &str) -> Result<()> {
        self.check_trusted()?;
        let (meta, epoch, servers) = {
            let mut state = self.state.lock();
            let meta = state
                .counters
                .remove(name)
                .ok_or_else(|| PsError::NotFound(format!("no counter named '{name}'")))?;
            state.epoch += 1;
            (meta, state.epoch, state.every_server())
        };
        self.persist();
        if let Err(e) = self
            .admin(&servers, |ids| {
                request(CounterAdminOp::CleanUp, &meta, ids, epoch)
            })
            .await
        {
            tracing::warn!(%name, "a server did not free a removed counter's keys: {e}");
        }
        tracing::info!(%name, "counter removed");
        Ok(())
    }

    /// The counter, its placement and the next epoch (saved), if it is in one of the `allowed`
    /// states and the master trusts its state.
    fn counter_in(
        &self,
        name: &str,
        allowed: &[CounterState],
        verb: &str,
    ) -> Result<(CounterMeta, Placement, u64)> {
        self.check_trusted()?;
        let (meta, placement) = self.counter_placed(name, allowed, verb)?;
        Ok((meta, placement, self.next_epoch()))
    }

    fn counter_placed(
        &self,
        name: &str,
        allowed: &[CounterState],
        verb: &str,
    ) -> Result<(CounterMeta, Placement)> {
        let state = self.state.lock();
        let meta = state
            .counters
            .get(name)
            .ok_or_else(|| PsError::NotFound(format!("no counter named '{name}'")))?;
        if !allowed.contains(&meta.state()) {
            return Err(PsError::WrongState(format!(
                "counter '{name}' is {}; {verb} needs a counter that is {}",
                described(meta.state()),
                allowed
                    .iter()
                    .map(|&s| described(s))
                    .collect::<Vec<_>>()
                    .join(" or ")
            )));
        }
        let placement = state.placement(meta.space.as_ref().expect("counters have a key space"))?;
        Ok((meta.clone(), placement))
    }

    fn store(&self, meta: CounterMeta) -> Result<CounterMeta> {
        let mut state = self.state.lock();
        state.epoch += 1;
        state.counters.insert(meta.name.clone(), meta.clone());
        drop(state);
        self.persist();
        tracing::info!(name = %meta.name, state = ?meta.state(), size = meta.size, "counter updated");
        Ok(meta)
    }

    /// Sends each server its admin request, all at once; the first failure is the answer.
    async fn admin(
        &self,
        servers: &Placement,
        make: impl Fn(Vec<u32>) -> CounterAdminRequest,
    ) -> Result<Vec<(Vec<u32>, CounterAdminReply)>> {
        let calls = servers.values().map(|(entry, ids)| {
            let (mut rpc, addr, ids) = (entry.rpc.clone(), entry.addr.clone(), ids.clone());
            let call = make(ids.clone());
            async move { (ids, addr, rpc.counter_admin(call).await) }
        });
        let mut replies = Vec::with_capacity(servers.len());
        for (ids, addr, result) in futures::future::join_all(calls).await {
            let reply = result.map_err(|s| PsError::from_status(s, &format!("server {addr}")))?;
            replies.push((ids, reply.into_inner()));
        }
        Ok(replies)
    }
}

/// A counter state in the words of its users' flow: count, seal, clean up.
fn described(state: CounterState) -> &'static str {
    match state {
        CounterState::Write => "still counting (not sealed)",
        CounterState::Read => "sealed",
        CounterState::Clean => "cleaned up",
        CounterState::Unspecified => "in no known state",
    }
}

fn request(
    op: CounterAdminOp,
    meta: &CounterMeta,
    partition_ids: Vec<u32>,
    epoch: u64,
) -> CounterAdminRequest {
    CounterAdminRequest {
        op: op as i32,
        counter: Some(meta.clone()),
        partition_ids,
        epoch,
        ..Default::default()
    }
}

//! Distributed counters of string keys (Angel's counter for dummy-variable features).
//!
//! Keys route by [`key_hash`](angel_proto::counter_keys::key_hash), a stable 63-bit hash, over hash-range partitions. Sealing gives
//! the keys counted at least `min_count` times the indices 0..n-1 in the order (hash, key):
//! each partition holds one hash range, so its keys get one contiguous run of indices and the
//! master only adds up per-partition counts. The same keys get the same indices whatever the
//! number of servers, partitions or tasks.

use std::collections::HashMap;
use std::sync::Arc;

use angel_proto::{
    CounterGetRequest, CounterIncreaseRequest, CounterKeys, CounterRequest, CounterState,
    CounterValues, PsError, Result, SealCounterRequest, wire,
};
use bytes::Bytes;

use angel_proto::counter_keys::{NO_INDEX, decode_str_keys, encode_str_keys};

use crate::PsClient;
use crate::counter_space::Counter;
use crate::replay::Change;
use crate::routes::{SendError, server_of};
use crate::task_change::TaskChange;

/// Sums deltas by key, so each distinct key is sent once.
pub fn merge_counts<'a, S: AsRef<str> + 'a>(
    keys: &'a [S],
    deltas: &[i64],
) -> Result<HashMap<&'a str, i64>> {
    if keys.len() != deltas.len() {
        return Err(PsError::InvalidArgument(format!(
            "counter increase: {} keys but {} deltas",
            keys.len(),
            deltas.len()
        )));
    }
    let mut merged: HashMap<&str, i64> = HashMap::with_capacity(keys.len());
    for (k, &d) in keys.iter().zip(deltas) {
        let slot = merged.entry(k.as_ref()).or_default();
        *slot = slot.wrapping_add(d);
    }
    Ok(merged)
}

impl PsClient {
    /// Creates a counter in the WRITE state.
    pub async fn create_counter(&self, name: &str) -> Result<Arc<Counter>> {
        self.new_counter(name, false).await
    }

    /// Creates a counter in the WRITE state, removing one of that name first whatever its
    /// state: what a job does before it first counts into a counter, so counts of an earlier
    /// run never mix in.
    pub async fn replace_counter(&self, name: &str) -> Result<Arc<Counter>> {
        self.new_counter(name, true).await
    }

    /// Removes a counter, in any state, from the service.
    pub async fn drop_counter(&self, name: &str) -> Result<()> {
        self.on_master(
            CounterRequest {
                name: self.qualify(name),
                ..Default::default()
            },
            |mut m, r| async move { m.drop_counter(r).await },
        )
        .await?;
        self.refresh().await
    }

    async fn new_counter(&self, name: &str, replace: bool) -> Result<Arc<Counter>> {
        self.on_master(
            CounterRequest {
                name: self.qualify(name),
                replace,
            },
            |mut m, r| async move { m.create_counter(r).await },
        )
        .await?;
        // The map may hold a counter of that name made before (and now removed).
        self.refresh().await?;
        self.counter(name).await
    }

    /// Adds `deltas` to `keys`. Duplicate keys are summed here before anything is sent.
    pub async fn counter_increase<S: AsRef<str>>(
        &self,
        name: &str,
        keys: &[S],
        deltas: &[i64],
    ) -> Result<()> {
        self.increase(name, keys, deltas, None).await
    }

    /// [`PsClient::counter_increase`] as `change` of a SQL task: if the task runs again and
    /// resends it, the servers that applied it refuse it.
    pub async fn task_counter_increase<S: AsRef<str>>(
        &self,
        change: TaskChange,
        name: &str,
        keys: &[S],
        deltas: &[i64],
    ) -> Result<()> {
        self.increase(name, keys, deltas, Some(change)).await
    }

    async fn increase<S: AsRef<str>>(
        &self,
        name: &str,
        keys: &[S],
        deltas: &[i64],
        change: Option<TaskChange>,
    ) -> Result<()> {
        let merged = merge_counts(keys, deltas)?;
        let (keys, deltas): (Vec<&str>, Vec<i64>) = merged.into_iter().unzip();
        let c = self.live_counter(name).await?;
        let mut parts = Vec::new();
        for (partition_id, positions) in c.group(&keys) {
            let part_keys: Vec<&str> = positions.iter().map(|&i| keys[i]).collect();
            let part_deltas: Vec<i64> = positions.iter().map(|&i| deltas[i]).collect();
            let (data, lengths) = encode_str_keys(&part_keys)?;
            parts.push(CounterKeys {
                partition_id,
                data,
                lengths,
                deltas: Bytes::copy_from_slice(bytemuck::cast_slice(&part_deltas)),
            });
        }
        let counter_id = c.space.meta.id;
        self.scatter(
            parts,
            change,
            |routing, p: &CounterKeys| server_of(routing, counter_id, p.partition_id),
            |mut conn, parts, caller| async move {
                let count = parts.len();
                let request = CounterIncreaseRequest {
                    caller: Some(caller),
                    counter_id,
                    parts: parts.clone(),
                };
                let reply = conn.rpc.counter_increase(request).await?.into_inner();
                for (ack, part) in reply.acks.iter().zip(parts) {
                    let change = Change::Count { counter_id, part };
                    self.replays.keep(counter_id, ack, &caller, change);
                }
                Ok::<_, SendError>(vec![(); count])
            },
        )
        .await
        .map(drop)
    }

    /// The barrier: moves the counter from WRITE to READ and gives the keys counted at least
    /// `min_count` times the indices 0..n-1. Returns the sealed metadata (`size` = n).
    pub async fn counter_seal(&self, name: &str, min_count: i64) -> Result<Arc<Counter>> {
        self.on_master(
            SealCounterRequest {
                name: self.qualify(name),
                min_count,
            },
            |mut m, r| async move { m.seal_counter(r).await },
        )
        .await?;
        self.refresh().await?;
        self.counter(name).await
    }

    /// Count and index of each key, in request order (count 0 and no index for unknown keys).
    /// The counter must be sealed (READ).
    pub async fn counter_get<S: AsRef<str>>(
        &self,
        name: &str,
        keys: &[S],
    ) -> Result<Vec<(i64, Option<u64>)>> {
        let c = self.live_counter(name).await?;
        let groups = c.group(keys);
        let mut parts = Vec::with_capacity(groups.len());
        for (partition_id, positions) in &groups {
            let part_keys: Vec<&str> = positions.iter().map(|&i| keys[i].as_ref()).collect();
            let (data, lengths) = encode_str_keys(&part_keys)?;
            parts.push(CounterKeys {
                partition_id: *partition_id,
                data,
                lengths,
                deltas: Bytes::new(),
            });
        }
        let replies = self.counter_get_parts(&c, parts, false).await?;
        let mut out = vec![(0i64, None); keys.len()];
        for ((_, positions), reply) in groups.iter().zip(replies) {
            let counts: Vec<i64> = wire::decode_values(&reply.counts, "counter counts")?;
            let indices: Vec<u64> = wire::decode_keys(&reply.indices, "counter indices")?;
            if counts.len() != positions.len() || indices.len() != positions.len() {
                return Err(PsError::Internal(format!(
                    "counter '{name}': a server answered {} counts for {} keys",
                    counts.len(),
                    positions.len()
                )));
            }
            for ((&i, count), index) in positions.iter().zip(counts).zip(indices) {
                out[i] = (count, (index != NO_INDEX).then_some(index));
            }
        }
        Ok(out)
    }

    /// Frees the counter's keys on the servers (READ or WRITE -> CLEAN).
    pub async fn counter_clean(&self, name: &str) -> Result<()> {
        self.on_master(
            CounterRequest {
                name: self.qualify(name),
                ..Default::default()
            },
            |mut m, r| async move { m.clean_counter(r).await },
        )
        .await?;
        self.refresh().await
    }

    /// The counter named `name`, unless it was cleaned (its keys are gone from the servers).
    /// Every indexed key of a sealed counter as (key, count, index), ordered by index: the
    /// feature dictionary a model is exported with.
    pub async fn counter_indexed(&self, name: &str) -> Result<Vec<(String, i64, u64)>> {
        let c = self.live_counter(name).await?;
        let parts = c
            .space
            .meta
            .partitions
            .iter()
            .map(|p| CounterKeys {
                partition_id: p.id,
                ..Default::default()
            })
            .collect();
        let mut out = Vec::new();
        for reply in self.counter_get_parts(&c, parts, true).await? {
            let listed = reply.keys.unwrap_or_default();
            let keys = decode_str_keys(&listed.data, &listed.lengths)?;
            let counts: Vec<i64> = wire::decode_values(&reply.counts, "counter counts")?;
            let indices = wire::decode_keys(&reply.indices, "counter indices")?;
            if counts.len() != keys.len() || indices.len() != keys.len() {
                return Err(PsError::Internal(format!(
                    "counter '{name}': a server listed {} keys with {} counts",
                    keys.len(),
                    counts.len()
                )));
            }
            for ((k, count), index) in keys.into_iter().zip(counts).zip(indices) {
                out.push((k.to_string(), count, index));
            }
        }
        out.sort_by_key(|e| e.2);
        Ok(out)
    }

    /// Sends a `CounterGet` for `parts` of counter `c`; one answer per part.
    async fn counter_get_parts(
        &self,
        c: &Counter,
        parts: Vec<CounterKeys>,
        all_indexed: bool,
    ) -> Result<Vec<CounterValues>> {
        let counter_id = c.space.meta.id;
        self.scatter(
            parts,
            None,
            |routing, p: &CounterKeys| server_of(routing, counter_id, p.partition_id),
            |mut conn, parts, caller| async move {
                let request = CounterGetRequest {
                    caller: Some(caller),
                    counter_id,
                    parts,
                    all_indexed,
                };
                Ok::<_, SendError>(conn.rpc.counter_get(request).await?.into_inner().parts)
            },
        )
        .await
    }

    async fn live_counter(&self, name: &str) -> Result<Arc<Counter>> {
        let c = self.counter(name).await?;
        if c.meta.state() == CounterState::Clean {
            return Err(PsError::WrongState(format!(
                "counter '{name}' was cleaned; create a new one to count again"
            )));
        }
        Ok(c)
    }

    /// The counter named `name` from the cached map, refreshing once if it is not there.
    pub async fn counter(&self, name: &str) -> Result<Arc<Counter>> {
        let name = &self.qualify(name);
        if let Some(c) = self.routing.read().counters.get(name) {
            return Ok(c.clone());
        }
        self.refresh().await?;
        self.routing
            .read()
            .counters
            .get(name)
            .cloned()
            .ok_or_else(|| PsError::NotFound(format!("no counter named '{name}'")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_sums_deltas_by_key() {
        assert_eq!(merge_counts(&["a", "b", "a"], &[1, 2, 3]).unwrap()["a"], 4);
        assert!(merge_counts(&["a"], &[1, 2]).is_err());
    }
}

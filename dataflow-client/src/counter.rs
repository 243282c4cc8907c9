//! Distributed counters of string keys (Angel's counter for dummy-variable features).
//!
//! Keys route by [`key_hash`], a stable 63-bit hash, over hash-range partitions. Sealing gives
//! the keys counted at least `min_count` times the indices 0..n-1 in the order (hash, key):
//! each partition holds one hash range, so its keys get one contiguous run of indices and the
//! master only adds up per-partition counts. The same keys get the same indices whatever the
//! number of servers, partitions or tasks.

use std::collections::HashMap;
use std::sync::Arc;

use angel_proto::{
    CounterGetRequest, CounterIncreaseRequest, CounterKeys, CounterMeta, CounterRequest,
    CounterState, CounterValues, SealCounterRequest,
};
use bytes::Bytes;
use xxhash_rust::xxh3::xxh3_64;

use crate::client::{SendError, server_of};
use crate::matrix::Matrix;
use crate::{PsClient, PsError, Result};

/// Index reported for keys that have none (unknown, or counted under `min_count`).
pub const NO_INDEX: u64 = u64::MAX;

/// The stable hash a key routes and sorts by (below 2^63, like every column key).
pub fn key_hash(key: &str) -> u64 {
    xxh3_64(key.as_bytes()) >> 1
}

/// Packs string keys: bytes back to back, plus packed u32 lengths.
pub fn encode_str_keys<S: AsRef<str>>(keys: &[S]) -> Result<(Bytes, Bytes)> {
    let mut data = Vec::with_capacity(keys.iter().map(|k| k.as_ref().len()).sum());
    let mut lengths = Vec::with_capacity(keys.len());
    for key in keys {
        let key = key.as_ref();
        let len = u32::try_from(key.len()).map_err(|_| {
            PsError::InvalidArgument(format!("a counter key of {} bytes is too long", key.len()))
        })?;
        data.extend_from_slice(key.as_bytes());
        lengths.push(len);
    }
    Ok((
        Bytes::from(data),
        Bytes::copy_from_slice(bytemuck::cast_slice(&lengths)),
    ))
}

/// Unpacks string keys packed by [`encode_str_keys`], checking lengths and UTF-8.
pub fn decode_str_keys<'a>(data: &'a [u8], lengths: &[u8]) -> Result<Vec<&'a str>> {
    if !lengths.len().is_multiple_of(4) {
        return Err(PsError::InvalidArgument(format!(
            "counter key lengths: {} bytes is not a whole number of u32",
            lengths.len()
        )));
    }
    let lengths: Vec<u32> = bytemuck::pod_collect_to_vec(lengths);
    let mut keys = Vec::with_capacity(lengths.len());
    let mut at = 0usize;
    for (i, len) in lengths.into_iter().enumerate() {
        let end = at
            .checked_add(len as usize)
            .filter(|&e| e <= data.len())
            .ok_or_else(|| {
                PsError::InvalidArgument(format!(
                    "counter key {i} runs past the {} bytes of key data",
                    data.len()
                ))
            })?;
        let key = std::str::from_utf8(&data[at..end])
            .map_err(|e| PsError::InvalidArgument(format!("counter key {i} is not UTF-8: {e}")))?;
        keys.push(key);
        at = end;
    }
    if at != data.len() {
        return Err(PsError::InvalidArgument(format!(
            "counter keys use {at} of {} bytes of key data",
            data.len()
        )));
    }
    Ok(keys)
}

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

/// A counter as the client knows it: its metadata and the layout of its key space.
#[derive(Debug, Clone)]
pub struct Counter {
    /// Metadata from the master (state, size after sealing).
    pub meta: CounterMeta,
    /// The hash space the keys route over, as a 1 x 2^63 matrix layout.
    pub space: Arc<Matrix>,
}

impl Counter {
    /// Builds the handle, validating the key-space layout.
    pub fn new(meta: CounterMeta) -> Result<Self> {
        let space = meta.space.clone().ok_or_else(|| {
            PsError::Internal(format!("counter '{}' has no key space", meta.name))
        })?;
        Ok(Counter {
            space: Arc::new(Matrix::new(space)?),
            meta,
        })
    }

    /// Groups `keys` by partition: (partition id, positions of its keys in `keys`).
    fn group<S: AsRef<str>>(&self, keys: &[S]) -> Vec<(u32, Vec<usize>)> {
        let band = self
            .space
            .layout
            .band(0)
            .expect("a counter space has row 0");
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); band.len()];
        for (i, k) in keys.iter().enumerate() {
            groups[band.locate(key_hash(k.as_ref()))].push(i);
        }
        groups
            .into_iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .map(|(pos, g)| (self.space.meta.partitions[band.part(pos)].id, g))
            .collect()
    }
}

impl PsClient {
    /// Creates a counter in the WRITE state.
    pub async fn create_counter(&self, name: &str) -> Result<Arc<Counter>> {
        self.master
            .clone()
            .create_counter(CounterRequest { name: name.into() })
            .await
            .map_err(|s| self.master_error(s))?;
        self.counter(name).await
    }

    /// Adds `deltas` to `keys`. Duplicate keys are summed here before anything is sent.
    pub async fn counter_increase<S: AsRef<str>>(
        &self,
        name: &str,
        keys: &[S],
        deltas: &[i64],
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
            |routing, p: &CounterKeys| server_of(routing, counter_id, p.partition_id),
            |mut conn, parts, caller| async move {
                let count = parts.len();
                let request = CounterIncreaseRequest {
                    caller: Some(caller),
                    counter_id,
                    parts,
                };
                conn.rpc.counter_increase(request).await?;
                Ok::<_, SendError>(vec![(); count])
            },
        )
        .await
        .map(drop)
    }

    /// The barrier: moves the counter from WRITE to READ and gives the keys counted at least
    /// `min_count` times the indices 0..n-1. Returns the sealed metadata (`size` = n).
    pub async fn counter_seal(&self, name: &str, min_count: i64) -> Result<Arc<Counter>> {
        self.master
            .clone()
            .seal_counter(SealCounterRequest {
                name: name.into(),
                min_count,
            })
            .await
            .map_err(|s| self.master_error(s))?;
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
            let counts: Vec<i64> = crate::wire::decode_values(&reply.counts, "counter counts")?;
            let indices: Vec<u64> = crate::wire::decode_keys(&reply.indices, "counter indices")?;
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
        self.master
            .clone()
            .clean_counter(CounterRequest { name: name.into() })
            .await
            .map_err(|s| self.master_error(s))?;
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
            let counts: Vec<i64> = crate::wire::decode_values(&reply.counts, "counter counts")?;
            let indices = crate::wire::decode_keys(&reply.indices, "counter indices")?;
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
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn string_keys_round_trip(keys in proptest::collection::vec(".{0,12}", 0..40)) {
            let (data, lengths) = encode_str_keys(&keys).unwrap();
            prop_assert_eq!(decode_str_keys(&data, &lengths).unwrap(), keys.iter().map(String::as_str).collect::<Vec<_>>());
        }

        #[test]
        fn any_bytes_decode_or_fail_cleanly(data in proptest::collection::vec(any::<u8>(), 0..64),
                                             lengths in proptest::collection::vec(any::<u8>(), 0..32)) {
            if let Ok(keys) = decode_str_keys(&data, &lengths) {
                prop_assert_eq!(keys.iter().map(|k| k.len()).sum::<usize>(), data.len());
            }
        }
    }

    #[test]
    fn hash_is_stable_and_below_two_to_the_63() {
        // A changed hash would renumber every feature of every saved model.
        assert_eq!(
            key_hash("occupation=Sales"),
            xxh3_64(b"occupation=Sales") >> 1
        );
        assert!(key_hash("x") < 1 << 63);
        assert_eq!(merge_counts(&["a", "b", "a"], &[1, 2, 3]).unwrap()["a"], 4);
    }
}

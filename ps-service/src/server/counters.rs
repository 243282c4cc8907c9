//! The server's counter handlers: allocate, count, seal in two phases, read, clean.
//! Like the matrix handlers, each checks a whole request before changing anything.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use angel_proto::counter_keys::{decode_str_keys, encode_str_keys, key_hash};
use angel_proto::{
    CounterAdminOp, CounterAdminReply, CounterAdminRequest, CounterGetReply, CounterGetRequest,
    CounterIncreaseReply, CounterIncreaseRequest, CounterKeys, CounterValues, PsError, Result,
    wire,
};

use super::applied::ack;
use super::memory::{Reservation, Use};
use super::partition::{CounterPart, record_bytes};
use super::service::ServerService;
use crate::blocks::{CounterBlock, Growth, Phase};

impl ServerService {
    pub(super) fn counter_admin_checked(
        &self,
        r: CounterAdminRequest,
    ) -> Result<CounterAdminReply> {
        self.parts.observe_epoch(r.epoch);
        let meta = Arc::new(r.counter.clone().ok_or_else(|| {
            PsError::InvalidArgument("counter admin: the counter is missing".into())
        })?);
        let epoch = r.epoch;
        let mut reply = CounterAdminReply::default();
        match r.op() {
            CounterAdminOp::Create => {
                let space = meta.space.as_ref().ok_or_else(|| {
                    PsError::InvalidArgument(format!("counter '{}' has no key space", meta.name))
                })?;
                let mut parts = Vec::with_capacity(r.partition_ids.len());
                for &pid in &r.partition_ids {
                    let p = space.partitions.get(pid as usize).ok_or_else(|| {
                        PsError::InvalidArgument(format!(
                            "counter '{}' has no partition {pid}",
                            meta.name
                        ))
                    })?;
                    let hashes = p.col_start..p.col_end;
                    parts.push(match r.restore {
                        true => self.restore_counter(&meta, pid, hashes)?,
                        false => CounterPart::new(
                            meta.clone(),
                            (pid, hashes),
                            CounterBlock::default(),
                            Default::default(),
                            Default::default(),
                        ),
                    });
                }
                let read: u64 = parts.iter().map(|p| p.bytes.load(Relaxed)).sum();
                let write = Use {
                    kind: "counter",
                    name: &meta.name,
                    what: "restoring its partitions",
                };
                let _reserved = self.memory.reserve(&self.parts, write, read)?;
                if r.restore {
                    reply.restored = parts
                        .iter()
                        .map(|p| ack(p.id, &p.applied.lock(), &p.snapshotted.lock()))
                        .collect();
                }
                self.parts.insert_counter(parts);
                if !r.restore {
                    self.write_snapshots(&[meta.id])?;
                }
            }
            CounterAdminOp::Seal => {
                let parts = self.counter_parts(meta.id, &r.partition_ids, epoch)?;
                // A partition sealed already is ranked afresh: the master asks again only when
                // its seal did not finish (a reply lost, another server failing), and ranking
                // the same counts gives the same indices. The master refuses to seal a counter
                // its own state holds sealed.
                for part in &parts {
                    let mut block = part.data.write();
                    reply.qualifying.push(block.rank(r.min_count));
                    part.applied.lock().version += 1;
                }
            }
            CounterAdminOp::Assign => {
                let parts = self.counter_parts(meta.id, &r.partition_ids, epoch)?;
                if parts.len() != r.offsets.len() {
                    return Err(PsError::InvalidArgument(format!(
                        "counter '{}': {} offsets for {} partitions",
                        meta.name,
                        r.offsets.len(),
                        parts.len()
                    )));
                }
                for (part, &offset) in parts.iter().zip(&r.offsets) {
                    let mut block = part.data.write();
                    if block.phase() != Phase::Ranked {
                        return Err(wrong_state(part, "was not ranked by a seal"));
                    }
                    block.assign(offset);
                    part.applied.lock().version += 1;
                }
                // The seal is a barrier: once it returns, the counter's state is durable, so
                // no client needs to replay a count to a sealed partition.
                self.write_snapshots(&[meta.id])?;
            }
            CounterAdminOp::CleanUp => self.parts.remove_counter(meta.id),
            CounterAdminOp::Unspecified => {
                return Err(PsError::InvalidArgument(
                    "counter admin: no operation".into(),
                ));
            }
        }
        Ok(reply)
    }

    pub(super) fn counter_increase_checked(
        &self,
        r: CounterIncreaseRequest,
    ) -> Result<CounterIncreaseReply> {
        let epoch = r.caller.map_or(0, |c| c.map_epoch);
        let mut checked = Vec::with_capacity(r.parts.len());
        for p in &r.parts {
            let (part, keys) = self.counter_keys(r.counter_id, p, epoch)?;
            let deltas: Vec<i64> = wire::decode_values(&p.deltas, "counter deltas")?;
            if deltas.len() != keys.len() {
                return Err(PsError::InvalidArgument(format!(
                    "counter '{}': {} keys but {} deltas",
                    part.counter.name,
                    keys.len(),
                    deltas.len()
                )));
            }
            if let Some(d) = deltas.iter().find(|&&d| d < 0) {
                return Err(PsError::InvalidArgument(format!(
                    "counter '{}': delta {d} is negative; counts only grow",
                    part.counter.name
                )));
            }
            if part.data.read().phase() != Phase::Write {
                return Err(wrong_state(
                    &part,
                    "is sealed; increase needs the WRITE state",
                ));
            }
            checked.push((part, keys, deltas));
        }
        let _reserved = self.reserve_counts(&checked)?;
        let caller = r.caller.unwrap_or_default();
        let mut acks = Vec::with_capacity(checked.len());
        for (part, keys, deltas) in checked {
            let mut block = part.data.write();
            if block.phase() != Phase::Write {
                return Err(wrong_state(&part, "was sealed during this increase"));
            }
            let mut applied = part.applied.lock();
            let before = block.usage().1;
            if applied.admit(&caller) {
                keys.iter()
                    .zip(deltas)
                    .for_each(|(k, d)| block.increase(k, d));
            }
            record_bytes(&part.bytes, block.usage().1 as i64 - before as i64);
            acks.push(ack(part.id, &applied, &part.snapshotted.lock()));
        }
        Ok(CounterIncreaseReply { acks })
    }

    /// Reserves what an increase may add to its partitions: the keys they do not hold yet
    /// (see [`super::memory::MemoryAccount`]).
    fn reserve_counts(
        &self,
        checked: &[(Arc<CounterPart>, Vec<&str>, Vec<i64>)],
    ) -> Result<Reservation<'_>> {
        let Some((first, _, _)) = checked.first() else {
            return self.memory.reserve(&self.parts, Use::NOTHING, 0);
        };
        let keys: usize = checked.iter().map(|c| c.1.len()).sum();
        let what = format!("an increase of {keys} keys");
        let write = Use {
            kind: "counter",
            name: &first.counter.name,
            what: &what,
        };
        self.memory.reserve_growth(&self.parts, write, |exact| {
            let grows =
                (checked.iter()).map(|(part, keys, _)| part.data.read().growth(keys, exact));
            Ok(grows.fold(Growth::default(), Growth::and))
        })
    }

    pub(super) fn counter_get_checked(&self, r: CounterGetRequest) -> Result<CounterGetReply> {
        let epoch = r.caller.map_or(0, |c| c.map_epoch);
        let mut parts = Vec::with_capacity(r.parts.len());
        for p in &r.parts {
            let (part, keys) = self.counter_keys(r.counter_id, p, epoch)?;
            let block = part.data.read();
            if block.phase() != Phase::Read {
                return Err(wrong_state(
                    &part,
                    "is not sealed yet; seal it before reading indices",
                ));
            }
            let entries: Vec<(&str, i64, u64)> = match r.all_indexed {
                true => block.indexed(),
                false => keys
                    .iter()
                    .map(|&k| {
                        let (count, index) = block.get(k);
                        (k, count, index)
                    })
                    .collect(),
            };
            let counts: Vec<i64> = entries.iter().map(|e| e.1).collect();
            let indices: Vec<u64> = entries.iter().map(|e| e.2).collect();
            let listed = match r.all_indexed {
                true => {
                    let names: Vec<&str> = entries.iter().map(|e| e.0).collect();
                    let (data, lengths) = encode_str_keys(&names)?;
                    Some(CounterKeys {
                        partition_id: part.id,
                        data,
                        lengths,
                        ..Default::default()
                    })
                }
                false => None,
            };
            parts.push(CounterValues {
                counts: wire::encode_values(&counts),
                indices: wire::encode_keys(&indices),
                keys: listed,
            });
        }
        Ok(CounterGetReply { parts })
    }

    fn counter_parts(
        &self,
        counter_id: u32,
        ids: &[u32],
        epoch: u64,
    ) -> Result<Vec<Arc<CounterPart>>> {
        ids.iter()
            .map(|&pid| self.parts.counter(counter_id, pid, epoch))
            .collect()
    }

    /// Resolves a request part and decodes its keys, checking each hashes into the partition.
    fn counter_keys<'a>(
        &self,
        counter_id: u32,
        p: &'a CounterKeys,
        epoch: u64,
    ) -> Result<(Arc<CounterPart>, Vec<&'a str>)> {
        let part = self.parts.counter(counter_id, p.partition_id, epoch)?;
        let keys = decode_str_keys(&p.data, &p.lengths)?;
        if let Some(k) = keys.iter().find(|k| !part.hashes.contains(&key_hash(k))) {
            return Err(PsError::OutOfRange(format!(
                "key '{k}' does not hash into partition {} of counter '{}'",
                part.id, part.counter.name
            )));
        }
        Ok((part, keys))
    }
}

fn wrong_state(part: &CounterPart, why: &str) -> PsError {
    PsError::WrongState(format!("counter '{}' {why}", part.counter.name))
}

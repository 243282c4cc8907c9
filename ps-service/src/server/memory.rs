//! [`MemoryAccount`]: the bytes of partition data one server may hold (its memory budget)
//! and the share of them one namespace may take. Every write that can make partition data
//! grow (a dense create or a restore, new sparse keys, new counter keys, optimizer state, a
//! PS function's writes and scratch) reserves its growth here before it allocates. A
//! reservation past the budget or past the namespace's share is refused with
//! RESOURCE_EXHAUSTED naming the matrix, the namespace, the budget and what is held, and
//! nothing of the request is applied, so nothing acknowledged is lost.
//!
//! What is held is the sum of what each hosted partition last measured of itself
//! ([`super::partition::Partition::bytes`]): a dropped partition frees its bytes by leaving,
//! and no running total can drift. Reservations cover the writes in flight; a write measures
//! the rows it touched once applied and then releases its reservation. Growth is a bound
//! (every key taken for new) far from the limits and exact (only keys not held) near them,
//! so a model that stopped growing keeps training at its budget.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use angel_proto::{PsError, Result, namespace};
use parking_lot::Mutex;

use super::partition::Partitions;
use crate::blocks::Growth;

/// See the module documentation.
#[derive(Debug)]
pub struct MemoryAccount {
    budget: u64,
    /// The fraction of the budget one namespace may hold, as f64 bits (1.0: all of it).
    share: AtomicU64,
    /// Bytes reserved by writes in flight, by namespace.
    reserved: Mutex<HashMap<Option<String>, u64>>,
}

/// Bytes reserved for one write; released when dropped, once the write has measured what it
/// took.
#[must_use = "the reservation is released when dropped"]
pub struct Reservation<'a> {
    account: Option<&'a MemoryAccount>,
    namespace: Option<String>,
    bytes: u64,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let Some(account) = self.account else {
            return;
        };
        let mut reserved = account.reserved.lock();
        if let Some(held) = reserved.get_mut(&self.namespace) {
            *held = held.saturating_sub(self.bytes);
            if *held == 0 {
                reserved.remove(&self.namespace);
            }
        }
    }
}

/// What a reservation is for: the object written (`matrix 'NAME'`, `counter 'NAME'`), whose
/// name gives its namespace, and the write (`a push of 300 keys`).
#[derive(Debug, Clone, Copy)]
pub struct Use<'a> {
    /// `matrix` or `counter`.
    pub kind: &'a str,
    /// The object's full name.
    pub name: &'a str,
    /// The write, as the error names it.
    pub what: &'a str,
}

impl Use<'_> {
    /// The use of a write that takes nothing (a reservation of 0 bytes names nothing).
    pub const NOTHING: Use<'static> = Use {
        kind: "",
        name: "",
        what: "",
    };
}

impl MemoryAccount {
    /// An account of `budget` bytes, every namespace allowed all of it.
    pub fn new(budget: u64) -> Self {
        MemoryAccount {
            budget,
            share: AtomicU64::new(1f64.to_bits()),
            reserved: Mutex::default(),
        }
    }

    /// The budget, in bytes.
    pub fn budget(&self) -> u64 {
        self.budget
    }

    /// Lets one namespace hold `share` of the budget (the master's
    /// `--namespace-memory-share`); 0, or anything not in (0, 1], means all of it.
    pub fn set_share(&self, share: f64) {
        let share = if share > 0.0 && share <= 1.0 {
            share
        } else {
            1.0
        };
        self.share.store(share.to_bits(), Ordering::Relaxed);
    }

    fn share(&self) -> f64 {
        f64::from_bits(self.share.load(Ordering::Relaxed))
    }

    /// Bytes one namespace may hold.
    pub fn namespace_limit(&self) -> u64 {
        (self.budget as f64 * self.share()).min(u64::MAX as f64) as u64
    }

    /// Reserves `bytes` for `write`, given what `parts` hold: refused when they would take
    /// the server past its budget, or the object's namespace past its share.
    pub fn reserve(
        &self,
        parts: &Partitions,
        write: Use<'_>,
        bytes: u64,
    ) -> Result<Reservation<'_>> {
        let ns = namespace::split(write.name).0;
        if bytes == 0 {
            return Ok(Reservation {
                account: None,
                namespace: None,
                bytes,
            });
        }
        let mut reserved = self.reserved.lock();
        let (held, held_ns) = parts.bytes_held(ns);
        let all = held.saturating_add(reserved.values().sum());
        let key = ns.map(str::to_string);
        let ours = held_ns.saturating_add(reserved.get(&key).copied().unwrap_or(0));
        let object = format!(
            "{} '{}': {} needs up to {bytes} more bytes",
            write.kind, write.name, write.what
        );
        if all.saturating_add(bytes) > self.budget {
            return Err(PsError::TooLarge(format!(
                "{object}, past this server's memory budget: it holds {all} of its {} bytes \
                 (--memory-budget); nothing was applied: drop a model, add servers or raise \
                 --memory-budget",
                self.budget
            )));
        }
        let limit = self.namespace_limit();
        if let Some(ns) = ns
            && ours.saturating_add(bytes) > limit
        {
            return Err(PsError::TooLarge(format!(
                "{object}, past namespace '{ns}''s share of this server: the namespace holds \
                 {ours} of its {limit} bytes ({:.0}% of the {}-byte memory budget, \
                 --namespace-memory-share on the master); nothing was applied: drop one of its \
                 models or raise the share",
                self.share() * 100.0,
                self.budget
            )));
        }
        *reserved.entry(key.clone()).or_default() += bytes;
        Ok(Reservation {
            account: Some(self),
            namespace: key,
            bytes,
        })
    }

    /// Reserves the growth `grows` foretells for `write`: first its bound
    /// (`grows(false)`), and only when that is refused its exact figure (`grows(true)`),
    /// which looks every key up.
    pub fn reserve_growth(
        &self,
        parts: &Partitions,
        write: Use<'_>,
        grows: impl Fn(bool) -> Result<Growth>,
    ) -> Result<Reservation<'_>> {
        match self.reserve(parts, write, grows(false)?.bytes()) {
            Ok(reservation) => Ok(reservation),
            Err(_) => self.reserve(parts, write, grows(true)?.bytes()),
        }
    }
}

#[cfg(test)]
mod tests {
    use angel_proto::counter_keys::encode_str_keys;
    use angel_proto::{
        Caller, CounterAdminOp, CounterAdminRequest, CounterIncreaseRequest, CounterKeys,
        CounterMeta, CreatePartitionsRequest, MatrixMeta, Partition as Block, PullRequest,
        PushRequest, RowSlice, StorageKind, ValueType, wire,
    };

    use crate::server::Functions;
    use crate::server::service::ServerService;

    use super::*;

    const BUDGET: u64 = 1 << 20;

    /// A server's service, off the network, with a budget of [`BUDGET`] bytes of which one
    /// namespace may take `share`.
    fn service(share: f64) -> ServerService {
        let s = ServerService {
            memory: MemoryAccount::new(BUDGET),
            ..ServerService::new(Functions::default(), String::new(), "server@test".into())
        };
        s.memory.set_share(share);
        s
    }

    /// Matrix `id` named `name`: one row of 2^40 columns in two blocks, sparse or dense.
    fn matrix(id: u32, name: &str, storage: StorageKind, cols: u64) -> MatrixMeta {
        let block = |id, col_start, col_end| Block {
            id,
            row_start: 0,
            row_end: 1,
            col_start,
            col_end,
            ..Default::default()
        };
        MatrixMeta {
            id,
            name: name.into(),
            rows: 1,
            cols,
            value_type: ValueType::F32 as i32,
            storage: storage as i32,
            partitions: vec![block(0, 0, cols / 2), block(1, cols / 2, cols)],
            ..Default::default()
        }
    }

    fn create(s: &ServerService, meta: MatrixMeta) -> angel_proto::Result<()> {
        let request = CreatePartitionsRequest {
            matrix: Some(meta),
            partition_ids: vec![0, 1],
            epoch: 1,
            restore: false,
        };
        s.create_checked(request).map(drop)
    }

    /// Pushes `value` at `keys` (all in the first block) of matrix `id` as change `seq`.
    fn push(s: &ServerService, id: u32, seq: u64, keys: &[u64], value: f32) -> Result<()> {
        let request = PushRequest {
            caller: Some(Caller {
                worker_id: 5,
                seq,
                ..Default::default()
            }),
            matrix_id: id,
            value_type: ValueType::F32 as i32,
            slices: vec![RowSlice {
                partition_id: 0,
                row: 0,
                keys: wire::encode_keys(keys),
                values: wire::encode_values(&vec![value; keys.len()]),
                codec: 0,
            }],
            ..Default::default()
        };
        s.push_checked(request).map(drop)
    }

    fn pull(s: &ServerService, id: u32, keys: &[u64]) -> Vec<f32> {
        let request = PullRequest {
            caller: None,
            matrix_id: id,
            value_type: ValueType::F32 as i32,
            slices: vec![RowSlice {
                partition_id: 0,
                row: 0,
                keys: wire::encode_keys(keys),
                ..Default::default()
            }],
        };
        let reply = s.pull_checked(request).unwrap();
        wire::decode_values(&reply.slices[0].values, "values").unwrap()
    }

    /// What the blocks hold, measured afresh: the account must agree with it.
    fn measured(s: &ServerService) -> u64 {
        let matrices = s.parts.all().into_iter();
        let blocks = matrices.map(|p| crate::with_block!(&*p.data.read(), b => b.usage()).1);
        let counters = s.parts.all_counters().into_iter();
        blocks.sum::<u64>() + counters.map(|p| p.data.read().usage().1).sum::<u64>()
    }

    /// Pushes batches of 1,000 new keys to matrix `id` until one is refused; the keys of
    /// the accepted batches.
    fn flood(s: &ServerService, id: u32) -> (Vec<u64>, PsError) {
        let mut accepted = Vec::new();
        for batch in 0..10_000u64 {
            let keys: Vec<u64> = (batch * 1000..(batch + 1) * 1000).collect();
            match push(s, id, batch + 1, &keys, 1.0) {
                Ok(()) => accepted.extend(keys),
                Err(e) => return (accepted, e),
            }
        }
        panic!("10 million keys were accepted under a budget of {BUDGET} bytes");
    }

    /// Checks `err` is RESOURCE_EXHAUSTED naming every one of `words`.
    fn names(err: &PsError, words: &[&str]) {
        assert!(matches!(err, PsError::TooLarge(_)), "{err:?}");
        let text = err.to_string();
        for word in words {
            assert!(text.contains(word), "'{word}' missing from: {text}");
        }
    }

    #[test]
    fn a_sparse_push_flood_stops_at_the_budget_and_loses_nothing_it_accepted() {
        let s = service(1.0);
        create(&s, matrix(7, "w", StorageKind::Sparse, 1 << 40)).unwrap();
        let (accepted, err) = flood(&s, 7);
        let words = [
            "matrix 'w'",
            "a push of 1 slices and 1000 keys",
            "1048576",
            "--memory-budget",
        ];
        names(&err, &words);
        let held = s.parts.bytes_held(None).0;
        assert!(held <= BUDGET, "held {held} of {BUDGET}");
        // The last table to grow needs its old and new arrays at once: 2.5 x what it held.
        assert!(
            held > BUDGET / 3,
            "refused at {held} of {BUDGET}: the bound is too loose"
        );
        assert_eq!(held, measured(&s), "the account agrees with the blocks");
        assert!(pull(&s, 7, &accepted).iter().all(|&v| v == 1.0));
        // A model that stopped growing trains on at its budget: held keys take no memory.
        let again = &accepted[..1000];
        push(&s, 7, 20_000, again, 1.0).unwrap();
        assert_eq!(pull(&s, 7, again), vec![2.0; 1000]);
        assert_eq!(s.parts.bytes_held(None).0, held);
        // Dropping the matrix frees its bytes.
        s.parts.remove_matrix(7);
        assert_eq!(s.parts.bytes_held(None).0, 0);
    }

    #[test]
    fn a_namespace_stops_at_its_share_and_leaves_the_rest_to_others() {
        let s = service(0.5);
        create(&s, matrix(1, "a/w", StorageKind::Sparse, 1 << 40)).unwrap();
        create(&s, matrix(2, "b/w", StorageKind::Sparse, 1 << 40)).unwrap();
        let (_, err) = flood(&s, 1);
        names(
            &err,
            &[
                "matrix 'a/w'",
                "namespace 'a'",
                "50%",
                "--namespace-memory-share",
            ],
        );
        let (_, of_a) = s.parts.bytes_held(Some("a"));
        assert!(of_a <= BUDGET / 2, "namespace a holds {of_a}");
        push(&s, 2, 1, &[1, 2, 3], 1.0).unwrap();
        // A dense create past the share is refused before it allocates.
        let err = create(&s, matrix(3, "a/d", StorageKind::Dense, 200_000)).unwrap_err();
        names(&err, &["matrix 'a/d'", "creating its partitions"]);
        create(&s, matrix(4, "c/d", StorageKind::Dense, 100_000)).unwrap();
        assert_eq!(s.parts.bytes_held(Some("c")).1, 400_000);
    }

    #[test]
    fn a_counter_flood_stops_at_the_budget() {
        let s = service(1.0);
        let space = MatrixMeta {
            partitions: vec![Block {
                id: 0,
                col_start: 0,
                col_end: 1 << 63,
                ..Default::default()
            }],
            ..Default::default()
        };
        let counter = CounterMeta {
            id: 3,
            name: "ids".into(),
            space: Some(space),
            ..Default::default()
        };
        let create = CounterAdminRequest {
            op: CounterAdminOp::Create as i32,
            counter: Some(counter),
            partition_ids: vec![0],
            epoch: 1,
            ..Default::default()
        };
        s.counter_admin_checked(create).unwrap();
        let mut refused = None;
        for batch in 0..1000u64 {
            let keys: Vec<String> = (0..1000).map(|i| format!("user-{batch}-{i}")).collect();
            let (data, lengths) = encode_str_keys(&keys).unwrap();
            let request = CounterIncreaseRequest {
                caller: Some(Caller {
                    worker_id: 5,
                    seq: batch + 1,
                    ..Default::default()
                }),
                counter_id: 3,
                parts: vec![CounterKeys {
                    partition_id: 0,
                    data,
                    lengths,
                    deltas: wire::encode_values(&vec![1i64; keys.len()]),
                }],
            };
            if let Err(e) = s.counter_increase_checked(request) {
                refused = Some(e);
                break;
            }
        }
        let err = refused.expect("a million keys were counted under a 1 MiB budget");
        names(&err, &["counter 'ids'", "an increase of 1000 keys"]);
        let held = s.parts.bytes_held(None).0;
        assert!(held <= BUDGET, "held {held} of {BUDGET}");
        assert_eq!(held, measured(&s));
    }
}

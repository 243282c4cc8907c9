//! Clock tables: the consistency models (BSP, SSP, ASP) of training, kept on the master.
//!
//! Each model has one table of the workers (ps_train tasks) of its current round, a round
//! being one pass of a training statement: it starts when a worker joins a table with no
//! active worker. A worker's clock is the number of mini-batches (or averaging rounds) it
//! completed. Before pulling at clock `c`, a worker asks ([`ClockPhase::Pull`]) and is let go
//! once every other active worker reached `c - s` (s = staleness: 0 for BSP), or all but
//! `backup` of them did. ASP never waits. Under BSP a worker also asks before pushing
//! ([`ClockPhase::Push`]): pushes of one clock wait until everyone pulled at it and go in the
//! order of the workers' `order_key`, so a run with the same data repeats the same model bit
//! for bit. The staleness, the workers a round waits for, the backups and the slow factor
//! are the model's, from the `sync` of its matrix's training description. Workers that finish
//! their data leave; a worker silent for [`WORKER_TIMEOUT`] is dropped (and taken back if it
//! reports again), so nobody waits for a dead task.
//!
//! The reports also carry each worker's computing time and steps: a worker whose rate is
//! below the round's median divided by the model's `slow_factor` is flagged slow, in the
//! status and the logs, with the time others spent waiting for it; judged at each of its
//! reports, so the flag clears when its rate over the round recovers.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use angel_proto::{ClockPhase, ClockReply, ClockRequest, Result, Sync, WorkerStatus};
use parking_lot::Mutex;
use tokio::sync::Notify;

use super::quota::{Quotas, exceeded, namespace_of};

/// A worker that reports nothing for this long is dropped from its table.
pub const WORKER_TIMEOUT: Duration = Duration::from_secs(60);
/// A table none of whose workers reported for this long is forgotten: its job is gone.
const FORGET_AFTER: Duration = Duration::from_secs(600);
/// How long a round's first clocks wait for the statement's workers to join. Tasks of one
/// statement start together; on a cluster with fewer slots than workers the rest start later,
/// and waiting for them longer would only stall the ones running.
const JOIN_GRACE: Duration = Duration::from_secs(3);
/// The longest one call waits; the worker then asks again, so calls stay bounded.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// Steps a worker makes before its rate counts for the median and the slow flag.
const MIN_STEPS: u64 = 5;
/// Workers, finished ones included, that the tables of one namespace may list, as a multiple
/// of its quota of active workers: a finished worker stays listed until its model's next
/// round (or [`FORGET_AFTER`]), and every listed one costs each call under the tables' lock.
const LISTED_PER_ACTIVE: usize = 4;

/// Every model's clock table.
#[derive(Debug)]
pub struct Clocks {
    tables: Mutex<HashMap<String, Table>>,
    changed: Notify,
    /// Active workers the models of one namespace may have together.
    max_workers: usize,
}

impl Default for Clocks {
    fn default() -> Self {
        Clocks::new(Quotas::default().workers)
    }
}

/// One model's workers in its current (or last) round, in join order.
#[derive(Debug)]
struct Table {
    workers: Vec<ClockEntry>,
    started: Instant,
}

#[derive(Debug)]
struct ClockEntry {
    id: u64,
    rank: u32,
    order_key: u64,
    clock: i64,
    /// The clock whose update it is waiting to push (-1: none).
    pushing: i64,
    busy_ms: f64,
    steps: u64,
    waited_ms: u64,
    caused_wait_ms: u64,
    left: bool,
    evicted: bool,
    slow: bool,
    last_seen: Instant,
}

impl ClockEntry {
    fn active(&self) -> bool {
        !self.left && !self.evicted
    }

    /// Steps per second of computing, once it made enough steps to tell.
    fn rate(&self) -> Option<f64> {
        (self.steps >= MIN_STEPS && self.busy_ms > 0.0)
            .then(|| self.steps as f64 * 1e3 / self.busy_ms)
    }
}

impl Clocks {
    /// Handles one report; see the module documentation. Returns when the worker may go on,
    /// or after [`MAX_WAIT`] with `ready` false.
    /// No tables yet; the models of one namespace may have `max_workers` active workers.
    pub fn new(max_workers: usize) -> Self {
        Clocks {
            tables: Mutex::default(),
            changed: Notify::new(),
            max_workers,
        }
    }

    /// Refuses a worker new to its model's table when the tables of the model's namespace hold
    /// its quota of active workers already (models trained one after another each have theirs),
    /// or [`LISTED_PER_ACTIVE`] times as many listed, finished ones included (fake workers
    /// that join and leave would make every call slower under the tables' lock). Concurrent
    /// joins may pass together: the overshoot is bounded by the calls in flight.
    pub fn admit(&self, r: &ClockRequest) -> Result<()> {
        let Some(ns) = namespace_of(&r.model) else {
            return Ok(());
        };
        let mut tables = self.tables.lock();
        if tables
            .get(&r.model)
            .is_some_and(|t| t.workers.iter().any(|w| w.id == r.worker))
        {
            return Ok(());
        }
        forget_silent(&mut tables);
        let ours = (tables.iter()).filter(|(model, _)| namespace_of(model) == Some(ns));
        let (active, listed) = ours.fold((0, 0), |(active, listed), (_, t)| {
            let running = t.workers.iter().filter(|w| w.active()).count();
            (active + running, listed + t.workers.len())
        });
        let quota = self.max_workers;
        let why = match (
            active >= quota,
            listed >= quota.saturating_mul(LISTED_PER_ACTIVE),
        ) {
            (true, _) => format!(
                "has {active} training workers running, its quota (--namespace-max-workers \
                 {quota})"
            ),
            (false, true) => format!(
                "lists {listed} training workers, finished ones included (they stay until \
                 their model's next round), {LISTED_PER_ACTIVE} x its quota \
                 (--namespace-max-workers {quota})"
            ),
            (false, false) => return Ok(()),
        };
        Err(exceeded(ns, &why))
    }

    /// Records `request` of a worker of a model trained as `sync` says and waits (a bounded
    /// time) until the worker may go on.
    pub async fn clock(&self, request: &ClockRequest, sync: &Sync) -> ClockReply {
        let started = Instant::now();
        self.report(request, sync);
        self.changed.notify_waiters();
        let mut blocker = None;
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let (reply, holder) = self.check(request, sync);
            if holder.is_none() || started.elapsed() >= MAX_WAIT {
                let waited = started.elapsed();
                if waited >= Duration::from_millis(1) {
                    self.account_wait(request, blocker.or(holder), waited);
                }
                return ClockReply {
                    ready: holder.is_none(),
                    ..reply
                };
            }
            blocker = blocker.or(holder);
            let left = MAX_WAIT.saturating_sub(started.elapsed());
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), notified).await;
        }
    }

    /// Every model's workers of the current or last round; tables whose workers all fell
    /// silent [`FORGET_AFTER`] ago are forgotten first.
    pub fn status(&self) -> Vec<WorkerStatus> {
        let mut tables = self.tables.lock();
        // A killed job's workers are evicted after WORKER_TIMEOUT; its table goes later.
        tables.retain(|_, t| {
            t.workers
                .iter()
                .any(|w| w.last_seen.elapsed() < FORGET_AFTER)
        });
        let mut models: Vec<_> = tables.iter().collect();
        models.sort_by(|a, b| a.0.cmp(b.0));
        models
            .into_iter()
            .flat_map(|(model, table)| {
                table.workers.iter().map(move |w| WorkerStatus {
                    model: model.clone(),
                    worker: w.id,
                    rank: w.rank,
                    clock: w.clock,
                    steps_per_sec: w.rate().unwrap_or(0.0),
                    slow: w.slow,
                    waited_ms: w.waited_ms,
                    caused_wait_ms: w.caused_wait_ms,
                    left: w.left,
                    evicted: w.evicted,
                })
            })
            .collect()
    }

    /// Records what the worker says: joins it (starting a round if nobody is active), moves
    /// its clock, adds its computing time, and flags it when slow.
    fn report(&self, r: &ClockRequest, sync: &Sync) {
        let mut tables = self.tables.lock();
        let table = tables.entry(r.model.clone()).or_insert_with(|| Table {
            workers: Vec::new(),
            started: Instant::now(),
        });
        if !table.workers.iter().any(|w| w.id == r.worker) {
            if r.phase() == ClockPhase::Leave {
                return;
            }
            if !table.workers.iter().any(ClockEntry::active) {
                table.workers.clear();
                table.started = Instant::now();
            }
            table.workers.push(ClockEntry {
                id: r.worker,
                rank: table.workers.len() as u32,
                order_key: r.order_key,
                clock: r.clock,
                pushing: -1,
                busy_ms: 0.0,
                steps: 0,
                waited_ms: 0,
                caused_wait_ms: 0,
                left: false,
                evicted: false,
                slow: false,
                last_seen: Instant::now(),
            });
        }
        let median = median_rate(&table.workers);
        let w = table
            .workers
            .iter_mut()
            .find(|w| w.id == r.worker)
            .expect("joined above");
        w.clock = w.clock.max(r.clock);
        w.busy_ms += r.busy_ms.max(0.0);
        w.steps += r.steps;
        w.last_seen = Instant::now();
        if w.evicted {
            tracing::info!(model = %r.model, rank = w.rank, "worker reported again; taken back");
            w.evicted = false;
        }
        match r.phase() {
            ClockPhase::Leave => w.left = true,
            ClockPhase::Push => w.pushing = r.clock,
            _ => {}
        }
        let factor = match sync.slow_factor {
            f if f > 1.0 && f.is_finite() => f,
            _ => 2.0,
        };
        // Judged again at every report on the round's rates so far, so a worker that was slow
        // only over its first steps (a moment of CPU contention) is not flagged for good.
        let Some((rate, median)) = w.rate().zip(median) else {
            return;
        };
        let was_slow = std::mem::replace(&mut w.slow, rate * factor < median);
        if w.slow && !was_slow {
            tracing::warn!(
                model = %r.model,
                rank = w.rank,
                rate = format!("{rate:.1} steps/s"),
                median = format!("{median:.1} steps/s"),
                "slow worker: below the median rate / {factor}"
            );
        }
    }

    /// The reply the worker would get now, and the worker holding it back (None: it may go).
    fn check(&self, r: &ClockRequest, sync: &Sync) -> (ClockReply, Option<u64>) {
        let (staleness, backup) = (sync.effective_staleness(), sync.backup_workers as usize);
        let mut tables = self.tables.lock();
        let Some(table) = tables.get_mut(&r.model) else {
            return (ClockReply::default(), None);
        };
        evict_silent(&r.model, table);
        let me = table.workers.iter().find(|w| w.id == r.worker);
        let active: Vec<&ClockEntry> = table.workers.iter().filter(|w| w.active()).collect();
        let reply = ClockReply {
            ready: false,
            rank: me.map_or(0, |w| w.rank),
            active: active.len() as u32,
            min_clock: active.iter().map(|w| w.clock).min().unwrap_or(r.clock),
        };
        let Some(me) = me.filter(|w| w.active()) else {
            return (reply, None);
        };
        let others: Vec<&ClockEntry> = active.into_iter().filter(|w| w.id != me.id).collect();
        let holder = match r.phase() {
            _ if staleness < 0 => None,
            ClockPhase::Pull => {
                let joining = (table.workers.len() as u32) < sync.workers
                    && table.started.elapsed() < JOIN_GRACE;
                let behind: Vec<&&ClockEntry> = others
                    .iter()
                    .filter(|w| w.clock < r.clock - staleness)
                    .collect();
                match behind.len() > backup {
                    true => behind.iter().min_by_key(|w| w.clock).map(|w| w.id),
                    false if joining => Some(0),
                    false => None,
                }
            }
            ClockPhase::Push if staleness == 0 && backup == 0 => {
                let key = (me.order_key, me.id);
                others
                    .iter()
                    .find(|w| match (w.order_key, w.id) < key {
                        true => w.clock <= r.clock,
                        false => w.clock <= r.clock && w.pushing < r.clock,
                    })
                    .map(|w| w.id)
            }
            _ => None,
        };
        (reply, holder)
    }

    /// Adds `waited` to the worker's waits and to what `blocker` made others wait.
    fn account_wait(&self, r: &ClockRequest, blocker: Option<u64>, waited: Duration) {
        let ms = waited.as_millis() as u64;
        let mut tables = self.tables.lock();
        let Some(table) = tables.get_mut(&r.model) else {
            return;
        };
        for w in table.workers.iter_mut() {
            if w.id == r.worker {
                w.waited_ms += ms;
            }
            if Some(w.id) == blocker {
                w.caused_wait_ms += ms;
            }
        }
    }
}

/// The median computing rate of the workers that made enough steps.
/// Forgets the tables whose workers all fell silent [`FORGET_AFTER`] ago: a killed job's
/// workers are evicted after [`WORKER_TIMEOUT`], its table goes later.
fn forget_silent(tables: &mut HashMap<String, Table>) {
    tables.retain(|_, t| {
        t.workers
            .iter()
            .any(|w| w.last_seen.elapsed() < FORGET_AFTER)
    });
}

fn median_rate(workers: &[ClockEntry]) -> Option<f64> {
    let mut rates: Vec<f64> = workers.iter().filter_map(ClockEntry::rate).collect();
    if rates.len() < 2 {
        return None;
    }
    rates.sort_by(f64::total_cmp);
    Some(rates[rates.len() / 2])
}

/// Drops the active workers of `table` silent for [`WORKER_TIMEOUT`].
fn evict_silent(model: &str, table: &mut Table) {
    for w in table.workers.iter_mut().filter(|w| w.active()) {
        if w.last_seen.elapsed() >= WORKER_TIMEOUT {
            tracing::warn!(
                model,
                rank = w.rank,
                clock = w.clock,
                "worker silent; dropped"
            );
            w.evicted = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pull(worker: u64, clock: i64) -> ClockRequest {
        ClockRequest {
            model: "m".into(),
            worker,
            clock,
            phase: ClockPhase::Pull as i32,
            ..Default::default()
        }
    }

    /// A model's sync options: two workers at `staleness`.
    fn sync(staleness: i64) -> Sync {
        Sync {
            staleness,
            workers: 2,
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn ssp_holds_a_worker_until_the_others_are_within_the_staleness() {
        let (clocks, ssp) = (Clocks::default(), sync(1));
        assert!(clocks.clock(&pull(1, 0), &ssp).await.ready);
        assert!(clocks.clock(&pull(2, 0), &ssp).await.ready);
        assert!(
            clocks.clock(&pull(1, 1), &ssp).await.ready,
            "1 ahead is allowed"
        );
        let (reply, holder) = clocks.check(&pull(1, 2), &ssp);
        assert_eq!((holder, reply.min_clock), (Some(2), 0), "2 ahead waits");
        clocks.report(&pull(2, 1), &ssp);
        assert_eq!(clocks.check(&pull(1, 2), &ssp).1, None);
        let leave = ClockRequest {
            phase: ClockPhase::Leave as i32,
            ..pull(2, 1)
        };
        clocks.clock(&leave, &ssp).await;
        assert!(
            clocks.clock(&pull(1, 9), &ssp).await.ready,
            "nobody waits for a leaver"
        );
        let epochs = Sync {
            epoch_clock: true,
            ..sync(0)
        };
        clocks.report(&pull(3, 0), &epochs);
        assert_eq!(clocks.check(&pull(1, 20), &epochs).1, None, "epoch clocks");
    }

    #[tokio::test]
    async fn a_waiting_worker_goes_on_when_the_slowest_catches_up() {
        let (clocks, bsp) = (std::sync::Arc::new(Clocks::default()), sync(0));
        clocks.clock(&pull(1, 0), &bsp).await;
        clocks.clock(&pull(2, 0), &bsp).await;
        let waiting = tokio::spawn({
            let (clocks, bsp) = (clocks.clone(), bsp);
            async move { clocks.clock(&pull(1, 1), &bsp).await }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiting.is_finished(), "BSP: worker 1 waits for worker 2");
        clocks.clock(&pull(2, 1), &bsp).await;
        assert!(waiting.await.unwrap().ready);
        let status = clocks.status();
        assert!(status[0].waited_ms >= 40 && status[1].caused_wait_ms >= 40);
    }

    #[test]
    fn bsp_pushes_go_in_order_of_the_workers_keys() {
        let (clocks, bsp) = (Clocks::default(), sync(0));
        let at = |worker, phase: ClockPhase, clock| ClockRequest {
            phase: phase as i32,
            order_key: worker * 10,
            ..pull(worker, clock)
        };
        clocks.report(&at(1, ClockPhase::Pull, 0), &bsp);
        clocks.report(&at(2, ClockPhase::Pull, 0), &bsp);
        clocks.report(&at(2, ClockPhase::Push, 0), &bsp);
        assert_eq!(clocks.check(&at(2, ClockPhase::Push, 0), &bsp).1, Some(1));
        assert_eq!(clocks.check(&at(1, ClockPhase::Push, 0), &bsp).1, None);
        clocks.report(&at(1, ClockPhase::Pull, 1), &bsp);
        assert_eq!(clocks.check(&at(2, ClockPhase::Push, 0), &bsp).1, None);
    }

    #[test]
    fn backup_workers_let_a_clock_complete_without_the_slowest() {
        let clocks = Clocks::default();
        let with_backup = Sync {
            backup_workers: 1,
            workers: 3,
            ..sync(0)
        };
        for worker in [1, 2, 3] {
            clocks.report(&pull(worker, 0), &with_backup);
        }
        clocks.report(&pull(2, 1), &with_backup);
        // Worker 3 has not completed clock 0: one behind, the backup's share.
        assert_eq!(clocks.check(&pull(1, 1), &with_backup).1, None);
        let strict = Sync {
            backup_workers: 0,
            ..with_backup
        };
        assert_eq!(
            clocks.check(&pull(1, 1), &strict).1,
            Some(3),
            "no backup: wait for 3"
        );
        // At clock 2, workers 2 and 3 are both behind: more than the one backup.
        assert_eq!(clocks.check(&pull(1, 2), &with_backup).1, Some(3));
    }

    #[test]
    fn a_worker_far_below_the_median_rate_is_flagged() {
        let (clocks, asp) = (Clocks::default(), sync(-1));
        let asp = Sync {
            slow_factor: 2.0,
            ..asp
        };
        for (worker, busy_ms) in [(1, 100.0), (2, 110.0), (3, 400.0)] {
            let report = ClockRequest {
                busy_ms,
                steps: 10,
                ..pull(worker, 10)
            };
            clocks.report(&report, &asp);
        }
        clocks.report(&pull(3, 11), &asp);
        let slow: Vec<bool> = clocks.status().iter().map(|w| w.slow).collect();
        assert_eq!(slow, [false, false, true]);
        // Slow over its first steps only: 100 steps in 500 ms now, above the median's half.
        let recovered = ClockRequest {
            busy_ms: 100.0,
            steps: 90,
            ..pull(3, 12)
        };
        clocks.report(&recovered, &asp);
        let slow: Vec<bool> = clocks.status().iter().map(|w| w.slow).collect();
        assert_eq!(slow, [false, false, false]);
    }

    #[test]
    fn a_namespace_past_its_worker_quota_is_refused_new_workers_only() {
        let clocks = Clocks::new(2);
        let join = |model: &str, worker| ClockRequest {
            model: model.into(),
            ..pull(worker, 0)
        };
        for worker in [1, 2] {
            clocks.admit(&join("a/m", worker)).unwrap();
            clocks.report(&join("a/m", worker), &sync(0));
        }
        clocks
            .admit(&join("a/m", 2))
            .expect("a known worker reports on");
        let err = clocks.admit(&join("a/other", 3)).unwrap_err();
        assert!(err.to_string().contains("namespace 'a'"), "{err}");
        clocks
            .admit(&join("b/m", 3))
            .expect("another namespace has its own quota");
        clocks.admit(&join("m", 3)).expect("no namespace, no quota");
    }

    /// Models trained one after another each get the namespace's quota: workers that left do
    /// not count against it, though the tables list at most 4 x the quota of them.
    #[test]
    fn finished_workers_do_not_count_against_the_quota_but_stay_bounded() {
        let clocks = Clocks::new(2);
        let request = |model: String, worker, phase: ClockPhase| ClockRequest {
            model,
            phase: phase as i32,
            ..pull(worker, 0)
        };
        for model in 0..4u64 {
            let (name, workers) = (format!("a/m{model}"), [10 * model, 10 * model + 1]);
            for worker in workers {
                let join = request(name.clone(), worker, ClockPhase::Pull);
                clocks.admit(&join).unwrap();
                clocks.report(&join, &sync(0));
            }
            for worker in workers {
                clocks.report(&request(name.clone(), worker, ClockPhase::Leave), &sync(0));
            }
        }
        let err = clocks.admit(&request("a/m9".into(), 90, ClockPhase::Pull));
        let err = err.unwrap_err().to_string();
        assert!(err.contains("lists 8 training workers"), "{err}");
    }
}

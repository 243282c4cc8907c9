//! [`ClockWorker`]: one training task as a member of its model's clock table on the master
//! (`ps-service`'s `master::clocks`). It reports its clock before each pull and waits there
//! as BSP/SSP require, under BSP waits for its turn before pushing, reports its computing time
//! (the master flags slow workers from it), and leaves when its data ends, so nobody waits for
//! it. Under ASP it only reports, twice a second.
//!
//! `ANGEL_SLOW_WORKER=rank:factor` (tests and `bench sync`) makes the worker of that rank in
//! each round `factor` times slower, sleeping after each step for (factor - 1) times the step's
//! time.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use angel_client::runtime::block_on;
use angel_client::{ClockPhase, ClockReply, ClockRequest, PsClient, WorkerClock};

use crate::error::{Error, Result};
use crate::sync::SyncSpec;

/// The test and benchmark hook slowing one worker down.
pub const SLOW_WORKER_VAR: &str = "ANGEL_SLOW_WORKER";
/// How often an ASP worker reports its rate.
const ASP_REPORT: Duration = Duration::from_millis(500);

/// See the module documentation.
#[derive(Debug)]
pub struct ClockWorker {
    client: Arc<PsClient>,
    model: String,
    /// Whether nobody waits on clocks (ASP, or epoch clocks), read once from the spec.
    asp: bool,
    /// Whether it pulls the next mini-batch while computing the current one.
    pulls_ahead: bool,
    /// Whether it waits for its turn to push (BSP without backup workers).
    waits_to_push: bool,
    id: u64,
    order_key: u64,
    /// Steps (mini-batches or averaging rounds) completed.
    clock: i64,
    rank: Option<u32>,
    /// Computing since the last report: since when, and steps completed.
    busy_since: Instant,
    steps: u64,
    last_report: Option<Instant>,
    /// `ANGEL_SLOW_WORKER`: (rank, factor).
    slow_hook: Option<(u32, f64)>,
    left: bool,
}

impl ClockWorker {
    /// Worker `id` (unique in its round; 0 draws one) of `model`, whose pushes are ordered
    /// under BSP by `order_key` (derived from its data, so reruns keep the order).
    pub fn join(
        client: Arc<PsClient>,
        model: &str,
        sync: &SyncSpec,
        id: u64,
        order_key: u64,
    ) -> Result<Self> {
        Ok(ClockWorker {
            client,
            model: model.to_string(),
            asp: sync.staleness() < 0,
            pulls_ahead: sync.pulls_ahead(),
            waits_to_push: sync.staleness() == 0 && sync.backup_workers == 0,
            id: if id == 0 { fresh_id() } else { id },
            order_key,
            clock: 0,
            rank: None,
            busy_since: Instant::now(),
            steps: 0,
            last_report: None,
            slow_hook: slow_hook()?,
            left: false,
        })
    }

    /// Reports the clock before a pull and waits as the consistency model requires; returns
    /// the step to pull as (which the servers record).
    pub fn before_pull(&mut self) -> Result<WorkerClock> {
        let due = self.last_report.is_none_or(|t| t.elapsed() >= ASP_REPORT);
        if !self.asp || due {
            self.report(ClockPhase::Pull)?;
        }
        Ok(WorkerClock {
            worker: self.id,
            clock: self.clock,
        })
    }

    /// The step of a pull of the next mini-batch started while the current one computes, or
    /// `None` unless the model pulls ahead: only under ASP does no worker wait on clocks, so
    /// only there may a pull run one step early.
    pub fn pull_ahead(&mut self) -> Result<Option<WorkerClock>> {
        if !self.pulls_ahead {
            return Ok(None);
        }
        let step = self.before_pull()?;
        Ok(Some(WorkerClock {
            clock: step.clock + 1,
            ..step
        }))
    }

    /// Under BSP, waits for this worker's turn to push its update of the current clock.
    pub fn before_push(&mut self) -> Result<()> {
        if self.waits_to_push {
            self.report(ClockPhase::Push)?;
        }
        Ok(())
    }

    /// Counts a completed step that started at `started`; the slow hook sleeps here.
    pub fn after_step(&mut self, started: Instant) {
        self.clock += 1;
        self.steps += 1;
        if let Some((rank, factor)) = self.slow_hook
            && self.rank == Some(rank)
        {
            let extra = started.elapsed().mul_f64(factor - 1.0);
            tokio::task::block_in_place(|| std::thread::sleep(extra));
        }
    }

    /// Leaves the clock table: the worker's data ended.
    pub fn leave(&mut self) -> Result<()> {
        if !self.left {
            self.left = true;
            self.report(ClockPhase::Leave)?;
        }
        Ok(())
    }

    fn request(&self, phase: ClockPhase) -> ClockRequest {
        ClockRequest {
            model: self.model.clone(),
            worker: self.id,
            clock: self.clock,
            phase: phase as i32,
            order_key: self.order_key,
            busy_ms: self.busy_since.elapsed().as_secs_f64() * 1e3,
            steps: self.steps,
        }
    }

    fn report(&mut self, phase: ClockPhase) -> Result<ClockReply> {
        let request = self.request(phase);
        let reply = block_on(self.client.clock(request))?;
        self.rank.get_or_insert(reply.rank);
        self.steps = 0;
        self.busy_since = Instant::now();
        self.last_report = Some(Instant::now());
        Ok(reply)
    }
}

impl Drop for ClockWorker {
    /// A task that failed still leaves, so the next round does not wait for it.
    fn drop(&mut self) {
        if self.left {
            return;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let (client, request) = (self.client.clone(), self.request(ClockPhase::Leave));
            handle.spawn(async move { client.clock(request).await });
        }
    }
}

/// A worker id no other worker of this or another process draws (in practice).
pub(crate) fn fresh_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    std::collections::hash_map::RandomState::new()
        .hash_one((std::process::id(), n))
        .max(1)
}

/// What [`set_slow_worker`] set, if it was called.
static SLOW_WORKER: std::sync::Mutex<Option<Option<(u32, f64)>>> = std::sync::Mutex::new(None);

/// Sets this process's slow worker (rank, factor), or none, in place of `ANGEL_SLOW_WORKER`:
/// for `bench sync`, whose runs with and without a slow worker share a process.
pub fn set_slow_worker(hook: Option<(u32, f64)>) {
    *SLOW_WORKER.lock().expect("slow worker") = Some(hook);
}

/// The slow worker set by [`set_slow_worker`], else `ANGEL_SLOW_WORKER` (`rank:factor`,
/// factor >= 1).
pub(crate) fn slow_hook() -> Result<Option<(u32, f64)>> {
    if let Some(hook) = *SLOW_WORKER.lock().expect("slow worker") {
        return Ok(hook);
    }
    let Ok(text) = std::env::var(SLOW_WORKER_VAR) else {
        return Ok(None);
    };
    let parsed = text.split_once(':').and_then(|(r, f)| {
        let factor = f
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|f| *f >= 1.0 && *f <= 1e3)?;
        Some((r.trim().parse::<u32>().ok()?, factor))
    });
    match parsed {
        Some(hook) => Ok(Some(hook)),
        None => Err(Error::Setting(format!(
            "{SLOW_WORKER_VAR}='{text}': expected rank:factor, e.g. 1:3 (factor from 1 to 1000)"
        ))),
    }
}

//! Model rotation (Harp, "model rotation"), scheduled on the master.
//!
//! A rotating model's rotated part (matrix factorization: the item factors) is cut into S
//! slices, and a training statement's W workers each train their own rows against one slice at
//! a time, trading slices so that every slice visits every worker once per round (one round
//! per statement: an epoch) and every update sees the latest value of what it touches.
//!
//! The schedule: with S = 2W slices, worker of rank `w` takes at step `t` the slice
//! `perm[(2w + t) mod S]`, `perm` a fresh random order of the slices each round. At one step
//! the workers' slices differ, and each worker meets every slice once in S steps. The slices a
//! worker asks for one step ahead (to fetch the next while it trains the current: pipelining)
//! are never those the others hold at the current step. The master grants a slice only once
//! its previous holder handed it back (exclusive leases); a worker waiting for a slice waits
//! for a worker further behind, whose own next slice was released one step before it, so the
//! waits never form a cycle.
//!
//! Hybrid parallelism (Angel): with G groups, ranks are dealt to the groups in turn and each
//! group of W/G workers rotates its own S = 2W/G slices as above, with leases exclusive within
//! the group; the groups train the same slices at once and share them through the PS (each
//! step pushes its change as an addition). G = 1 is pure rotation; G = W, data parallelism.
//!
//! A round's workers must train at once: one that joins finds the round of the model's
//! running statement, and a round whose W workers have not all joined within [`JOIN_GRACE`]
//! fails its acquisitions with an error saying so (fewer task slots than workers). Every
//! lease is recorded (round, step, group, rank, slice, start, end, rows and time trained) for
//! the status and the tests.
//!
//! - [`record`]: the schedules as the master's saved state holds them, so a restarted master
//!   resumes the rounds its workers are in.

mod record;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use angel_proto::{Lease, PsError, Result, RotatePhase, RotateReply, RotateRequest, Sync};
use parking_lot::Mutex;
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use tokio::sync::Notify;

/// Automatic time control: a step's budget is the previous round's typical step (the lower
/// median of its training times) with this much slack, so the usual step trains all its rows
/// and a straggler's is cut to the others' pace.
const AUTO_SLACK: f64 = 1.25;

/// How long a round's workers have to join before its acquisitions fail.
pub const JOIN_GRACE: Duration = Duration::from_secs(10);
/// The longest one ACQUIRE waits; the worker then asks again, so calls stay bounded.
const MAX_WAIT: Duration = Duration::from_secs(10);
/// A full round none of whose workers called for this long is abandoned when a new worker
/// asks to join ([`Rotation::abandoned_for`]): the lease of a job's run, after which a job
/// run again takes the killed run's place.
const ABANDONED_AFTER: Duration = angel_proto::limits::JOB_LEASE;
/// Leases kept per model: the last rounds' (a round has W x S of them).
const MAX_LEASES: usize = 100_000;

/// Every rotating model's current round and its record of leases.
#[derive(Debug)]
pub struct Rotations {
    models: Mutex<HashMap<String, Model>>,
    changed: Notify,
    /// When the master started: lease times count from it, after `base_us`.
    epoch: Instant,
    /// The latest lease time of the saved state this master resumed (0 without one), so lease
    /// times go on from it.
    base_us: AtomicU64,
}

impl Default for Rotations {
    fn default() -> Self {
        Rotations {
            models: Mutex::default(),
            changed: Notify::new(),
            epoch: Instant::now(),
            base_us: AtomicU64::new(0),
        }
    }
}

/// One model's rotation: its round and its leases so far.
#[derive(Debug, Default)]
struct Model {
    round: Option<Rotation>,
    /// Rounds started.
    rounds: u32,
    leases: Vec<Lease>,
}

impl Model {
    /// Forgets the oldest half of a full record of leases, but none still held: a slice's
    /// holder must stay in the record, or the slice would look free.
    fn trim_leases(&mut self) {
        if self.leases.len() < MAX_LEASES {
            return;
        }
        let holders = self.round.iter_mut().flat_map(|r| r.holder.iter_mut());
        let oldest_held = holders.flatten().map(|i| *i).min();
        let cut = oldest_held.unwrap_or(usize::MAX).min(MAX_LEASES / 2);
        self.leases.drain(..cut);
        for held in self.round.iter_mut().flat_map(|r| r.holder.iter_mut()) {
            *held = held.map(|i| i - cut);
        }
    }

    /// Frees the slices the worker of `member` (its group and rank) holds, ending their leases
    /// at `now`.
    fn free_held(&mut self, member: &RotateReply, now: u64) {
        let Some(round) = self.round.as_mut() else {
            return;
        };
        let own = |l: &Lease| (l.group, l.rank) == (member.group, member.rank);
        for held in round.holder.iter_mut() {
            if let Some(index) = *held
                && self.leases.get(index).is_some_and(own)
            {
                *held = None;
                self.leases[index].end_us = now.max(self.leases[index].start_us);
            }
        }
    }
}

/// One statement's rotation.
#[derive(Debug)]
struct Rotation {
    number: u32,
    workers: u32,
    /// The workers joined, by task id, in rank order; the run of each that holds the rank
    /// (the latest to join under its id), and the steps it has handed back.
    joined: Vec<u64>,
    runs: Vec<u64>,
    done: Vec<u32>,
    left: Vec<bool>,
    started: Instant,
    /// When one of its workers last called (or the round was resumed).
    heard: Instant,
    /// Per group: the slices in this round's order.
    order: Vec<Vec<u32>>,
    /// Per group and slice (`group * slices + slice`): the index in `leases` of its current
    /// lease, if held.
    holder: Vec<Option<usize>>,
    /// Its workers did not all join in time: the next join starts a new round.
    failed: bool,
    /// Time control: how long a worker may hold a slice, in microseconds (0: no limit).
    budget_us: u64,
}

impl Rotation {
    /// A round of `workers` in `groups` groups, each rotating `slices` slices in an order
    /// drawn from `seed`.
    fn new(number: u32, (workers, groups, slices): (u32, u32, u32), seed: u64) -> Self {
        let mut rng = StdRng::seed_from_u64(seed);
        let order = (0..groups)
            .map(|_| {
                let mut order: Vec<u32> = (0..slices).collect();
                order.shuffle(&mut rng);
                order
            })
            .collect();
        Rotation {
            number,
            workers,
            joined: Vec::new(),
            runs: Vec::new(),
            done: Vec::new(),
            left: Vec::new(),
            started: Instant::now(),
            heard: Instant::now(),
            order,
            holder: vec![None; (groups * slices) as usize],
            failed: false,
            budget_us: 0,
        }
    }

    /// Whether a new worker `worker` asking to join finds this round abandoned: every worker
    /// joined, and none has called for [`ABANDONED_AFTER`]. Its statement's job was killed
    /// (its run lost its hold on the job after the same silence): the job run again starts a
    /// round of its own instead of being refused a place in the dead one.
    fn abandoned_for(&self, worker: u64) -> bool {
        self.joined.len() >= self.workers as usize
            && !self.joined.contains(&worker)
            && self.heard.elapsed() >= ABANDONED_AFTER
    }

    fn slices(&self) -> u32 {
        self.order[0].len() as u32
    }

    fn groups(&self) -> u32 {
        self.order.len() as u32
    }

    /// The group of rank `rank` (join order) and its rank in the group: ranks are dealt to
    /// the groups in turn.
    fn member(&self, rank: u32) -> (u32, u32) {
        (rank % self.groups(), rank / self.groups())
    }

    /// The slice of rank `rank` at `step`.
    fn slice(&self, rank: u32, step: u32) -> u32 {
        let (group, member) = self.member(rank);
        let index = (2 * member + step) % self.slices();
        self.order[group as usize][index as usize]
    }

    /// Where the holder of rank `rank`'s group's `slice` is kept.
    fn slot(&self, rank: u32, slice: u32) -> usize {
        (self.member(rank).0 * self.slices() + slice) as usize
    }

    fn reply(&self, rank: u32) -> RotateReply {
        let (group, member) = self.member(rank);
        RotateReply {
            ready: true,
            rank: member,
            workers: self.workers / self.groups(),
            slices: self.slices(),
            round: self.number,
            slice: 0,
            budget_us: self.budget_us,
            group,
            first_step: self.done[rank as usize],
        }
    }
}

impl Rotations {
    /// Handles `request` of a worker of a model rotating as `sync` says (its workers and
    /// time control); see the module documentation.
    pub async fn rotate(&self, request: &RotateRequest, sync: &Sync) -> Result<RotateReply> {
        match request.phase() {
            RotatePhase::Join => self.join(request, sync),
            RotatePhase::Acquire => self.acquire(request).await,
            RotatePhase::Release => self.release(request),
            RotatePhase::Leave => self.leave(request),
            RotatePhase::Unspecified => Err(PsError::InvalidArgument(
                "rotate: the request names no phase".into(),
            )),
        }
    }

    /// Joins the model's running round, or starts the next one when none runs.
    fn join(&self, r: &RotateRequest, sync: &Sync) -> Result<RotateReply> {
        let workers = sync.workers;
        if workers == 0 {
            return Err(PsError::InvalidArgument(format!(
                "model '{}' rotates among 0 workers",
                r.model
            )));
        }
        let mut models = self.models.lock();
        let model = models.entry(r.model.clone()).or_default();
        // A task run again after its round ended (its output was lost with its executor):
        // what its lost run trained is applied, and there is nothing left to do.
        if let Some(round) = &model.round
            && let Some(rank) = round.joined.iter().position(|&id| id == r.worker)
            && round.left.iter().all(|&left| left)
        {
            return Ok(RotateReply {
                ready: false,
                ..round.reply(rank as u32)
            });
        }
        let running = model.round.as_ref().is_some_and(|round| {
            let waiting = round.joined.len() < round.workers as usize;
            !round.failed
                && (waiting || round.left.iter().any(|left| !left))
                && !round.abandoned_for(r.worker)
        });
        if !running {
            let budget_us = match sync.rotation_step_ms {
                0 => 0,
                ms if ms > 0 => ms as u64 * 1000,
                _ => auto_budget(&model.leases, model.rounds),
            };
            model.rounds = model.rounds.saturating_add(1);
            let groups = sync.rotation_groups.clamp(1, workers);
            let slices = match sync.rotation_slices {
                0 => 2 * (workers / groups).max(1),
                s => s,
            };
            let seed = u64::from(model.rounds) ^ hash(&r.model);
            let sizes = (workers, groups, slices);
            model.round = Some(Rotation {
                budget_us,
                ..Rotation::new(model.rounds, sizes, seed)
            });
        }
        let round = model.round.as_mut().expect("made above");
        round.heard = Instant::now();
        if let Some(rank) = round.joined.iter().position(|&id| id == r.worker) {
            if round.runs[rank] == r.run {
                // The same run asking again (its reply was lost).
                return Ok(round.reply(rank as u32));
            }
            // The task again (it names itself the same on a rerun): its lost run died with
            // its executor, holding slices the others wait for, or was cancelled and may still
            // be running. The new run takes the rank over: the lost run's slices go free, its
            // calls are refused from now on, and the new run starts at the first step the
            // rank has not handed back (the lost run pushed the ones before).
            round.left[rank] = false;
            round.runs[rank] = r.run;
            let reply = round.reply(rank as u32);
            model.free_held(&reply, self.now_us());
            drop(models);
            self.changed.notify_waiters();
            return Ok(reply);
        }
        if round.joined.len() >= round.workers as usize {
            return Err(PsError::WrongState(format!(
                "model '{}' rotates among {} workers and all have joined round {}; one \
                 more asked to join (the statement runs more tasks than the model has workers)",
                r.model, round.workers, round.number
            )));
        }
        round.joined.push(r.worker);
        round.runs.push(r.run);
        round.done.push(0);
        round.left.push(false);
        Ok(round.reply(round.joined.len() as u32 - 1))
    }

    /// Grants the slice of the worker's step once it is free; waits a bounded time.
    async fn acquire(&self, r: &RotateRequest) -> Result<RotateReply> {
        let started = Instant::now();
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(reply) = self.try_acquire(r)? {
                return Ok(reply);
            }
            let left = MAX_WAIT.saturating_sub(started.elapsed());
            if left.is_zero() {
                let mut models = self.models.lock();
                let (round, rank) = self.round_of(&mut models, r)?;
                return Ok(RotateReply {
                    ready: false,
                    ..round.reply(rank)
                });
            }
            let _ = tokio::time::timeout(left.min(Duration::from_secs(1)), notified).await;
        }
    }

    /// The lease of the worker's step if its slice is free; `None` while it is held.
    fn try_acquire(&self, r: &RotateRequest) -> Result<Option<RotateReply>> {
        let now = self.now_us();
        let mut models = self.models.lock();
        let (round, rank) = self.round_of(&mut models, r)?;
        if round.joined.len() < round.workers as usize {
            if round.started.elapsed() >= JOIN_GRACE {
                round.failed = true;
                return Err(PsError::WrongState(format!(
                    "model '{}' rotates among {} workers that must train at once, and only {} \
                     joined within {} s: the engine runs fewer tasks at once than the \
                     model's workers (lower workers, or give the engine more task slots)",
                    r.model,
                    round.workers,
                    round.joined.len(),
                    JOIN_GRACE.as_secs()
                )));
            }
            return Ok(None);
        }
        if r.step >= round.slices() {
            return Err(PsError::InvalidArgument(format!(
                "rotate: step {} of model '{}', whose rounds have {} steps",
                r.step,
                r.model,
                round.slices()
            )));
        }
        let slice = round.slice(rank, r.step);
        let slot = round.slot(rank, slice);
        let (number, reply) = (round.number, round.reply(rank));
        let holder = round.holder[slot];
        let model = models.get_mut(&r.model).expect("found above");
        if let Some(index) = holder {
            // Held by this very step: a retried call whose first reply was lost.
            let again = (model.leases.get(index)).is_some_and(|l| of_step(l, &reply, r.step));
            return Ok(again.then_some(RotateReply { slice, ..reply }));
        }
        model.trim_leases();
        model.leases.push(Lease {
            model: r.model.clone(),
            round: number,
            step: r.step,
            rank: reply.rank,
            slice,
            group: reply.group,
            start_us: now,
            end_us: 0,
            rows: 0,
            busy_us: 0,
        });
        let index = model.leases.len() - 1;
        let round = model.round.as_mut().expect("found above");
        round.holder[slot] = Some(index);
        Ok(Some(RotateReply { slice, ..reply }))
    }

    /// Takes back the slice of the worker's step.
    fn release(&self, r: &RotateRequest) -> Result<RotateReply> {
        let now = self.now_us();
        let mut models = self.models.lock();
        let (round, rank) = self.round_of(&mut models, r)?;
        let slice = round.slice(rank, r.step % round.slices().max(1));
        let reply = RotateReply {
            slice,
            ..round.reply(rank)
        };
        let slot = round.slot(rank, slice);
        let model = models.get_mut(&r.model).expect("found above");
        let round = model.round.as_mut().expect("found above");
        let ours = |l: &Lease| of_step(l, &reply, r.step);
        let Some(index) = round.holder[slot].filter(|&i| model.leases.get(i).is_some_and(ours))
        else {
            if round.done[rank as usize] > r.step {
                // Handed back already: a retried call whose first reply was lost.
                return Ok(reply);
            }
            return Err(PsError::WrongState(format!(
                "rotate: rank {rank} of model '{}' hands back slice {slice} of step {}, which \
                 it does not hold",
                r.model, r.step
            )));
        };
        round.holder[slot] = None;
        let done = &mut round.done[rank as usize];
        *done = (*done).max(r.step.saturating_add(1));
        if let Some(lease) = model.leases.get_mut(index) {
            lease.end_us = now.max(lease.start_us);
            lease.rows = r.rows;
            lease.busy_us = r.busy_us;
        }
        drop(models);
        self.changed.notify_waiters();
        Ok(reply)
    }

    /// The worker finished its steps, or failed: the slices it still holds are released, so
    /// the others go on.
    fn leave(&self, r: &RotateRequest) -> Result<RotateReply> {
        let now = self.now_us();
        let mut models = self.models.lock();
        let (round, rank) = self.round_of(&mut models, r)?;
        round.left[rank as usize] = true;
        let reply = round.reply(rank);
        let model = models.get_mut(&r.model).expect("found above");
        model.free_held(&reply, now);
        drop(models);
        self.changed.notify_waiters();
        Ok(reply)
    }

    /// The model's round and the worker's rank in it.
    fn round_of<'a>(
        &self,
        models: &'a mut HashMap<String, Model>,
        r: &RotateRequest,
    ) -> Result<(&'a mut Rotation, u32)> {
        let round = (models.get_mut(&r.model))
            .and_then(|m| m.round.as_mut())
            .ok_or_else(|| {
                PsError::WrongState(format!(
                    "rotate: model '{}' has no round running; join first",
                    r.model
                ))
            })?;
        match round.joined.iter().position(|&id| id == r.worker) {
            Some(rank) if round.runs[rank] != r.run => Err(PsError::WrongState(format!(
                "rotate: worker {} of model '{}' was taken over by a later run of its task; \
                 this run stops",
                r.worker, r.model
            ))),
            Some(rank) => {
                round.heard = Instant::now();
                Ok((round, rank as u32))
            }
            None => Err(PsError::WrongState(format!(
                "rotate: worker {} is not in round {} of model '{}'",
                r.worker, round.number, r.model
            ))),
        }
    }

    /// Every rotating model's leases, oldest first.
    pub fn leases(&self) -> Vec<Lease> {
        let models = self.models.lock();
        let mut names: Vec<&String> = models.keys().collect();
        names.sort();
        names
            .into_iter()
            .flat_map(|name| models[name].leases.iter().cloned())
            .collect()
    }

    fn now_us(&self) -> u64 {
        let since_start = self.epoch.elapsed().as_micros().max(1) as u64;
        (self.base_us.load(Ordering::Relaxed)).saturating_add(since_start)
    }
}

/// A stable hash of a model name, so each model's rounds have their own orders.
fn hash(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

/// The automatic step budget after round `round` (0: none yet): [`AUTO_SLACK`] times the
/// lower median of the training times of that round's finished leases; 0 (no limit) when it
/// has none.
fn auto_budget(leases: &[Lease], round: u32) -> u64 {
    let mut busy: Vec<u64> = (leases.iter())
        .filter(|l| l.round == round && l.end_us > 0)
        .map(|l| l.busy_us)
        .collect();
    busy.sort_unstable();
    match busy.get(busy.len().saturating_sub(1) / 2) {
        Some(&median) if round > 0 => ((median as f64 * AUTO_SLACK) as u64).max(1),
        _ => 0,
    }
}

/// Whether `lease` is the one of step `step` of the worker `member` answers.
fn of_step(lease: &Lease, member: &RotateReply, step: u32) -> bool {
    (lease.group, lease.rank, lease.step) == (member.group, member.rank, step)
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::sync::Arc;

    use super::*;

    pub(super) fn request(worker: u64, phase: RotatePhase, step: u32) -> RotateRequest {
        RotateRequest {
            model: "m".into(),
            worker,
            phase: phase as i32,
            step,
            rows: 0,
            busy_us: 0,
            run: worker,
        }
    }

    /// Changes the running round of model `m` with `change`.
    fn with_round(rotations: &Rotations, change: impl FnOnce(&mut Rotation)) {
        change(
            rotations
                .models
                .lock()
                .get_mut("m")
                .unwrap()
                .round
                .as_mut()
                .unwrap(),
        );
    }

    pub(super) fn sync(workers: u32) -> Sync {
        Sync {
            workers,
            rotation_slices: 2 * workers,
            ..Sync::default()
        }
    }

    /// A full round none of whose workers called for the job lease gives way to a new worker
    /// (its job was killed and run again): the newcomer starts the next round, where before
    /// the silence it is refused a place.
    #[tokio::test]
    async fn a_silent_full_round_gives_way_to_a_new_worker() {
        let rotations = Rotations::default();
        for w in [1, 2] {
            let join = request(w, RotatePhase::Join, 0);
            rotations.rotate(&join, &sync(2)).await.unwrap();
        }
        let newcomer = request(3, RotatePhase::Join, 0);
        let refused = rotations.rotate(&newcomer, &sync(2)).await.unwrap_err();
        assert!(refused.to_string().contains("all have joined"), "{refused}");
        let silent = Instant::now().checked_sub(ABANDONED_AFTER).unwrap();
        with_round(&rotations, |round| round.heard = silent);
        let joined = rotations.rotate(&newcomer, &sync(2)).await.unwrap();
        assert_eq!((joined.round, joined.rank), (2, 0));
    }

    /// Three workers rotate six slices at random speeds; the record shows no slice held by
    /// two at once, and every slice visiting every worker once per round, in a new order each
    /// round.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn leases_are_exclusive_and_every_slice_visits_every_worker_once_a_round() {
        let rotations = Arc::new(Rotations::default());
        for round in 0..2u64 {
            let tasks: Vec<_> = (0..3u64)
                .map(|w| {
                    let rotations = rotations.clone();
                    let id = round * 10 + w;
                    tokio::spawn(async move {
                        let join = request(id, RotatePhase::Join, 0);
                        let slices = rotations.rotate(&join, &sync(3)).await.unwrap().slices;
                        // Each step's slice is fetched while the previous one trains.
                        let mut next = rotations
                            .rotate(&request(id, RotatePhase::Acquire, 0), &sync(3))
                            .await
                            .unwrap();
                        for step in 0..slices {
                            let current = next;
                            assert!(current.ready);
                            if step + 1 < slices {
                                let ask = request(id, RotatePhase::Acquire, step + 1);
                                next = rotations.rotate(&ask, &sync(3)).await.unwrap();
                            }
                            let pause = (id * 7 + u64::from(step) * 3) % 5;
                            tokio::time::sleep(Duration::from_millis(pause)).await;
                            let back = request(id, RotatePhase::Release, step);
                            let released = rotations.rotate(&back, &sync(3)).await.unwrap();
                            assert_eq!(released.slice, current.slice);
                        }
                        rotations
                            .rotate(&request(id, RotatePhase::Leave, 0), &sync(3))
                            .await
                            .unwrap();
                    })
                })
                .collect();
            for task in tasks {
                task.await.unwrap();
            }
        }
        let leases = rotations.leases();
        assert_eq!(leases.len(), 2 * 3 * 6);
        for a in &leases {
            assert!(a.end_us > 0, "every lease was handed back");
            for b in &leases {
                let overlap = a.start_us < b.end_us && b.start_us < a.end_us;
                let same = (a.round, a.step, a.rank) == (b.round, b.step, b.rank);
                assert!(
                    same || a.slice != b.slice || !overlap || a.round != b.round,
                    "slice {} held by ranks {} and {} at once",
                    a.slice,
                    a.rank,
                    b.rank
                );
            }
        }
        let mut orders = Vec::new();
        for round in [1, 2] {
            let of_round: Vec<&Lease> = leases.iter().filter(|l| l.round == round).collect();
            let visits: HashSet<(u32, u32)> = of_round.iter().map(|l| (l.slice, l.rank)).collect();
            assert_eq!(visits.len(), 18, "every slice met every worker once");
            let mut rank0: Vec<&&Lease> = of_round.iter().filter(|l| l.rank == 0).collect();
            rank0.sort_by_key(|l| l.step);
            orders.push(rank0.iter().map(|l| l.slice).collect::<Vec<_>>());
        }
        assert_ne!(orders[0], orders[1], "a fresh order each round");
    }

    /// Hybrid parallelism: four workers in two groups. Within a group no slice is held by two
    /// workers at once and every slice meets every member once; the groups rotate the same
    /// slices side by side.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn groups_rotate_their_own_slices_side_by_side() {
        let rotations = Arc::new(Rotations::default());
        let grouped = Sync {
            rotation_groups: 2,
            rotation_slices: 4,
            ..sync(4)
        };
        let tasks: Vec<_> = (0..4u64)
            .map(|id| {
                let (rotations, grouped) = (rotations.clone(), grouped);
                tokio::spawn(async move {
                    let join = request(id, RotatePhase::Join, 0);
                    let joined = rotations.rotate(&join, &grouped).await.unwrap();
                    assert_eq!((joined.workers, joined.slices), (2, 4));
                    for step in 0..joined.slices {
                        let ask = request(id, RotatePhase::Acquire, step);
                        rotations.rotate(&ask, &grouped).await.unwrap();
                        let pause = (id * 5 + u64::from(step) * 3) % 4;
                        tokio::time::sleep(Duration::from_millis(pause)).await;
                        let back = request(id, RotatePhase::Release, step);
                        rotations.rotate(&back, &grouped).await.unwrap();
                    }
                    let leave = request(id, RotatePhase::Leave, 0);
                    rotations.rotate(&leave, &grouped).await.unwrap();
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let leases = rotations.leases();
        assert_eq!(leases.len(), 16);
        for a in &leases {
            for b in &leases {
                let overlap = a.start_us < b.end_us && b.start_us < a.end_us;
                let same_group = a.group == b.group && a.slice == b.slice && a.rank != b.rank;
                assert!(!(same_group && overlap), "{a:?} and {b:?}");
            }
        }
        let visits: HashSet<(u32, u32, u32)> =
            leases.iter().map(|l| (l.group, l.rank, l.slice)).collect();
        assert_eq!(
            visits.len(),
            16,
            "every slice met each member of each group once"
        );
    }

    /// A full record forgets its oldest leases but keeps the held ones, whose slices stay
    /// held.
    #[test]
    fn trimming_the_record_keeps_every_held_lease() {
        let mut round = Rotation::new(1, (2, 1, 4), 3);
        round.holder[2] = Some(10);
        round.holder[3] = Some(MAX_LEASES - 1);
        let lease = |step| Lease {
            step,
            ..Lease::default()
        };
        let mut model = Model {
            round: Some(round),
            rounds: 1,
            leases: (0..MAX_LEASES as u32).map(lease).collect(),
        };
        model.trim_leases();
        assert_eq!(
            model.leases.len(),
            MAX_LEASES - 10,
            "cut at the oldest held"
        );
        let holder = &model.round.as_ref().unwrap().holder;
        assert_eq!(model.leases[holder[2].unwrap()].step, 10);
        assert_eq!(model.leases[holder[3].unwrap()].step, MAX_LEASES as u32 - 1);
        model.round.as_mut().unwrap().holder[2] = None;
        model.leases.extend((0..10).map(lease));
        model.trim_leases();
        assert_eq!(
            model.leases.len(),
            MAX_LEASES / 2,
            "the oldest half once none is held"
        );
        let holder = &model.round.as_ref().unwrap().holder;
        assert_eq!(model.leases[holder[3].unwrap()].step, MAX_LEASES as u32 - 1);
    }

    /// The slices held at one step are never those the workers ask for one step ahead.
    #[test]
    fn the_schedule_gives_distinct_slices_and_frees_the_next_ones() {
        let round = Rotation::new(1, (4, 1, 8), 5);
        for step in 0..7 {
            let now: HashSet<u32> = (0..4).map(|w| round.slice(w, step)).collect();
            let next: HashSet<u32> = (0..4).map(|w| round.slice(w, step + 1)).collect();
            assert_eq!(now.len(), 4);
            assert!(now.is_disjoint(&next), "step {step}");
        }
    }

    #[tokio::test]
    async fn a_round_whose_workers_cannot_all_run_fails_naming_why() {
        let rotations = Rotations::default();
        rotations
            .rotate(&request(1, RotatePhase::Join, 0), &sync(2))
            .await
            .unwrap();
        with_round(&rotations, |round| {
            round.started = Instant::now() - JOIN_GRACE
        });
        let err = rotations
            .rotate(&request(1, RotatePhase::Acquire, 0), &sync(2))
            .await
            .unwrap_err()
            .to_string();
        assert!(err.contains("only 1 joined"), "{err}");
        let next = rotations
            .rotate(&request(2, RotatePhase::Join, 0), &sync(2))
            .await
            .unwrap();
        assert_eq!(
            (next.round, next.rank),
            (2, 0),
            "the failed round is not joined"
        );
    }

    /// A worker that joins again under its id with another run (its task run again after its
    /// executor died) takes its rank over: the slice its lost run held goes free, the lost
    /// run's calls are refused, and the new run starts at the first step the rank had not
    /// handed back. A retried release is answered as the first was. Once the round has ended,
    /// a run joining is told there is nothing left to do.
    #[tokio::test]
    async fn a_run_taking_a_rank_over_starts_where_the_lost_run_stopped() {
        let rotations = Rotations::default();
        let call = |(worker, run), phase, step| {
            let rotations = &rotations;
            async move {
                let request = RotateRequest {
                    run,
                    ..request(worker, phase, step)
                };
                rotations.rotate(&request, &sync(2)).await
            }
        };
        let (lost, rerun, other) = ((1, 1), (1, 7), (2, 2));
        for worker in [lost, other] {
            let joined = call(worker, RotatePhase::Join, 0).await.unwrap();
            assert_eq!(joined.first_step, 0);
        }
        let first = call(lost, RotatePhase::Acquire, 0).await.unwrap();
        let retried = call(lost, RotatePhase::Acquire, 0).await.unwrap();
        assert!(
            retried.ready && retried.slice == first.slice,
            "a retried acquire holds the same lease: {retried:?}"
        );
        call(lost, RotatePhase::Release, 0).await.unwrap();
        call(lost, RotatePhase::Release, 0)
            .await
            .expect("a retried release");
        let held = call(lost, RotatePhase::Acquire, 1).await.unwrap();
        let again = call(rerun, RotatePhase::Join, 0).await.unwrap();
        assert_eq!(
            (again.rank, again.round, again.first_step),
            (0, 1, 1),
            "the same rank in the same round, from the step not handed back"
        );
        let slot = |rotations: &Rotations| {
            let models = rotations.models.lock();
            let round = models["m"].round.as_ref().unwrap();
            round.holder[round.slot(0, held.slice)]
        };
        assert_eq!(slot(&rotations), None, "the lost run's slice is free");
        let err = call(lost, RotatePhase::Release, 1).await.unwrap_err();
        assert!(err.to_string().contains("taken over"), "{err}");
        let retaken = call(rerun, RotatePhase::Acquire, 1).await.unwrap();
        assert!(retaken.ready && retaken.slice == held.slice);
        call(rerun, RotatePhase::Release, 1).await.unwrap();
        let err = call((3, 3), RotatePhase::Join, 0).await.unwrap_err();
        assert!(err.to_string().contains("one more asked to join"), "{err}");
        let err = call(other, RotatePhase::Release, 0).await.unwrap_err();
        assert!(err.to_string().contains("does not hold"), "{err}");
        for worker in [rerun, other] {
            call(worker, RotatePhase::Leave, 0).await.unwrap();
        }
        let late = call((2, 9), RotatePhase::Join, 0).await.unwrap();
        assert!(
            !late.ready && late.round == 1,
            "a worker of the round that ended has nothing to do: {late:?}"
        );
        let next = call((4, 4), RotatePhase::Join, 0).await.unwrap();
        assert!(next.ready && next.round == 2, "{next:?}");
    }

    /// A fixed budget is the option's; an automatic one follows the previous round's lower
    /// median lease, so one slow worker's long leases do not set the pace.
    #[tokio::test]
    async fn time_control_budgets_come_from_the_option_or_the_last_round() {
        let lease = |round, busy_us| Lease {
            round,
            start_us: 100,
            end_us: 100 + 2 * busy_us,
            busy_us,
            ..Lease::default()
        };
        let leases: Vec<Lease> = [(1, 40), (1, 10), (1, 50), (1, 12), (2, 1000)]
            .into_iter()
            .map(|(r, h)| lease(r, h))
            .collect();
        assert_eq!(auto_budget(&leases, 1), 15, "1.25 x the lower median, 12");
        assert_eq!(auto_budget(&leases, 0), 0, "no round before the first");
        assert_eq!(auto_budget(&leases, 3), 0, "a round without leases");

        let rotations = Rotations::default();
        let fixed = Sync {
            rotation_step_ms: 40,
            ..sync(1)
        };
        let join = rotations
            .rotate(&request(1, RotatePhase::Join, 0), &fixed)
            .await;
        assert_eq!(join.unwrap().budget_us, 40_000);
        (rotations
            .rotate(&request(1, RotatePhase::Leave, 0), &fixed)
            .await)
            .unwrap();
        let auto = Sync {
            rotation_step_ms: -1,
            ..sync(1)
        };
        for round in 1..=2u64 {
            let id = 10 + round;
            let joined = rotations
                .rotate(&request(id, RotatePhase::Join, 0), &auto)
                .await;
            let budget = joined.unwrap().budget_us;
            match round {
                1 => assert_eq!(budget, 0, "no lease of the first round yet"),
                _ => assert_eq!(budget, 625, "1.25 x the first round's training times"),
            }
            for step in 0..2 {
                (rotations
                    .rotate(&request(id, RotatePhase::Acquire, step), &auto)
                    .await)
                    .unwrap();
                let back = RotateRequest {
                    busy_us: 500,
                    ..request(id, RotatePhase::Release, step)
                };
                (rotations.rotate(&back, &auto).await).unwrap();
            }
            (rotations
                .rotate(&request(id, RotatePhase::Leave, 0), &auto)
                .await)
                .unwrap();
        }
    }
}

//! The rotation schedules saved with the master's state ([`RotationRecord`]) and resumed from
//! it. A master killed mid-round and started again on its snapshot directory finds each round
//! as it left it: who joined, the steps each rank handed back, the slices held and by which
//! lease. Its workers, retrying their calls meanwhile, go on where they were; a retried
//! acquire or release whose first reply was lost is recognised as before.
//!
//! Only the current round's leases are saved: the next round's time budget is measured on
//! them, and the older rounds' record is for the status alone.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use angel_proto::{Lease, PsError, Result, RotationRecord, RoundRecord};

use super::{Model, Rotation, Rotations};

impl Rotations {
    /// Every rotating model's schedule as the master's state saves it, by model name.
    pub fn records(&self) -> Vec<RotationRecord> {
        let models = self.models.lock();
        let mut records: Vec<RotationRecord> = (models.iter())
            .map(|(name, model)| model.record(name))
            .collect();
        records.sort_by(|a, b| a.model.cmp(&b.model));
        records
    }

    /// Resumes the schedules of a saved state, replacing any held. A record that does not hold
    /// together is DATA_LOSS naming its model, and nothing is resumed.
    pub fn resume(&self, records: Vec<RotationRecord>) -> Result<()> {
        let mut resumed = HashMap::new();
        let mut latest = 0;
        for record in records {
            let times = record.leases.iter().map(|l| l.start_us.max(l.end_us));
            latest = times.fold(latest, u64::max);
            let model =
                Model::resumed(record.rounds, record.round, record.leases).map_err(|why| {
                    PsError::DataLoss(format!(
                        "the saved rotation of model '{}' {why}",
                        record.model
                    ))
                })?;
            resumed.insert(record.model, model);
        }
        *self.models.lock() = resumed;
        self.base_us.store(latest, Ordering::Relaxed);
        self.changed.notify_waiters();
        Ok(())
    }
}

impl Model {
    /// This model's schedule under `name`, with its current round's leases.
    fn record(&self, name: &str) -> RotationRecord {
        let current = self.round.as_ref().map(|r| r.number);
        let first = (self.leases.iter())
            .position(|l| Some(l.round) == current)
            .unwrap_or(self.leases.len());
        RotationRecord {
            model: name.to_string(),
            rounds: self.rounds,
            round: self.round.as_ref().map(|r| r.record(first)),
            leases: self.leases[first..].to_vec(),
        }
    }

    /// The model of a saved record, or why the record does not hold together.
    fn resumed(
        rounds: u32,
        round: Option<RoundRecord>,
        leases: Vec<Lease>,
    ) -> std::result::Result<Model, String> {
        let late = |l: &Lease| l.start_us.max(l.end_us) > MAX_TIME_US;
        if rounds == u32::MAX || leases.iter().any(late) {
            return Err(format!(
                "has {rounds} rounds, or a lease time past {MAX_TIME_US} µs"
            ));
        }
        let round = round.map(|r| Rotation::resumed(r, &leases)).transpose()?;
        if round.as_ref().is_some_and(|r| r.number > rounds) {
            return Err(format!("runs a round past its {rounds} rounds"));
        }
        Ok(Model {
            round,
            rounds,
            leases,
        })
    }
}

impl Rotation {
    /// This round as saved, its holders counted from the lease at `first`.
    fn record(&self, first: usize) -> RoundRecord {
        let holder = (self.holder.iter())
            .map(|held| {
                held.and_then(|i| i.checked_sub(first))
                    .map_or(0, |i| i as u32 + 1)
            })
            .collect();
        RoundRecord {
            number: self.number,
            workers: self.workers,
            joined: self.joined.clone(),
            runs: self.runs.clone(),
            done: self.done.clone(),
            left: self.left.clone(),
            groups: self.groups(),
            order: self.order.concat(),
            holder,
            failed: self.failed,
            budget_us: self.budget_us,
        }
    }

    /// The round of a saved record whose model kept `leases`, checked so that no later call
    /// indexes past what it holds or waits for a slice nobody holds; its workers get a fresh
    /// grace to join.
    fn resumed(r: RoundRecord, leases: &[Lease]) -> std::result::Result<Rotation, String> {
        let ranks = r.joined.len();
        if [r.runs.len(), r.done.len(), r.left.len()] != [ranks; 3] {
            return Err(format!(
                "lists {ranks} workers joined but {} runs, {} step counts and {} leave marks",
                r.runs.len(),
                r.done.len(),
                r.left.len()
            ));
        }
        if r.workers == 0 || ranks > r.workers as usize {
            return Err(format!("has {ranks} of {} workers joined", r.workers));
        }
        if r.groups == 0 || r.groups > r.workers || !r.order.len().is_multiple_of(r.groups as usize)
        {
            return Err(format!(
                "cuts {} slices into {} groups of {} workers",
                r.order.len(),
                r.groups,
                r.workers
            ));
        }
        let slices = r.order.len() / r.groups as usize;
        let order: Vec<Vec<u32>> = match slices {
            0 => return Err("has no slices".into()),
            n => r.order.chunks(n).map(<[u32]>::to_vec).collect(),
        };
        if !order.iter().all(|group| is_permutation(group)) {
            return Err("has a group whose order is not each slice once".into());
        }
        if r.holder.len() != r.order.len() {
            return Err(format!(
                "has {} holders of {} slices",
                r.holder.len(),
                r.order.len()
            ));
        }
        let ranks_per_group = r.workers / r.groups;
        let member = |l: &Lease| {
            l.round == r.number
                && (l.step as usize) < slices
                && (l.slice as usize) < slices
                && l.group < r.groups
                && l.rank < ranks_per_group
        };
        if !leases.iter().all(member) {
            return Err(format!(
                "keeps a lease of another round, or past its {slices} steps, slices, {} groups \
                 or {ranks_per_group} ranks a group",
                r.groups
            ));
        }
        for (slot, &h) in r.holder.iter().enumerate() {
            let (group, slice) = (slot / slices, slot % slices);
            let fits = |l: &Lease| (l.group as usize, l.slice as usize) == (group, slice);
            let held = h.checked_sub(1).map(|i| leases.get(i as usize));
            if held.is_some_and(|lease| !lease.is_some_and(fits)) {
                return Err(format!(
                    "has slice {slice} of group {group} held by a lease that is not of it"
                ));
            }
        }
        if r.done.iter().any(|&done| done as usize > slices) {
            return Err(format!("has a rank past the round's {slices} steps"));
        }
        Ok(Rotation {
            number: r.number,
            workers: r.workers,
            joined: r.joined,
            runs: r.runs,
            done: r.done,
            left: r.left,
            started: Instant::now(),
            heard: Instant::now(),
            order,
            holder: (r.holder.iter())
                .map(|&h| h.checked_sub(1).map(|i| i as usize))
                .collect(),
            failed: r.failed,
            budget_us: r.budget_us,
        })
    }
}

/// Latest lease time a saved record may hold (µs, about 36 years), so later times cannot
/// overflow.
const MAX_TIME_US: u64 = 1 << 60;

/// Whether `order` holds each of `0..order.len()` once.
fn is_permutation(order: &[u32]) -> bool {
    let mut seen = vec![false; order.len()];
    order.iter().all(|&slice| {
        let fresh = seen.get(slice as usize).is_some_and(|s| !s);
        if fresh {
            seen[slice as usize] = true;
        }
        fresh
    })
}

#[cfg(test)]
mod tests {
    use super::super::tests::{request, sync};
    use super::*;
    use angel_proto::RotatePhase;

    /// A master resumed mid-round from the saved record goes on as the one that saved it: the
    /// held slice stays held (another rank asking for it waits), a retried acquire and release
    /// are recognised, the steps handed back are known, and the round ends as usual.
    #[tokio::test]
    async fn a_resumed_round_goes_on_where_the_saved_one_was() {
        let before = Rotations::default();
        for w in [1, 2] {
            before
                .rotate(&request(w, RotatePhase::Join, 0), &sync(2))
                .await
                .unwrap();
        }
        let acquire = |w, step| request(w, RotatePhase::Acquire, step);
        let release = |w, step| request(w, RotatePhase::Release, step);
        let held = before.rotate(&acquire(1, 0), &sync(2)).await.unwrap();
        before.rotate(&release(1, 0), &sync(2)).await.unwrap();
        let held_next = before.rotate(&acquire(1, 1), &sync(2)).await.unwrap();
        assert!(held.ready && held_next.ready);

        let after = Rotations::default();
        after.resume(before.records()).unwrap();
        assert_eq!(after.records(), before.records());
        // Retried calls whose replies were lost: answered as the first were.
        let again = after.rotate(&acquire(1, 1), &sync(2)).await.unwrap();
        assert_eq!((again.ready, again.slice), (true, held_next.slice));
        let again = after.rotate(&release(1, 0), &sync(2)).await.unwrap();
        assert_eq!(again.slice, held.slice);
        // Rank 1 (worker 2) wants rank 0's held slice at the step that meets it: it is not
        // granted while held, and is once rank 0 hands it back.
        let step = {
            let models = after.models.lock();
            let round = models["m"].round.as_ref().unwrap();
            (0..round.slices()).find(|&t| round.slice(1, t) == held_next.slice)
        };
        let step = step.unwrap();
        let waiting = after.try_acquire(&acquire(2, step)).unwrap();
        assert!(
            waiting.is_none(),
            "a held slice was granted to another rank"
        );
        after.rotate(&release(1, 1), &sync(2)).await.unwrap();
        let granted = after.try_acquire(&acquire(2, step)).unwrap();
        assert_eq!(granted.map(|r| r.slice), Some(held_next.slice));
        // A later lease's time is past every saved one.
        let saved = before.leases().iter().map(|l| l.start_us).max().unwrap();
        assert!(after.leases().iter().any(|l| l.start_us > saved));
    }

    /// A saved round that does not hold together is refused naming its model, never
    /// resumed into a panic or a slice held forever later.
    #[tokio::test]
    async fn a_broken_record_is_refused_naming_its_model() {
        let before = Rotations::default();
        for w in [1, 2] {
            let join = request(w, RotatePhase::Join, 0);
            before.rotate(&join, &sync(2)).await.unwrap();
        }
        let acquire = request(1, RotatePhase::Acquire, 0);
        before.rotate(&acquire, &sync(2)).await.unwrap();
        let good = before.records();
        Rotations::default()
            .resume(good.clone())
            .expect("the record as saved");
        fn round(r: &mut RotationRecord) -> &mut RoundRecord {
            r.round.as_mut().unwrap()
        }
        let breaks: [fn(&mut RotationRecord); 13] = [
            |r| round(r).runs.clear(),
            |r| round(r).workers = 0,
            |r| round(r).groups = 3,
            |r| round(r).order[0] = round(r).order[1],
            |r| round(r).holder[0] = 7,
            |r| round(r).done[0] = 99,
            |r| round(r).number = 9,
            |r| r.rounds = u32::MAX,
            |r| r.leases[0].start_us = u64::MAX,
            |r| r.leases[0].step = u32::MAX,
            |r| r.leases[0].round = 7,
            |r| r.leases[0].rank = 5,
            // Held by a lease of another slice.
            |r| {
                let slice = r.leases[0].slice as usize;
                round(r).holder[slice] = 0;
                round(r).holder[(slice + 1) % 4] = 1;
            },
        ];
        for broken in breaks {
            let mut records = good.clone();
            broken(&mut records[0]);
            let error = Rotations::default()
                .resume(records)
                .unwrap_err()
                .to_string();
            assert!(error.contains("rotation of model 'm'"), "{error}");
        }
    }
}

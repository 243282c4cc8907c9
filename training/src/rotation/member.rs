//! [`Member`]: a worker's part in one round of model rotation as the master schedules it
//! (`ps-service`'s `master::rotation`): it joins the round, leases each step's slice, hands
//! it back, and leaves. Matrix factorization's workers and the topic model's share it.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use angel_client::runtime::block_on;
use angel_client::{ChangeNames, PsClient, RotatePhase, RotateReply, RotateRequest, TaskChange};

use crate::error::Result;
use crate::model::Model;
use crate::sync::worker::{fresh_id, slow_hook};

/// See the module documentation.
#[derive(Debug)]
pub struct Member {
    client: Arc<PsClient>,
    model: String,
    id: u64,
    /// This run of the worker's task (see [`RotateRequest::run`]).
    run: u64,
    /// Whether the id is its task's name (on Ballista), so the task may run again and take
    /// its rank over; embedded, a task runs once.
    pub may_run_again: bool,
    /// The master's answer to the join: the worker's rank and group, the round's slices, and
    /// the first step to train (after 0 for a run that took its rank over).
    pub joined: RotateReply,
    /// The `ANGEL_SLOW_WORKER` hook's slowdown for this worker (1: none), for [`super::pace`].
    pub slowdown: f64,
}

impl Member {
    /// Joins the running round of `model`, runs `steps` as a member of it, and leaves,
    /// whatever happened (an error or a panic, which goes on unwinding after), so the slices
    /// it holds go to the others rather than leaving them waiting, and the next statement
    /// starts a round of its own. A task run again after its round ended runs nothing.
    pub fn round<T: Default>(model: &Model, steps: impl FnOnce(&Member) -> Result<T>) -> Result<T> {
        let client = model.client().clone();
        let ((id, may_run_again), run) = (worker_id(), fresh_id());
        let name = model.name.clone();
        let join = request(&name, (id, run), RotatePhase::Join, 0);
        let joined = block_on(client.rotate(join))?;
        if !joined.ready {
            // A task run again after its round ended: its lost run's work is applied.
            tracing::debug!(model = %name, round = joined.round, "rotation worker: round over");
            return Ok(T::default());
        }
        // The hook names a rank in join order; ranks are dealt to the groups in turn.
        let groups = (model.spec.sync.workers / joined.workers.max(1)).max(1);
        let slowdown = match slow_hook()? {
            Some((rank, factor)) if rank == joined.rank * groups + joined.group => factor,
            _ => 1.0,
        };
        let member = Member {
            client,
            model: name,
            id,
            run,
            may_run_again,
            joined,
            slowdown,
        };
        let done = std::panic::catch_unwind(AssertUnwindSafe(|| steps(&member)));
        let left = block_on(member.client.rotate(member.request(RotatePhase::Leave, 0)));
        let done = done.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
        left?;
        Ok(done)
    }

    /// Asks for the slice of step `step`: the future ends with its lease once the slice's
    /// previous holder handed it back.
    pub fn acquire(
        &self,
        step: u32,
    ) -> impl Future<Output = angel_client::Result<RotateReply>> + Send + 'static {
        let client = self.client.clone();
        let request = self.request(RotatePhase::Acquire, step);
        async move { client.rotate(request).await }
    }

    /// Hands back the slice of step `step`, having trained `rows` rows (or drawn as many
    /// tokens) in `busy`: the master's time control learns the usual step from it.
    pub fn release(&self, step: u32, rows: u64, busy: Duration) -> Result<()> {
        let release = RotateRequest {
            rows,
            busy_us: busy.as_micros() as u64,
            ..self.request(RotatePhase::Release, step)
        };
        block_on(self.client.rotate(release))?;
        Ok(())
    }

    /// The name of the change the worker pushes at `step`: the same in a later run of its
    /// task, so the servers refuse a step pushed twice (by a lost run and its successor).
    pub fn change(&self, step: u32) -> TaskChange {
        TaskChange {
            task: self.id,
            seq: u64::from(step),
        }
    }

    fn request(&self, phase: RotatePhase, step: u32) -> RotateRequest {
        request(&self.model, (self.id, self.run), phase, step)
    }
}

/// The worker's id in the master's round, and whether it is its task's name: on Ballista,
/// the same when the task runs again after its executor died, so the rerun takes over the
/// lost run's rank (the master frees the slices that run held); embedded, a fresh one.
fn worker_id() -> (u64, bool) {
    ChangeNames::for_accumulator().map_or_else(|| (fresh_id(), false), |names| (names.task(), true))
}

fn request(model: &str, (worker, run): (u64, u64), phase: RotatePhase, step: u32) -> RotateRequest {
    RotateRequest {
        model: model.to_string(),
        worker,
        phase: phase as i32,
        step,
        rows: 0,
        busy_us: 0,
        run,
    }
}

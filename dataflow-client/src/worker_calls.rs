//! What a training worker's calls add to a pull and a push: [`WorkerClock`] (who pulls, at
//! which clock) and [`PushOptions`] (how a push is applied and named). Plain pulls and pushes
//! need neither.

use angel_proto::Ack;

use crate::task_change::TaskChange;

/// A pull by training worker `worker` at its clock `clock`; the servers record it, so the
/// consistency models can be checked from their side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerClock {
    pub worker: u64,
    pub clock: i64,
}

/// How a push is applied: added, or (`gradients`) as gradients by the matrix's optimizer and
/// update rule; named by a SQL task's `change` or by the client; with the partition versions
/// (`bases`, from the pull) the values were computed from, which DynSGD needs.
#[derive(Debug, Clone, Copy, Default)]
pub struct PushOptions<'a> {
    pub gradients: bool,
    pub change: Option<TaskChange>,
    pub bases: &'a [Ack],
}

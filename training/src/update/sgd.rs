//! One mini-batch of SGD, ConSGD or DynSGD: pull the weights the mini-batch touches at the
//! worker's clock, compute the gradient, push it to the servers' optimizer.

use std::ops::Range;
use std::time::Instant;

use angel_client::runtime::{Started, block_on};
use angel_client::{Ack, TaskChange};

use crate::error::Result;
use crate::model::Model;
use crate::rows::{Gathered, SparseRows};
use crate::sync::worker::ClockWorker;

/// A pull in flight: weights and the versions of the partitions read.
pub type Ahead = Started<(Vec<f32>, Vec<Ack>)>;

/// One mini-batch: pull at the worker's clock (or take the pull `ahead` started for it),
/// start the pull of the `next` mini-batch where the consistency model allows, and push the
/// gradients as `change`; returns the summed loss of its rows.
pub fn step(
    (model, worker): (&Model, &mut ClockWorker),
    (rows, range, g): (&SparseRows, Range<usize>, &Gathered),
    (ahead, next): (&mut Option<Ahead>, Option<&Gathered>),
    change: Option<TaskChange>,
) -> Result<f64> {
    let started = Instant::now();
    let (weights, versions) = match ahead.take() {
        Some(pull) => block_on(pull.join())?,
        None => {
            let at = worker.before_pull()?;
            model.pull(&g.keys, Some(at))?
        }
    };
    if let Some(next) = next
        && let Some(clock) = worker.pull_ahead()?
    {
        *ahead = Some(model.pull_ahead(next.keys.clone(), clock));
    }
    let (loss, grads) = model.gradients(rows, range, g, &weights)?;
    worker.before_push()?;
    let bases = match angel_optim::rule::of(model.spec.sync.rule).needs_bases() {
        true => &versions[..],
        false => &[],
    };
    model.update(&g.keys, &grads, change, bases)?;
    worker.after_step(started);
    Ok(loss)
}

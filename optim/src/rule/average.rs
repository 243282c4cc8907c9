//! Model averaging (`update = 'average'`): each of W workers trains a local copy of the rows
//! its mini-batches touch — weights and optimizer state — with the model's own optimizer for
//! `local_steps` mini-batches (one round, one clock), then adds (local - pulled) / W of every
//! row to the servers, whose sum of the W pushes is the average of the workers' models.

use super::Rule;

/// See the module documentation.
pub struct Average;

impl Rule for Average {
    fn averages(&self) -> bool {
        true
    }
}

/// The share of a local change the servers add: (local - pulled) / W.
pub fn share(local: f64, pulled: f64, workers: u32) -> f64 {
    (local - pulled) / f64::from(workers.max(1))
}

//! [`TaskPass`]: one task's part of a training pass over its rows, the worker half of every
//! kind of model behind one interface. `ps_train` hands it each batch of its columns and says
//! when its rows end; what the pass does with them (mini-batch steps, a full gradient, a
//! rotation round, a sampling round, a boosting round, Lloyd's sums) is the kind's, which
//! opens it (the model interface's `Trains::open_pass`).

use std::fmt;

use arrow::array::ArrayRef;

use crate::error::Result;
use crate::kept::Kept;
use crate::key_lists::KeyLists;

/// What a pass trained: rows (a topic model: tokens) and their summed loss (a topic model:
/// its documents' log-likelihood; a boosted model's first round: the target).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Trained {
    pub rows: u64,
    pub loss: f64,
}

impl std::ops::AddAssign for Trained {
    fn add_assign(&mut self, other: Trained) {
        self.rows += other.rows;
        self.loss += other.loss;
    }
}

/// Hears the rows and summed loss a pass trains as it goes, for the job's progress bar.
pub type Progress<'a> = &'a mut dyn FnMut(u64, f64);

/// See the module documentation.
pub trait TaskPass: fmt::Debug + Send + Sync {
    /// One batch of the call's columns after the model's name: trains on it, or keeps it for
    /// [`TaskPass::finish`]; returns what it trained now.
    fn add(&mut self, columns: &[ArrayRef], progress: Progress) -> Result<Trained>;

    /// The task's rows ended: trains what it kept, pushes what it holds; returns what it
    /// trained now.
    fn finish(&mut self, progress: Progress) -> Result<Trained>;
}

/// What the process lends a task's pass: the function its rows come through (for errors
/// naming it) and what the job keeps across epochs and rounds.
#[derive(Debug, Clone)]
pub struct TaskContext {
    pub function: &'static str,
    /// The training batches kept across epochs (key-list caching).
    pub key_lists: KeyLists,
    /// The workers kept from round to round of a statement.
    pub kept: Kept,
}

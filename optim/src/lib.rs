//! How gradients become weights: the optimizers and the update rules, in one place that both
//! the servers (which apply them to pushed gradients) and the training workers (which apply
//! them to a local model under model averaging, and send what each rule needs) build on.
//!
//! A model matrix keeps, per output, a weights row and then the optimizer's state rows; the
//! default partitioner keeps a short matrix's rows together in every block, so one partition
//! lock covers a key's weight and its state.
//!
//! - [`Optimizer`]: an optimizer applied per key; [`builtin`]: sgd, adagrad, adam, ftrl.
//! - [`rule`]: the update rules, one file each.

pub mod builtin;
pub mod rule;

pub use angel_proto::OptimizerParams;

/// An optimizer applied per key. Users add their own by implementing it and registering it
/// on the servers; the servers report each one's state rows, so `CREATE MODEL ... OPTIONS
/// (optimizer = 'name')` trains with it.
pub trait Optimizer: Send + Sync + 'static {
    /// The name clients select it by.
    fn name(&self) -> &str;

    /// Rows of state it keeps after the weights row.
    fn state_rows(&self) -> usize;

    /// Updates one coordinate: `slot[0]` is the weight and `slot[1..]` its state (zero before
    /// the first update); `g` is the gradient of the loss (without regularisation).
    fn apply(&self, slot: &mut [f64], g: f64, params: &OptimizerParams);
}

/// Soft thresholding, the proximal step of L1 regularisation: shrinks `w` toward zero by
/// `t` and stops at zero, so weights of useless features become exactly zero.
pub fn shrink(w: f64, t: f64) -> f64 {
    w.signum() * (w.abs() - t).max(0.0)
}

/// Most state rows an optimizer may keep (bounds the per-key scratch space).
pub const MAX_STATE_ROWS: usize = 7;

//! Optimizers applied on the servers: a push that carries an [`Update`] holds gradients, and
//! the server turns them into new weights next to the data, so a training task sends one
//! message per batch and optimizer state never crosses the network.
//!
//! A model matrix keeps its weights in row 0 and the optimizer's state in rows 1..; the
//! default partitioner keeps a short matrix's rows together in every block, so one partition
//! lock covers a key's weight and its state. Users add optimizers by implementing
//! [`Optimizer`] and registering it in the server's [`OptimizerRegistry`]; the servers report
//! each one's state rows, so `CREATE MODEL ... OPTIONS (optimizer = 'name')` trains with it.
//!
//! - [`rules`]: the built-ins: sgd, adagrad, adam, ftrl.
//! - [`registry`]: [`OptimizerRegistry`], the optimizers of a server by name.

pub mod registry;
pub mod rules;

pub use registry::OptimizerRegistry;

pub use angel_proto::Update;

/// An update rule applied per key.
pub trait Optimizer: Send + Sync + 'static {
    /// The name clients select it by.
    fn name(&self) -> &str;

    /// Rows of state it keeps after the weights row.
    fn state_rows(&self) -> usize;

    /// Updates one coordinate: `slot[0]` is the weight and `slot[1..]` its state (zero before
    /// the first update); `g` is the gradient of the loss (without regularisation).
    fn step(&self, slot: &mut [f64], g: f64, update: &Update);
}

/// Soft thresholding, the proximal step of L1 regularisation: shrinks `w` toward zero by
/// `t` and stops at zero, so weights of useless features become exactly zero.
pub fn shrink(w: f64, t: f64) -> f64 {
    w.signum() * (w.abs() - t).max(0.0)
}

/// Most state rows an optimizer may keep (bounds the per-key scratch space).
pub const MAX_STATE_ROWS: usize = 7;

//! Full-batch quasi-Newton training (`optimizer = 'lbfgs'`, or `'owlqn'` for an L1 penalty) with the model and its history on
//! the servers, "vector-free" as Angel's PS functions allow: no worker or job ever holds the
//! model. Each iteration the workers push the summed gradient of their rows; the job turns it
//! into a direction with the two-loop recursion run as PS functions over the history's rows,
//! and searches along it with a pass of the workers per trial step.
//!
//! - [`solver`]: the options (`optimizer = 'lbfgs'`, `memory`, `tolerance`).
//! - [`vectors`]: the model's vectors on the servers, one row per output, and the PS functions
//!   over them.
//! - [`objective`]: the mean loss plus the L2 penalty, and its gradient.
//! - [`history`]: the `(s, y)` pairs and the two-loop recursion.
//! - [`orthant`]: OWL-QN's pseudo-gradient and projections, for an L1 penalty.
//! - [`search`]: the backtracking line search.
//! - [`task`]: one task's summed loss and gradient.
//! - [`driver`]: the statement's iterations, a pass of the workers per trial step.

pub mod driver;
pub mod history;
pub mod objective;
pub mod orthant;
pub mod search;
pub mod solver;
pub mod task;
pub mod vectors;

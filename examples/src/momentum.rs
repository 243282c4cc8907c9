//! A user-defined optimizer: SGD with heavy-ball momentum, `v = beta1 * v + g`, `w -= lr * v`.
//! One state row (the velocity). Registered on the servers, it trains from SQL with
//! `CREATE MODEL ... OPTIONS (optimizer = 'momentum', beta1 = 0.9, ...)`: the servers report
//! its state layout, so nothing else needs to know it.
//!
//! ```no_run
//! # use angel_ps_service::{Functions, Standalone, StandaloneConfig};
//! # async fn run() -> angel_client::Result<()> {
//! let mut functions = Functions::default();
//! functions.optimizers.register(angel_examples::momentum::Momentum);
//! let service = Standalone::start(StandaloneConfig { functions, ..StandaloneConfig::new(2) }).await?;
//! # Ok(()) }
//! ```

use angel_ps_service::Optimizer;
use angel_ps_service::optim::OptimizerParams;

/// Heavy-ball momentum; `beta1` of the model's optimizer is the momentum coefficient.
pub struct Momentum;

impl Optimizer for Momentum {
    fn name(&self) -> &str {
        "momentum"
    }

    fn state_rows(&self) -> usize {
        1
    }

    fn apply(&self, slot: &mut [f64], g: f64, u: &OptimizerParams) {
        slot[1] = u.beta1 * slot[1] + g + u.l2 * slot[0];
        slot[0] -= u.learning_rate * slot[1];
    }
}

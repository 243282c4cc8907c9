//! [`update`]: an optimizer step ([`Update`]) with the usual defaults, for pushes whose
//! gradients the servers turn into weights.

use crate::Update;

/// `optimizer` at `learning_rate`, no regularisation, Adam's decays 0.9 / 0.999, epsilon
/// 1e-8, FTRL's beta 1.0.
pub fn update(optimizer: &str, learning_rate: f64) -> Update {
    Update {
        optimizer: optimizer.to_string(),
        learning_rate,
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
        beta: 1.0,
        ..Default::default()
    }
}

/// The matrix attribute naming the optimizer a model matrix is trained with. A matrix that has
/// it must have a multiple of `1 + state_rows` rows (per output: weights, then the optimizer's
/// state), which the master checks against the layout the servers report.
pub const OPTIMIZER_ATTR: &str = "optimizer";

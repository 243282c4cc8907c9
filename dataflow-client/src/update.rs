//! [`update`]: an optimizer step ([`Update`]) with the usual defaults, for pushes whose
//! gradients the servers turn into weights.

use angel_proto::Update;

/// `optimizer` at `learning_rate`, no regularisation, Adam's decays 0.9 / 0.999, epsilon
/// 1e-8, FTRL's beta 1.0, step 1.
pub fn update(optimizer: &str, learning_rate: f64) -> Update {
    Update {
        optimizer: optimizer.to_string(),
        learning_rate,
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
        beta: 1.0,
        step: 1,
        ..Default::default()
    }
}

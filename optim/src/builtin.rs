//! The built-in optimizers. L2 regularisation adds `l2 * w` to the gradient; L1 is applied as
//! a proximal step after the update (FTRL has both in its closed form).

use crate::{Optimizer, OptimizerParams, shrink};

/// Plain SGD: `w -= lr * (g + l2 w)`, then L1 shrinkage by `lr * l1`.
pub struct Sgd;

impl Optimizer for Sgd {
    fn name(&self) -> &str {
        "sgd"
    }

    fn state_rows(&self) -> usize {
        0
    }

    fn apply(&self, slot: &mut [f64], g: f64, u: &OptimizerParams) {
        let w = slot[0] - u.learning_rate * (g + u.l2 * slot[0]);
        slot[0] = shrink(w, u.learning_rate * u.l1);
    }
}

/// Adagrad: per-key step sizes `lr / (sqrt(sum g^2) + eps)`; state: the sum of squares.
pub struct Adagrad;

impl Optimizer for Adagrad {
    fn name(&self) -> &str {
        "adagrad"
    }

    fn state_rows(&self) -> usize {
        1
    }

    fn apply(&self, slot: &mut [f64], g: f64, u: &OptimizerParams) {
        let g = g + u.l2 * slot[0];
        slot[1] += g * g;
        let rate = u.learning_rate / (slot[1].sqrt() + u.epsilon);
        slot[0] = shrink(slot[0] - rate * g, rate * u.l1);
    }
}

/// Adam; state: first and second moments, and the key's number of updates, which its bias
/// correction uses. Counted per key, on the servers, the count is saved, loaded, snapshotted
/// and recovered with the moments, whichever processes push: a model trained on after a load
/// continues exactly (a count restarted at 1 would scale the loaded moments up tenfold). For
/// dense data it equals the global step number; a rare feature's first updates are corrected
/// as first updates.
pub struct Adam;

impl Optimizer for Adam {
    fn name(&self) -> &str {
        "adam"
    }

    fn state_rows(&self) -> usize {
        3
    }

    fn apply(&self, slot: &mut [f64], g: f64, u: &OptimizerParams) {
        let g = g + u.l2 * slot[0];
        slot[1] = u.beta1 * slot[1] + (1.0 - u.beta1) * g;
        slot[2] = u.beta2 * slot[2] + (1.0 - u.beta2) * g * g;
        // Kept in the matrix's value type: an f32 count stops at 2^24, where beta^t is long 0.
        slot[3] += 1.0;
        let t = slot[3].clamp(1.0, f64::from(i32::MAX)) as i32;
        let m = slot[1] / (1.0 - u.beta1.powi(t));
        let v = slot[2] / (1.0 - u.beta2.powi(t));
        let rate = u.learning_rate / (v.sqrt() + u.epsilon);
        slot[0] = shrink(slot[0] - rate * m, rate * u.l1);
    }
}

/// FTRL-Proximal (McMahan et al., 2013): `alpha` = learning rate, `beta`, L1 and L2 as in the
/// paper; state: z and n. The weight is recomputed from them in closed form, so L1 gives
/// exact zeros.
pub struct Ftrl;

impl Optimizer for Ftrl {
    fn name(&self) -> &str {
        "ftrl"
    }

    fn state_rows(&self) -> usize {
        2
    }

    fn apply(&self, slot: &mut [f64], g: f64, u: &OptimizerParams) {
        let (w, z, n) = (slot[0], slot[1], slot[2]);
        let sigma = ((n + g * g).sqrt() - n.sqrt()) / u.learning_rate;
        let z = z + g - sigma * w;
        let n = n + g * g;
        slot[0] = match z.abs() <= u.l1 {
            true => 0.0,
            false => -(z - z.signum() * u.l1) / ((u.beta + n.sqrt()) / u.learning_rate + u.l2),
        };
        slot[1] = z;
        slot[2] = n;
    }
}

/// The built-in optimizer named `name`: what a worker can apply itself (model averaging);
/// a user's optimizer runs only where it is registered, on the servers.
pub fn by_name(name: &str) -> Option<&'static dyn Optimizer> {
    let all: [&'static dyn Optimizer; 4] = [&Sgd, &Adagrad, &Adam, &Ftrl];
    all.into_iter().find(|o| o.name() == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Minimises (w - 3)^2 / 2 with each optimizer; every one must reach the minimum.
    #[test]
    fn every_rule_minimises_a_quadratic() {
        let rules: [&dyn Optimizer; 4] = [&Sgd, &Adagrad, &Adam, &Ftrl];
        for rule in rules {
            let mut u = angel_proto::optimizer_params(rule.name(), 0.1);
            u.learning_rate = if rule.name() == "ftrl" { 1.0 } else { 0.1 };
            let mut slot = vec![0.0; 1 + rule.state_rows()];
            for _ in 1..=3000 {
                let g = slot[0] - 3.0;
                rule.apply(&mut slot, g, &u);
            }
            assert!(
                (slot[0] - 3.0).abs() < 1e-2,
                "{}: w = {}",
                rule.name(),
                slot[0]
            );
        }
    }

    #[test]
    fn adam_counts_each_keys_updates_and_stays_finite_past_two_to_the_31() {
        let u = angel_proto::optimizer_params("adam", 0.1);
        let mut slot = vec![1.0, 0.0, 0.0, 0.0];
        Adam.apply(&mut slot, 0.5, &u);
        // The first update, bias-corrected: m / (1 - beta1) = g and v / (1 - beta2) = g^2.
        assert!((slot[0] - (1.0 - 0.1 * 0.5 / (0.5 + u.epsilon))).abs() < 1e-12);
        assert_eq!(slot[3], 1.0);
        for count in [f64::from(1u32 << 31), 1e300] {
            slot[3] = count;
            Adam.apply(&mut slot, 0.5, &u);
            assert!(
                slot.iter().all(|x| x.is_finite()),
                "count {count}: {slot:?}"
            );
        }
        assert!(slot[0] < 1.0, "the weight moved against the gradient");
    }

    #[test]
    fn l1_makes_small_weights_exactly_zero() {
        let rules: [&dyn Optimizer; 3] = [&Sgd, &Adagrad, &Ftrl];
        for rule in rules {
            let mut u = angel_proto::optimizer_params(rule.name(), 0.1);
            u.l1 = 100.0;
            let mut slot = vec![0.0; 1 + rule.state_rows()];
            for _ in 0..100 {
                let g = slot[0] - 0.5;
                rule.apply(&mut slot, g, &u);
            }
            assert_eq!(slot[0], 0.0, "{}", rule.name());
        }
    }
}

//! The update rules (`update` option): how a worker's mini-batches change the model, one file
//! each. A model's rule is part of its [`Training`](angel_proto::Training) description, so the
//! servers read it from the matrix and a push carries only its gradients (and, for DynSGD, the
//! partition versions they were computed from).
//!
//! - [`sgd`]: each gradient goes to the servers' optimizer as it is;
//! - [`average`]: local rounds with the model's optimizer; the servers add the mean change;
//! - [`consgd`]: each change scaled by 1/W (Angel+);
//! - [`dynsgd`]: each change scaled by its staleness (Angel+).

pub mod average;
pub mod consgd;
pub mod dynsgd;
pub mod sgd;

use angel_proto::UpdateRule;

use crate::{Optimizer, OptimizerParams};

/// One update rule; see the module documentation.
pub trait Rule: Send + Sync {
    /// What the servers multiply the weight change an optimizer makes from a gradient push
    /// by: the push was computed `staleness` changes ago (0 unless the rule
    /// [`needs_bases`](Rule::needs_bases)) by one of `workers` workers.
    fn factor(&self, _workers: u32, _staleness: u64) -> f64 {
        1.0
    }

    /// Whether a push states the partition versions its gradients were computed from.
    fn needs_bases(&self) -> bool {
        false
    }

    /// Whether workers train local rounds and push their local models' mean change, which
    /// the servers add (no optimizer on the servers).
    fn averages(&self) -> bool {
        false
    }
}

/// Applies gradient `g` to `slot` (a weight, then its state) with `optimizer` and `params`,
/// the weight's change scaled by `factor` (a rule's [`Rule::factor`]): what the servers do to
/// each coordinate of a gradient push.
pub fn apply_scaled(
    (optimizer, params): (&dyn Optimizer, &OptimizerParams),
    factor: f64,
    slot: &mut [f64],
    g: f64,
) {
    let before = slot[0];
    optimizer.apply(slot, g, params);
    if factor != 1.0 {
        slot[0] = before + factor * (slot[0] - before);
    }
}

/// The rule a model's description names.
pub fn of(rule: UpdateRule) -> &'static dyn Rule {
    match rule {
        UpdateRule::Sgd => &sgd::AsComputed,
        UpdateRule::Average => &average::Average,
        UpdateRule::Consgd => &consgd::ConSgd,
        UpdateRule::Dynsgd => &dynsgd::DynSgd,
    }
}

/// The option values, in the order of the wire enum.
pub const NAMES: [&str; 4] = ["sgd", "average", "consgd", "dynsgd"];

/// The rule named `name` (an `update` option value), if it is one.
pub fn by_name(name: &str) -> Option<UpdateRule> {
    let i = NAMES
        .iter()
        .position(|n| n.eq_ignore_ascii_case(name.trim()))?;
    UpdateRule::try_from(i as i32).ok()
}

/// The option value of `rule`.
pub fn name(rule: UpdateRule) -> &'static str {
    NAMES[rule as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_and_each_rule_scales_as_it_says() {
        for n in NAMES {
            assert_eq!(name(by_name(n).unwrap()), n);
        }
        assert_eq!(by_name(" DynSGD "), Some(UpdateRule::Dynsgd));
        assert_eq!(by_name("adam"), None);
        assert_eq!(of(UpdateRule::Consgd).factor(4, 9), 0.25);
        assert_eq!(of(UpdateRule::Consgd).factor(0, 0), 1.0);
        assert_eq!(of(UpdateRule::Dynsgd).factor(4, 3), 0.25);
        assert_eq!(of(UpdateRule::Sgd).factor(4, 3), 1.0);
        assert!(of(UpdateRule::Dynsgd).needs_bases());
        assert!(of(UpdateRule::Average).averages() && !of(UpdateRule::Sgd).averages());
    }

    /// A scaled step moves the weight by the factor times the optimizer's move, and leaves the
    /// optimizer's state as the optimizer left it.
    #[test]
    fn a_scaled_step_scales_the_weights_change_only() {
        let adagrad = crate::builtin::by_name("adagrad").unwrap();
        let params = angel_proto::optimizer_params("adagrad", 0.1);
        let (mut plain, mut scaled) = ([0.5, 0.0], [0.5, 0.0]);
        apply_scaled((adagrad, &params), 1.0, &mut plain, 2.0);
        apply_scaled((adagrad, &params), 0.25, &mut scaled, 2.0);
        assert!(
            (scaled[0] - (0.5 + 0.25 * (plain[0] - 0.5))).abs() < 1e-12,
            "{scaled:?}"
        );
        assert!(plain[0] != 0.5, "the optimizer moved the weight");
        assert_eq!(scaled[1], plain[1]);
    }
}

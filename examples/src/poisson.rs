//! A model kind of a program's own, added by the recipe of `docs/architecture.md` ("Adding a
//! kind") and nothing else: Poisson regression, for counts, with a log link. A row's margin is
//! `m = w . x + b`, its rate `exp(m)`, its loss the negative log-likelihood `exp(m) - y m`
//! (without `log y!`, which no weight moves). `register` adds it to this process's registry;
//! `CREATE MODEL ... OPTIONS (kind = 'poisson')` then trains it (mini-batch steps, or
//! `optimizer = 'lbfgs'`: its loss is smooth and convex), `ps_predict` gives the rate, and
//! `SAVE MODEL` / `LOAD MODEL` keep it in the default weights format.
//! `tests/custom_kind.rs` trains it from SQL.

use angel_training::ModelKind;
use angel_training::Result;
use angel_training::kinds::{Gradient, Metric};
use angel_training::registry;

/// Poisson regression; see the module documentation.
#[derive(Debug, Clone, Copy, Default)]
pub struct Poisson;

/// Margins above this give the rate of this margin, so a diverging step cannot overflow.
const MAX_MARGIN: f64 = 50.0;

/// Adds the kind, as `kind = 'poisson'`, to this process's registry.
pub fn register() -> Result<()> {
    registry::register(&["poisson"], || Box::new(Poisson))
}

impl ModelKind for Poisson {
    fn name(&self) -> &'static str {
        "poisson"
    }

    fn loss_name(&self) -> &'static str {
        "poisson"
    }

    fn full_batch(&self) -> bool {
        true
    }
}

impl Gradient for Poisson {
    fn refuse_label(&self, label: f64) -> Option<String> {
        (!(label >= 0.0 && label.is_finite()))
            .then(|| format!("Poisson regression's labels are counts (0 or more), got {label}"))
    }

    fn loss(&self, label: f64, margins: &[f64], d: &mut [f64]) -> f64 {
        let m = margins[0].min(MAX_MARGIN);
        let rate = m.exp();
        d[0] = rate - label;
        rate - label * m
    }

    fn predict(&self, margins: &[f64]) -> f64 {
        margins[0].min(MAX_MARGIN).exp()
    }

    fn probabilities(&self, _margins: &[f64]) -> Option<Vec<f64>> {
        None
    }

    fn metrics(&self) -> &'static [Metric] {
        &[]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The derivative of the loss is its central difference, at counts and margins of
    /// either sign.
    #[test]
    fn the_derivative_is_that_of_the_loss() {
        for (y, m) in [(0.0, -1.0), (3.0, 0.4), (1.0, 2.0), (7.0, -0.3)] {
            let mut d = [0.0];
            Poisson.loss(y, &[m], &mut d);
            let h = 1e-6;
            let at = |m: f64| Poisson.loss(y, &[m], &mut [0.0]);
            let numeric = (at(m + h) - at(m - h)) / (2.0 * h);
            assert!(
                (d[0] - numeric).abs() < 1e-5,
                "y={y} m={m}: {} vs {numeric}",
                d[0]
            );
        }
        assert!(Poisson.refuse_label(-1.0).is_some());
        assert!(Poisson.refuse_label(f64::NAN).is_some());
        assert!(Poisson.refuse_label(2.0).is_none());
    }
}

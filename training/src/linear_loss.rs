//! [`Linear`]: the loss of a margin `w . x + b` and what it predicts, for logistic
//! regression, linear regression and the linear SVM. The linear kinds are these losses
//! (`kinds/linear/`); the factorization machines and the boosted trees score their margins
//! with one of them (option `loss`), so the loss sits below every kind.

use crate::error::Result;
use crate::kinds::{Gradient, Metric};
use crate::options::OptionValue;

/// The loss a linear model minimises, and how it turns a margin into a prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Linear {
    /// Logistic regression: log loss, predicts a probability. Labels > 0 are positive.
    Logistic,
    /// Linear regression: squared loss, predicts the margin.
    Regression,
    /// Linear SVM: hinge loss, predicts the margin. Labels > 0 are +1, others -1.
    Svm,
}

impl Linear {
    /// The loss of a kind that scores a margin as logistic or linear regression does (boosted
    /// trees, factorization machines), from its option `loss = 'logistic' | 'squared'`.
    pub fn from_loss_option(option: &OptionValue) -> Result<Linear> {
        Ok(match option.one_of(&["logistic", "squared"])? {
            "logistic" => Linear::Logistic,
            _ => Linear::Regression,
        })
    }

    /// The value of option `loss` that gives this loss ([`Linear::from_loss_option`]).
    pub fn loss_option(self) -> &'static str {
        match self {
            Linear::Logistic => "logistic",
            _ => "squared",
        }
    }

    /// The label as the loss uses it.
    fn target(self, label: f64) -> f64 {
        match self {
            Linear::Regression => label,
            Linear::Logistic => f64::from(label > 0.0),
            Linear::Svm => {
                if label > 0.0 {
                    1.0
                } else {
                    -1.0
                }
            }
        }
    }
}

impl Gradient for Linear {
    fn loss(&self, label: f64, margins: &[f64], d: &mut [f64]) -> f64 {
        let (y, m) = (self.target(label), margins[0]);
        let (loss, dm) = match self {
            // log(1 + e^m) - y m, computed without overflow.
            Linear::Logistic => (
                m.max(0.0) + (-m.abs()).exp().ln_1p() - y * m,
                sigmoid(m) - y,
            ),
            Linear::Regression => (0.5 * (m - y).powi(2), m - y),
            Linear::Svm => match y * m < 1.0 {
                true => (1.0 - y * m, -y),
                false => (0.0, 0.0),
            },
        };
        d[0] = dm;
        loss
    }

    fn predict(&self, margins: &[f64]) -> f64 {
        match self {
            Linear::Logistic => sigmoid(margins[0]),
            Linear::Regression | Linear::Svm => margins[0],
        }
    }

    fn probabilities(&self, margins: &[f64]) -> Option<Vec<f64>> {
        (*self == Linear::Logistic).then(|| vec![sigmoid(margins[0])])
    }

    fn metrics(&self) -> &'static [Metric] {
        match self {
            Linear::Logistic | Linear::Svm => &[Metric::Auc],
            Linear::Regression => &[Metric::Rmse],
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_match_their_closed_forms() {
        let loss = |kind: Linear, y, m| kind.loss(y, &[m], &mut [0.0]);
        assert!((Linear::Logistic.predict(&[0.0]) - 0.5).abs() < 1e-12);
        assert!((loss(Linear::Logistic, 1.0, 0.0) - 2f64.ln()).abs() < 1e-12);
        assert!(loss(Linear::Logistic, 1.0, -800.0).is_finite());
        assert_eq!(loss(Linear::Regression, 3.0, 1.0), 2.0);
        assert_eq!(loss(Linear::Svm, 0.0, 0.5), 1.5);
        assert_eq!(loss(Linear::Svm, 1.0, 2.0), 0.0);
        assert_eq!(Linear::Svm.probabilities(&[1.0]), None);
    }
}

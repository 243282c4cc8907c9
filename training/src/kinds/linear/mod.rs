//! The linear models: logistic regression, linear regression and the linear SVM. A weight
//! per feature and an intercept; they differ only in the loss of a row's margin `w . x + b`
//! and in what they predict from it.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, Result, option_err};

/// The loss a model minimises, and how it turns a margin into a prediction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Logistic regression: log loss, predicts a probability. Labels > 0 are positive.
    Logistic,
    /// Linear regression: squared loss, predicts the margin.
    Linear,
    /// Linear SVM: hinge loss, predicts the margin. Labels > 0 are +1, others -1.
    Svm,
}

impl Kind {
    /// The label as the loss uses it.
    fn target(self, label: f64) -> f64 {
        match self {
            Kind::Linear => label,
            Kind::Logistic => f64::from(label > 0.0),
            Kind::Svm => {
                if label > 0.0 {
                    1.0
                } else {
                    -1.0
                }
            }
        }
    }

    /// Loss of one row and its derivative with respect to the margin.
    pub fn loss(self, label: f64, margin: f64) -> (f64, f64) {
        let y = self.target(label);
        match self {
            Kind::Logistic => {
                // log(1 + e^m) - y m, computed without overflow.
                let loss = margin.max(0.0) + (-margin.abs()).exp().ln_1p() - y * margin;
                (loss, sigmoid(margin) - y)
            }
            Kind::Linear => (0.5 * (margin - y).powi(2), margin - y),
            Kind::Svm => match y * margin < 1.0 {
                true => (1.0 - y * margin, -y),
                false => (0.0, 0.0),
            },
        }
    }

    /// The name of the loss it minimises.
    pub fn loss_name(self) -> &'static str {
        match self {
            Kind::Logistic => "log",
            Kind::Linear => "squared",
            Kind::Svm => "hinge",
        }
    }

    /// The prediction for a margin: a probability for logistic models, else the margin.
    pub fn predict(self, margin: f64) -> f64 {
        match self {
            Kind::Logistic => sigmoid(margin),
            Kind::Linear | Kind::Svm => margin,
        }
    }
}

fn sigmoid(x: f64) -> f64 {
    1.0 / (1.0 + (-x).exp())
}

impl FromStr for Kind {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "logistic" | "lr" => Ok(Kind::Logistic),
            "linear" | "regression" => Ok(Kind::Linear),
            "svm" | "hinge" => Ok(Kind::Svm),
            _ => option_err(format!(
                "unknown model kind '{s}' (expected logistic, linear or svm)"
            )),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Logistic => "logistic",
            Kind::Linear => "linear",
            Kind::Svm => "svm",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn losses_have_the_right_derivatives() {
        for kind in [Kind::Logistic, Kind::Linear, Kind::Svm] {
            for (label, margin) in [(1.0, 0.3), (0.0, -1.7), (1.0, 2.5), (-1.0, 0.2)] {
                let (_, d) = kind.loss(label, margin);
                let h = 1e-6;
                let numeric =
                    (kind.loss(label, margin + h).0 - kind.loss(label, margin - h).0) / (2.0 * h);
                assert!(
                    (d - numeric).abs() < 1e-4,
                    "{kind} y={label} m={margin}: {d} vs {numeric}"
                );
            }
        }
        assert!((Kind::Logistic.predict(0.0) - 0.5).abs() < 1e-12);
        assert!(Kind::Logistic.loss(1.0, -800.0).0.is_finite());
    }
}

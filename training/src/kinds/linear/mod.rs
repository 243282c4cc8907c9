//! The linear models: logistic regression, linear regression and the linear SVM. A weight
//! per feature and an intercept (one output); they differ only in the loss of a row's margin
//! `w . x + b` and in what they predict from it.

pub use crate::linear_loss::Linear;
use crate::model::ModelKind;

impl ModelKind for Linear {
    fn name(&self) -> &'static str {
        match self {
            Linear::Logistic => "logistic",
            Linear::Regression => "linear",
            Linear::Svm => "svm",
        }
    }

    fn loss_name(&self) -> &'static str {
        match self {
            Linear::Logistic => "log",
            Linear::Regression => "squared",
            Linear::Svm => "hinge",
        }
    }

    fn full_batch(&self) -> bool {
        *self != Linear::Svm
    }
}

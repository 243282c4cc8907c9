//! The kinds of model, one folder each: what a kind's rows mean, its loss and its prediction.
//!
//! - [`linear`]: logistic regression, linear regression, the linear SVM.

pub mod linear;

pub use linear::Kind;

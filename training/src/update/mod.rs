//! A worker's side of the update rules (`update` option; the rules themselves, and what the
//! servers do with each, are `angel_optim::rule`'s):
//!
//! - [`sgd`]: one mini-batch of SGD, ConSGD or DynSGD: pull, gradients, one gradient push;
//! - [`average`]: model averaging's local rounds with the model's optimizer.

pub mod average;
pub mod sgd;

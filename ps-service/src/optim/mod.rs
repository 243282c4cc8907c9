//! Optimizers applied on the servers: a gradient push (`PushRequest.gradients`) holds
//! gradients, and the server turns them into new weights next to the data with the optimizer
//! and update rule of the matrix's `Training` description, so a training task sends one
//! message per batch and optimizer state never crosses the network.
//!
//! The optimizers and the update rules themselves are `angel-optim`'s (workers apply them
//! too, under model averaging); here is [`OptimizerRegistry`] ([`registry`]), the optimizers of
//! a server by name, to which users add their own.

pub mod registry;

pub use registry::OptimizerRegistry;

pub use angel_optim::{MAX_STATE_ROWS, Optimizer, OptimizerParams, shrink};

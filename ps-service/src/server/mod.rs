//! The parameter server: holds partitions and answers pull, push and PS-function calls.
//!
//! - [`partition`]: [`partition::Partition`], one hosted block with its lock, and
//!   [`partition::Partitions`], everything this server hosts.
//! - [`service`]: the gRPC handlers (validation first, then storage).
//! - [`push_metrics`]: accepted pushes per client and matrix, reported in the status.
//! - [`counters`]: the handlers of distributed counters.
//! - [`node`]: [`ServerNode`], which binds, registers with the master and heartbeats.

pub mod counters;
pub mod node;
pub mod partition;
pub mod push_metrics;
pub mod service;

pub use node::{Functions, ServerConfig, ServerNode, default_memory_budget};

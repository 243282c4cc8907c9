//! The parameter server: holds partitions and answers pull, push and PS-function calls.
//!
//! - [`partition`]: [`partition::Partition`], one hosted block with its lock, and
//!   [`partition::Partitions`], everything this server hosts.
//! - [`service`]: the gRPC handlers (validation first, then storage).
//! - [`push_metrics`]: accepted pushes per client and matrix, reported in the status.
//! - [`pull_log`]: the training pulls seen, with worker and clock (consistency checks).
//! - [`counters`]: the handlers of distributed counters.
//! - [`limits`]: [`Limits`], the largest and longest request and the memory budget.
//! - [`memory`]: [`memory::MemoryAccount`], which every growth of partition data reserves
//!   from first: the memory budget and a namespace's share of it.
//! - [`lease`]: how long a server may serve on its master's last word (a woken server is
//!   fenced).
//! - [`marks`]: which changes (writer, seq) a partition applied, so none applies twice.
//! - [`applied`]: a partition's version and marks, and what its newest snapshot holds.
//! - [`snapshots`]: writing hosted partitions to the snapshot directory, and restoring them.
//! - `metrics`: what a server reports at each Prometheus scrape.
//! - [`node`]: [`ServerNode`], which binds, registers with the master and heartbeats.

pub mod applied;
pub mod counters;
pub mod lease;
pub mod limits;
pub mod marks;
pub mod memory;
mod metrics;
pub mod node;
pub mod partition;
pub mod pull_log;
pub mod push_metrics;
pub mod service;
pub mod snapshots;

pub use limits::{Limits, default_memory_budget};
pub use node::{Functions, ServerConfig, ServerNode};

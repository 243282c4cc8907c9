//! The master: the one coordinator of a service.
//!
//! - [`partitioner`]: [`Partitioner`], which cuts a new matrix into blocks, and the default
//!   [`RangePartitioner`].
//! - [`service`]: the gRPC handlers: matrix create/drop/describe, the partition map (with its
//!   epoch) and status; [`state`]: what they read and change.
//! - [`membership`]: server registration and heartbeats, server processes told apart, and the
//!   master's doubt about a state older than its servers' data.
//! - [`clocks`]: training workers' clocks: BSP, SSP and ASP, and slow-worker flags.
//! - [`rotation`]: model rotation: each round's schedule of slices and its exclusive leases.
//! - [`jobs`]: jobs' runs (one at a time per job) and how far each got, so a killed job
//!   resumes.
//! - [`counters`]: distributed counters: create, the two-phase seal, clean.
//! - [`quota`]: what the names of one namespace may hold together.
//! - [`optimizers`]: the optimizers the servers report, and the layout a model needs.
//! - [`progress`]: each model's finished epochs, as its job reported them (the page's curves).
//! - [`trained_rows`]: each model's rows trained so far, as its tasks report them (progress
//!   bars of jobs whose tasks run elsewhere).
//! - [`recovery`]: declaring servers dead and restoring their partitions from snapshots.
//! - [`state_file`]: the master's own state, saved after every change and resumed on start.
//! - `metrics`: what the master reports at each Prometheus scrape.
//! - [`page`]: the status page (`GET /`) and its JSON (`GET /api/status`, see
//!   [`status_json`]).
//! - [`node`]: [`MasterNode`], which binds and serves.

pub mod clocks;
pub mod counters;
pub mod jobs;
pub mod membership;
mod metrics;
pub mod node;
pub mod optimizers;
pub mod page;
pub mod partitioner;
pub mod progress;
pub mod quota;
pub mod recovery;
pub mod rotation;
pub mod service;
mod state;
pub mod state_file;
pub mod status_json;
pub mod trained_rows;

pub use node::{MasterConfig, MasterNode};
pub use partitioner::{BlockRange, Partitioner, RangePartitioner};
pub use service::Snapshots;

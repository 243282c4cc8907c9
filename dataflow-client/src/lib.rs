//! The angel-ps client, used by every process that computes against the parameter servers.
//!
//! # Layout
//!
//! - [`client`]: [`PsClient`], the one object a process keeps: connects to the master, caches
//!   the partition map, and offers the whole API (create, describe, drop, pull, push, psf),
//!   one concern a file (configuration, master calls, data verbs, scatter, recovery).
//! - [`codec_choice`]: whether the next push to a compressed matrix is compressed, from measured
//!   push times (SketchML only where it pays).
//! - [`counter`]: distributed counters of string keys: create, increase, seal, get, clean.
//! - [`counter_space`]: [`Counter`], a counter's metadata and which partition a key routes to.
//! - [`durable`]: snapshots a client asks for: on command, at a job's end, and for room in its
//!   replay buffer.
//! - [`matrix`]: [`MatrixSpec`], what a caller asks for when creating a matrix, and the cached
//!   view of one.
//! - [`routes`]: the cached connections and partition map every call routes by.
//! - [`runtime`]: the runtime shared clients live on, and [`runtime::wait`] for synchronous
//!   callers.
//! - `replay`: the changes no snapshot holds yet, resent to a partition restored elsewhere.
//! - [`task_change`]: [`TaskChange`], a change named by the SQL task making it, so a retried
//!   task's resends are recognised, and [`ChangeNames`], one accumulator's names.
//! - [`worker_calls`]: [`WorkerClock`] and [`PushOptions`], what a training worker's pull (at
//!   its clock) and push carry.
//! - [`split`]: splits a batch of keys by partition, deduplicating (pulls) or merging (pushes)
//!   and remembering how to put the answers back in request order.
//!
//! What travels on the wire (codecs, SketchML, routing, value types, errors) lives in
//! `angel-proto`, shared with the servers; the types this API uses are re-exported here.

pub mod client;
pub mod codec_choice;
pub mod counter;
pub mod counter_space;
pub mod durable;
pub mod matrix;
mod replay;
pub mod routes;
pub mod runtime;
pub mod split;
pub mod task_change;
pub mod worker_calls;

pub use angel_proto::{
    Ack, ClockPhase, ClockReply, ClockRequest, Compression, CompressionMode, CounterState, Element,
    EpochReport, Layout, Lease, MatrixMeta, Merge, NodeSplit, OptimizerParams, PsError, Result,
    RotatePhase, RotateReply, RotateRequest, SnapshotReply, Solver, StorageKind, Sync, Training,
    UpdateRule, ValueType, optimizer_params,
};
pub use client::{ClientConfig, PsClient, REPLAY_MB_VAR, worker_pid};
pub use counter_space::Counter;
pub use matrix::MatrixSpec;
pub use task_change::{ChangeNames, TaskChange};
pub use worker_calls::{PushOptions, WorkerClock};

//! angel-ps-service: the angel-ps parameter server offered as a service, as a library.
//!
//! # Layout
//!
//! - [`master`]: the coordinator: servers, matrices, the partition map and its epoch.
//! - [`server`]: a parameter server: hosts partitions, answers pull / push / PS functions.
//! - [`blocks`]: how a server holds partitions: dense arrays and compact sparse maps (not to be
//!   confused with `angel-storage`, where files live, or a job's table storage levels).
//! - [`snapshot`]: partitions and the master's state written to, and restored from, a
//!   directory on any store.
//! - [`psf`]: PS functions, the built-ins and the trait users implement for their own.
//! - [`optim`]: the optimizers a server applies per key to pushed gradients, by name
//!   (`angel-optim`'s built-ins and users' own).
//! - [`registry`]: named extensions (PS functions, optimizers) and the NOT_FOUND that lists them.
//! - [`standalone`]: master and servers in one process on 127.0.0.1.
//! - [`net`]: listeners, tonic settings and signal handling shared by master and servers.
//! - [`gate`]: the connection caps (per listener and per process), greeting timeout and
//!   idle eviction on every listener, with [`request_activity`] recording each connection's
//!   requests.
//! - [`telemetry`]: Prometheus metrics and the `--http` listener that serves them.
//! - [`security`]: [`Security`](security::Security), a node's token, namespace tokens and TLS,
//!   shared by the master, server and standalone configurations.
//! - [`auth`]: the service token checked on every RPC, and the refusal to serve a wider
//!   address without one.
//! - [`access`]: what a token may name: anything, or the names of some namespaces.
//! - [`admin`]: the credential that keeps the master's calls to servers the master's.
//!
//! The wire both sides speak (codecs, routing, value types, errors) is `angel-proto`; the
//! optimizers and update rules are `angel-optim`'s; snapshots go through `angel-storage`. This
//! library depends on nothing else of ours and on no SQL engine: a PS deployment needs neither
//! DataFusion nor Ballista. Clients use `angel-client`; the `angel-ps` command is the
//! `angel-ps-cli` crate (folder `cli/`).

pub mod access;
pub mod admin;
pub mod auth;
pub mod blocks;
pub mod gate;
pub mod master;
pub mod net;
pub mod optim;
pub mod psf;
pub mod registry;
pub mod request_activity;
pub mod security;
pub mod server;
pub mod snapshot;
pub mod standalone;
pub mod telemetry;

pub use optim::{Optimizer, OptimizerRegistry};
pub use psf::{PsFunction, PsfContext, PsfRegistry};
pub use server::Functions;
pub use standalone::{Standalone, StandaloneConfig};
pub use telemetry::Telemetry;

//! angel-ps: a parameter server offered as a service.
//!
//! # Layout
//!
//! - [`master`]: the coordinator: servers, matrices, the partition map and its epoch.
//! - [`server`]: a parameter server: hosts partitions, answers pull / push / PS functions.
//! - [`storage`]: how a server holds partitions: dense arrays and compact sparse maps.
//! - [`psf`]: PS functions, the built-ins and the trait users implement for their own.
//! - [`optim`]: optimizers (sgd, adagrad, adam, ftrl) applied per key on pushed gradients.
//! - [`standalone`]: master and servers in one process on 127.0.0.1.
//! - [`local_cluster`]: master, servers, Ballista scheduler and executors as processes on
//!   127.0.0.1 (demo, benchmarks, tests).
//! - [`net`]: listeners, tonic settings and signal handling shared by master and servers.
//! - [`cli`]: the `angel-ps` command (master, server, standalone, status, demo, bench).
//!
//! Clients use the `angel-client` crate; this crate never depends on a SQL engine on the
//! server side.

pub mod cli;
pub mod local_cluster;
pub mod master;
pub mod net;
pub mod optim;
pub mod psf;
pub mod server;
pub mod standalone;
pub mod storage;

pub use optim::Optimizer;
pub use psf::{PsFunction, PsfContext, PsfRegistry};
pub use standalone::{Standalone, StandaloneConfig};

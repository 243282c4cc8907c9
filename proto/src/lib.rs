//! The angel-ps wire: everything a client and a server must agree on byte for byte.
//!
//! # Layout
//!
//! - the generated messages and services of `proto/angel.proto` (at the crate root):
//!   [`master_server`]/[`master_client`] (registration, heartbeats, matrix metadata, the
//!   partition map, counters) and [`server_server`]/[`server_client`] (pull, push, PS-function
//!   and counter calls on partitions); and of `proto/ballista.proto`, the Ballista glue's:
//!   [`ballista_slots_server`]/[`ballista_slots_client`] (the task slots `angel-ps scheduler`
//!   reports beside Ballista's scheduler service).
//! - [`wire`]: packed little-endian key and value arrays, the only way bulk data travels.
//! - [`value`]: [`Element`], the value types a matrix can hold (f32, f64, i64).
//! - [`codec`]: how push and pull slices travel (raw, SketchML, Rice-coded keys), and
//!   [`Compression`], the per-matrix choice.
//! - [`sketchml`]: the SketchML gradient codec (quantile buckets, MinMaxSketch, Rice keys).
//! - [`routing`]: [`Layout`], which partition of a matrix holds a given (row, column).
//! - [`counter_keys`]: the stable hash counter keys route by, and how string keys are packed.
//! - [`merge`]: how per-partition results of a PS function combine.
//! - [`node_split`]: [`NodeSplit`], a tree node's split as the PS function `best_split` answers.
//! - [`nonzeros`]: the arguments and answer of the PS function `nonzeros`, columns as exact
//!   32-bit halves.
//! - [`training`]: reading a model's [`Training`] description (optimizer defaults, codec,
//!   when its workers wait).
//! - [`pushes`]: per-client push counters, summed the same way by servers and readers.
//! - [`pulls`]: how far ahead of the slowest worker training pulls went (consistency checks).
//! - [`config_file`]: small configuration files read with a cap, never a FIFO or device.
//! - [`credential`]: the service token every RPC carries, and the client interceptor that
//!   adds it.
//! - [`namespace`]: how a name says its namespace (`NAMESPACE/name`).
//! - [`tls`]: TLS certificates a node serves with and the CA its callers trust.
//! - [`error`]: [`PsError`], one typed error per gRPC status the service uses, both ways.
//! - [`limits`]: HTTP/2 window and frame sizes both sides set, and the lease of a job's run.
//! - [`grpc_codec`]: the services' gRPC codec (prost, each message written once).
//!
//! Servers (`angel-ps`) and clients (`angel-client`) both build on this crate and on nothing
//! of each other.

pub mod codec;
pub mod config_file;
pub mod counter_keys;
pub mod credential;
pub mod error;
pub mod grpc_codec;
pub mod limits;
pub mod merge;
pub mod namespace;
pub mod node_split;
pub mod nonzeros;
pub mod pulls;
pub mod pushes;
pub mod routing;
pub mod sketchml;
pub mod tls;
pub mod training;
pub mod value;
pub mod wire;

pub use codec::{Compression, CompressionMode};
pub use error::{PsError, Result};
pub use node_split::NodeSplit;
pub use routing::Layout;
pub use training::optimizer_params;
pub use value::Element;

/// The code `tonic-prost-build` generates from `proto/angel.proto`.
#[allow(clippy::all, missing_docs)]
mod generated {
    tonic::include_proto!("angel.v1");
}
pub use generated::*;

//! The angel-ps client, used by every process that computes against the parameter servers.
//!
//! # Layout
//!
//! - [`client`]: [`PsClient`], the one object a process keeps: connects to the master, caches
//!   the partition map, and offers the whole API (create, describe, drop, pull, push, psf).
//! - [`codec`]: how push slices travel (raw or SketchML), [`Compression`] per matrix.
//! - [`sketchml`]: the SketchML gradient codec (quantile buckets, MinMaxSketch, Rice keys).
//! - [`counter`]: distributed counters of string keys: create, increase, seal, get, clean.
//! - [`routing`]: [`Layout`], which partition of a matrix holds a given (row, column).
//! - [`split`]: splits a batch of keys by partition, deduplicating (pulls) or merging (pushes)
//!   and remembering how to put the answers back in request order.
//! - [`wire`]: packed little-endian key and value arrays, the only way bulk data travels.
//! - [`value`]: [`Element`], the value types a matrix can hold (f32, f64, i64).
//! - [`matrix`]: [`MatrixSpec`], what a caller asks for when creating a matrix.
//! - [`update`]: an optimizer step with the usual defaults, for [`PsClient::push_update`].
//! - [`pushes`]: the per-client push counters of a status, summed over servers.
//! - [`psf`]: [`Merge`], how per-partition results of a PS function combine.
//! - [`error`]: [`PsError`], one typed error per gRPC status the service uses.

pub mod client;
pub mod codec;
pub mod counter;
pub mod error;
pub mod matrix;
pub mod psf;
pub mod pushes;
pub mod routing;
pub mod sketchml;
pub mod split;
pub mod update;
pub mod value;
pub mod wire;

pub use angel_proto::{StorageKind, Update, ValueType};
pub use client::{ClientConfig, PsClient, worker_pid};
pub use codec::Compression;
pub use error::{PsError, Result};
pub use matrix::MatrixSpec;
pub use psf::Merge;
pub use routing::Layout;
pub use update::update;
pub use value::Element;

//! The angel-ps wire protocol, generated from `proto/angel.proto`.
//!
//! Two services: [`master_server`]/[`master_client`] (registration, heartbeats, matrix
//! metadata and the partition map) and [`server_server`]/[`server_client`] (pull, push and
//! PS-function calls on partitions). Bulk keys and values are packed little-endian arrays in
//! `bytes` fields; `angel-client`'s `wire` module encodes and decodes them.

#![allow(clippy::all, missing_docs)]

tonic::include_proto!("angel.v1");

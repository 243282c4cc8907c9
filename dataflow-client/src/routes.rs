//! The client's cached routes: connections to the servers, matrices and counters by name and
//! id, and why one server's part of a call failed. Shared by every call of [`crate::PsClient`].

use std::collections::HashMap;
use std::sync::Arc;

use angel_proto::OptimizerInfo;
use angel_proto::credential::AuthChannel;
use angel_proto::server_client::ServerClient;

use crate::counter_space::Counter;
use crate::matrix::Matrix;
use crate::{PsError, Result};

/// A connection to one server, cheap to clone (tonic channels multiplex one HTTP/2 connection).
#[derive(Debug, Clone)]
pub(crate) struct ServerConn {
    pub(crate) addr: String,
    pub(crate) rpc: ServerClient<AuthChannel>,
}

/// The cached partition map.
#[derive(Debug, Default)]
pub(crate) struct Routing {
    pub(crate) epoch: u64,
    /// The service the map came from ([`angel_proto::PartitionMap::service`]).
    pub(crate) service: u64,
    pub(crate) servers: HashMap<u32, ServerConn>,
    pub(crate) by_name: HashMap<String, Arc<Matrix>>,
    /// Matrices and counter key spaces by id (ids are unique across both).
    pub(crate) by_id: HashMap<u32, Arc<Matrix>>,
    pub(crate) counters: HashMap<String, Arc<Counter>>,
    /// The optimizers every server runs.
    pub(crate) optimizers: Vec<OptimizerInfo>,
}

/// Why one server's part of a call failed: before sending, or as the server's answer.
#[derive(Debug)]
pub(crate) enum SendError {
    Local(PsError),
    Remote(tonic::Status),
}

impl From<tonic::Status> for SendError {
    fn from(status: tonic::Status) -> Self {
        SendError::Remote(status)
    }
}

impl From<PsError> for SendError {
    fn from(err: PsError) -> Self {
        SendError::Local(err)
    }
}

pub(crate) fn server_of(routing: &Routing, matrix_id: u32, partition_id: u32) -> Result<u32> {
    let m = routing.by_id.get(&matrix_id).ok_or_else(|| {
        PsError::NotFound(format!(
            "matrix {matrix_id} was dropped while the call was in flight"
        ))
    })?;
    m.meta
        .partitions
        .get(partition_id as usize)
        .map(|p| p.server_id)
        .ok_or_else(|| {
            PsError::Internal(format!(
                "matrix '{}' has no partition {partition_id}",
                m.meta.name
            ))
        })
}

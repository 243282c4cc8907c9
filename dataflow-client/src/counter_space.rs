//! [`Counter`]: a distributed counter as the client knows it, and which partition of its hash
//! space each string key routes to.

use std::sync::Arc;

use angel_proto::CounterMeta;
use angel_proto::counter_keys::key_hash;

use crate::matrix::Matrix;
use crate::{PsError, Result};

/// A counter as the client knows it: its metadata and the layout of its key space.
#[derive(Debug, Clone)]
pub struct Counter {
    /// Metadata from the master (state, size after sealing).
    pub meta: CounterMeta,
    /// The hash space the keys route over, as a 1 x 2^63 matrix layout.
    pub space: Arc<Matrix>,
}

impl Counter {
    /// Builds the handle, validating the key-space layout.
    pub fn new(meta: CounterMeta) -> Result<Self> {
        let space = meta.space.clone().ok_or_else(|| {
            PsError::Internal(format!("counter '{}' has no key space", meta.name))
        })?;
        Ok(Counter {
            space: Arc::new(Matrix::new(space)?),
            meta,
        })
    }

    /// Groups `keys` by partition: (partition id, positions of its keys in `keys`).
    pub(crate) fn group<S: AsRef<str>>(&self, keys: &[S]) -> Vec<(u32, Vec<usize>)> {
        let band = self
            .space
            .layout
            .band(0)
            .expect("a counter space has row 0");
        let mut groups: Vec<Vec<usize>> = vec![Vec::new(); band.len()];
        for (i, k) in keys.iter().enumerate() {
            groups[band.locate(key_hash(k.as_ref()))].push(i);
        }
        groups
            .into_iter()
            .enumerate()
            .filter(|(_, g)| !g.is_empty())
            .map(|(pos, g)| (self.space.meta.partitions[band.part(pos)].id, g))
            .collect()
    }
}

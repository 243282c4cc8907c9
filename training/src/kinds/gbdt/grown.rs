//! How many rows of a boosted model's matrix hold trees worth pulling. Trees grow in order and
//! early stopping empties a run at the end, so the trees are a prefix of the rows: complete
//! trees, then at most one growing. A dense model (small by construction:
//! [`super::MAX_DENSE_TREES`]) is pulled whole; a sparse one (many deep trees) up to its first
//! incomplete tree, found from pulls of the rows' headers alone, so a pull holds what the trees
//! hold and never the trees x nodes its options allow.

use angel_client::{PsClient, Result, StorageKind};

/// The header value saying a tree is complete ([`super::tree::HEADER`]'s first).
const DONE: u64 = 0;
/// Headers pulled at a time.
const HEADERS_PER_PULL: u64 = 1 << 16;

/// The rows of model `name` up to and with its first incomplete tree (a dense model's all).
pub async fn rows(client: &PsClient, name: &str) -> Result<u64> {
    let meta = client.matrix(name).await?.meta.clone();
    if meta.storage() != StorageKind::Sparse {
        return Ok(meta.rows);
    }
    for first in (0..meta.rows).step_by(HEADERS_PER_PULL as usize) {
        let ids: Vec<u64> = (first..(first + HEADERS_PER_PULL).min(meta.rows)).collect();
        let (done, _) = client.pull_at::<f64>(name, &ids, &[DONE], None).await?;
        if let Some(at) = done.iter().position(|&d| d == 0.0) {
            return Ok(first + at as u64 + 1);
        }
    }
    Ok(meta.rows)
}

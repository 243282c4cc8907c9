//! [`StoredTopics`]: a topic model's token topics on the servers, for workers that keep
//! nothing from round to round: on Ballista each round's tasks are new (and may run in another
//! executor than the last round's), and a job with tables on disk reads its rows anew.
//!
//! The statement's job creates a sparse integer matrix `<model>.tokens` beside the model and
//! writes the round in it before each round. A worker puts its documents in an order of their
//! own (by content, [`super::corpus::Corpus::canonical`]), so the worker of the same documents
//! numbers its tokens the same whichever order they arrive in; token `i` of the worker whose
//! documents hash to `h` is at key `(h mod 2^30) << 32 | i`. After pushing a slice's change of
//! the counts, the worker adds its tokens' change of topic there; the next round's worker of
//! those documents reads them back.
//!
//! A task run again after its executor died reads the topics the lost run left: those of the
//! slices it finished are new, and so are the counts, so the rerun draws each token from where
//! the lost run left it. Only the slice in flight at the loss may have its counts pushed and
//! its topics not (the sampler's floor keeps counts from going below the worker's own).

use std::sync::Arc;

use angel_client::runtime::block_on;
use angel_client::{MatrixSpec, PsClient, PsError, PushOptions, ValueType};

use crate::error::Result;

/// The key holding the round being run.
const ROUND_KEY: u64 = 1 << 62;
/// Tokens read or written per call.
const CHUNK: usize = 1 << 20;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct StoredTopics {
    client: Arc<PsClient>,
    name: String,
}

impl StoredTopics {
    /// The token topics of model `model`.
    pub fn of(client: Arc<PsClient>, model: &str) -> Self {
        StoredTopics {
            client,
            name: format!("{model}.tokens"),
        }
    }

    /// Creates the matrix for a statement, replacing what an earlier one left.
    pub async fn create(&self) -> Result<()> {
        self.drop().await?;
        let spec = MatrixSpec::sparse(&self.name, 1, ROUND_KEY + 1).value_type(ValueType::I64);
        self.client.create_matrix(spec).await?;
        Ok(())
    }

    /// Drops the matrix: the statement ended.
    pub async fn drop(&self) -> Result<()> {
        match self.client.drop_matrix(&self.name).await {
            Ok(()) | Err(PsError::NotFound(_)) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Sets the round the workers run next (after round `round - 1`, or 0 at the start).
    pub async fn start_round(&self, round: u32) -> Result<()> {
        if round > 0 {
            self.add(&[ROUND_KEY], &[1]).await?;
        }
        Ok(())
    }

    /// The round being run; `None` when the statement keeps no topics here (the matrix is
    /// missing).
    pub fn round(&self) -> Result<Option<u32>> {
        match block_on(
            self.client
                .pull_at::<i64>(&self.name, &[0], &[ROUND_KEY], None),
        ) {
            Ok((values, _)) => Ok(values.first().map(|&r| r as u32)),
            Err(PsError::NotFound(_)) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The topics of the `tokens` tokens of the worker whose documents hash to `content`.
    pub fn load(&self, content: u64, tokens: usize) -> Result<Vec<u32>> {
        let mut topics = Vec::with_capacity(tokens);
        for start in (0..tokens).step_by(CHUNK) {
            let keys: Vec<u64> = (start..tokens.min(start + CHUNK))
                .map(|i| key(content, i))
                .collect();
            let pull = self.client.pull_at::<i64>(&self.name, &[0], &keys, None);
            topics.extend(block_on(pull)?.0.into_iter().map(|t| t as u32));
        }
        Ok(topics)
    }

    /// Adds the change from `old` to `new` of the topics of tokens `first..` of the worker
    /// whose documents hash to `content`.
    pub fn save(&self, content: u64, first: usize, (old, new): (&[u32], &[u32])) -> Result<()> {
        let (keys, changes): (Vec<u64>, Vec<i64>) = (old.iter().zip(new).enumerate())
            .filter(|(_, (o, n))| o != n)
            .map(|(i, (&o, &n))| (key(content, first + i), i64::from(n) - i64::from(o)))
            .unzip();
        for (keys, changes) in keys.chunks(CHUNK).zip(changes.chunks(CHUNK)) {
            block_on(self.add(keys, changes))?;
        }
        Ok(())
    }

    async fn add(&self, keys: &[u64], changes: &[i64]) -> angel_client::Result<()> {
        let how = PushOptions::default();
        (self.client)
            .push_with::<i64>(&self.name, &[0], keys, changes, how)
            .await?;
        Ok(())
    }
}

/// The key of token `i` of the worker whose documents hash to `content`.
fn key(content: u64, i: usize) -> u64 {
    ((content & ((1 << 30) - 1)) << 32) | i as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_tokens_have_keys_of_their_own_below_the_round() {
        assert_eq!(key(0, 7), 7);
        assert_eq!(key(1, 0), 1 << 32);
        assert_eq!(key(u64::MAX, u32::MAX as usize), ROUND_KEY - 1);
        assert_ne!(key(3, 5), key(2, 5));
    }
}

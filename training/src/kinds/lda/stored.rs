//! [`StoredTopics`]: a topic model's token topics on the servers, for workers that keep
//! nothing from round to round: on Ballista each round's tasks are new (and may run in another
//! executor than the last round's), and a job with tables on disk reads its rows anew.
//!
//! The statement's job creates a sparse integer matrix `<model>.tokens` beside the model and
//! writes the round in it before each round. A worker puts its documents in an order of their
//! own (by content, [`super::corpus::Corpus::canonical`]), so the worker of the same documents
//! numbers its tokens the same whichever order they arrive in; token `i` of the worker whose
//! documents hash to `h` is at key `(h mod 2^30) << 32 | i`, and key `(h mod 2^30) << 32 |
//! (2^32 - 1)` holds its number of tokens plus one, so a worker whose documents were never
//! stored (the query gave other rows than in round 0) is told rather than read as topic 0.
//! After pushing a slice's change of the counts, the worker adds its tokens' change of topic
//! there; the next round's worker of those documents reads them back.
//!
//! A task run again after its executor died: in round 0 it draws the same topics and names
//! its pushes as its lost run did, so the servers refuse what that run applied; in a later
//! round it reads the topics the lost run left (those of the slices it finished are new, and
//! so are their counts) and draws each token from there. Only the slice in flight at the loss
//! may have its counts pushed and its topics not (the sampler's floor keeps counts from going
//! below the worker's own).

use std::sync::Arc;

use angel_client::runtime::block_on;
use angel_client::{ChangeNames, MatrixSpec, PsClient, PsError, PushOptions, ValueType};

use crate::error::{Result, input_err};

/// The key holding the round being run.
const ROUND_KEY: u64 = 1 << 62;
/// A worker's token place holding its number of tokens plus one.
const TOKENS_AT: usize = u32::MAX as usize;
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
            name: Self::name_of(model),
        }
    }

    /// The name of the matrix holding model `model`'s token topics.
    pub fn name_of(model: &str) -> String {
        format!("{model}.tokens")
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
        Ok(self.client.drop_matrix_if_any(&self.name).await?)
    }

    /// Sets the round the workers run next (after round `round - 1`, or 0 at the start).
    pub async fn start_round(&self, round: u32) -> Result<()> {
        if round > 0 {
            self.add(&[ROUND_KEY], &[1], None).await?;
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

    /// Stores the `topics` round 0 drew for the worker whose documents hash to `content`,
    /// its pushes named by `names` (a task's, so a rerun repeats the names).
    pub fn start(
        &self,
        content: u64,
        topics: &[u32],
        mut names: Option<&mut ChangeNames>,
    ) -> Result<()> {
        if topics.len() >= TOKENS_AT {
            return input_err(format!(
                "model '{}': a worker holds {} tokens, more than the {} a worker may hold; \
                 give the statement more workers",
                self.model(),
                topics.len(),
                TOKENS_AT - 1
            ));
        }
        let count = [key(content, TOKENS_AT)];
        block_on(self.add(&count, &[topics.len() as i64 + 1], names.as_deref_mut()))?;
        self.save(content, 0, (&vec![0; topics.len()], topics), names)
    }

    /// The topics of the `tokens` tokens of the worker whose documents hash to `content`.
    pub fn load(&self, content: u64, tokens: usize) -> Result<Vec<u32>> {
        let count = [key(content, TOKENS_AT)];
        let stored = block_on(self.client.pull_at::<i64>(&self.name, &[0], &count, None))?.0;
        if stored.first() != Some(&(tokens as i64 + 1)) {
            return input_err(format!(
                "model '{}': no topics are stored for a worker's {tokens} tokens: the \
                 training query gave other rows in this round than in the first (a LIMIT \
                 without ORDER BY, or a table that changed during the statement?)",
                self.model()
            ));
        }
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
    /// whose documents hash to `content`, its pushes named by `names` if any.
    pub fn save(
        &self,
        content: u64,
        first: usize,
        (old, new): (&[u32], &[u32]),
        mut names: Option<&mut ChangeNames>,
    ) -> Result<()> {
        let (keys, changes): (Vec<u64>, Vec<i64>) = (old.iter().zip(new).enumerate())
            .filter(|(_, (o, n))| o != n)
            .map(|(i, (&o, &n))| (key(content, first + i), i64::from(n) - i64::from(o)))
            .unzip();
        for (keys, changes) in keys.chunks(CHUNK).zip(changes.chunks(CHUNK)) {
            block_on(self.add(keys, changes, names.as_deref_mut()))?;
        }
        Ok(())
    }

    async fn add(
        &self,
        keys: &[u64],
        changes: &[i64],
        names: Option<&mut ChangeNames>,
    ) -> angel_client::Result<()> {
        let how = PushOptions {
            change: names.map(ChangeNames::next_change),
            ..PushOptions::default()
        };
        (self.client)
            .push_with::<i64>(&self.name, &[0], keys, changes, how)
            .await?;
        Ok(())
    }

    /// The model's name, for errors.
    fn model(&self) -> &str {
        self.name.strip_suffix(".tokens").unwrap_or(&self.name)
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
        assert_eq!(key(u64::MAX, TOKENS_AT), ROUND_KEY - 1);
        assert_ne!(key(3, 5), key(2, 5));
    }
}

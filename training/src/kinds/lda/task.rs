//! [`TopicTask`]: one worker's pass over its documents in a topic model's statement, with
//! `parallelism = 'data'` (Angel's LDA, AD-LDA's approximation between workers).
//!
//! `CREATE MODEL` runs round 0, where each worker draws its tokens' topics at random and pushes
//! their counts, and then one round per epoch, where it draws every token's topic once. The
//! rounds run one after the other, so every worker starts sampling against every worker's
//! counts. The worker's state (its tokens in sampling order, their topics, its documents'
//! counts) stays in the job's memory from round to round ([`Kept`]).
//!
//! A round walks the worker's slices of the vocabulary: it pulls the counts of the slice's
//! words that its documents use, with the topic totals (the next slice's pull in flight while
//! the current one is drawn), draws the slice's tokens, and pushes the change of the counts
//! (the servers add it). The totals are thus brought up to date at every step; between two
//! pulls a worker sees its own moves only, as in Angel.

use std::sync::Arc;

use angel_client::runtime::{Started, block_on, start};
use arrow::array::{ArrayData, ArrayRef};

use super::Lda;
use super::corpus::Corpus;
use super::worker::{Change, Worker};
use crate::error::{Result, input_err};
use crate::model::Model;
use crate::rotation::kept::Kept;

/// See the module documentation.
#[derive(Debug)]
pub struct TopicTask {
    model: Model,
    lda: Lda,
    /// The function the rows come through, for errors in them.
    function: &'static str,
    /// The task's documents, batch after batch: each batch's `words [, counts]` arrays.
    batches: Vec<Vec<ArrayRef>>,
    kept: Kept<Worker>,
}

/// What a worker's round did: its tokens, and its documents' part of the log-likelihood
/// after it.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Round {
    pub tokens: u64,
    pub doc_likelihood: f64,
}

impl TopicTask {
    /// A worker of topic model `model`, reading documents that come through `function`,
    /// keeping its state in `kept`; an error when the model is not a topic model.
    pub fn new(model: Model, function: &'static str, kept: Kept<Worker>) -> Result<Self> {
        let Some(lda) = model.spec.kind.topics().cloned() else {
            return input_err(format!(
                "{function}: model '{}' is a {} model, not a topic model",
                model.name,
                model.spec.kind.name()
            ));
        };
        Ok(TopicTask {
            model,
            lda,
            function,
            batches: Vec::new(),
            kept,
        })
    }

    /// The model being trained.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// Keeps a batch of documents (its `words [, counts]` arrays) for the round.
    pub fn add(&mut self, inputs: &[ArrayRef]) {
        self.batches.push(inputs.to_vec());
    }

    /// Runs the worker's part of the current round; `progress` hears the tokens of each
    /// step.
    pub fn run(&mut self, mut progress: impl FnMut(u64, f64)) -> Result<Round> {
        let name = self.model.name.clone();
        let Some(round) = self.kept.round(&name) else {
            return input_err(format!(
                "model '{name}': a topic model's workers keep their documents' topics in the \
                 job's memory for the whole statement, and this job streams its training rows \
                 (on Ballista, or with tables on disk): not supported yet"
            ));
        };
        let arrays: Vec<ArrayData> = self.batches.iter().flatten().map(|a| a.to_data()).collect();
        let worker = match (round, self.kept.take(&name, &arrays)) {
            (0, _) => self.start()?,
            (_, Some(mut worker)) => {
                self.sample(&mut worker, &mut progress)?;
                worker
            }
            (_, None) => {
                return input_err(format!(
                    "model '{name}': a worker's documents' topics from round {} are gone (its \
                     rows came as other record batches); the statement cannot go on",
                    round - 1
                ));
            }
        };
        let done = Round {
            tokens: worker.tokens(),
            doc_likelihood: worker.doc_likelihood(),
        };
        if round == 0 {
            progress(done.tokens, 0.0);
        }
        self.kept.put(&name, round, arrays, worker);
        Ok(done)
    }

    /// Round 0: reads the documents, draws their tokens' topics and pushes their counts.
    fn start(&self) -> Result<Worker> {
        let read = (self.batches.iter())
            .map(|b| {
                Corpus::read(
                    self.function,
                    &self.model.name,
                    (&b[0], b.get(1)),
                    self.model.spec.dim,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let worker = Worker::for_model(&self.lda, self.model.spec.dim, &Corpus::concat(read));
        for s in (0..worker.slices.len()).filter(|&s| !worker.slices[s].keys.is_empty()) {
            self.push(&worker.slices[s].keys, worker.counts(s))?;
        }
        Ok(worker)
    }

    /// One draw of every token, slice after slice.
    fn sample(&self, worker: &mut Worker, progress: &mut impl FnMut(u64, f64)) -> Result<()> {
        let k = self.lda.topics;
        let steps: Vec<usize> = (worker.round_order().into_iter())
            .filter(|&s| !worker.slices[s].keys.is_empty())
            .collect();
        let dim = self.model.spec.dim;
        let keys = |w: &Worker, s: usize| with_totals(&w.slices[s].keys, dim);
        let mut pulled = match steps.first() {
            Some(&s) => block_on(self.fetch(keys(worker, s)).join())?,
            None => return Ok(()),
        };
        // The totals' change of the last step, which the pull of the current one did not see.
        let mut own: Option<Vec<i64>> = None;
        for (i, &s) in steps.iter().enumerate() {
            let ahead = steps.get(i + 1).map(|&next| self.fetch(keys(worker, next)));
            let n = worker.slices[s].keys.len();
            let (mut totals, words) = word_major(&pulled, k, n);
            if let Some(own) = own.take() {
                totals.iter_mut().zip(own).for_each(|(t, d)| *t += d);
            }
            let change = worker.sample(s, &totals, &words);
            // The next pull ends before this push starts, so it lacks exactly this change.
            if let Some(ahead) = ahead {
                pulled = block_on(ahead.join())?;
            }
            self.push(&worker.slices[s].keys, (change.0.clone(), change.1))?;
            own = Some(change.0);
            progress(worker.slices[s].tokens(), 0.0);
        }
        Ok(())
    }

    /// Starts pulling the counts of `keys` (a slice's words, then the totals' column) in
    /// every topic's row.
    fn fetch(&self, keys: Vec<u64>) -> Started<Vec<i64>> {
        let client = self.model.client().clone();
        let (name, rows) = (self.model.name.clone(), self.model.weight_row_ids());
        start(async move { Ok(client.pull_at::<i64>(&name, &rows, &keys, None).await?.0) })
    }

    /// Adds a change of the counts of slice words `keys` (and of the totals) to the model.
    fn push(&self, keys: &[u64], (totals, words): Change) -> Result<()> {
        let keys = with_totals(keys, self.model.spec.dim);
        let values = topic_major(&totals, &words, keys.len());
        let rows = self.model.weight_row_ids();
        let client: &Arc<_> = self.model.client();
        let how = angel_client::PushOptions::default();
        block_on(client.push_with::<i64>(&self.model.name, &rows, &keys, &values, how))?;
        Ok(())
    }
}

/// `keys` and then the topic totals' column (`dim`).
fn with_totals(keys: &[u64], dim: u64) -> Vec<u64> {
    keys.iter().copied().chain([dim]).collect()
}

/// Values pulled topic after topic (`k` rows of `n` words and the totals) as the topic
/// totals and the words' counts word after word.
fn word_major(pulled: &[i64], k: usize, n: usize) -> (Vec<i64>, Vec<i64>) {
    let width = n + 1;
    let totals = (0..k).map(|t| pulled[t * width + n]).collect();
    let words = (0..n)
        .flat_map(|j| (0..k).map(move |t| pulled[t * width + j]))
        .collect();
    (totals, words)
}

/// The inverse of [`word_major`]: a change as pushed, topic after topic.
fn topic_major(totals: &[i64], words: &[i64], width: usize) -> Vec<i64> {
    let (k, n) = (totals.len(), width - 1);
    (0..k)
        .flat_map(|t| (0..width).map(move |j| (t, j)))
        .map(|(t, j)| match j == n {
            true => totals[t],
            false => words[j * k + t],
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulls_and_pushes_are_topic_major_with_the_totals_last() {
        // 2 topics, 3 words: topic 0 = [1, 2, 3 | 10], topic 1 = [4, 5, 6 | 20].
        let pulled = [1, 2, 3, 10, 4, 5, 6, 20];
        let (totals, words) = word_major(&pulled, 2, 3);
        assert_eq!(totals, [10, 20]);
        assert_eq!(words, [1, 4, 2, 5, 3, 6]);
        assert_eq!(topic_major(&totals, &words, 4), pulled);
    }
}

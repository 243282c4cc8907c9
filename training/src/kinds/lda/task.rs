//! [`TopicTask`]: one worker's pass over its documents in a topic model's statement.
//!
//! `CREATE MODEL` runs round 0, where each worker draws its tokens' topics at random and pushes
//! their counts, and then one round per epoch, where it draws every token's topic once. The
//! rounds run one after the other, so every worker starts sampling against every worker's
//! counts. The worker's state (its tokens in sampling order, their topics, its documents'
//! counts) stays in the job's memory from round to round ([`Kept`]).
//!
//! A round walks the worker's slices of the vocabulary: it pulls the counts of the slice's
//! words that its documents use (the next slice's pull in flight while the current one is
//! drawn), draws the slice's tokens, and pushes the change of the counts (the servers add it).
//! The topic totals come with the pulls, so they are brought up to date at every slice;
//! between two pulls a worker sees its own moves only. In which order:
//!
//! - `parallelism = 'data'` (Angel's LDA; AD-LDA's approximation between workers): each
//!   worker walks all its slices from one drawn at random, whatever the others draw.
//! - `parallelism = 'rotation'` (Harp's): the vocabulary is cut into the rotation's slices,
//!   each a run of the slices above, which the master leases to one worker at a time
//!   ([`Member`]). A worker draws the tokens of the rotated slice it holds against counts of
//!   its words that no other worker changes meanwhile, so only the totals are approximate.
//!   The next lease is asked for, and its first slice pulled, while a step draws; under time
//!   control a step stops between two slices when its budget runs out, and the next step on
//!   that rotated slice resumes there.

use std::sync::Arc;
use std::time::Instant;

use angel_client::runtime::{Started, block_on, start};
use angel_client::{ChangeNames, PsClient, RotateReply};
use arrow::array::{ArrayData, ArrayRef};

use super::Lda;
use super::corpus::Corpus;
use super::stored::StoredTopics;
use super::worker::{Change, TopicWorker};
use crate::error::{Result, input_err};
use crate::kept::Kept;
use crate::model::Model;
use crate::rotation::member::Member;
use crate::rotation::pace::Pace;
use crate::task_pass::{Progress, TaskContext, TaskPass, Trained};

/// See the module documentation.
#[derive(Debug)]
pub struct TopicTask {
    model: Model,
    lda: Lda,
    /// The function the rows come through, for errors in them.
    function: &'static str,
    /// The task's documents, batch after batch: each batch's `words [, counts]` arrays.
    batches: Vec<Vec<ArrayRef>>,
    kept: Kept,
    /// Where the worker's token topics are kept when the job does not keep the worker, and
    /// the hash of its documents.
    stored: Option<(StoredTopics, u64)>,
}

/// What a worker's round did: its tokens, and its documents' part of the log-likelihood
/// after it.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Sampled {
    pub tokens: u64,
    pub doc_likelihood: f64,
}

impl TopicTask {
    /// A worker of topic model `model` of options `lda`, reading documents that come through
    /// the context's function, keeping its state in the context's [`Kept`].
    pub fn new(model: Model, lda: Lda, context: &TaskContext) -> Self {
        TopicTask {
            model,
            lda,
            function: context.function,
            batches: Vec::new(),
            kept: context.kept.clone(),
            stored: None,
        }
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
    pub fn run(&mut self, mut progress: impl FnMut(u64, f64)) -> Result<Sampled> {
        match self.kept.round(&self.model.name) {
            Some(round) => self.run_kept(round, &mut progress),
            None => self.run_stored(&mut progress),
        }
    }

    /// A round of a job holding the rows in memory: the worker the previous round left is
    /// found by the identity of its batches, and kept for the next.
    fn run_kept(&mut self, round: u32, progress: &mut impl FnMut(u64, f64)) -> Result<Sampled> {
        let name = self.model.name.clone();
        let arrays: Vec<ArrayData> = self.batches.iter().flatten().map(|a| a.to_data()).collect();
        let worker = match (round, self.kept.take::<TopicWorker>(&name, &arrays)) {
            (0, _) => self.start(&self.corpus()?)?,
            (_, Some(mut worker)) => {
                self.draw(&mut worker, progress)?;
                worker
            }
            // A task without documents left nothing to find (tasks without documents share
            // one fingerprint); it still takes part in a rotation.
            (_, None) if arrays.is_empty() => {
                let mut worker = self.start(&Corpus::default())?;
                self.draw(&mut worker, progress)?;
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
        let done = self.done(round, &worker, progress);
        self.kept.put(&name, round, arrays, worker);
        Ok(done)
    }

    /// A round of a job that reads its rows anew every round: the worker is made again from
    /// its documents, and its tokens' topics are on the servers ([`StoredTopics`]).
    fn run_stored(&mut self, progress: &mut impl FnMut(u64, f64)) -> Result<Sampled> {
        let stored = StoredTopics::of(self.model.client().clone(), &self.model.name);
        let Some(round) = stored.round()? else {
            return input_err(format!(
                "model '{}': the statement keeps its workers' token topics neither in the \
                 job's memory nor on the servers",
                self.model.name
            ));
        };
        let (corpus, content) = self.corpus()?.canonical();
        tracing::debug!(model = %self.model.name, round, content, docs = corpus.docs(), tokens = corpus.words.len(), "topic worker of stored topics");
        self.stored = Some((stored, content));
        let worker = match round {
            0 => self.start(&corpus)?,
            _ => {
                let mut worker = self.worker(&corpus);
                let (stored, content) = self.stored.as_ref().expect("set above");
                worker.restore(stored.load(*content, worker.tokens() as usize)?, round)?;
                self.draw(&mut worker, progress)?;
                worker
            }
        };
        Ok(self.done(round, &worker, progress))
    }

    /// What `worker` did in round `round`; round 0's tokens go to `progress` (later rounds'
    /// went step by step).
    fn done(
        &self,
        round: u32,
        worker: &TopicWorker,
        progress: &mut impl FnMut(u64, f64),
    ) -> Sampled {
        if round == 0 {
            progress(worker.tokens(), 0.0);
        }
        Sampled {
            tokens: worker.tokens(),
            doc_likelihood: worker.doc_likelihood(),
        }
    }

    /// The task's documents.
    fn corpus(&self) -> Result<Corpus> {
        let mut corpus = Corpus::default();
        for b in &self.batches {
            let (model, dim) = (&self.model.name, self.model.spec.dim);
            corpus.read_more(self.function, model, (&b[0], b.get(1)), dim)?;
        }
        Ok(corpus)
    }

    /// The worker of `corpus`, every token's topic drawn at random.
    fn worker(&self, corpus: &Corpus) -> TopicWorker {
        // The master cuts the rotation into as many slices as the training description says.
        let rotated = self.model.spec.sync.to_proto().rotation_slices as usize;
        TopicWorker::for_model(&self.lda, self.model.spec.dim, corpus, rotated)
    }

    /// Round 0: draws the topics of `corpus`'s tokens at random and pushes their counts (and,
    /// when they are stored, the topics). It draws the same and pushes in the same order at
    /// every run, so on Ballista a task run again names its pushes as its lost run did, and
    /// the servers refuse what that run applied.
    fn start(&self, corpus: &Corpus) -> Result<TopicWorker> {
        let worker = self.worker(corpus);
        let mut names = ChangeNames::for_accumulator();
        for s in (0..worker.slices.len()).filter(|&s| !worker.slices[s].keys.is_empty()) {
            self.push(&worker.slices[s].keys, worker.counts(s), names.as_mut())?;
        }
        if let Some((stored, content)) = &self.stored {
            stored.start(*content, &worker.topics, names.as_mut())?;
        }
        Ok(worker)
    }

    /// One draw of every token, in the model's parallel mode.
    fn draw(&self, worker: &mut TopicWorker, progress: &mut impl FnMut(u64, f64)) -> Result<()> {
        match self.model.spec.sync.rotation {
            true => Member::round(&self.model, |m| self.rotate(worker, m, progress)),
            false => self.sample(worker, progress),
        }
    }

    /// A data-parallel round: one draw of every token, slice after slice from a random one.
    fn sample(&self, worker: &mut TopicWorker, progress: &mut impl FnMut(u64, f64)) -> Result<()> {
        let keys = self.keys(worker);
        let order: Vec<usize> = (worker.round_order().into_iter())
            .filter(|&s| !worker.slices[s].keys.is_empty())
            .collect();
        let Some(&first) = order.first() else {
            return Ok(());
        };
        let first = block_on(self.fetch(&keys, first).join())?;
        let mut view = View::new(vec![0; self.lda.topics]);
        self.walk(
            worker,
            (&mut view, &keys),
            (&order, first),
            || true,
            progress,
        )?;
        Ok(())
    }

    /// A round under model rotation: one step per rotated slice, in the master's order, each
    /// drawing the tokens of the slice it leased (all of them, or as many as time control
    /// lets it).
    fn rotate(
        &self,
        worker: &mut TopicWorker,
        member: &Member,
        progress: &mut impl FnMut(u64, f64),
    ) -> Result<()> {
        let steps = member.joined.slices;
        if worker.rotated() != steps as usize {
            return input_err(format!(
                "model '{}': its rotation has {steps} slices, and the workers cut the \
                 vocabulary into {} when the statement started",
                self.model.name,
                worker.rotated()
            ));
        }
        let keys = self.keys(worker);
        let orders = Arc::new(
            (0..worker.rotated())
                .map(|r| worker.step_order(r))
                .collect(),
        );
        let mut view = View::new(self.totals()?);
        // A run that took its rank over starts where its lost run stopped handing slices
        // back: the topics it read are those the lost run left (every finished slice's).
        let first = member.joined.first_step;
        let mut next = Some(self.lease(member, first, (&keys, &orders)));
        for step in first..steps {
            let (lease, first) = block_on(next.take().expect("started").join())?;
            if step + 1 < steps {
                next = Some(self.lease(member, step + 1, (&keys, &orders)));
            }
            let r = lease.slice as usize;
            let mut pace = Pace::start(lease.budget_us, member.slowdown);
            let busy = Instant::now();
            let (drawn, stopped) = match first {
                Some(first) => self.walk(
                    worker,
                    (&mut view, &keys),
                    (&orders[r], first),
                    || pace.go_on(),
                    progress,
                )?,
                None => (0, None),
            };
            if let Some(s) = stopped {
                worker.resume_at(r, s);
            }
            member.release(step, drawn, busy.elapsed())?;
        }
        Ok(())
    }

    /// Draws the tokens of slices `order`, the first against its counts `first`, each next
    /// one's pulled while the current one is drawn, and pushes each change; after each slice
    /// `go_on` says whether to go on. Returns the tokens drawn and, if `go_on` stopped the
    /// walk, the slice it stopped before.
    fn walk(
        &self,
        worker: &mut TopicWorker,
        (view, keys): (&mut View, &Keys),
        (order, first): (&[usize], Pulled),
        mut go_on: impl FnMut() -> bool,
        progress: &mut impl FnMut(u64, f64),
    ) -> Result<(u64, Option<usize>)> {
        let mut pulled = Some(first);
        let mut drawn = 0;
        for (i, &s) in order.iter().enumerate() {
            let following = order.get(i + 1).map(|&f| self.fetch(keys, f));
            let tokens = worker.slice_tokens(s);
            let before = (self.stored.as_ref()).map(|_| worker.topics[tokens.clone()].to_vec());
            let change = view.sample(worker, s, pulled.take().expect("pulled before its draw"));
            // The following pull ends before this push starts, so it lacks exactly this change.
            if let Some(following) = following {
                pulled = Some(block_on(following.join())?);
            }
            self.push(&worker.slices[s].keys, change, None)?;
            if let (Some((stored, content)), Some(before)) = (&self.stored, before) {
                let after = &worker.topics[tokens.clone()];
                stored.save(*content, tokens.start, (&before, after), None)?;
            }
            drawn += tokens.len() as u64;
            progress(tokens.len() as u64, 0.0);
            if !go_on()
                && let Some(&next) = order.get(i + 1)
            {
                return Ok((drawn, Some(next)));
            }
        }
        Ok((drawn, None))
    }

    /// Each of the worker's slices' keys with the topic totals' column last, for pulls in
    /// flight.
    fn keys(&self, worker: &TopicWorker) -> Keys {
        let dim = self.model.spec.dim;
        Arc::new(
            worker
                .slices
                .iter()
                .map(|s| with_totals(&s.keys, dim))
                .collect(),
        )
    }

    /// The topic totals as the servers have them now.
    fn totals(&self) -> Result<Vec<i64>> {
        let pull = pull(self.puller(), vec![self.model.spec.dim], true);
        Ok(block_on(pull)?.totals.unwrap_or_default())
    }

    /// Starts pulling the counts of slice `s`'s words (`keys`) and the topic totals.
    fn fetch(&self, keys: &Keys, s: usize) -> Started<Pulled> {
        start(pull(self.puller(), keys[s].clone(), true))
    }

    /// Starts leasing the rotated slice of step `step` and pulling the counts of the words of
    /// its first slice in `orders` (none if the worker has no tokens in it); the totals are
    /// left out, the pull's moment against the worker's own pushes being unknown.
    fn lease(
        &self,
        member: &Member,
        step: u32,
        (keys, orders): (&Keys, &Arc<Vec<Vec<usize>>>),
    ) -> Started<(RotateReply, Option<Pulled>)> {
        let (acquire, puller) = (member.acquire(step), self.puller());
        let (keys, orders) = (keys.clone(), orders.clone());
        start(async move {
            let lease = acquire.await?;
            let first = match orders[lease.slice as usize].first() {
                Some(&s) => Some(pull(puller, keys[s][..keys[s].len() - 1].to_vec(), false).await?),
                None => None,
            };
            Ok((lease, first))
        })
    }

    fn puller(&self) -> Puller {
        Puller {
            client: self.model.client().clone(),
            name: self.model.name.clone(),
            rows: self.model.weight_row_ids(),
            topics: self.lda.topics,
        }
    }

    /// Adds a change of the counts of slice words `keys` (and of the totals) to the model, the
    /// push named by `names` if any.
    fn push(
        &self,
        keys: &[u64],
        (totals, words): Change,
        names: Option<&mut ChangeNames>,
    ) -> Result<()> {
        let keys = with_totals(keys, self.model.spec.dim);
        let values = topic_major(&totals, &words, keys.len());
        let rows = self.model.weight_row_ids();
        let client: &Arc<_> = self.model.client();
        let how = angel_client::PushOptions {
            change: names.map(ChangeNames::next_change),
            ..angel_client::PushOptions::default()
        };
        block_on(client.push_with::<i64>(&self.model.name, &rows, &keys, &values, how))?;
        Ok(())
    }
}

/// Each slice's keys, with the topic totals' column last.
type Keys = Arc<Vec<Vec<u64>>>;

/// One slice's counts as pulled: the topic totals (when asked for) and the words' counts,
/// word after word.
#[derive(Debug, PartialEq)]
struct Pulled {
    totals: Option<Vec<i64>>,
    words: Vec<i64>,
}

/// What a pull of the model's counts needs, for a pull in flight.
struct Puller {
    client: Arc<PsClient>,
    name: String,
    rows: Vec<u64>,
    topics: usize,
}

/// Pulls the counts of `keys` in every topic's row; with `totals`, the last key is the
/// totals' column.
async fn pull(p: Puller, keys: Vec<u64>, totals: bool) -> angel_client::Result<Pulled> {
    let values = p
        .client
        .pull_at::<i64>(&p.name, &p.rows, &keys, None)
        .await?
        .0;
    Ok(word_major(&values, p.topics, keys.len(), totals))
}

/// The topic totals a worker draws against: the last pulled, with its own moves since.
struct View {
    totals: Vec<i64>,
    /// The totals' change of the last slice drawn, which a pull started before its push lacks.
    last: Vec<i64>,
}

impl View {
    fn new(totals: Vec<i64>) -> Self {
        let last = vec![0; totals.len()];
        View { totals, last }
    }

    /// Draws slice `s`'s tokens of `worker` against `pulled` (its totals, if any, from a
    /// pull that ended before the last slice's push); returns the change.
    fn sample(&mut self, worker: &mut TopicWorker, s: usize, pulled: Pulled) -> Change {
        if let Some(totals) = pulled.totals {
            self.totals = totals.iter().zip(&self.last).map(|(t, d)| t + d).collect();
        }
        let change = worker.sample(s, &self.totals, &pulled.words);
        self.totals
            .iter_mut()
            .zip(&change.0)
            .for_each(|(t, d)| *t += d);
        self.last.clone_from(&change.0);
        change
    }
}

/// `keys` and then the topic totals' column (`dim`).
fn with_totals(keys: &[u64], dim: u64) -> Vec<u64> {
    keys.iter().copied().chain([dim]).collect()
}

/// Values pulled topic after topic (`k` rows of `width` keys: words, then with `totals` the
/// totals' column) as the topic totals and the words' counts word after word.
fn word_major(pulled: &[i64], k: usize, width: usize, totals: bool) -> Pulled {
    let n = width - usize::from(totals);
    let words = (0..n)
        .flat_map(|j| (0..k).map(move |t| pulled[t * width + j]))
        .collect();
    Pulled {
        totals: totals.then(|| (0..k).map(|t| pulled[t * width + n]).collect()),
        words,
    }
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

/// Keeps the documents as they come; samples them in the round when they end, and answers
/// its tokens and their documents' log-likelihood.
impl TaskPass for TopicTask {
    fn add(&mut self, columns: &[ArrayRef], _: Progress) -> Result<Trained> {
        TopicTask::add(self, columns);
        Ok(Trained::default())
    }

    fn finish(&mut self, progress: Progress) -> Result<Trained> {
        let round = self.run(|tokens, _| progress(tokens, 0.0))?;
        Ok(Trained {
            rows: round.tokens,
            loss: round.doc_likelihood,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pulls_and_pushes_are_topic_major_with_the_totals_last() {
        // 2 topics, 3 words: topic 0 = [1, 2, 3 | 10], topic 1 = [4, 5, 6 | 20].
        let pulled = [1, 2, 3, 10, 4, 5, 6, 20];
        let Pulled { totals, words } = word_major(&pulled, 2, 4, true);
        let totals = totals.expect("asked for");
        assert_eq!(totals, [10, 20]);
        assert_eq!(words, [1, 4, 2, 5, 3, 6]);
        assert_eq!(topic_major(&totals, &words, 4), pulled);
        let words_only = word_major(&[1, 2, 4, 5], 2, 2, false);
        assert_eq!(
            (words_only.totals, words_only.words),
            (None, vec![1, 4, 2, 5])
        );
    }
}

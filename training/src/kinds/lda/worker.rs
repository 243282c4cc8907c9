//! [`TopicWorker`]: one worker's documents as the sampler walks them, their tokens' topics and
//! their documents' topic counts, kept for the whole statement.
//!
//! The vocabulary is cut into slices of consecutive words, and the worker's tokens are kept
//! slice after slice, and within a slice document after document: a step pulls the counts of
//! one slice's words that the worker uses, draws every token of them, and pushes the change,
//! so the worker never holds more of the model than a slice. Within a slice a document's
//! tokens are drawn together, so its counts are expanded once per slice.

use std::ops::Range;

use rand::SeedableRng;
use rand::rngs::SmallRng;

use super::corpus::{Corpus, seed_of};
use super::likelihood;
use super::sampler::Sampler;
use super::{Lda, Priors};
use crate::error::{Result, input_err};

/// Values one slice's dense pull may hold (topics x words): a pull of 8 MB.
const SLICE_VALUES: u64 = 1 << 20;
/// Fewest slices: each step's pull brings the other workers' moves of its words since their
/// own step on them, so more steps mean fresher counts.
const MIN_SLICES: u64 = 16;
/// Fewest slices per rotated slice under model rotation: each brings the topic totals up to
/// date, and time control stops a step between two of them.
const MIN_PER_ROTATED: usize = 8;

/// One slice's part of the worker: the words it uses, and its tokens by document.
#[derive(Debug, Clone, PartialEq)]
pub struct Slice {
    /// The words of the slice the worker's tokens use, ascending: the keys its step pulls.
    pub keys: Vec<u64>,
    /// Per document with tokens in the slice: the document, and its tokens' positions.
    runs: Vec<(u32, Range<usize>)>,
}

impl Slice {
    /// Number of the worker's tokens in the slice.
    pub fn tokens(&self) -> u64 {
        self.runs.iter().map(|(_, t)| t.len() as u64).sum()
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct TopicWorker {
    priors: Priors,
    /// Each token's word, as its place in its slice's keys, in sampling order.
    slots: Vec<u32>,
    /// Each token's topic, in sampling order.
    pub topics: Vec<u32>,
    pub slices: Vec<Slice>,
    /// Each document's topic counts (topic, count).
    docs: Vec<Vec<(u32, u32)>>,
    /// Each document's number of tokens.
    lengths: Vec<u32>,
    /// Under model rotation, per rotated slice (a run of `slices.len() / resume.len()`
    /// slices): the one of them its next step starts at, as time control left it. Empty
    /// without rotation.
    resume: Vec<usize>,
    rng: SmallRng,
}

/// The counts a slice's step changed: the topic totals' change (K) and the words' (word
/// after word, K each).
pub type Change = (Vec<i64>, Vec<i64>);

impl TopicWorker {
    /// The worker of `corpus`, its vocabulary in `slices` slices, every token's topic drawn
    /// at random from `seed`.
    pub fn new(priors: Priors, corpus: &Corpus, slices: usize, seed: u64) -> Self {
        let (slots, cut) = order(corpus, priors.words, slices);
        let mut rng = SmallRng::seed_from_u64(seed);
        let topics: Vec<u32> = (0..slots.len())
            .map(|_| rand::Rng::random_range(&mut rng, 0..priors.topics as u32))
            .collect();
        let mut worker = TopicWorker {
            priors,
            slots,
            topics,
            slices: cut,
            docs: vec![Vec::new(); corpus.docs()],
            lengths: (0..corpus.docs())
                .map(|d| corpus.doc(d).len() as u32)
                .collect(),
            resume: Vec::new(),
            rng,
        };
        worker.count_docs();
        worker
    }

    /// The worker of `corpus` for model `lda` over `words` words, as a statement's round 0
    /// makes it: every token's topic drawn from the model's seed and the documents (so a job
    /// samples the same chain at every run); its vocabulary in the data-parallel slices, or
    /// under model rotation (`rotated` slices, 0: none) in as many runs of slices.
    pub fn for_model(lda: &Lda, words: u64, corpus: &Corpus, rotated: usize) -> Self {
        let seed = seed_of(lda.seed, &corpus.words);
        let slices = data_slices(lda.topics, words);
        let Some(rotated) = std::num::NonZeroUsize::new(rotated) else {
            return TopicWorker::new(lda.priors(words), corpus, slices, seed);
        };
        let per = slices.div_ceil(rotated.get()).max(MIN_PER_ROTATED);
        let mut worker = TopicWorker::new(lda.priors(words), corpus, per * rotated.get(), seed);
        worker.resume = vec![0; rotated.get()];
        worker
    }

    /// Each document's counts, from its tokens' topics: sorted runs of each document's
    /// topics, in memory proportional to its tokens (a dense documents x topics table would
    /// take 8 GB for 30,000 documents of 65,536 topics).
    fn count_docs(&mut self) {
        let mut of_doc = vec![Vec::new(); self.docs.len()];
        for slice in &self.slices {
            for (doc, tokens) in &slice.runs {
                of_doc[*doc as usize].extend_from_slice(&self.topics[tokens.clone()]);
            }
        }
        for (counts, mut topics) in self.docs.iter_mut().zip(of_doc) {
            topics.sort_unstable();
            *counts = (topics.chunk_by(|a, b| a == b))
                .map(|run| (run[0], run.len() as u32))
                .collect();
        }
    }

    /// The counts slice `s`'s tokens add to the model as they are now: what the worker
    /// pushes when it starts.
    pub fn counts(&self, s: usize) -> Change {
        let k = self.priors.topics;
        let slice = &self.slices[s];
        let mut totals = vec![0i64; k];
        let mut words = vec![0i64; k * slice.keys.len()];
        for (_, tokens) in &slice.runs {
            for i in tokens.clone() {
                let t = self.topics[i] as usize;
                totals[t] += 1;
                words[self.slots[i] as usize * k + t] += 1;
            }
        }
        (totals, words)
    }

    /// Draws a new topic for every token of slice `s`, against the topic `totals` and the
    /// slice's words' counts `words` (word after word), which include the worker's own
    /// tokens; returns the change.
    ///
    /// A count pulled below the worker's own share (a partition restored from its snapshot
    /// before the worker's changes since were replayed to it) is raised to that share, so the
    /// sampler never takes a token out of a count that does not hold it; the change is the
    /// tokens' moves all the same.
    pub fn sample(&mut self, s: usize, totals: &[i64], words: &[i64]) -> Change {
        let (own_totals, own_words) = self.counts(s);
        let floor = |pulled: &[i64], own: Vec<i64>| -> Vec<i64> {
            pulled.iter().zip(own).map(|(&p, o)| p.max(o)).collect()
        };
        let (totals, words) = (floor(totals, own_totals), floor(words, own_words));
        let mut sampler = Sampler::new(&self.priors, totals.clone(), words.clone());
        for (doc, tokens) in &self.slices[s].runs {
            let counts = &mut self.docs[*doc as usize];
            sampler.open(counts);
            for i in tokens.clone() {
                let (w, old) = (self.slots[i] as usize, self.topics[i]);
                self.topics[i] = sampler.resample(w, old, &mut self.rng);
            }
            sampler.close(counts);
        }
        let (after_totals, after_words) = sampler.into_counts();
        let minus = |a: Vec<i64>, b: &[i64]| a.iter().zip(b).map(|(a, b)| a - b).collect();
        (minus(after_totals, &totals), minus(after_words, &words))
    }

    /// The order of the worker's slices in a round: from one drawn at random, around. The
    /// workers start at different slices, so a step's pull finds the others' moves of its
    /// words from earlier in the round, not only from the round before.
    pub fn round_order(&mut self) -> Vec<usize> {
        let n = self.slices.len();
        let first = rand::Rng::random_range(&mut self.rng, 0..n.max(1));
        (0..n).map(|i| (first + i) % n).collect()
    }

    /// The rotated slices the vocabulary is cut into (0: the worker does not rotate).
    pub fn rotated(&self) -> usize {
        self.resume.len()
    }

    /// The slices of rotated slice `r` in the order its step draws them: from where its last
    /// step stopped, around; those without tokens of the worker left out.
    pub fn step_order(&self, r: usize) -> Vec<usize> {
        let per = self.slices.len() / self.rotated().max(1);
        (0..per)
            .map(|i| r * per + (self.resume[r] + i) % per)
            .filter(|&s| !self.slices[s].keys.is_empty())
            .collect()
    }

    /// Rotated slice `r`'s next step starts at slice `s` (one of it).
    pub fn resume_at(&mut self, r: usize, s: usize) {
        let per = self.slices.len() / self.rotated().max(1);
        self.resume[r] = s - r * per;
    }

    /// The documents' side of the joint log-likelihood (see [`likelihood`]).
    pub fn doc_likelihood(&self) -> f64 {
        let p = &self.priors;
        (self.docs.iter().zip(&self.lengths))
            .map(|(counts, &n)| likelihood::document(p, counts.iter().map(|c| c.1), n))
            .sum()
    }

    /// The tokens of slice `s`: a run of the sampling order.
    pub fn slice_tokens(&self, s: usize) -> Range<usize> {
        let runs = &self.slices[s].runs;
        match (runs.first(), runs.last()) {
            (Some((_, first)), Some((_, last))) => first.start..last.end,
            _ => 0..0,
        }
    }

    /// Sets every token's topic (`topics`, in sampling order, as a worker of the same
    /// documents left them) and the documents' counts from them, for round `round`, whose
    /// draws and time control's starting places follow the round.
    pub fn restore(&mut self, topics: Vec<u32>, round: u32) -> Result<()> {
        let k = self.priors.topics as u32;
        if topics.len() != self.topics.len() || topics.iter().any(|&t| t >= k) {
            return input_err(format!(
                "the stored topics of a worker's {} tokens are not {} topics of {k}",
                self.topics.len(),
                topics.len()
            ));
        }
        self.topics = topics;
        self.count_docs();
        // Where time control stopped each rotated slice's last step is not kept: each round
        // starts one slice further, so no slice is always the one a step runs out before.
        let per = (self.slices.len() / self.rotated().max(1)).max(1);
        self.resume.fill(round as usize % per);
        let seed = rand::Rng::random::<u64>(&mut self.rng);
        self.rng = SmallRng::seed_from_u64(seed ^ u64::from(round));
        Ok(())
    }

    /// Number of tokens.
    pub fn tokens(&self) -> u64 {
        self.topics.len() as u64
    }

    /// The words of each token, in sampling order (for checks against the model's counts).
    pub fn words(&self) -> impl Iterator<Item = u64> + '_ {
        (self.slices.iter())
            .flat_map(|s| {
                s.runs
                    .iter()
                    .flat_map(move |(_, t)| t.clone().map(move |i| (s, i)))
            })
            .map(|(s, i)| s.keys[self.slots[i] as usize])
    }
}

/// Slices for a model of `topics` topics over `words` words: as few as keep a slice's dense
/// pull within [`SLICE_VALUES`] values, and at least [`MIN_SLICES`] (or one per word).
pub fn data_slices(topics: usize, words: u64) -> usize {
    let per_slice = (SLICE_VALUES / topics.max(1) as u64).max(1);
    words.div_ceil(per_slice).max(MIN_SLICES.min(words)).max(1) as usize
}

/// The slice of word `w` among `slices` slices of `words` words.
fn slice_of(w: u32, words: u64, slices: usize) -> usize {
    (u128::from(w) * slices as u128 / u128::from(words.max(1))) as usize
}

/// The tokens of `corpus` in sampling order, as their word's place in their slice's keys,
/// and the slices.
fn order(corpus: &Corpus, words: u64, slices: usize) -> (Vec<u32>, Vec<Slice>) {
    let mut per_slice: Vec<Vec<(u32, u32)>> = vec![Vec::new(); slices];
    for d in 0..corpus.docs() {
        for &w in corpus.doc(d) {
            per_slice[slice_of(w, words, slices)].push((d as u32, w));
        }
    }
    let mut slots = Vec::with_capacity(corpus.words.len());
    let mut cut = Vec::with_capacity(slices);
    for tokens in per_slice {
        let mut keys: Vec<u64> = tokens.iter().map(|&(_, w)| u64::from(w)).collect();
        keys.sort_unstable();
        keys.dedup();
        let mut runs: Vec<(u32, Range<usize>)> = Vec::new();
        for (doc, w) in tokens {
            let at = slots.len();
            slots.push(
                keys.binary_search(&u64::from(w))
                    .expect("a key of the slice") as u32,
            );
            match runs.last_mut() {
                Some((d, range)) if *d == doc => range.end = at + 1,
                _ => runs.push((doc, at..at + 1)),
            }
        }
        cut.push(Slice { keys, runs });
    }
    (slots, cut)
}

#[cfg(test)]
mod tests {
    use rand::Rng;

    use super::*;

    fn corpus() -> Corpus {
        Corpus {
            offsets: vec![0, 4, 4, 7],
            words: vec![5, 0, 9, 5, 1, 8, 0],
        }
    }

    fn priors() -> Priors {
        Priors {
            topics: 3,
            words: 10,
            alpha: 0.1,
            beta: 0.01,
        }
    }

    #[test]
    fn tokens_go_slice_after_slice_then_document_after_document() {
        let worker = TopicWorker::new(priors(), &corpus(), 2, 9);
        let keys: Vec<&[u64]> = worker.slices.iter().map(|s| &s.keys[..]).collect();
        assert_eq!(keys, [&[0, 1][..], &[5, 8, 9]]);
        let words: Vec<u64> = worker.words().collect();
        assert_eq!(words, [0, 1, 0, 5, 9, 5, 8]);
        assert_eq!(worker.slices[0].runs, [(0, 0..1), (2, 1..3)]);
        assert_eq!(worker.tokens(), 7);
        assert_eq!(data_slices(1000, 50_000), 48);
        assert_eq!((data_slices(20, 50_000), data_slices(20, 5)), (16, 5));
    }

    /// Counts pulled from a partition restored without the worker's changes yet (all zero
    /// here) are raised to the worker's own share: sampling goes on, and the change is exactly
    /// the tokens' moves.
    #[test]
    fn counts_pulled_below_the_workers_own_are_raised_to_them() {
        let mut worker = TopicWorker::new(priors(), &corpus(), 2, 9);
        for s in 0..worker.slices.len() {
            let before = worker.counts(s);
            let zeros = |n: usize| vec![0i64; n];
            let change = worker.sample(s, &zeros(3), &zeros(before.1.len()));
            let after = worker.counts(s);
            let moved = |a: &[i64], b: &[i64]| -> Vec<i64> {
                a.iter().zip(b).map(|(a, b)| a - b).collect()
            };
            assert_eq!(change.0, moved(&after.0, &before.0));
            assert_eq!(change.1, moved(&after.1, &before.1));
        }
    }

    /// Each document's counts are its tokens' topics counted, sparse: 30,000 one-word
    /// documents under 65,536 topics take a pair each (a dense table took 8 GB).
    #[test]
    fn document_counts_are_their_tokens_topics_counted_in_memory_of_the_tokens() {
        let one_word = Corpus {
            offsets: (0..=30_000).collect(),
            words: (0..30_000).map(|d| d % 10).collect(),
        };
        let many = Priors {
            topics: 1 << 16,
            ..priors()
        };
        let few = Priors {
            topics: 5,
            words: 60,
            ..priors()
        };
        for (priors, corpus) in [(many, one_word), (few, blocks())] {
            let worker = TopicWorker::new(priors, &corpus, 3, 7);
            let mut counted = vec![std::collections::BTreeMap::new(); corpus.docs()];
            for slice in &worker.slices {
                for (doc, tokens) in &slice.runs {
                    for &t in &worker.topics[tokens.clone()] {
                        *counted[*doc as usize].entry(t).or_insert(0u32) += 1;
                    }
                }
            }
            let counted: Vec<Vec<(u32, u32)>> = counted
                .into_iter()
                .map(|c| c.into_iter().collect())
                .collect();
            assert_eq!(worker.docs, counted);
        }
    }

    /// A corpus of 150 documents of 40 tokens over 60 words, each document mostly from one
    /// of 5 blocks of 12 words.
    fn blocks() -> Corpus {
        let mut rng = SmallRng::seed_from_u64(99);
        let mut corpus = Corpus {
            offsets: vec![0],
            words: vec![],
        };
        for _ in 0..150 {
            let block = rng.random_range(0..5u32);
            for _ in 0..40 {
                corpus.words.push(match rng.random::<f64>() < 0.8 {
                    true => block * 12 + rng.random_range(0..12),
                    false => rng.random_range(0..60),
                });
            }
            corpus.offsets.push(corpus.words.len());
        }
        corpus
    }

    /// The joint log-likelihood of counts and their documents' part, by [`likelihood`].
    fn joint(p: &Priors, (totals, words): (&[i64], &[i64]), docs: f64) -> f64 {
        likelihood::totals(p, totals) + likelihood::words(p, words.iter().copied()) + docs
    }

    /// The documents' part of the log-likelihood of dense document counts.
    fn docs_part(p: &Priors, docs: &[Vec<u32>]) -> f64 {
        let doc = |c: &Vec<u32>| likelihood::document(p, c.iter().copied(), c.iter().sum());
        docs.iter().map(doc).sum()
    }

    /// Plain collapsed Gibbs sampling, document after document, each token's topic drawn
    /// from its conditional computed for every topic: the log-likelihood after the random
    /// start and after each sweep.
    fn plain_chain(p: &Priors, corpus: &Corpus, sweeps: usize, seed: u64) -> Vec<f64> {
        let (k, v) = (p.topics, p.words as usize);
        let mut rng = SmallRng::seed_from_u64(seed);
        let docs: Vec<&[u32]> = (0..corpus.docs()).map(|d| corpus.doc(d)).collect();
        let mut z: Vec<Vec<usize>> = (docs.iter())
            .map(|d| d.iter().map(|_| rng.random_range(0..k)).collect())
            .collect();
        let (mut n_wk, mut n_k) = (vec![0i64; k * v], vec![0i64; k]);
        let mut n_dk = vec![vec![0u32; k]; docs.len()];
        for (d, doc) in docs.iter().enumerate() {
            for (&w, &t) in doc.iter().zip(&z[d]) {
                n_wk[w as usize * k + t] += 1;
                n_k[t] += 1;
                n_dk[d][t] += 1;
            }
        }
        let mut trajectory = vec![joint(p, (&n_k, &n_wk), docs_part(p, &n_dk))];
        let mut cumulative = vec![0.0; k];
        for _ in 0..sweeps {
            for (d, doc) in docs.iter().enumerate() {
                for (i, &w) in doc.iter().enumerate() {
                    let (w, old) = (w as usize, z[d][i]);
                    n_wk[w * k + old] -= 1;
                    n_k[old] -= 1;
                    n_dk[d][old] -= 1;
                    let mut sum = 0.0;
                    for t in 0..k {
                        sum += (f64::from(n_dk[d][t]) + p.alpha)
                            * (n_wk[w * k + t] as f64 + p.beta)
                            / (n_k[t] as f64 + v as f64 * p.beta);
                        cumulative[t] = sum;
                    }
                    let u = rng.random::<f64>() * sum;
                    let new = cumulative.iter().position(|&c| u < c).unwrap_or(k - 1);
                    n_wk[w * k + new] += 1;
                    n_k[new] += 1;
                    n_dk[d][new] += 1;
                    z[d][i] = new;
                }
            }
            trajectory.push(joint(p, (&n_k, &n_wk), docs_part(p, &n_dk)));
        }
        trajectory
    }

    /// One worker's chain (one slice, SparseLDA's draws, its counts kept by the step's
    /// changes as the servers keep them) is collapsed Gibbs sampling: over 40 seeds each, its
    /// mean log-likelihood after the start and after each of 8 sweeps is the plain sampler's
    /// within 4 standard errors of the difference. The draws differ (three buckets against
    /// one cumulative sum), so the chains are compared in distribution.
    #[test]
    fn one_worker_is_collapsed_gibbs_sampling_in_distribution() {
        let p = Priors {
            topics: 5,
            words: 60,
            alpha: 0.1,
            beta: 0.01,
        };
        let corpus = blocks();
        let (sweeps, seeds) = (8, 40);
        let (mut ours, mut plain) = (Vec::new(), Vec::new());
        for seed in 0..seeds {
            let mut worker = TopicWorker::new(p, &corpus, 1, seed);
            let (mut totals, mut words) = worker.counts(0);
            let mut trajectory = vec![joint(&p, (&totals, &words), worker.doc_likelihood())];
            for _ in 0..sweeps {
                let (dt, dw) = worker.sample(0, &totals, &words);
                totals.iter_mut().zip(dt).for_each(|(a, b)| *a += b);
                words.iter_mut().zip(dw).for_each(|(a, b)| *a += b);
                trajectory.push(joint(&p, (&totals, &words), worker.doc_likelihood()));
            }
            ours.push(trajectory);
            plain.push(plain_chain(&p, &corpus, sweeps, 1000 + seed));
        }
        let n = seeds as f64;
        let mean_var = |runs: &[Vec<f64>], s: usize| {
            let mean = runs.iter().map(|r| r[s]).sum::<f64>() / n;
            let var = runs.iter().map(|r| (r[s] - mean).powi(2)).sum::<f64>() / (n - 1.0);
            (mean, var)
        };
        for s in 0..=sweeps {
            let ((a, va), (b, vb)) = (mean_var(&ours, s), mean_var(&plain, s));
            let se = ((va + vb) / n).sqrt();
            assert!((a - b).abs() < 4.0 * se, "sweep {s}: {a} vs {b} (se {se})");
        }
    }

    /// A step's change moves every token of the slice from its old topic to its new one.
    #[test]
    fn a_step_changes_the_counts_by_its_tokens_moves() {
        let mut worker = TopicWorker::new(priors(), &corpus(), 2, 9);
        let (totals0, words0) = worker.counts(1);
        let before = worker.topics.clone();
        let (dt, dw) = worker.sample(1, &totals0, &words0);
        let (totals1, words1) = worker.counts(1);
        let add =
            |a: &[i64], b: &[i64]| -> Vec<i64> { a.iter().zip(b).map(|(a, b)| a + b).collect() };
        assert_eq!(add(&totals0, &dt), totals1);
        assert_eq!(add(&words0, &dw), words1);
        assert_eq!(worker.topics[..3], before[..3], "slice 0 untouched");
        let total: i64 = dt.iter().sum();
        assert_eq!(total, 0);
    }
}

//! Folding-in: the topic mixture of a document under a trained topic model kept fixed
//! (`ps_topics`), and the document's log-likelihood under it (held-out perplexity).
//!
//! Each of the document's tokens is drawn from `p(z = k) ∝ (n_dk + α) φ_wk`, with the
//! model's word distributions `φ_wk = (n_wk + β) / (n_k + Vβ)` fixed, for [`SWEEPS`] sweeps
//! from topics drawn from `α φ_wk`; the mixture `θ_dk = (n_dk + α) / (N_d + Kα)` is averaged
//! over the sweeps after the first [`BURN_IN`]. The draws are seeded by the model's seed and
//! the document's words, so the same document always gets the same mixture. A draw costs the
//! document's topics plus a binary search: `α φ_wk` is summed once per word.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::corpus::{Corpus, seed_of};
use super::{Lda, Priors};
use crate::error::Result;
use crate::model::Model;
use angel_client::runtime::block_on;

/// Sweeps of a document's tokens.
pub const SWEEPS: usize = 40;
/// Sweeps left out of the average, while the draws forget their start.
pub const BURN_IN: usize = 10;

/// The model's word distributions of some words, as folding-in uses them.
pub struct Fixed {
    priors: Priors,
    /// The words, ascending.
    words: Vec<u64>,
    /// `φ_wk`, word after word (K each).
    phi: Vec<f64>,
    /// Running sums of `α φ_wk` over k, word after word.
    prior_sums: Vec<f64>,
}

impl Fixed {
    /// The word distributions of `corpus`'s words under `model` (a topic model `lda`), from
    /// one pull of their counts and the topic totals.
    pub fn pull(model: &Model, lda: &Lda, corpus: &Corpus) -> Result<Self> {
        let mut words: Vec<u64> = corpus.words.iter().map(|&w| u64::from(w)).collect();
        words.sort_unstable();
        words.dedup();
        let keys: Vec<u64> = words.iter().copied().chain([model.spec.dim]).collect();
        let rows = model.weight_row_ids();
        let client = model.client();
        let (counts, _) = block_on(client.pull_at::<i64>(&model.name, &rows, &keys, None))?;
        Ok(Fixed::new(lda.priors(model.spec.dim), words, &counts))
    }

    /// From `counts` pulled topic after topic for `words` and then the totals' column.
    pub fn new(priors: Priors, words: Vec<u64>, counts: &[i64]) -> Self {
        let (k, n) = (priors.topics, words.len());
        let width = n + 1;
        let v_beta = priors.words as f64 * priors.beta;
        let mut phi = vec![0.0; k * n];
        let mut prior_sums = vec![0.0; k * n];
        for j in 0..n {
            let mut sum = 0.0;
            for t in 0..k {
                let total = counts[t * width + n].max(0) as f64;
                let p = (counts[t * width + j].max(0) as f64 + priors.beta) / (total + v_beta);
                phi[j * k + t] = p;
                sum += priors.alpha * p;
                prior_sums[j * k + t] = sum;
            }
        }
        Fixed {
            priors,
            words,
            phi,
            prior_sums,
        }
    }

    /// The topic mixture of a document of tokens `doc` (all among the words), drawn with
    /// `seed`.
    pub fn mixture(&self, doc: &[u32], seed: u64) -> Vec<f64> {
        let k = self.priors.topics;
        let (alpha, n) = (self.priors.alpha, doc.len() as f64);
        if doc.is_empty() {
            return vec![1.0 / k as f64; k];
        }
        let mut rng = SmallRng::seed_from_u64(seed_of(seed, doc));
        let slots: Vec<usize> = (doc.iter())
            .map(|&w| self.words.binary_search(&u64::from(w)).unwrap_or_default())
            .collect();
        let mut counts = vec![0u32; k];
        let mut used: Vec<u32> = Vec::new();
        let mut z: Vec<u32> = Vec::with_capacity(doc.len());
        for &j in &slots {
            let t = self.draw_prior(j, &mut rng);
            add(&mut counts, &mut used, t);
            z.push(t);
        }
        let mut theta = vec![0.0; k];
        let mut doc_part = Vec::new();
        for sweep in 0..SWEEPS {
            for (i, &j) in slots.iter().enumerate() {
                remove(&mut counts, &mut used, z[i]);
                let phi = &self.phi[j * k..][..k];
                doc_part.clear();
                let mut sum = 0.0;
                for &t in &used {
                    sum += f64::from(counts[t as usize]) * phi[t as usize];
                    doc_part.push(sum);
                }
                let prior = self.prior_sums[j * k + k - 1];
                let u = rng.random::<f64>() * (sum + prior);
                z[i] = match doc_part.iter().position(|&c| u < c) {
                    Some(at) => used[at],
                    None => self.search(j, u - sum),
                };
                add(&mut counts, &mut used, z[i]);
            }
            if sweep >= BURN_IN {
                for t in 0..k {
                    theta[t] += (f64::from(counts[t]) + alpha) / (n + k as f64 * alpha);
                }
            }
        }
        let kept = (SWEEPS - BURN_IN) as f64;
        theta.iter().map(|x| x / kept).collect()
    }

    /// A topic drawn from `α φ_wk` for the word in slot `j`.
    fn draw_prior(&self, j: usize, rng: &mut SmallRng) -> u32 {
        let k = self.priors.topics;
        self.search(j, rng.random::<f64>() * self.prior_sums[j * k + k - 1])
    }

    /// The topic at which the running sum of `α φ_wk` of slot `j` passes `u`.
    fn search(&self, j: usize, u: f64) -> u32 {
        let k = self.priors.topics;
        let sums = &self.prior_sums[j * k..][..k];
        sums.partition_point(|&s| s <= u).min(k - 1) as u32
    }

    /// The log-likelihood of a document's tokens under its `mixture`: `sum over tokens of log
    /// sum_k θ_k φ_wk` (its part of a held-out perplexity).
    pub fn log_likelihood(&self, doc: &[u32], mixture: &[f64]) -> f64 {
        let k = self.priors.topics;
        (doc.iter())
            .map(|&w| self.words.binary_search(&u64::from(w)).unwrap_or_default())
            .map(|j| {
                let phi = &self.phi[j * k..][..k];
                phi.iter()
                    .zip(mixture)
                    .map(|(p, t)| p * t)
                    .sum::<f64>()
                    .ln()
            })
            .sum()
    }
}

fn add(counts: &mut [u32], used: &mut Vec<u32>, t: u32) {
    counts[t as usize] += 1;
    if counts[t as usize] == 1 {
        used.push(t);
    }
}

fn remove(counts: &mut [u32], used: &mut Vec<u32>, t: u32) {
    counts[t as usize] -= 1;
    if counts[t as usize] == 0
        && let Some(at) = used.iter().position(|&x| x == t)
    {
        used.swap_remove(at);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two topics over four words, each topic on two words of its own (almost): a document of
    /// topic 0's words gets nearly all of its mass on topic 0, a half-and-half document about
    /// half each, and the draws repeat for the same document.
    #[test]
    fn a_documents_mixture_follows_its_words_topics() {
        let priors = Priors {
            topics: 2,
            words: 4,
            alpha: 0.1,
            beta: 0.01,
        };
        // Topic 0: words 0 and 1; topic 1: words 2 and 3; totals last.
        let counts = [500, 500, 0, 0, 1000, 0, 0, 500, 500, 1000];
        let fixed = Fixed::new(priors, vec![0, 1, 2, 3], &counts);
        let pure = fixed.mixture(&[0, 1, 0, 1, 1, 0], 7);
        assert!(pure[0] > 0.95, "{pure:?}");
        let half = fixed.mixture(&[0, 2, 1, 3, 0, 2, 1, 3], 7);
        assert!((half[0] - 0.5).abs() < 0.05, "{half:?}");
        assert_eq!(half, fixed.mixture(&[0, 2, 1, 3, 0, 2, 1, 3], 7));
        assert_eq!(fixed.mixture(&[], 7), [0.5, 0.5]);
        // log p(w) under the pure mixture: each word's probability about 0.5 * 0.95.
        let ll = fixed.log_likelihood(&[0, 1], &pure);
        assert!((ll - 2.0 * (0.5f64 * pure[0]).ln()).abs() < 0.05, "{ll}");
    }
}

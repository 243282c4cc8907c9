//! The joint log-likelihood `log p(w, z)` of collapsed Gibbs LDA, the figure the epoch table
//! reports (as the `lda` package's `loglikelihoods_` and Angel's LDA do):
//!
//! ```text
//! log p(w, z) = sum_k [lgamma(Vβ) - lgamma(n_k + Vβ)]                     topic totals
//!             + sum_k sum_{w: n_wk > 0} [lgamma(n_wk + β) - lgamma(β)]        words
//!             + sum_d [lgamma(Kα) - lgamma(N_d + Kα)
//!                      + sum_{k: n_dk > 0} (lgamma(n_dk + α) - lgamma(α))]    documents
//! ```
//!
//! The words' part is summed on the servers, where the counts are (the PS function
//! `lgamma_sum`); the documents' by each worker over its own documents.

use angel_client::PsClient;
use libm::lgamma;

use super::Priors;
use crate::error::Result;

/// One document's part, from its topic counts and its `n` tokens.
pub fn document(p: &Priors, counts: impl Iterator<Item = u32>, n: u32) -> f64 {
    let k_alpha = p.topics as f64 * p.alpha;
    let base = lgamma(p.alpha);
    let topics: f64 = counts.map(|c| lgamma(f64::from(c) + p.alpha) - base).sum();
    lgamma(k_alpha) - lgamma(f64::from(n) + k_alpha) + topics
}

/// The topic totals' part.
pub fn totals(p: &Priors, totals: &[i64]) -> f64 {
    let v_beta = p.words as f64 * p.beta;
    (totals.iter())
        .map(|&n| lgamma(v_beta) - lgamma(n as f64 + v_beta))
        .sum()
}

/// The words' part over some word-topic counts (the servers' sum, computed where they are).
pub fn words(p: &Priors, counts: impl Iterator<Item = i64>) -> f64 {
    let base = lgamma(p.beta);
    (counts.filter(|&c| c > 0))
        .map(|c| lgamma(c as f64 + p.beta) - base)
        .sum()
}

/// The model's part of the log-likelihood (topic totals and words) of model `name`, and its
/// number of tokens (the totals' sum), from the servers.
pub async fn model(client: &PsClient, name: &str, p: &Priors) -> Result<(f64, u64)> {
    let rows: Vec<u64> = (0..p.topics as u64).collect();
    let operands: Vec<(&str, u64)> = rows.iter().map(|&r| (name, r)).collect();
    let summed = client
        .psf("lgamma_sum", &operands, &[p.beta, p.words as f64])
        .await?;
    let (counts, _) = client.pull_at::<i64>(name, &rows, &[p.words], None).await?;
    let tokens = counts.iter().sum::<i64>().max(0) as u64;
    Ok((summed[0] + totals(p, &counts), tokens))
}

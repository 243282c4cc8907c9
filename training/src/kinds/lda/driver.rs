//! The driver of a topic model's statement (`CREATE MODEL ... OPTIONS (kind = 'lda', ...)`).
//! Round 0 draws every token's topic at random and pushes the counts; then each epoch draws
//! every token's topic once (`ps_train` over the documents, whose workers keep their tokens'
//! topics from round to round: in the job's memory, or on the servers when the job reads its
//! rows anew every round, as on Ballista). The epoch table has a row per round: epoch (0: the
//! random start), documents, tokens, the joint log-likelihood `log p(w, z)` (its words' part
//! summed on the servers) and the perplexity `exp(-log p(w, z) / tokens)` that follows, with
//! a `holdout` table the perplexity on its documents (`ps_perplexity`), seconds, tokens drawn
//! per second, push traffic and workers.

use std::time::Instant;

use angel_client::EpochReport;
use arrow::array::RecordBatch;

use super::Lda;
use super::likelihood;
use super::stored::StoredTopics;
use crate::driver::answers::first_number;
use crate::driver::engine::Watch;
use crate::driver::epoch_table::{self, Column};
use crate::driver::holdout;
use crate::driver::progress::bar;
use crate::driver::traffic::{push_traffic, traffic};
use crate::error::Result;
use crate::model::Engine;

/// Trains the statement's topic model `lda` for its epochs; returns the epoch table.
pub async fn train(engine: &dyn Engine, lda: &Lda) -> Result<RecordBatch> {
    let (name, plan, client) = (engine.model(), engine.plan(), engine.client());
    let id = client.matrix(name).await?.meta.id;
    let priors = lda.priors(plan.spec.dim);
    let workers = plan.workers();
    // Workers of rows held in memory are kept in the job from round to round; workers of
    // rows read anew every round keep their tokens' topics on the servers.
    let stored = match engine.query().in_memory {
        true => None,
        false => Some(StoredTopics::of(client.clone(), name)),
    };
    if let Some(stored) = &stored {
        stored.create().await?;
    }
    let kept = engine.kept();
    let bar = bar(0, "tokens");
    // The statement's token topics go whether its rounds succeed or not.
    let table = async {
        let mut table = Vec::new();
        for round in 0..=plan.epochs {
            kept.start_round(name, round as u32);
            if let Some(stored) = &stored {
                stored.start_round(round as u32).await?;
            }
            let started = Instant::now();
            let before = push_traffic(&client.status().await?, &[id]);
            // The workers count the tokens they draw, which time control may leave short of all.
            let drawn_before = bar.position();
            let watch = Watch {
                bar: &bar,
                epoch: round,
                epochs: plan.epochs,
                shows_loss: false,
            };
            let passed = engine.pass(1, Some(watch)).await?;
            let seconds = started.elapsed().as_secs_f64();
            let drawn = bar.position() - drawn_before;
            let after = push_traffic(&client.status().await?, &[id]);
            let (model_side, tokens) = likelihood::model(client, name, &priors).await?;
            let evaluating = Instant::now();
            let holdout_perplexity = match &plan.holdout {
                Some(holdout) => Some(perplexity(engine, holdout).await?),
                None => None,
            };
            let holdout_seconds = evaluating.elapsed().as_secs_f64();
            if round == 0 {
                bar.set_length(tokens * (plan.epochs as u64 + 1));
            }
            // ps_train answers the documents' part per token.
            let log_likelihood = model_side + passed.mean.unwrap_or_default() * tokens as f64;
            let report = EpochReport {
                model: name.to_string(),
                epoch: round as u32,
                rows: tokens,
                train_loss: Some(-log_likelihood / tokens.max(1) as f64).filter(|l| l.is_finite()),
                seconds,
                ..Default::default()
            };
            if let Err(e) = client.report_epoch(report).await {
                tracing::warn!(
                    model = name,
                    round,
                    "the master did not take the epoch report: {e}"
                );
            }
            table.push(Row {
                epoch: round as i64,
                documents: passed.rows as i64,
                tokens: tokens as i64,
                drawn: drawn as i64,
                log_likelihood,
                holdout_perplexity,
                seconds,
                holdout_seconds,
                push_mb: traffic(before, after).0 as f64 / 1e6,
                workers: workers as i64,
            });
        }
        Ok::<_, crate::Error>(table)
    }
    .await;
    bar.finish_and_clear();
    let dropped = match &stored {
        Some(stored) => stored.drop().await,
        None => Ok(()),
    };
    // A failed round's error says more than a failed drop.
    let table = table?;
    dropped?;
    epoch_table::batch(&table, &columns())
}

/// The perplexity of the statement's topic model on the documents of table `holdout`, whose
/// columns are the training query's (`doc, words [, counts]`).
async fn perplexity(engine: &dyn Engine, holdout: &str) -> Result<f64> {
    let (name, inputs) = (engine.model(), &engine.query().inputs);
    let sql = format!("SELECT ps_perplexity('{name}', {inputs}) FROM {holdout}");
    let answer = holdout::answer_on(engine, holdout, inputs, &sql).await?;
    Ok(first_number(&answer, 0)?.unwrap_or(f64::NAN))
}

/// One round's figures.
struct Row {
    epoch: i64,
    documents: i64,
    tokens: i64,
    /// Tokens the workers drew this round.
    drawn: i64,
    log_likelihood: f64,
    /// With a holdout table: the perplexity on its documents.
    holdout_perplexity: Option<f64>,
    seconds: f64,
    holdout_seconds: f64,
    push_mb: f64,
    workers: i64,
}

/// The epoch table's columns.
fn columns() -> Vec<Column<Row>> {
    vec![
        Column::Int("epoch", |r| r.epoch),
        Column::Int("documents", |r| r.documents),
        Column::Int("tokens", |r| r.tokens),
        Column::Float("log_likelihood", |r| r.log_likelihood),
        Column::Float("perplexity", |r| {
            (-r.log_likelihood / r.tokens.max(1) as f64).exp()
        }),
        Column::Optional("holdout_perplexity", |r| r.holdout_perplexity),
        Column::Float("seconds", |r| r.seconds),
        Column::Float("holdout_seconds", |r| r.holdout_seconds),
        Column::Float("tokens_per_second", |r| {
            r.drawn as f64 / r.seconds.max(1e-9)
        }),
        Column::Float("push_mb", |r| r.push_mb),
        Column::Int("workers", |r| r.workers),
    ]
}

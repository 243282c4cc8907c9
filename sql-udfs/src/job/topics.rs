//! `CREATE MODEL ... OPTIONS (kind = 'lda', ...)`: a topic model's statement. Round 0 draws
//! every token's topic at random and pushes the counts; then each epoch draws every token's
//! topic once (`ps_train` over the documents, whose workers keep their tokens' topics from
//! round to round: in the job's memory, or on the servers when the job reads its rows anew
//! every round, as on Ballista). The epoch table has a row per round: epoch (0: the random start),
//! documents, tokens, the joint log-likelihood `log p(w, z)` (its words' part summed on the
//! servers) and the perplexity `exp(-log p(w, z) / tokens)` that follows, with a `holdout`
//! table the perplexity on its documents (`ps_perplexity`), seconds, tokens drawn per second,
//! push traffic and workers.

use std::time::Instant;

use angel_client::EpochReport;
use angel_training::kinds::lda::likelihood;
use angel_training::kinds::lda::stored::StoredTopics;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::{DataFusionError, Result, ScalarValue, plan_err};
use datafusion::prelude::SessionContext;

use super::answers::{first_row, float};
use super::caching::Caching;
use super::epoch_table::{self, Column};
use super::plan::Plan;
use super::progress::{bar, watch};
use super::traffic::{push_traffic, traffic};
use super::train_rows::{Rows, TrainRows};
use crate::binding::Binding;
use crate::bridge::{ps_error, train_error};

/// Trains topic model `name` (matrix `id`) for `plan`'s epochs over `rows`; returns the
/// epoch table.
pub(super) async fn train(
    ctx: &SessionContext,
    binding: &Binding,
    (name, id): (&str, u32),
    plan: &Plan,
    rows: Rows,
) -> Result<RecordBatch> {
    let Some(lda) = plan.spec.kind.topics() else {
        return plan_err!("CREATE MODEL {name}: not a topic model");
    };
    let priors = lda.priors(plan.spec.dim);
    let client = binding.client()?;
    let workers = plan.spec.sync.workers as usize;
    // Workers of rows held in memory are kept in the job from round to round; workers of
    // rows read anew every round keep their tokens' topics on the servers.
    let caching = matches!(rows.rows, TrainRows::Spread(_)).then(|| Caching::on(binding, name));
    let stored = match caching {
        Some(_) => None,
        None => Some(StoredTopics::of(client.clone(), name)),
    };
    if let Some(stored) = &stored {
        stored.create().await.map_err(train_error)?;
    }
    let kept = binding.kept();
    let bar = bar(0, "tokens");
    // The statement's token topics go whether its rounds succeed or not.
    let table = async {
        let mut table = Vec::new();
        for round in 0..=plan.epochs {
            kept.start_round(name, round as u32);
            if let Some(stored) = &stored {
                stored
                    .start_round(round as u32)
                    .await
                    .map_err(train_error)?;
            }
            let started = Instant::now();
            let before = push_traffic(&client.status().await.map_err(ps_error)?, &[id]);
            // The workers count the tokens they draw, which time control may leave short of all.
            let drawn_before = bar.position();
            let frame = rows.rows.epoch(ctx, (name, workers), 1)?;
            let (mean, documents) = watch(
                &bar,
                (&binding.reports().progress, &client, name),
                (round, plan.epochs, false),
                first_row(frame),
            )
            .await?;
            let seconds = started.elapsed().as_secs_f64();
            let drawn = bar.position() - drawn_before;
            let after = push_traffic(&client.status().await.map_err(ps_error)?, &[id]);
            let (model_side, tokens) =
                (likelihood::model(&client, name, &priors).await).map_err(train_error)?;
            let evaluating = Instant::now();
            let holdout_perplexity = match &plan.holdout {
                Some(holdout) => Some(perplexity(ctx, name, &rows.columns.inputs, holdout).await?),
                None => None,
            };
            let holdout_seconds = evaluating.elapsed().as_secs_f64();
            if round == 0 {
                bar.set_length(tokens * (plan.epochs as u64 + 1));
            }
            // ps_train answers the documents' part per token.
            let log_likelihood = model_side + float(&mean).unwrap_or_default() * tokens as f64;
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
                documents: float(&documents).unwrap_or_default() as i64,
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
        Ok::<_, DataFusionError>(table)
    }
    .await;
    bar.finish_and_clear();
    drop(caching);
    let dropped = match &stored {
        Some(stored) => stored.drop().await.map_err(train_error),
        None => Ok(()),
    };
    // A failed round's error says more than a failed drop.
    let table = table?;
    dropped?;
    epoch_table::register(ctx, name, epoch_table::batch(&table, &columns())?)
}

/// The perplexity of topic model `name` on the documents of table `holdout`, whose `inputs`
/// columns are the training query's (`words [, counts]`).
async fn perplexity(ctx: &SessionContext, name: &str, inputs: &str, holdout: &str) -> Result<f64> {
    let sql = format!("SELECT ps_perplexity('{name}', {inputs}) FROM {holdout}");
    let batches = ctx.sql(&sql).await?.collect().await?;
    match batches.iter().find(|b| b.num_rows() > 0) {
        Some(batch) => {
            Ok(float(&ScalarValue::try_from_array(batch.column(0), 0)?).unwrap_or(f64::NAN))
        }
        None => plan_err!("the holdout evaluation answered no row"),
    }
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

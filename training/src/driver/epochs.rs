//! The epochs of a kind trained by mini-batch gradient steps: a pass of `ps_train` over the
//! rows per epoch, the holdout's figures after each, and the epoch table (epoch, rows,
//! train_loss, holdout_loss, holdout_auc, holdout_accuracy, seconds of training and of holdout
//! evaluation, push traffic, what the master saw of the workers, ...).

use std::time::Instant;

use angel_proto::{StatusReply, WorkerStatus};
use arrow::array::RecordBatch;

use super::engine::Watch;
use super::epoch_table::{self, Column};
use super::holdout::{Holdout, evaluate, metrics};
use super::progress::{bar, report};
use super::traffic::{push_traffic, traffic};
use crate::error::Result;
use crate::kinds::Metric;
use crate::model::Engine;

/// Trains the statement's model for its epochs (those after [`Plan::done_epochs`], which an
/// earlier run completed); returns the epoch table of the epochs trained.
///
/// [`Plan::done_epochs`]: crate::Plan::done_epochs
pub async fn train(engine: &dyn Engine) -> Result<RecordBatch> {
    let (name, plan, client) = (engine.model(), engine.plan(), engine.client());
    let id = client.matrix(name).await?.meta.id;
    let first = plan.done_epochs + 1;
    let left = (plan.epochs + 1).saturating_sub(first);
    let bar = bar(engine.query().rows * left as u64, "rows");
    let mut table = Vec::new();
    for epoch in first..=plan.epochs {
        let started = Instant::now();
        let before = push_traffic(&client.status().await?, &[id]);
        let watch = Watch {
            bar: &bar,
            epoch,
            epochs: plan.epochs,
            shows_loss: true,
        };
        let passed = engine.pass(0, Some(watch)).await?;
        let trained = started.elapsed().as_secs_f64();
        let cached = engine.cached_after(epoch);
        let status = client.status().await?;
        let after = push_traffic(&status, &[id]);
        let holdout = evaluate(engine).await?;
        let seconds = (trained, started.elapsed().as_secs_f64() - trained);
        report(
            (client, plan),
            (name, epoch),
            (passed.rows, passed.mean, trained),
            &holdout,
        )
        .await?;
        engine.epoch_done(epoch).await?;
        // Half the squared error is the loss of the kinds that report RMSE.
        let rmse = (metrics(&*plan.spec.kind).contains(&Metric::Rmse))
            .then(|| passed.mean.map(|l| (2.0 * l).sqrt()))
            .flatten();
        table.push(Row {
            epoch: epoch as i64,
            rows: passed.rows as i64,
            train_loss: passed.mean,
            train_rmse: rmse,
            holdout,
            seconds,
            traffic: traffic(before, after),
            workers: Workers::of(&status, &client.qualify(name)),
            cached_batches: cached as i64,
        });
    }
    bar.finish_and_clear();
    epoch_table::batch(&table, &columns())
}

/// What the master saw of an epoch's workers: how many, their waits, the slow ones.
struct Workers {
    count: i64,
    wait_seconds: f64,
    slow: String,
}

impl Workers {
    fn of(status: &StatusReply, model: &str) -> Workers {
        let workers: Vec<&WorkerStatus> =
            status.workers.iter().filter(|w| w.model == model).collect();
        let slow: Vec<String> = workers
            .iter()
            .filter(|w| w.slow)
            .map(|w| {
                format!(
                    "rank {} ({:.1} steps/s; others waited {:.1} s)",
                    w.rank,
                    w.steps_per_sec,
                    w.caused_wait_ms as f64 / 1e3
                )
            })
            .collect();
        Workers {
            count: workers.len() as i64,
            wait_seconds: workers.iter().map(|w| w.waited_ms as f64 / 1e3).sum(),
            slow: slow.join("; "),
        }
    }
}

/// One epoch's figures.
struct Row {
    epoch: i64,
    rows: i64,
    train_loss: Option<f64>,
    /// Kinds whose loss is half the squared error: `sqrt(2 train_loss)`.
    train_rmse: Option<f64>,
    holdout: Holdout,
    /// Seconds of training and of holdout evaluation.
    seconds: (f64, f64),
    /// (sent, raw) bytes pushed.
    traffic: (u64, u64),
    workers: Workers,
    /// Record batches found in the key-list cache.
    cached_batches: i64,
}

/// The epoch table's columns.
fn columns() -> Vec<Column<Row>> {
    vec![
        Column::Int("epoch", |r| r.epoch),
        Column::Int("rows", |r| r.rows),
        Column::Optional("train_loss", |r| r.train_loss),
        Column::Optional("holdout_loss", |r| r.holdout.loss),
        Column::Optional("holdout_auc", |r| r.holdout.auc),
        Column::Optional("holdout_accuracy", |r| r.holdout.accuracy),
        Column::Float("seconds", |r| r.seconds.0),
        Column::Float("holdout_seconds", |r| r.seconds.1),
        Column::Float("push_mb", |r| r.traffic.0 as f64 / 1e6),
        Column::Float("raw_mb", |r| r.traffic.1 as f64 / 1e6),
        Column::Int("workers", |r| r.workers.count),
        Column::Float("wait_seconds", |r| r.workers.wait_seconds),
        Column::Text("slow_workers", |r| r.workers.slow.clone()),
        Column::Int("cached_batches", |r| r.cached_batches),
        Column::Optional("train_rmse", |r| r.train_rmse),
        Column::Optional("holdout_rmse", |r| r.holdout.rmse),
    ]
}

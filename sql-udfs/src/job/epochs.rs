//! The epochs of a kind trained by mini-batch gradient steps: a pass of `ps_train` over the
//! rows per epoch, the holdout's figures after each, and the epoch table (epoch, rows,
//! train_loss, holdout_loss, holdout_auc, holdout_accuracy, seconds of training and of holdout
//! evaluation, push traffic, what the master saw of the workers, ...).

use std::sync::Arc;
use std::time::{Duration, Instant};

use angel_proto::{StatusReply, WorkerStatus};
use angel_training::kinds::Metric;
use datafusion::arrow::array::{Float64Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema};
use datafusion::common::{Result, ScalarValue};
use datafusion::prelude::SessionContext;

use super::answers::{first_row, float};
use super::caching::Caching;
use super::epoch_table;
use super::holdout::{Holdout, evaluate, metrics};
use super::plan::Plan;
use super::progress::{bar, report, watch};
use super::traffic::{push_traffic, traffic};
use super::train_rows::{Rows, TrainRows};
use crate::binding::Binding;
use crate::bridge::ps_error;

/// Trains model `name` (matrix `id`) for `plan`'s epochs over `rows`; returns the epoch table.
pub(super) async fn train(
    ctx: &SessionContext,
    binding: &Binding,
    (name, id): (&str, u32),
    plan: &Plan,
    rows: Rows,
) -> Result<RecordBatch> {
    let Rows {
        rows: train_rows,
        count: rows,
        columns,
        ..
    } = rows;
    let client = binding.client()?;
    let workers = plan.spec.sync.workers as usize;
    // Rows held in memory reach ps_train as the same batches every epoch: read them once.
    let caching = matches!(train_rows, TrainRows::Spread(_)).then(|| Caching::on(binding, name));
    let bar = bar(rows * plan.epochs as u64, "rows");
    let mut table = EpochTable::default();
    for epoch in 1..=plan.epochs {
        let started = Instant::now();
        let before = push_traffic(&client.status().await.map_err(ps_error)?, &[id]);
        let epoch_frame = train_rows.epoch(ctx, (name, workers), 0)?;
        let (loss, n) = watch(
            &bar,
            (&binding.reports().progress, &client, name),
            (epoch, plan.epochs, true),
            first_row(epoch_frame),
        )
        .await?;
        let trained = started.elapsed();
        let cached = caching.as_ref().map_or(0, |c| c.after_epoch(epoch));
        let status = client.status().await.map_err(ps_error)?;
        let after = push_traffic(&status, &[id]);
        let traffic = traffic(before, after);
        let holdout = match &plan.holdout {
            Some(h) => evaluate(ctx, name, &*plan.spec.kind, &columns, h).await?,
            None => Holdout::default(),
        };
        let rows = float(&n).unwrap_or_default() as i64;
        let evaluated = started.elapsed() - trained;
        let figures = (rows as u64, float(&loss), trained.as_secs_f64());
        report(&client, (name, epoch), figures, &holdout).await;
        // Half the squared error is the loss of the kinds that report RMSE.
        let rmse = (metrics(&*plan.spec.kind).contains(&Metric::Rmse))
            .then(|| float(&loss).map(|l| (2.0 * l).sqrt()))
            .flatten();
        table.push(
            (epoch, rows, cached),
            (loss, rmse),
            &holdout,
            (trained, evaluated),
            traffic,
            &Round::of(&status, &client.qualify(name)),
        );
    }
    bar.finish_and_clear();
    epoch_table::register(ctx, name, table.finish()?)
}

/// What the master saw of an epoch's workers: how many, their waits, the slow ones.
struct Round {
    workers: i64,
    wait_seconds: f64,
    slow: String,
}

impl Round {
    fn of(status: &StatusReply, model: &str) -> Round {
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
        Round {
            workers: workers.len() as i64,
            wait_seconds: workers.iter().map(|w| w.waited_ms as f64 / 1e3).sum(),
            slow: slow.join("; "),
        }
    }
}

/// The rows of the epoch table being built.
#[derive(Default)]
struct EpochTable {
    epoch: Vec<i64>,
    rows: Vec<i64>,
    train_loss: Vec<Option<f64>>,
    holdout_loss: Vec<Option<f64>>,
    holdout_auc: Vec<Option<f64>>,
    holdout_accuracy: Vec<Option<f64>>,
    seconds: Vec<f64>,
    holdout_seconds: Vec<f64>,
    push_mb: Vec<f64>,
    raw_mb: Vec<f64>,
    workers: Vec<i64>,
    wait_seconds: Vec<f64>,
    slow_workers: Vec<String>,
    cached_batches: Vec<i64>,
    train_rmse: Vec<Option<f64>>,
    holdout_rmse: Vec<Option<f64>>,
}

impl EpochTable {
    /// Adds an epoch: its rows, the record batches it found in the key-list cache and its
    /// loss (and training RMSE), holdout figures, (training, holdout) time and (sent, raw) push bytes, and what
    /// the master saw of its workers.
    fn push(
        &mut self,
        (epoch, rows, cached): (usize, i64, u64),
        (loss, rmse): (ScalarValue, Option<f64>),
        holdout: &Holdout,
        took: (Duration, Duration),
        traffic: (u64, u64),
        round: &Round,
    ) {
        self.workers.push(round.workers);
        self.wait_seconds.push(round.wait_seconds);
        self.slow_workers.push(round.slow.clone());
        self.cached_batches.push(cached as i64);
        self.push_mb.push(traffic.0 as f64 / 1e6);
        self.raw_mb.push(traffic.1 as f64 / 1e6);
        self.epoch.push(epoch as i64);
        self.rows.push(rows);
        self.train_loss.push(float(&loss));
        self.train_rmse.push(rmse);
        self.holdout_loss.push(holdout.loss);
        self.holdout_auc.push(holdout.auc);
        self.holdout_accuracy.push(holdout.accuracy);
        self.holdout_rmse.push(holdout.rmse);
        self.seconds.push(took.0.as_secs_f64());
        self.holdout_seconds.push(took.1.as_secs_f64());
    }

    fn finish(self) -> Result<RecordBatch> {
        let schema = Schema::new(vec![
            Field::new("epoch", DataType::Int64, false),
            Field::new("rows", DataType::Int64, false),
            Field::new("train_loss", DataType::Float64, true),
            Field::new("holdout_loss", DataType::Float64, true),
            Field::new("holdout_auc", DataType::Float64, true),
            Field::new("holdout_accuracy", DataType::Float64, true),
            Field::new("seconds", DataType::Float64, false),
            Field::new("holdout_seconds", DataType::Float64, false),
            Field::new("push_mb", DataType::Float64, false),
            Field::new("raw_mb", DataType::Float64, false),
            Field::new("workers", DataType::Int64, false),
            Field::new("wait_seconds", DataType::Float64, false),
            Field::new("slow_workers", DataType::Utf8, false),
            Field::new("cached_batches", DataType::Int64, false),
            Field::new("train_rmse", DataType::Float64, true),
            Field::new("holdout_rmse", DataType::Float64, true),
        ]);
        Ok(RecordBatch::try_new(
            Arc::new(schema),
            vec![
                Arc::new(Int64Array::from(self.epoch)),
                Arc::new(Int64Array::from(self.rows)),
                Arc::new(Float64Array::from(self.train_loss)),
                Arc::new(Float64Array::from(self.holdout_loss)),
                Arc::new(Float64Array::from(self.holdout_auc)),
                Arc::new(Float64Array::from(self.holdout_accuracy)),
                Arc::new(Float64Array::from(self.seconds)),
                Arc::new(Float64Array::from(self.holdout_seconds)),
                Arc::new(Float64Array::from(self.push_mb)),
                Arc::new(Float64Array::from(self.raw_mb)),
                Arc::new(Int64Array::from(self.workers)),
                Arc::new(Float64Array::from(self.wait_seconds)),
                Arc::new(StringArray::from(self.slow_workers)),
                Arc::new(Int64Array::from(self.cached_batches)),
                Arc::new(Float64Array::from(self.train_rmse)),
                Arc::new(Float64Array::from(self.holdout_rmse)),
            ],
        )?)
    }
}

//! `CREATE MODEL ... OPTIONS (kind = 'gbdt', ...)`: a boosted model's statement. Rounds of
//! `ps_train` over the rows (whose workers keep their rows' bins and margins from round to
//! round, or rebuild them where their tasks read the rows anew: on Ballista) alternate with
//! the [`Grower`]'s work on the servers: round 0 sketches every feature, then each tree takes
//! a round for its root and one per further layer. The epoch
//! table has a row per tree, tree 0 being the base margin alone: rows, the training loss
//! after it, with a `holdout` table its loss and AUC (logistic) or RMSE (squared), the leaves
//! of the tree it adds, seconds, push traffic and workers.

use std::time::Instant;

use angel_training::kinds::gbdt::grower::{Grower, Names};
use angel_training::kinds::gbdt::resident;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::{Result, plan_err};
use datafusion::prelude::SessionContext;

use super::answers::{first_row, float};
use super::caching::Caching;
use super::epoch_table::{self, Column};
use super::holdout::{Holdout, evaluate};
use super::plan::Plan;
use super::progress::{bar, report};
use super::traffic::{push_traffic, traffic};
use super::train_rows::{Rows, TrainRows};
use crate::binding::Binding;
use crate::bridge::{ps_error, train_error};

/// Grows boosted model `name` (matrix `id`) over `rows` as `plan` says; returns the epoch
/// table.
pub(super) async fn train(
    ctx: &SessionContext,
    binding: &Binding,
    (name, id): (&str, u32),
    plan: &Plan,
    rows: Rows,
) -> Result<RecordBatch> {
    let Some(gbdt) = plan.spec.kind.trees() else {
        return plan_err!("CREATE MODEL {name}: not a boosted model");
    };
    if gbdt.early_stopping_rounds > 0 && plan.holdout.is_none() {
        return plan_err!(
            "CREATE MODEL {name}: early_stopping_rounds stops on the holdout loss; name the \
             holdout table with the option holdout"
        );
    }
    let client = binding.client()?;
    let workers = plan.spec.sync.workers as usize;
    let caching = matches!(rows.rows, TrainRows::Spread(_)).then(|| Caching::on(binding, name));
    let mut grower = Grower::create(client.clone(), name, gbdt, plan.spec.dim)
        .await
        .map_err(train_error)?;
    let mut rounds = Rounds {
        ctx,
        name,
        rows: &rows,
        workers,
    };
    let bar = bar(gbdt.trees as u64, "trees");
    let (mean_target, _) = rounds.run(&mut grower).await?;
    grower
        .after_sketch(mean_target)
        .await
        .map_err(train_error)?;
    let mut table = Vec::new();
    let mut started = Instant::now();
    // Traffic of the trees, the histograms and the totals (the sketch's is before the trees).
    let names = Names::of(name);
    let mut ids = vec![id];
    for matrix in [&names.histograms, &names.totals] {
        ids.push(client.matrix(matrix).await.map_err(ps_error)?.meta.id);
    }
    let mut before = push_traffic(&client.status().await.map_err(ps_error)?, &ids);
    let mut leaves_before = 0;
    for tree in 0..=gbdt.trees {
        if tree < gbdt.trees {
            grower.begin_tree(tree).await.map_err(train_error)?;
        }
        // The round that starts a tree answers the loss after the trees before it.
        let (loss, count) = rounds.run(&mut grower).await?;
        let seconds = started.elapsed().as_secs_f64();
        let after = push_traffic(&client.status().await.map_err(ps_error)?, &ids);
        let evaluating = Instant::now();
        let holdout = match &plan.holdout {
            Some(h) => evaluate(ctx, name, &*plan.spec.kind, &rows.columns, h).await?,
            None => Holdout::default(),
        };
        table.push(Row {
            tree: tree as i64,
            rows: count as i64,
            train_loss: loss,
            holdout,
            leaves: (grower.leaves - leaves_before) as i64,
            seconds,
            holdout_seconds: evaluating.elapsed().as_secs_f64(),
            push_mb: traffic(before, after).0 as f64 / 1e6,
            workers: workers as i64,
        });
        let row = table.last().expect("pushed");
        let figures = (row.rows as u64, Some(row.train_loss), row.seconds);
        report(&client, (name, tree), figures, &row.holdout).await;
        let patience = gbdt.early_stopping_rounds;
        let best = best_trees(&table);
        if patience > 0 && (tree == gbdt.trees || tree >= best + patience) {
            grower.drop_trees(best..tree).await.map_err(train_error)?;
            break;
        }
        if tree == gbdt.trees {
            break;
        }
        (started, before, leaves_before) = (Instant::now(), after, grower.leaves);
        while grower.after_round().await.map_err(train_error)? {
            rounds.run(&mut grower).await?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    grower.finish().await.map_err(train_error)?;
    // Workers this process kept for rows it read anew each round (tables on disk).
    resident::forget(&client.qualify(name));
    drop(caching);
    epoch_table::register(ctx, name, epoch_table::batch(&table, &columns())?)
}

/// The number of trees of the best holdout loss so far (the first such).
fn best_trees(table: &[Row]) -> usize {
    let losses = table
        .iter()
        .map(|r| r.holdout.loss.unwrap_or(f64::INFINITY));
    let best = (losses.enumerate()).fold((0, f64::INFINITY), |(b, l), (i, x)| match x < l {
        true => (i, x),
        false => (b, l),
    });
    best.0
}

/// The statement's rounds of `ps_train`.
struct Rounds<'a> {
    ctx: &'a SessionContext,
    name: &'a str,
    rows: &'a Rows,
    workers: usize,
}

impl Rounds<'_> {
    /// Runs the next round, numbered by `grower` on the servers for the workers; answers its
    /// mean (target or loss) and the rows it counted.
    async fn run(&mut self, grower: &mut Grower) -> Result<(f64, u64)> {
        grower.start_round().await.map_err(train_error)?;
        let frame = self
            .rows
            .rows
            .epoch(self.ctx, (self.name, self.workers), 0)?;
        let (mean, rows) = first_row(frame).await?;
        let rows = float(&rows).unwrap_or_default() as u64;
        Ok((float(&mean).unwrap_or(f64::NAN), rows))
    }
}

/// One tree's figures.
struct Row {
    tree: i64,
    rows: i64,
    train_loss: f64,
    holdout: Holdout,
    leaves: i64,
    seconds: f64,
    holdout_seconds: f64,
    push_mb: f64,
    workers: i64,
}

/// The epoch table's columns.
fn columns() -> Vec<Column<Row>> {
    vec![
        Column::Int("tree", |r| r.tree),
        Column::Int("rows", |r| r.rows),
        Column::Float("train_loss", |r| r.train_loss),
        Column::Optional("holdout_loss", |r| r.holdout.loss),
        Column::Optional("holdout_auc", |r| r.holdout.auc),
        Column::Optional("holdout_rmse", |r| r.holdout.rmse),
        Column::Int("leaves", |r| r.leaves),
        Column::Float("seconds", |r| r.seconds),
        Column::Float("holdout_seconds", |r| r.holdout_seconds),
        Column::Float("push_mb", |r| r.push_mb),
        Column::Int("workers", |r| r.workers),
    ]
}

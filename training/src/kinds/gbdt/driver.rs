//! The driver of a boosted model's statement (`CREATE MODEL ... OPTIONS (kind = 'gbdt',
//! ...)`). Rounds of `ps_train` over the rows (whose workers keep their rows' bins and margins
//! from round to round, or rebuild them where their tasks read the rows anew: on Ballista)
//! alternate with the [`Grower`]'s work on the servers: round 0 sketches every feature, then
//! each tree takes a round for its root and one per further layer. The epoch table has a row
//! per tree, tree 0 being the base margin alone: rows, the training loss after it, with a
//! `holdout` table its loss and AUC (logistic) or RMSE (squared), the leaves of the tree it
//! adds, seconds, push traffic and workers.

use std::time::Instant;

use arrow::array::RecordBatch;

use super::Gbdt;
use super::grower::{Grower, Names};
use super::resident;
use crate::driver::epoch_table::{self, Column};
use crate::driver::holdout::{Holdout, evaluate};
use crate::driver::progress::{bar, report};
use crate::driver::traffic::{push_traffic, traffic};
use crate::error::{Result, option_err};
use crate::model::Engine;

/// Grows the statement's boosted model `gbdt`; returns the epoch table.
pub async fn train(engine: &dyn Engine, gbdt: &Gbdt) -> Result<RecordBatch> {
    let (name, plan, client) = (engine.model(), engine.plan(), engine.client());
    if gbdt.early_stopping_rounds > 0 && plan.holdout.is_none() {
        return option_err(format!(
            "CREATE MODEL {name}: early_stopping_rounds stops on the holdout loss; name the \
             holdout table with the option holdout"
        ));
    }
    let id = client.matrix(name).await?.meta.id;
    let mut grower = Grower::create(client.clone(), name, gbdt, plan.spec.dim).await?;
    let rounds = Rounds { engine };
    let bar = bar(gbdt.trees as u64, "trees");
    let (mean_target, _) = rounds.run(&mut grower).await?;
    grower.after_sketch(mean_target).await?;
    let mut table = Vec::new();
    let mut started = Instant::now();
    // Traffic of the trees, the histograms and the totals (the sketch's is before the trees).
    let names = Names::of(name);
    let mut ids = vec![id];
    for matrix in [&names.histograms, &names.totals] {
        ids.push(client.matrix(matrix).await?.meta.id);
    }
    let mut before = push_traffic(&client.status().await?, &ids);
    let mut leaves_before = 0;
    for tree in 0..=gbdt.trees {
        if tree < gbdt.trees {
            grower.begin_tree(tree).await?;
        }
        // The round that starts a tree answers the loss after the trees before it.
        let (loss, count) = rounds.run(&mut grower).await?;
        let seconds = started.elapsed().as_secs_f64();
        let after = push_traffic(&client.status().await?, &ids);
        let evaluating = Instant::now();
        let holdout = evaluate(engine).await?;
        table.push(Row {
            tree: tree as i64,
            rows: count as i64,
            train_loss: loss,
            holdout,
            leaves: (grower.leaves - leaves_before) as i64,
            seconds,
            holdout_seconds: evaluating.elapsed().as_secs_f64(),
            push_mb: traffic(before, after).0 as f64 / 1e6,
            workers: plan.workers() as i64,
        });
        let row = table.last().expect("pushed");
        let figures = (row.rows as u64, Some(row.train_loss), row.seconds);
        report((client, plan), (name, tree), figures, &row.holdout).await?;
        let patience = gbdt.early_stopping_rounds;
        let best = best_trees(&table);
        if patience > 0 && (tree == gbdt.trees || tree >= best + patience) {
            grower.drop_trees(best..tree).await?;
            break;
        }
        if tree == gbdt.trees {
            break;
        }
        (started, before, leaves_before) = (Instant::now(), after, grower.leaves);
        while grower.after_round().await? {
            rounds.run(&mut grower).await?;
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    grower.finish().await?;
    // Workers this process kept for rows it read anew each round (tables on disk).
    resident::forget(&client.qualify(name));
    epoch_table::batch(&table, &columns())
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
    engine: &'a dyn Engine,
}

impl Rounds<'_> {
    /// Runs the next round, numbered by `grower` on the servers for the workers; answers its
    /// mean (target or loss) and the rows it counted.
    async fn run(&self, grower: &mut Grower) -> Result<(f64, u64)> {
        grower.start_round().await?;
        let passed = self.engine.pass(0, None).await?;
        Ok((passed.mean.unwrap_or(f64::NAN), passed.rows))
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

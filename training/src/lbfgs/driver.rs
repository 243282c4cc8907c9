//! The driver of `CREATE MODEL ... OPTIONS (optimizer = 'lbfgs' | 'owlqn', ...)` and `TRAIN
//! MODEL` of such a model: a full-batch model's statement. Each pass of `ps_train` sums the loss and gradient of
//! every row at the weights on the servers; between passes the job runs L-BFGS on the servers
//! (this module's siblings): the two-loop recursion gives the direction, and a backtracking
//! line search moves the weights along it, a pass per trial step. OWL-QN computes the direction
//! from the pseudo-gradient and keeps each step in an orthant. `epochs` bounds the iterations;
//! training stops earlier when the (pseudo-)gradient's norm, or the objective's relative change
//! over an iteration, falls below `tolerance`.
//!
//! The epoch table has a row per iteration, iteration 0 being the starting point: rows, the
//! objective (mean loss plus penalties) and the mean training loss, the (pseudo-)gradient's
//! norm, the weights that are not zero, the step taken and the passes it took, the holdout's
//! figures, seconds and workers.

use std::time::Instant;

use arrow::array::RecordBatch;

use super::history::History;
use super::objective::Objective;
use super::orthant::Orthant;
use super::search::{LineSearch, Verdict};
use super::solver::Method;
use super::vectors::{
    DIRECTION, GRADIENT, NEXT_GRADIENT, POINT, PSEUDO_GRADIENT, Vector, Vectors, WEIGHTS,
};
use crate::driver::epoch_table::{self, Column};
use crate::driver::holdout::{Holdout, evaluate};
use crate::driver::progress::{bar, report};
use crate::error::Result;
use crate::model::{Engine, Plan};

/// Trains the statement's full-batch model for at most its epochs' iterations; returns the
/// epoch table.
pub async fn train(engine: &dyn Engine) -> Result<RecordBatch> {
    let (name, plan, client) = (engine.model(), engine.plan(), engine.client());
    let matrix = client.matrix(name).await?;
    let outputs = plan.spec.kind.outputs();
    let group = matrix.meta.rows as usize / outputs.max(1);
    let vectors = Vectors::new(client.clone(), name, outputs, group);
    let (solver, penalties) = (
        plan.spec.solver,
        (plan.spec.optimizer.l1, plan.spec.optimizer.l2),
    );
    let bias = plan.spec.bias_key();
    let passes = Passes {
        engine,
        objective: Objective::new(vectors.clone(), penalties, bias),
    };
    let run = Iterations {
        passes: &passes,
        vectors: &vectors,
        history: History::new(vectors.clone(), solver.memory),
        orthant: (solver.method == Some(Method::Owlqn))
            .then(|| Orthant::new(vectors.clone(), penalties.0, bias)),
        tolerance: solver.tolerance,
    };
    let table = run.all(plan).await?;
    epoch_table::batch(&table, &columns())
}

/// The statement's passes of `ps_train`.
struct Passes<'a> {
    engine: &'a dyn Engine,
    objective: Objective,
}

/// The objective at a point, and what the pass there summed.
#[derive(Debug, Clone, Copy)]
struct Point {
    objective: f64,
    loss: f64,
    rows: u64,
}

impl Passes<'_> {
    /// A pass at the weights on the servers: the workers' summed gradient lands in
    /// [`NEXT_GRADIENT`], which becomes the objective's gradient there.
    async fn run(&self, vectors: &Vectors) -> Result<Point> {
        vectors.zero(NEXT_GRADIENT).await?;
        let passed = self.engine.pass(0, None).await?;
        let loss = passed.mean.unwrap_or(f64::NAN);
        let objective = self.objective.at_pass(loss, passed.rows).await?;
        Ok(Point {
            objective,
            loss,
            rows: passed.rows,
        })
    }
}

/// L-BFGS's iterations over the passes.
struct Iterations<'a> {
    passes: &'a Passes<'a>,
    vectors: &'a Vectors,
    history: History,
    /// OWL-QN's steps; `None` for L-BFGS.
    orthant: Option<Orthant>,
    tolerance: f64,
}

impl Iterations<'_> {
    /// Runs every iteration; returns the epoch table's rows.
    async fn all(mut self, plan: &Plan) -> Result<Vec<Row>> {
        let v = self.vectors;
        let started = Instant::now();
        let mut at = self.passes.run(v).await?;
        v.copy(NEXT_GRADIENT, GRADIENT).await?;
        self.pseudo_gradient().await?;
        let mut table = vec![self.row(plan, (0, at), (0.0, 1), started).await?];
        let bar = bar(plan.epochs as u64, "iterations");
        for iteration in 1..=plan.epochs {
            let started = Instant::now();
            let Some((next, step, passes)) = self.iterate(at).await? else {
                tracing::info!(
                    model = self.passes.engine.model(),
                    iteration,
                    "no step decreases the objective"
                );
                break;
            };
            let row = self
                .row(plan, (iteration, next), (step, passes), started)
                .await?;
            let figures = (row.rows as u64, Some(row.train_loss), row.seconds);
            report(
                (self.passes.engine.client(), plan),
                (self.passes.engine.model(), iteration),
                figures,
                &row.holdout,
            )
            .await?;
            let gradient_norm = row.gradient_norm;
            table.push(row);
            bar.inc(1);
            let scale = at.objective.abs().max(next.objective.abs()).max(1.0);
            let change = (at.objective - next.objective) / scale;
            at = next;
            if gradient_norm <= self.tolerance || change <= self.tolerance {
                break;
            }
        }
        bar.finish_and_clear();
        Ok(table)
    }

    /// The gradient the direction comes from: OWL-QN's pseudo-gradient, or the gradient.
    fn source(&self) -> Vector {
        match self.orthant {
            Some(_) => PSEUDO_GRADIENT,
            None => GRADIENT,
        }
    }

    /// OWL-QN: the pseudo-gradient at the weights.
    async fn pseudo_gradient(&self) -> Result<()> {
        match &self.orthant {
            Some(orthant) => orthant.pseudo_gradient().await,
            None => Ok(()),
        }
    }

    /// The direction from the history, kept where it descends (OWL-QN); returns its slope.
    async fn direction(&self) -> Result<f64> {
        self.history.direction(self.source()).await?;
        if let Some(orthant) = &self.orthant {
            orthant.constrain().await?;
        }
        self.vectors.dot(self.source(), DIRECTION).await
    }

    /// One iteration from `at`: the direction, then the line search along it, the weights
    /// moved on the servers to each trial. Returns the point reached, the step and the passes
    /// it took; `None` when no step decreased the objective (the weights are moved back).
    async fn iterate(&mut self, at: Point) -> Result<Option<(Point, f64, usize)>> {
        let (v, source) = (self.vectors, self.source());
        let norm = v.dot(source, source).await?.sqrt();
        v.copy(WEIGHTS, POINT).await?;
        let mut slope = self.direction().await?;
        if slope.is_nan() || slope >= 0.0 {
            // The history's curvature no longer gives a descent: start again from -g.
            self.history.clear();
            slope = self.direction().await?;
        }
        // Without curvature yet, the first step moves the weights by 1 at most.
        let first = match self.history.is_empty() {
            true => (1.0 / norm).min(1.0),
            false => 1.0,
        };
        let mut search = LineSearch::new(at.objective, slope, first);
        let from = v.dot(source, POINT).await?;
        loop {
            let step = search.step();
            v.copy(POINT, WEIGHTS).await?;
            v.axpy(step, DIRECTION, WEIGHTS).await?;
            if let Some(orthant) = &self.orthant {
                orthant.project().await?;
            }
            let trial = self.passes.run(v).await?;
            let promised = v.dot(source, WEIGHTS).await? - from;
            match search.judge(trial.objective, promised) {
                Verdict::Accept => {
                    self.history.update().await?;
                    self.pseudo_gradient().await?;
                    return Ok(Some((trial, step, search.trials())));
                }
                Verdict::Retry(_) => {}
                Verdict::Fail => {
                    v.copy(POINT, WEIGHTS).await?;
                    return Ok(None);
                }
            }
        }
    }

    /// The epoch table's row of an iteration that reached `at` by `step` in `passes` passes.
    async fn row(
        &self,
        plan: &Plan,
        (iteration, at): (usize, Point),
        (step, passes): (f64, usize),
        started: Instant,
    ) -> Result<Row> {
        let seconds = started.elapsed().as_secs_f64();
        let evaluating = Instant::now();
        let gradient_norm = self.vectors.dot(self.source(), self.source()).await;
        let nonzero = self.vectors.reduce("nnz", WEIGHTS).await;
        let holdout = evaluate(self.passes.engine).await?;
        Ok(Row {
            iteration: iteration as i64,
            rows: at.rows as i64,
            objective: at.objective,
            train_loss: at.loss,
            gradient_norm: gradient_norm?.sqrt(),
            nonzero_weights: nonzero? as i64,
            step,
            passes: passes as i64,
            holdout,
            seconds,
            holdout_seconds: evaluating.elapsed().as_secs_f64(),
            workers: plan.workers() as i64,
        })
    }
}

/// One iteration's figures.
struct Row {
    iteration: i64,
    rows: i64,
    objective: f64,
    train_loss: f64,
    gradient_norm: f64,
    nonzero_weights: i64,
    step: f64,
    passes: i64,
    holdout: Holdout,
    seconds: f64,
    holdout_seconds: f64,
    workers: i64,
}

/// The epoch table's columns.
fn columns() -> Vec<Column<Row>> {
    vec![
        Column::Int("iteration", |r| r.iteration),
        Column::Int("rows", |r| r.rows),
        Column::Float("objective", |r| r.objective),
        Column::Float("train_loss", |r| r.train_loss),
        Column::Float("gradient_norm", |r| r.gradient_norm),
        Column::Int("nonzero_weights", |r| r.nonzero_weights),
        Column::Float("step", |r| r.step),
        Column::Int("passes", |r| r.passes),
        Column::Optional("holdout_loss", |r| r.holdout.loss),
        Column::Optional("holdout_auc", |r| r.holdout.auc),
        Column::Optional("holdout_accuracy", |r| r.holdout.accuracy),
        Column::Optional("holdout_rmse", |r| r.holdout.rmse),
        Column::Float("seconds", |r| r.seconds),
        Column::Float("holdout_seconds", |r| r.holdout_seconds),
        Column::Int("workers", |r| r.workers),
    ]
}

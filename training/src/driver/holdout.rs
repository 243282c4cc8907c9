//! [`Holdout`]: an epoch's figures on the holdout table, scored with the model's own SQL
//! functions (`ps_loss`, `ps_predict`, and the metrics its kind names).

use arrow::array::RecordBatch;

use crate::error::{Error, Result};
use crate::kinds::Metric;
use crate::model::{Engine, ModelKind};

use super::answers::first_number;

/// An epoch's holdout figures: the mean of the model's own loss (`ps_loss`, the loss
/// `train_loss` reports), and the metrics its kind names (AUC, accuracy, RMSE).
#[derive(Debug, Default, Clone, Copy)]
pub struct Holdout {
    /// The mean of `ps_loss` over the table's rows.
    pub loss: Option<f64>,
    /// Binary classifiers: the area under the ROC curve of `ps_predict`.
    pub auc: Option<f64>,
    /// Classifiers of classes: the share of rows predicted right.
    pub accuracy: Option<f64>,
    /// Kinds whose loss is half the squared error: the root mean squared error.
    pub rmse: Option<f64>,
}

/// Scores the statement's holdout table with its model; no figures without one.
pub async fn evaluate(engine: &dyn Engine) -> Result<Holdout> {
    let Some(holdout) = &engine.plan().holdout else {
        return Ok(Holdout::default());
    };
    let (model, kind) = (engine.model(), &*engine.plan().spec.kind);
    let (label, features) = (&engine.query().label, &engine.query().inputs);
    let metric = |m: Metric, sql: &'static str| match metrics(kind).contains(&m) {
        true => sql,
        false => "CAST(NULL AS DOUBLE)",
    };
    let sql = format!(
        "SELECT avg(l) AS loss, {} AS auc, {} AS accuracy, {} AS rmse FROM (SELECT CAST({label} \
         AS DOUBLE) AS y, ps_predict('{model}', {features}) AS p, ps_loss('{model}', {label}, \
         {features}) AS l FROM {holdout}) AS scored",
        metric(Metric::Auc, "ps_auc(y, p)"),
        metric(Metric::Accuracy, "ps_accuracy(y, p)"),
        metric(Metric::Rmse, "ps_rmse(y, p)"),
    );
    let answer = answer_on(engine, holdout, &format!("{label}, {features}"), &sql).await?;
    Ok(Holdout {
        loss: first_number(&answer, 0)?,
        auc: first_number(&answer, 1)?,
        accuracy: first_number(&answer, 2)?,
        rmse: first_number(&answer, 3)?,
    })
}

/// The answer of `sql`, which reads holdout table `holdout` with the training query's
/// `columns`: an error names the table and those columns, which the engine's own (`No field
/// named words`) does not.
pub async fn answer_on(
    engine: &dyn Engine,
    holdout: &str,
    columns: &str,
    sql: &str,
) -> Result<Vec<RecordBatch>> {
    engine.answer(sql).await.map_err(|e| match e {
        Error::Engine(e) => Error::Input(format!(
            "scoring holdout table '{holdout}', which needs the training query's columns \
             ({columns}): {e}"
        )),
        e => e,
    })
}

/// The holdout metrics of a kind that scores rows (none for the topic model).
pub fn metrics(kind: &dyn ModelKind) -> &'static [Metric] {
    kind.scoring().map_or(&[], |g| g.metrics())
}

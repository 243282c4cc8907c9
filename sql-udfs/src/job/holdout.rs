//! [`Holdout`]: an epoch's figures on the holdout table, scored with the model's own SQL
//! functions (`ps_loss`, `ps_predict`, and the metrics its kind names).

use angel_training::kinds::{Metric, ModelKind};
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::prelude::SessionContext;

use super::answers::float;
use super::train_rows::Columns;

/// An epoch's holdout figures: the mean of the model's own loss (`ps_loss`, the loss
/// `train_loss` reports), and the metrics its kind names (AUC, accuracy).
#[derive(Debug, Default)]
pub(super) struct Holdout {
    pub(super) loss: Option<f64>,
    pub(super) auc: Option<f64>,
    pub(super) accuracy: Option<f64>,
    pub(super) rmse: Option<f64>,
}

/// Scores the holdout table with the model; see [`Holdout`].
pub(super) async fn evaluate(
    ctx: &SessionContext,
    model: &str,
    kind: &dyn ModelKind,
    columns: &Columns,
    holdout: &str,
) -> Result<Holdout> {
    let (label, features) = (&columns.label, &columns.inputs);
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
    let batches = ctx.sql(&sql).await?.collect().await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return plan_err!("the holdout evaluation answered no row");
    };
    let value = |i| ScalarValue::try_from_array(batch.column(i), 0).map(|v| float(&v));
    Ok(Holdout {
        loss: value(0)?,
        auc: value(1)?,
        accuracy: value(2)?,
        rmse: value(3)?,
    })
}

/// The holdout metrics of a kind that scores rows (none for the topic model).
pub(super) fn metrics(kind: &dyn ModelKind) -> &'static [Metric] {
    kind.scoring().map_or(&[], |g| g.metrics())
}

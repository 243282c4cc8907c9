//! `CREATE MODEL` and `TRAIN MODEL`: read the plan and the training rows, create the model on
//! the PS (with its first values), and hand the statement to its kind's driver, which trains it
//! with `ps_train` and returns the epoch table.

use angel_client::PsError;
use angel_training::ModelSpec;
use datafusion::arrow::array::RecordBatch;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::prelude::SessionContext;

use super::answers::float;
use super::epochs;
use super::plan::{Plan, plan};
use super::train_rows::{Columns, Engine, Rows};
use super::{clusters, lbfgs, topics, trees};
use crate::binding::Binding;
use crate::bridge::{ps_error, train_error};

/// Runs `CREATE MODEL`; see the module documentation.
pub async fn create_model(
    ctx: &SessionContext,
    binding: &Binding,
    (name, replace): (&str, bool),
    options: &[(String, String)],
    query: &str,
    engine: Engine<'_>,
) -> Result<RecordBatch> {
    let mut plan = plan(binding, options).await?;
    // Stored qualified: the model finds its dictionary whichever namespace reads it.
    if let Some(counter) = plan.spec.counter.take() {
        plan.spec.counter = Some(binding.client()?.qualify(&counter));
    }
    if plan.spec.sync.workers == 0 {
        plan.spec.sync.workers = ctx.copied_config().target_partitions() as u32;
    }
    plan.spec.sync.check().map_err(train_error)?;
    let rows = Rows::read(ctx, &plan, query, engine).await?;
    if rows.count == 0 {
        return plan_err!("CREATE MODEL {name}: the training query returned no rows");
    }
    if plan.spec.kind.wants_label_mean() {
        let mean = label_mean(ctx, query, &rows.columns).await?;
        plan.spec
            .set("mean", &mean.to_string())
            .map_err(train_error)?;
    }
    let client = binding.client()?;
    if replace {
        client.drop_matrix_if_any(name).await.map_err(ps_error)?;
    }
    let matrix = plan.spec.create(&client, name).await.map_err(train_error)?;
    if plan.spec.kind.clusters().is_some() {
        clusters::init(ctx, binding, name, &plan, &rows).await?;
    }
    (plan.spec.randomize(&client, name, RANDOM_SEED).await).map_err(train_error)?;
    drive(ctx, binding, (name, matrix.meta.id), &plan, rows).await
}

/// Trains model `name` (matrix `id`) over `rows` as `plan` says, by the driver of its
/// statement; returns the epoch table.
async fn drive(
    ctx: &SessionContext,
    binding: &Binding,
    (name, id): (&str, u32),
    plan: &Plan,
    rows: Rows,
) -> Result<RecordBatch> {
    if plan.spec.kind.topics().is_some() {
        return topics::train(ctx, binding, (name, id), plan, rows).await;
    }
    if plan.spec.kind.trees().is_some() {
        return trees::train(ctx, binding, (name, id), plan, rows).await;
    }
    if plan.spec.solver.method.is_some() {
        return lbfgs::train(ctx, binding, name, plan, rows).await;
    }
    if plan.spec.kind.clusters().is_some() {
        return clusters::train(ctx, binding, name, plan, rows).await;
    }
    epochs::train(ctx, binding, (name, id), plan, rows).await
}

/// The seed of the weights a kind starts at random (matrix factorization's factors), so a
/// job trains the same model at every run.
const RANDOM_SEED: u64 = 0x5eed;

/// The mean label of the training query's rows (`columns`: its columns, the label's first).
async fn label_mean(ctx: &SessionContext, query: &str, columns: &Columns) -> Result<f64> {
    let sql = format!(
        "SELECT avg(CAST({} AS DOUBLE)) FROM ({query}) AS rows",
        columns.label
    );
    let batches = ctx.sql(&sql).await?.collect().await?;
    let mean = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| ScalarValue::try_from_array(b.column(0), 0))
        .transpose()?;
    match mean.as_ref().and_then(float) {
        Some(mean) if mean.is_finite() => Ok(mean),
        _ => plan_err!(
            "the training query's mean label ({}) is not a number",
            columns.label
        ),
    }
}

/// Runs `TRAIN MODEL`: model `name` (created or loaded, with its optimizer state) trains on
/// for more epochs (`epochs`, 1 by default), on the rows of `query`, with its own options; the
/// result is an epoch table as `CREATE MODEL`'s.
pub async fn train_model(
    ctx: &SessionContext,
    binding: &Binding,
    name: &str,
    options: &[(String, String)],
    query: &str,
    engine: Engine<'_>,
) -> Result<RecordBatch> {
    let client = binding.client()?;
    client.refresh().await.map_err(ps_error)?;
    let matrix = match client.matrix(name).await {
        Ok(m) => m,
        Err(PsError::NotFound(_)) => {
            return plan_err!(
                "TRAIN MODEL {name}: no model of that name; create it with CREATE MODEL or load \
                 it with LOAD MODEL"
            );
        }
        Err(e) => return Err(ps_error(e)),
    };
    let mut plan = Plan {
        spec: ModelSpec::of_matrix(name, &matrix.meta).map_err(train_error)?,
        epochs: 1,
        holdout: None,
    };
    if let Some(why) = plan.spec.kind.refuses_more_epochs() {
        return plan_err!("TRAIN MODEL {name}: {why}");
    }
    for (key, value) in options {
        if !plan.run_option(key, value)? {
            return plan_err!(
                "TRAIN MODEL {name}: option '{key}' is the model's own, set when it was created; \
                 TRAIN MODEL takes epochs and holdout"
            );
        }
    }
    let rows = Rows::read(ctx, &plan, query, engine).await?;
    if rows.count == 0 {
        return plan_err!("TRAIN MODEL {name}: the training query returned no rows");
    }
    drive(ctx, binding, (name, matrix.meta.id), &plan, rows).await
}

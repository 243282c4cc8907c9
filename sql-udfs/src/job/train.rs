//! `CREATE MODEL` and `TRAIN MODEL`: read the plan and the training rows, create the model on
//! the PS (with its first values), and hand the statement to its kind's driver
//! ([`angel_training::ModelKind::drive`]) on the job's session, which trains it with
//! `ps_train` and returns the epoch table.

use angel_client::PsError;
use angel_training::ModelSpec;
use angel_training::{Engine, Plan};
use datafusion::arrow::array::RecordBatch;
use datafusion::common::{Result, ScalarValue, plan_err};
use datafusion::prelude::SessionContext;

use super::answers::float;
use super::epoch_table;
use super::plan::plan;
use super::resume::Resume;
use super::session_engine::SessionEngine;
use super::train_rows::{RowReading, Rows};
use crate::binding::Binding;
use crate::bridge::{ps_error, train_error};

/// How a training statement goes with the job's run.
#[derive(Clone, Copy, Default)]
pub struct Training<'a> {
    /// The job's run, which records each completed epoch.
    pub resume: Option<&'a Resume>,
    /// Some when an earlier run of the job stopped in this statement: the epochs it
    /// completed, after which training goes on on the model the servers hold.
    pub done_epochs: Option<usize>,
}

/// Runs `CREATE MODEL`; see the module documentation.
pub async fn create_model(
    (ctx, binding): (&SessionContext, &Binding),
    (name, replace): (&str, bool),
    options: &[(String, String)],
    query: &str,
    (reading, training): (RowReading<'_>, Training<'_>),
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
    let rows = Rows::read(ctx, &plan, query, reading).await?;
    if rows.query.rows == 0 {
        return plan_err!("CREATE MODEL {name}: the training query returned no rows");
    }
    if plan.spec.kind.wants_label_mean() {
        let mean = label_mean(ctx, query, &rows.query.label).await?;
        plan.spec
            .set("mean", &mean.to_string())
            .map_err(train_error)?;
    }
    let client = binding.client()?;
    let created: Vec<String> = std::iter::once(name.to_string())
        .chain(plan.spec.kind.companions(name))
        .collect();
    match training.done_epochs {
        // An earlier run of the job trained this model for some epochs: go on after them,
        // with the weights and optimizer state the servers hold.
        Some(done) if done > 0 && made_for(&client, name, &plan.spec).await => {
            plan.done_epochs = done.min(plan.epochs);
            let engine = SessionEngine::new((ctx, binding), name, plan, rows)?;
            return drive(ctx, engine.recording(training.resume)).await;
        }
        // It stopped before an epoch was complete: what it made is nobody's. A model of
        // another description is not what it made, and is left to fail as without a kill.
        Some(_) if made_for(&client, name, &plan.spec).await => {
            drop_created(&client, &created).await
        }
        _ if replace => client.drop_matrix_if_any(name).await.map_err(ps_error)?,
        _ => {}
    }
    plan.spec.create(&client, name).await.map_err(train_error)?;
    let trained = train_created((ctx, binding), name, plan, rows, training.resume).await;
    // A run that lost the job to a later one leaves the model to it.
    let still_held = training.resume.is_none_or(|r| r.check().is_ok());
    if trained.is_err() && still_held {
        drop_created(&client, &created).await;
    }
    trained
}

/// Whether model `name` is on the service with the training description of `spec`: what an
/// earlier run of the same statement made.
async fn made_for(client: &angel_client::PsClient, name: &str, spec: &ModelSpec) -> bool {
    let made = client.matrix(name).await;
    made.is_ok_and(|m| m.meta.training.as_ref() == Some(&spec.to_training()))
}

/// Starts, draws and trains model `name`, just created for `plan`, on `rows`, recording its
/// epochs with the job's run `resume`.
async fn train_created(
    (ctx, binding): (&SessionContext, &Binding),
    name: &str,
    plan: Plan,
    rows: Rows,
    resume: Option<&Resume>,
) -> Result<RecordBatch> {
    let client = binding.client()?;
    let engine = SessionEngine::new((ctx, binding), name, plan, rows)?.recording(resume);
    (engine.plan().spec.kind.start(&engine).await).map_err(train_error)?;
    (engine
        .plan()
        .spec
        .randomize(&client, name, RANDOM_SEED)
        .await)
        .map_err(train_error)?;
    drive(ctx, engine).await
}

/// Drops what a failed `CREATE MODEL` created (the model and its kind's companions), so the
/// statement can run again without `OR REPLACE`: a half-trained model is nobody's. A drop
/// that fails too (the service is unreachable) is logged; the statement's own error stands.
async fn drop_created(client: &angel_client::PsClient, created: &[String]) {
    for matrix in created {
        if let Err(e) = client.drop_matrix_if_any(matrix).await {
            tracing::warn!(matrix, error = %e, "could not drop what a failed CREATE MODEL created");
        }
    }
}

/// Trains the statement's model on `engine` by its kind's driver; returns the epoch table,
/// registered as `<model>_epochs`.
async fn drive(ctx: &SessionContext, engine: SessionEngine<'_>) -> Result<RecordBatch> {
    let table = (engine.plan().spec.kind.drive(&engine).await).map_err(train_error)?;
    let model = engine.model().to_string();
    // The statement's caching ends with its training.
    drop(engine);
    epoch_table::register(ctx, &model, table)
}

/// The seed of the weights a kind starts at random (matrix factorization's factors), so a
/// job trains the same model at every run.
const RANDOM_SEED: u64 = 0x5eed;

/// The mean label (column `label`, quoted) of the training query's rows.
async fn label_mean(ctx: &SessionContext, query: &str, label: &str) -> Result<f64> {
    let sql = format!("SELECT avg(CAST({label} AS DOUBLE)) FROM ({query}) AS rows");
    let batches = ctx.sql(&sql).await?.collect().await?;
    let mean = batches
        .iter()
        .find(|b| b.num_rows() > 0)
        .map(|b| ScalarValue::try_from_array(b.column(0), 0))
        .transpose()?;
    match mean.as_ref().and_then(float) {
        Some(mean) if mean.is_finite() => Ok(mean),
        _ => plan_err!("the training query's mean label ({label}) is not a number"),
    }
}

/// Runs `TRAIN MODEL`: model `name` (created or loaded, with its optimizer state) trains on
/// for more epochs (`epochs`, 1 by default), on the rows of `query`, with its own options; the
/// result is an epoch table as `CREATE MODEL`'s.
pub async fn train_model(
    (ctx, binding): (&SessionContext, &Binding),
    name: &str,
    options: &[(String, String)],
    query: &str,
    (reading, training): (RowReading<'_>, Training<'_>),
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
    let spec = ModelSpec::of_matrix(name, &matrix.meta).map_err(train_error)?;
    let mut plan = Plan::new(spec, 1);
    if let Some(why) = plan.spec.kind.refuses_more_epochs() {
        return plan_err!("TRAIN MODEL {name}: {why}");
    }
    for (key, value) in options {
        if !plan.run_option(key, value).map_err(train_error)? {
            return plan_err!(
                "TRAIN MODEL {name}: option '{key}' is the model's own, set when it was created; \
                 TRAIN MODEL takes epochs, holdout and on_divergence"
            );
        }
    }
    let rows = Rows::read(ctx, &plan, query, reading).await?;
    if rows.query.rows == 0 {
        return plan_err!("TRAIN MODEL {name}: the training query returned no rows");
    }
    // An earlier run of the job stopped in this statement after some epochs: the rest.
    plan.done_epochs = training.done_epochs.unwrap_or(0).min(plan.epochs);
    let engine = SessionEngine::new((ctx, binding), name, plan, rows)?;
    drive(ctx, engine.recording(training.resume)).await
}

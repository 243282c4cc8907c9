//! k-means|| (Bahmani, Moseley, Vattani, Kumar and Vassilvitskii, "Scalable K-Means++", 2012):
//! the first centres of `init = 'k-means||'`, drawn as Spark MLlib draws them. One row is drawn
//! uniformly; then each of `init_steps` rounds passes over every row and draws each one
//! independently with probability `2k d² / φ` (`d` its distance to the candidates so far, `φ`
//! the sum of `d²` over the rows); at the end each candidate is weighted by the rows nearest
//! it and the candidates are reduced to `k` centres ([`seeding::reduce`]).
//!
//! The candidates are a k-means model of their own on the servers, so a round is two SQL passes
//! whose `ps_distance` runs wherever the engine runs tasks (on Ballista, in the executors);
//! only the rows drawn reach the job. A row's draw compares a number made from a seeded hash of
//! its id, so every engine draws the same rows.

use angel_client::PsClient;
use angel_training::kinds;
use angel_training::kinds::kmeans::{KMeans, MAX_CENTRES, seeding};
use angel_training::model::ModelSpec;
use angel_training::rows::SparseRows;
use datafusion::common::{Result, ScalarValue, exec_err};
use datafusion::prelude::SessionContext;

use super::answers::float;
use super::plan::Plan;
use super::points::{read, sample, uniform, write_centres};
use super::train_rows::Rows;
use crate::binding::Binding;
use crate::bridge::{ps_error, train_error};

/// The first `k` centres of k-means model `name` by k-means|| over the training rows.
pub(super) async fn centres(
    ctx: &SessionContext,
    binding: &Binding,
    name: &str,
    (kmeans, plan): (&KMeans, &Plan),
    rows: &Rows,
) -> Result<Vec<f64>> {
    let client = binding.client()?;
    let candidates = Candidates {
        client: &client,
        model: format!("{name}__candidates"),
        dim: plan.spec.dim as usize,
    };
    let drawn = rounds(ctx, &candidates, (kmeans, plan), rows).await;
    let dropped = candidates.drop().await;
    let (drawn, weights) = drawn?;
    dropped?;
    if drawn.len() < kmeans.k {
        return exec_err!(
            "k-means|| drew {} candidates, fewer than the k = {} centres: the rows have fewer \
             distinct points than k, or too few rounds (init_steps)",
            drawn.len(),
            kmeans.k
        );
    }
    seeding::reduce(&drawn, &weights, kmeans.k, candidates.dim, kmeans.seed).map_err(train_error)
}

/// The candidates drawn in `init_steps` rounds and their weights.
async fn rounds(
    ctx: &SessionContext,
    candidates: &Candidates<'_>,
    (kmeans, plan): (&KMeans, &Plan),
    rows: &Rows,
) -> Result<(SparseRows, Vec<f64>)> {
    let (id, inputs, query) = (&rows.columns.label, &rows.columns.inputs, &rows.query);
    let model = &candidates.model;
    let distance = format!("power(ps_distance('{model}', {inputs}), 2)");
    let mut drawn = sample(ctx, rows, (1, kmeans.seed), plan).await?;
    for round in 1..=kmeans.init_steps {
        candidates.hold(&drawn).await?;
        let sql = format!("SELECT sum({distance}) FROM ({query}) AS rows");
        let cost = number(ctx, &sql).await?;
        if cost <= 0.0 {
            break;
        }
        let draw = uniform(kmeans.seed, round, id);
        let oversampling = 2 * kmeans.k;
        let sql = format!(
            "SELECT {id}, {inputs} FROM ({query}) AS rows WHERE {draw} * {cost:e} < \
             {oversampling} * {distance}"
        );
        drawn = SparseRows::concat(vec![drawn, read(ctx, &sql, plan).await?]);
        tracing::debug!(round, cost, candidates = drawn.len(), "k-means|| round");
    }
    candidates.hold(&drawn).await?;
    let sql = format!(
        "SELECT CAST(ps_predict('{model}', {inputs}) AS BIGINT) AS c, count(*) AS n FROM \
         ({query}) AS rows GROUP BY 1"
    );
    let mut weights = vec![0.0; drawn.len()];
    for batch in ctx.sql(&sql).await?.collect().await? {
        for r in 0..batch.num_rows() {
            let c = ScalarValue::try_from_array(batch.column(0), r)?;
            let n = ScalarValue::try_from_array(batch.column(1), r)?;
            if let (Some(c), Some(n)) = (float(&c), float(&n)) {
                // The first candidate is held twice when it is alone (a model has 2 centres).
                weights[(c as usize).min(drawn.len() - 1)] += n;
            }
        }
    }
    Ok((drawn, weights))
}

/// The one number `sql` answers (0 when it answers null: no rows).
async fn number(ctx: &SessionContext, sql: &str) -> Result<f64> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
        return Ok(0.0);
    };
    Ok(float(&ScalarValue::try_from_array(batch.column(0), 0)?).unwrap_or(0.0))
}

/// The candidates' own k-means model on the servers.
struct Candidates<'a> {
    client: &'a PsClient,
    model: String,
    dim: usize,
}

impl Candidates<'_> {
    /// Makes the model hold `drawn` as its centres (the first twice when it is alone).
    async fn hold(&self, drawn: &SparseRows) -> Result<()> {
        let n = drawn.len();
        if n as u64 > MAX_CENTRES {
            return exec_err!(
                "k-means|| drew {n} candidates, more than the {MAX_CENTRES} centres a model \
                 holds: use fewer init_steps or init = 'k-means++'"
            );
        }
        let mut centres =
            seeding::first_rows(drawn, n, self.dim, "k-means||").map_err(train_error)?;
        if n == 1 {
            centres.extend_from_within(..);
        }
        self.drop().await?;
        let mut spec = ModelSpec::new(
            kinds::by_name("kmeans").map_err(train_error)?,
            self.dim as u64,
        );
        spec.set("k", &n.max(2).to_string()).map_err(train_error)?;
        spec.create(self.client, &self.model)
            .await
            .map_err(train_error)?;
        write_centres(self.client, &self.model, &centres, self.dim).await
    }

    async fn drop(&self) -> Result<()> {
        self.client
            .drop_matrix_if_any(&self.model)
            .await
            .map_err(ps_error)
    }
}

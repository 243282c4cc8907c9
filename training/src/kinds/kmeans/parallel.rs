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

use super::sampling::{read, sample, uniform, write_centres};
use super::{KMeans, MAX_CENTRES, seeding};
use crate::driver::answers::{first_number, number};
use crate::error::{Result, input_err};
use crate::model::{Engine, ModelSpec};
use crate::rows::SparseRows;

/// The first `k` centres of the statement's k-means model by k-means|| over its training rows.
pub async fn centres(engine: &dyn Engine, kmeans: &KMeans) -> Result<Vec<f64>> {
    let candidates = Candidates {
        client: engine.client(),
        model: format!("{}__candidates", engine.model()),
        dim: engine.plan().spec.dim as usize,
    };
    let drawn = rounds(engine, &candidates, kmeans).await;
    let dropped = candidates.drop().await;
    let (drawn, weights) = drawn?;
    dropped?;
    if drawn.len() < kmeans.k {
        return input_err(format!(
            "k-means|| drew {} candidates, fewer than the k = {} centres: the rows have fewer \
             distinct points than k, or too few rounds (init_steps)",
            drawn.len(),
            kmeans.k
        ));
    }
    seeding::reduce(&drawn, &weights, kmeans.k, candidates.dim, kmeans.seed)
}

/// The candidates drawn in `init_steps` rounds and their weights.
async fn rounds(
    engine: &dyn Engine,
    candidates: &Candidates<'_>,
    kmeans: &KMeans,
) -> Result<(SparseRows, Vec<f64>)> {
    let query = engine.query();
    let (id, inputs, query) = (&query.label, &query.inputs, &query.sql);
    let model = &candidates.model;
    let distance = format!("power(ps_distance('{model}', {inputs}), 2)");
    let mut drawn = sample(engine, (1, kmeans.seed)).await?;
    for round in 1..=kmeans.init_steps {
        candidates.hold(&drawn).await?;
        let sql = format!("SELECT sum({distance}) FROM ({query}) AS rows");
        // No rows: a null sum.
        let cost = match engine.answer(&sql).await? {
            answer if answer.iter().all(|b| b.num_rows() == 0) => 0.0,
            answer => first_number(&answer, 0)?.unwrap_or(0.0),
        };
        if cost <= 0.0 {
            break;
        }
        let draw = uniform(kmeans.seed, round, id);
        let oversampling = 2 * kmeans.k;
        let sql = format!(
            "SELECT {id}, {inputs} FROM ({query}) AS rows WHERE {draw} * {cost:e} < \
             {oversampling} * {distance}"
        );
        drawn = SparseRows::concat(vec![drawn, read(engine, &sql).await?]);
        tracing::debug!(round, cost, candidates = drawn.len(), "k-means|| round");
    }
    candidates.hold(&drawn).await?;
    let sql = format!(
        "SELECT CAST(ps_predict('{model}', {inputs}) AS BIGINT) AS c, count(*) AS n FROM \
         ({query}) AS rows GROUP BY 1"
    );
    let mut weights = vec![0.0; drawn.len()];
    for batch in engine.answer(&sql).await? {
        for r in 0..batch.num_rows() {
            let (c, n) = (number(batch.column(0), r), number(batch.column(1), r));
            if let (Some(c), Some(n)) = (c, n) {
                // The first candidate is held twice when it is alone (a model has 2 centres).
                weights[(c as usize).min(drawn.len() - 1)] += n;
            }
        }
    }
    Ok((drawn, weights))
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
            return input_err(format!(
                "k-means|| drew {n} candidates, more than the {MAX_CENTRES} centres a model \
                 holds: use fewer init_steps or init = 'k-means++'"
            ));
        }
        let mut centres = seeding::first_rows(drawn, n, self.dim, "k-means||")?;
        if n == 1 {
            centres.extend_from_within(..);
        }
        self.drop().await?;
        let mut spec = ModelSpec::new(crate::model::Kind::of(KMeans::default()), self.dim as u64);
        spec.set("k", &n.max(2).to_string())?;
        spec.create(self.client, &self.model).await?;
        write_centres(self.client, &self.model, &centres, self.dim).await
    }

    async fn drop(&self) -> Result<()> {
        Ok(self.client.drop_matrix_if_any(&self.model).await?)
    }
}

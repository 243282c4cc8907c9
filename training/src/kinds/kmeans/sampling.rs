//! The k-means statements' points: rows a query answers read as points, a uniform sample of
//! the training rows by a seeded hash of their ids (and that hash as SQL), and centres written
//! to a model's first rows.

use angel_client::PsClient;

use super::points;
use crate::error::Result;
use crate::model::Engine;
use crate::rows::SparseRows;

/// The rows `sql` answers (`id, point` or `id, idx, val`), read as points.
pub async fn read(engine: &dyn Engine, sql: &str) -> Result<SparseRows> {
    let batches = engine.answer(sql).await?;
    let mut all = Vec::with_capacity(batches.len());
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let inputs = &batch.columns()[1..];
        let dim = engine.plan().spec.dim;
        all.push(points::read("CREATE MODEL", "init", dim, inputs)?);
    }
    Ok(SparseRows::concat(all))
}

/// `n` of the training rows, drawn uniformly: the first by a seeded hash of their id, so the
/// draw depends neither on the rows' order nor on the last bits of their coordinates.
pub async fn sample(engine: &dyn Engine, (n, seed): (usize, u64)) -> Result<SparseRows> {
    let query = engine.query();
    let (id, inputs, query) = (&query.label, &query.inputs, &query.sql);
    let sql = format!(
        "SELECT {id}, {inputs} FROM ({query}) AS rows ORDER BY md5('{seed};' || CAST({id} AS \
         VARCHAR)), {id} LIMIT {n}"
    );
    read(engine, &sql).await
}

/// Adds `centres` (`dim` coordinates each, centre after centre) to the first rows of model
/// `name`, whose values are zero.
pub async fn write_centres(
    client: &PsClient,
    name: &str,
    centres: &[f64],
    dim: usize,
) -> Result<()> {
    let keys: Vec<u64> = (0..dim as u64).collect();
    for (c, centre) in centres.chunks(dim).enumerate() {
        let centre: Vec<f32> = centre.iter().map(|&v| v as f32).collect();
        client.push_keys(name, c as u64, &keys, &centre).await?;
    }
    Ok(())
}

/// SQL for a number in [0, 1) made from the first 8 hexadecimal digits of a seeded hash of
/// `id` for `round` (0: k-means's variance sample).
pub fn uniform(seed: u64, round: usize, id: &str) -> String {
    let hash = format!("md5('{seed};{round};' || CAST({id} AS VARCHAR))");
    let digits: Vec<String> = (1..=8)
        .map(|i| {
            let scale = 16f64.powi(-i);
            format!("(strpos('0123456789abcdef', substr({hash}, {i}, 1)) - 1) * {scale:e}")
        })
        .collect();
    format!("({})", digits.join(" + "))
}

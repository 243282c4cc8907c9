//! The k-means statements' points: rows a query answers read as points, a uniform sample of
//! the training rows by a seeded hash of their ids (and that hash as SQL), and centres written
//! to a model's first rows.

use angel_client::PsClient;
use angel_training::kinds::kmeans::points;
use angel_training::rows::SparseRows;
use datafusion::common::Result;
use datafusion::prelude::SessionContext;

use super::plan::Plan;
use super::train_rows::Rows;
use crate::bridge::{ps_error, train_error};

/// The rows `sql` answers (`id, point` or `id, idx, val`), read as points.
pub(super) async fn read(ctx: &SessionContext, sql: &str, plan: &Plan) -> Result<SparseRows> {
    let batches = ctx.sql(sql).await?.collect().await?;
    let mut all = Vec::with_capacity(batches.len());
    for batch in batches.iter().filter(|b| b.num_rows() > 0) {
        let inputs = &batch.columns()[1..];
        let rows = points::read("CREATE MODEL", "init", plan.spec.dim, inputs);
        all.push(rows.map_err(train_error)?);
    }
    Ok(SparseRows::concat(all))
}

/// `n` of the training rows, drawn uniformly: the first by a seeded hash of their id, so the
/// draw depends neither on the rows' order nor on the last bits of their coordinates.
pub(super) async fn sample(
    ctx: &SessionContext,
    rows: &Rows,
    (n, seed): (usize, u64),
    plan: &Plan,
) -> Result<SparseRows> {
    let (id, inputs, query) = (&rows.columns.label, &rows.columns.inputs, &rows.query);
    let sql = format!(
        "SELECT {id}, {inputs} FROM ({query}) AS rows ORDER BY md5('{seed};' || CAST({id} AS \
         VARCHAR)), {id} LIMIT {n}"
    );
    read(ctx, &sql, plan).await
}

/// Adds `centres` (`dim` coordinates each, centre after centre) to the first rows of model
/// `name`, whose values are zero.
pub(super) async fn write_centres(
    client: &PsClient,
    name: &str,
    centres: &[f64],
    dim: usize,
) -> Result<()> {
    let keys: Vec<u64> = (0..dim as u64).collect();
    for (c, centre) in centres.chunks(dim).enumerate() {
        let centre: Vec<f32> = centre.iter().map(|&v| v as f32).collect();
        (client.push_keys(name, c as u64, &keys, &centre).await).map_err(ps_error)?;
    }
    Ok(())
}

/// SQL for a number in [0, 1) made from the first 8 hexadecimal digits of a seeded hash of
/// `id` for `round` (0: k-means's variance sample).
pub(super) fn uniform(seed: u64, round: usize, id: &str) -> String {
    let hash = format!("md5('{seed};{round};' || CAST({id} AS VARCHAR))");
    let digits: Vec<String> = (1..=8)
        .map(|i| {
            let scale = 16f64.powi(-i);
            format!("(strpos('0123456789abcdef', substr({hash}, {i}, 1)) - 1) * {scale:e}")
        })
        .collect();
    format!("({})", digits.join(" + "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::common::ScalarValue;

    use super::super::answers::float;

    /// The hash-made numbers of 20,000 ids lie in [0, 1) with the mean and spread of uniform
    /// ones (within 4 standard errors), and another round draws other numbers.
    #[tokio::test]
    async fn hashed_numbers_are_uniform() {
        let ctx = SessionContext::new();
        let (u, v) = (uniform(7, 1, "value"), uniform(7, 2, "value"));
        let sql = format!(
            "SELECT min({u}), max({u}), avg({u}), var_pop({u}), corr({u}, {v}) FROM range(20000)"
        );
        let batches = ctx.sql(&sql).await.unwrap().collect().await.unwrap();
        let figures: Vec<f64> = (0..5)
            .map(|c| float(&ScalarValue::try_from_array(batches[0].column(c), 0).unwrap()).unwrap())
            .collect();
        let error = (1.0f64 / 12.0 / 20_000.0).sqrt();
        assert!(figures[0] >= 0.0 && figures[1] < 1.0, "{figures:?}");
        assert!((figures[2] - 0.5).abs() < 4.0 * error, "{figures:?}");
        assert!((figures[3] - 1.0 / 12.0).abs() < 0.003, "{figures:?}");
        assert!(figures[4].abs() < 4.0 / 20_000f64.sqrt(), "{figures:?}");
    }
}

//! A k-means model's answer for rows: each row's nearest centre and its distance to it
//! (`ps_predict`, `ps_distance`), from one pull of the centres per call.

use angel_client::runtime::block_on;

use super::KMeans;
use super::centres::Centres;
use crate::error::Result;
use crate::model::Model;
use crate::rows::SparseRows;

/// The `k` centres of model `model`, pulled.
pub fn pull(model: &Model, k: usize) -> Result<Centres> {
    Ok(pull_sized(model, k)?.0)
}

/// The `k` centres of model `model` and their sizes (the rows they were given), pulled.
pub fn pull_sized(model: &Model, k: usize) -> Result<(Centres, Vec<f64>)> {
    let dim = model.spec.dim as usize;
    let ids: Vec<u64> = (0..k as u64).collect();
    let pulled = block_on(model.client().pull_rows::<f32>(&model.name, &ids))?;
    let values = (pulled.iter())
        .flat_map(|row| row[..dim].iter().map(|&v| f64::from(v)))
        .collect();
    let sizes = pulled.iter().map(|row| f64::from(row[dim])).collect();
    Ok((Centres::new(dim, values), sizes))
}

/// Each row's nearest centre of k-means model `model` (for `function`) and the Euclidean
/// distance to it.
pub fn nearest(model: &Model, function: &str, rows: &SparseRows) -> Result<Vec<(usize, f64)>> {
    let centres = pull(model, KMeans::of(model, function)?.k)?;
    Ok((0..rows.len())
        .map(|r| {
            let (c, squared) = centres.nearest(rows, r);
            (c, squared.sqrt())
        })
        .collect())
}

//! The margins of rows under a boosted model: every tree's offset, and the value of the leaf
//! each complete tree sends the row to.

use angel_client::runtime::block_on;

use super::grown;
use super::tree::Tree;
use crate::error::Result;
use crate::model::Model;
use crate::rows::SparseRows;

/// The margin of every row of `rows` under model `model`'s trees, after one pull of them.
pub fn margins(model: &Model, rows: &SparseRows) -> Result<Vec<f64>> {
    let mut ids = model.weight_row_ids();
    ids.truncate(block_on(grown::rows(model.client(), &model.name))? as usize);
    let pulled = block_on(model.client().pull_rows::<f64>(&model.name, &ids))?;
    let trees: Vec<Tree> = pulled
        .iter()
        .map(Vec::as_slice)
        .map(Tree::from_row)
        .collect();
    let offset: f64 = trees.iter().map(|t| t.offset).sum();
    let mut pairs: Vec<(u64, f64)> = Vec::new();
    Ok((0..rows.len())
        .map(|r| {
            pairs.clear();
            let keys = rows.keys(r).iter().enumerate();
            pairs.extend(keys.map(|(at, &k)| (k, rows.value(r, at))));
            pairs.sort_unstable_by_key(|p| p.0);
            let value = |f: u64| {
                let at = pairs.binary_search_by_key(&f, |p| p.0).ok()?;
                Some(pairs[at].1)
            };
            let leaves: f64 = (trees.iter().filter(|t| t.done))
                .map(|t| t.predict(value) - t.offset)
                .sum();
            offset + leaves
        })
        .collect())
}

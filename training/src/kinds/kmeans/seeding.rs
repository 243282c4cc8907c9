//! The first centres: rows as they are (drawn at random, or a table of them), or k-means++
//! (Arthur and Vassilvitskii) over rows the job holds: the first centre drawn uniformly, each
//! next one with probability proportional to a row's squared distance to the nearest centre
//! so far.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::centres::Centres;
use crate::error::{Result, input_err};
use crate::rows::SparseRows;

/// Row `r` of `rows` as `dim` coordinates.
fn dense(rows: &SparseRows, r: usize, dim: usize) -> Vec<f64> {
    let mut point = vec![0.0; dim];
    for (at, &k) in rows.keys(r).iter().enumerate() {
        point[k as usize] = rows.value(r, at);
    }
    point
}

/// The first `k` rows of `rows` as centres, `dim` coordinates each; an error when there are
/// fewer than `k` (`what` names where they came from).
pub fn first_rows(rows: &SparseRows, k: usize, dim: usize, what: &str) -> Result<Vec<f64>> {
    if rows.len() < k {
        return input_err(format!(
            "{what} has {} rows, fewer than the k = {k} centres it must give",
            rows.len()
        ));
    }
    Ok((0..k).flat_map(|r| dense(rows, r, dim)).collect())
}

/// `k` centres drawn from `rows` by k-means++, from `seed`.
pub fn plus_plus(rows: &SparseRows, k: usize, dim: usize, seed: u64) -> Result<Vec<f64>> {
    if rows.len() < k {
        return input_err(format!(
            "k-means++ needs at least k = {k} rows to draw centres from, the rows have {}",
            rows.len()
        ));
    }
    let mut random = StdRng::seed_from_u64(seed);
    let mut chosen = dense(rows, random.random_range(0..rows.len()), dim);
    let mut nearest = vec![f64::INFINITY; rows.len()];
    for _ in 1..k {
        let newest = Centres::new(dim, chosen[chosen.len() - dim..].to_vec());
        for (r, d) in nearest.iter_mut().enumerate() {
            *d = d.min(newest.nearest(rows, r).1);
        }
        let total: f64 = nearest.iter().sum();
        // Every row on a centre already: any row will do.
        let mut target = random.random::<f64>() * total;
        let pick = match total > 0.0 {
            true => nearest.iter().position(|&d| {
                target -= d;
                target < 0.0
            }),
            false => None,
        };
        let r = pick.unwrap_or_else(|| random.random_range(0..rows.len()));
        chosen.extend(dense(rows, r, dim));
    }
    Ok(chosen)
}

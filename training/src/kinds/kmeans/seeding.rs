//! The first centres: rows as they are (drawn at random, or a table of them), k-means++
//! (Arthur and Vassilvitskii) over rows the job holds (the first centre drawn uniformly, each
//! next one with probability proportional to a row's squared distance to the nearest centre
//! so far), or k-means||'s last step (Bahmani et al.): the candidates its rounds drew, each
//! weighted by the rows nearest it, reduced to `k` centres by weighted k-means++ and Lloyd's
//! iterations, as Spark MLlib does.

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

/// `k` centres drawn from `rows` by k-means++, from `seed`; with `weights`, each row counts as
/// that many (a row's chance is its weight times its squared distance).
pub fn plus_plus(
    rows: &SparseRows,
    weights: Option<&[f64]>,
    (k, dim): (usize, usize),
    seed: u64,
) -> Result<Vec<f64>> {
    if rows.len() < k {
        return input_err(format!(
            "k-means++ needs at least k = {k} rows to draw centres from, the rows have {}",
            rows.len()
        ));
    }
    let weight = |r: usize| weights.map_or(1.0, |w| w[r]);
    let mut random = StdRng::seed_from_u64(seed);
    let first = match weights {
        Some(weights) => draw(&mut random, weights.iter().copied()).unwrap_or(0),
        None => random.random_range(0..rows.len()),
    };
    let mut chosen = dense(rows, first, dim);
    let mut nearest = vec![f64::INFINITY; rows.len()];
    for _ in 1..k {
        let newest = Centres::new(dim, chosen[chosen.len() - dim..].to_vec());
        for (r, d) in nearest.iter_mut().enumerate() {
            *d = d.min(newest.nearest(rows, r).1);
        }
        let chances = nearest.iter().enumerate().map(|(r, d)| weight(r) * d);
        // Every row on a centre already: any row will do.
        let r = draw(&mut random, chances).unwrap_or_else(|| random.random_range(0..rows.len()));
        chosen.extend(dense(rows, r, dim));
    }
    Ok(chosen)
}

/// An index drawn with probability proportional to its `chance`; None when they are all 0.
fn draw(random: &mut StdRng, chances: impl Iterator<Item = f64> + Clone) -> Option<usize> {
    let total: f64 = chances.clone().sum();
    if total <= 0.0 {
        return None;
    }
    let mut target = random.random::<f64>() * total;
    let last = chances.clone().count() - 1;
    let found = chances.enumerate().position(|(_, c)| {
        target -= c;
        target < 0.0
    });
    // Rounding can leave the target a hair above the last chance.
    Some(found.unwrap_or(last))
}

/// Lloyd's iterations most candidate reductions need (Spark MLlib's for k-means||).
const REDUCE_ITERATIONS: usize = 30;

/// k-means||'s last step: `k` centres from its `candidates`, each weighted by the rows nearest
/// it: weighted k-means++ from `seed`, then weighted Lloyd's iterations until no candidate
/// changes centre (at most 30).
pub fn reduce(
    candidates: &SparseRows,
    weights: &[f64],
    k: usize,
    dim: usize,
    seed: u64,
) -> Result<Vec<f64>> {
    let mut centres = plus_plus(candidates, Some(weights), (k, dim), seed)?;
    let mut assigned = vec![usize::MAX; candidates.len()];
    for _ in 0..REDUCE_ITERATIONS {
        let current = Centres::new(dim, centres.clone());
        let nearest: Vec<usize> = (0..candidates.len())
            .map(|r| current.nearest(candidates, r).0)
            .collect();
        if nearest == assigned {
            break;
        }
        assigned = nearest;
        let mut sums = vec![0.0; k * dim];
        let mut mass = vec![0.0; k];
        for (r, &c) in assigned.iter().enumerate() {
            let w = weights[r];
            mass[c] += w;
            for (at, &key) in candidates.keys(r).iter().enumerate() {
                sums[c * dim + key as usize] += w * candidates.value(r, at);
            }
        }
        for c in (0..k).filter(|&c| mass[c] > 0.0) {
            let mean = sums[c * dim..(c + 1) * dim].iter().map(|s| s / mass[c]);
            centres.splice(c * dim..(c + 1) * dim, mean);
        }
    }
    Ok(centres)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Builder, ListBuilder};

    use super::*;

    /// Points on a line, one coordinate each.
    fn rows(xs: &[f64]) -> SparseRows {
        let mut list = ListBuilder::new(Float64Builder::new());
        for &x in xs {
            list.values().append_value(x);
            list.append(true);
        }
        let list: ArrayRef = Arc::new(list.finish());
        SparseRows::from_points("test", &list).unwrap()
    }

    /// Weighted candidates in two groups reduce to each group's weighted mean, whatever the
    /// seed draws first.
    #[test]
    fn candidates_reduce_to_their_weighted_means() {
        let candidates = rows(&[0.0, 2.0, 10.0, 12.0]);
        let weights = [3.0, 1.0, 1.0, 3.0];
        for seed in 0..20 {
            let mut got = reduce(&candidates, &weights, 2, 1, seed).unwrap();
            got.sort_by(f64::total_cmp);
            assert_eq!(got, vec![0.5, 11.5], "seed {seed}");
        }
    }

    /// A row of weight 0 is never drawn.
    #[test]
    fn weighted_plus_plus_draws_no_row_of_weight_zero() {
        let candidates = rows(&[0.0, 100.0, 1.0, 2.0]);
        for seed in 0..20 {
            let got = plus_plus(&candidates, Some(&[1.0, 0.0, 1.0, 1.0]), (3, 1), seed).unwrap();
            assert!(!got.contains(&100.0), "seed {seed}: {got:?}");
        }
    }
}

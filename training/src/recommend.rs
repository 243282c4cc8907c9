//! [`recommend`]: the top-k candidates of a ranking kind for each of a batch's subjects
//! (matrix factorization: the items with the highest predicted rating for a user), the ones a
//! row excludes (the items the user already rated) left out.

use std::cmp::Ordering;
use std::collections::HashSet;

use crate::error::{Result, input_err};
use crate::model::Model;

/// Most candidates a call ranks: their columns are pulled whole for each batch.
pub const MAX_CANDIDATES: u64 = 1 << 24;
/// Most candidates a row asks for.
pub const MAX_K: u64 = 100_000;

/// For each of `subjects` (ids from 0, e.g. users), the ids (from 0, e.g. items) of the `k`
/// best-scored candidates not in the row's `exclude`, best first (ties: lower id first).
pub fn recommend(
    model: &Model,
    function: &str,
    subjects: &[u64],
    k: usize,
    exclude: &[Vec<u64>],
) -> Result<Vec<Vec<u64>>> {
    let kind = &model.spec.kind;
    let Some(ranking) = kind.ranking() else {
        return input_err(format!(
            "{function}: model '{}' is a {} model; recommendations come from a matrix \
             factorization model (kind = 'mf')",
            model.name,
            kind.name()
        ));
    };
    let (own, candidates) = (ranking.subjects(), ranking.candidates());
    if let Some(r) = subjects.iter().position(|&s| s >= own.end - own.start) {
        return input_err(format!(
            "{function}: the user of row {r} of the batch is {}; model '{}' has user ids from \
             0 to {}",
            subjects[r],
            model.name,
            own.end - own.start - 1
        ));
    }
    let count = candidates.end - candidates.start;
    if count > MAX_CANDIDATES {
        return input_err(format!(
            "{function}: model '{}' has {count} items; recommending ranks at most \
             {MAX_CANDIDATES}",
            model.name
        ));
    }
    let items = columns(model, &candidates.collect::<Vec<_>>())?;
    let mut users: Vec<u64> = subjects.iter().map(|s| own.start + s).collect();
    users.sort_unstable();
    users.dedup();
    let user_columns = columns(model, &users)?;
    let best = subjects.iter().zip(exclude).map(|(s, exclude)| {
        let user = &user_columns[users.binary_search(&(own.start + s)).expect("pulled")];
        let exclude: HashSet<u64> = exclude.iter().copied().collect();
        let scored = (items.iter().enumerate())
            .filter(|(i, _)| !exclude.contains(&(*i as u64)))
            .map(|(i, item)| (ranking.score(user, item), i as u64));
        top(scored.collect(), k)
    });
    Ok(best.collect())
}

/// The weights of columns `keys`, one vector (a weight per weight row) per key.
fn columns(model: &Model, keys: &[u64]) -> Result<Vec<Vec<f32>>> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    let (pulled, _) = model.pull(keys, None)?;
    let (n, rows) = (keys.len(), pulled.len() / keys.len());
    Ok((0..n)
        .map(|j| (0..rows).map(|o| pulled[o * n + j]).collect())
        .collect())
}

/// The ids of the `k` best of `scored` (score, id), best first; ties and NaN go by id.
fn top(mut scored: Vec<(f64, u64)>, k: usize) -> Vec<u64> {
    let order =
        |a: &(f64, u64), b: &(f64, u64)| -> Ordering { b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)) };
    if k < scored.len() {
        scored.select_nth_unstable_by(k, order);
        scored.truncate(k);
    }
    scored.sort_unstable_by(order);
    scored.into_iter().map(|(_, id)| id).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_best_come_first_and_ties_go_by_id() {
        let scored = vec![(0.5, 0), (2.0, 1), (0.5, 2), (3.0, 3), (-1.0, 4)];
        assert_eq!(top(scored.clone(), 3), [3, 1, 0]);
        assert_eq!(top(scored.clone(), 10), [3, 1, 0, 2, 4]);
        assert_eq!(top(scored, 0), Vec::<u64>::new());
    }
}

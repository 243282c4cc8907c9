//! Sculley's mini-batch step ("Web-scale k-means clustering", 2010), per mini-batch as
//! scikit-learn's `MiniBatchKMeans` takes it: a centre `c` that was given `v` rows so far and
//! now `b` rows summing to `s` moves to `(v c + s) / (v + b)`, the mean of every row it was
//! given (a learning rate of `1 / size` per centre), and its size grows by `b`. A worker pushes
//! the move as an increment, so the steps of workers running at once add up on the servers.

use super::centres::{Assigned, Centres};

/// One mini-batch's increments: the centres it gave rows to, and for each its move (`dim`
/// values) then its size's growth.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The centres moved (rows of the model), in order.
    pub centres: Vec<u64>,
    /// `dim + 1` increments per centre moved.
    pub values: Vec<f32>,
}

/// The step that takes `centres` of sizes `sizes` (as a worker pulled them) to the means of
/// their rows after `assigned`, one mini-batch's assignment to them.
pub fn step(centres: &Centres, sizes: &[f64], assigned: &Assigned) -> Step {
    let width = assigned.sums.len() / centres.len().max(1);
    let dim = width - 1;
    let mut step = Step {
        centres: Vec::new(),
        values: Vec::new(),
    };
    for (c, sum) in assigned.sums.chunks(width).enumerate() {
        let given = sum[dim];
        if given == 0.0 {
            continue;
        }
        let rate = 1.0 / (sizes[c] + given);
        let centre = centres.centre(c);
        step.centres.push(c as u64);
        let moves = (sum[..dim].iter().zip(centre)).map(|(s, x)| ((s - given * x) * rate) as f32);
        step.values.extend(moves);
        step.values.push(given as f32);
    }
    step
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Builder, ListBuilder};

    use super::*;
    use crate::kinds::kmeans::points::Points;

    /// Dense rows of two coordinates.
    fn rows(points: &[[f64; 2]]) -> Points {
        let mut list = ListBuilder::new(Float64Builder::new());
        for p in points {
            list.values().append_slice(p);
            list.append(true);
        }
        let list: ArrayRef = Arc::new(list.finish());
        Points::read("test", "m", 2, &[list]).unwrap()
    }

    /// Applies one mini-batch to `centres`/`sizes` as the servers would add the step.
    fn apply(centres: &mut [f64], sizes: &mut [f64], batch: &[[f64; 2]]) {
        let pulled = Centres::new(2, centres.to_vec());
        let rows = rows(batch);
        let mut assigned = Assigned::new(sizes.len(), 2);
        assigned.add(&pulled, &rows, 0..rows.len());
        let step = step(&pulled, sizes, &assigned);
        for (at, &c) in step.centres.iter().enumerate() {
            let c = c as usize;
            for j in 0..2 {
                centres[2 * c + j] += f64::from(step.values[3 * at + j]);
            }
            sizes[c] += f64::from(step.values[3 * at + 2]);
        }
    }

    /// Each centre ends at the mean of every row it was given, batch after batch; a centre
    /// given no row stays.
    #[test]
    fn centres_move_to_the_mean_of_their_rows_so_far() {
        let mut centres = vec![0.0, 0.0, 10.0, 10.0];
        let mut sizes = [0.0, 0.0];
        apply(&mut centres, &mut sizes, &[[1.0, 1.0], [3.0, -1.0]]);
        assert_eq!(centres, vec![2.0, 0.0, 10.0, 10.0]);
        assert_eq!(sizes, [2.0, 0.0]);
        apply(
            &mut centres,
            &mut sizes,
            &[[5.0, 3.0], [9.0, 9.0], [12.0, 11.0]],
        );
        // Centre 0: the mean of (1, 1), (3, -1), (5, 3); centre 1: of (9, 9), (12, 11).
        let want = [3.0, 1.0, 10.5, 10.0];
        for (got, want) in centres.iter().zip(want) {
            assert!((got - want).abs() < 1e-6, "{centres:?}");
        }
        assert_eq!(sizes, [3.0, 2.0]);
    }
}

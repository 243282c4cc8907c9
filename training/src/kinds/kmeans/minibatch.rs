//! Sculley's mini-batch step ("Web-scale k-means clustering", 2010), per mini-batch as
//! scikit-learn's `MiniBatchKMeans` takes it: a centre `c` that was given `v` rows so far and
//! now `b` rows summing to `s` moves to `(v c + s) / (v + b)`, the mean of every row it was
//! given (a learning rate of `1 / size` per centre), and its size grows by `b`.
//!
//! A worker takes its steps on [`Local`], its copy of the centres, and pushes their sum as
//! increments once per record batch of rows, so the steps of workers running at once add up
//! on the servers, and a worker sees the others' steps at its next pull.

use super::centres::{Assigned, Centres};

/// A worker's copy of the centres and their sizes, and the moves of the steps it took on it
/// since it pulled them.
#[derive(Debug, Clone)]
pub struct Local {
    /// The centres, as moved by the steps taken.
    pub centres: Centres,
    /// Their sizes, as grown.
    pub sizes: Vec<f64>,
    /// Per centre: the summed move of its `dim` coordinates, then of its size.
    moved: Vec<f64>,
}

impl Local {
    /// The centres and sizes as pulled, nothing moved yet.
    pub fn new(centres: Centres, sizes: Vec<f64>) -> Self {
        let width = centres.centre(0).len() + 1;
        let moved = vec![0.0; sizes.len() * width];
        Local {
            centres,
            sizes,
            moved,
        }
    }

    /// Takes the step of one mini-batch, `assigned` to the centres as they are now.
    pub fn step(&mut self, assigned: &Assigned) {
        let width = self.moved.len() / self.sizes.len().max(1);
        let dim = width - 1;
        for (c, sum) in assigned.sums.chunks(width).enumerate() {
            let given = sum[dim];
            if given == 0.0 {
                continue;
            }
            let rate = 1.0 / (self.sizes[c] + given);
            let centre = self.centres.centre(c);
            let moves: Vec<f64> = (sum[..dim].iter().zip(centre))
                .map(|(s, x)| (s - given * x) * rate)
                .collect();
            self.centres.shift(c, &moves);
            self.sizes[c] += given;
            let moved = &mut self.moved[c * width..(c + 1) * width];
            moved.iter_mut().zip(&moves).for_each(|(m, v)| *m += v);
            moved[dim] += given;
        }
    }

    /// The moves since the pull, to push as increments: the centres moved (rows of the
    /// model), and for each its `dim + 1` increments.
    pub fn increments(&self) -> (Vec<u64>, Vec<f32>) {
        let width = self.moved.len() / self.sizes.len().max(1);
        let (mut rows, mut values) = (Vec::new(), Vec::new());
        for (c, moved) in self.moved.chunks(width).enumerate() {
            if moved[width - 1] > 0.0 {
                rows.push(c as u64);
                values.extend(moved.iter().map(|&v| v as f32));
            }
        }
        (rows, values)
    }
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

    /// One mini-batch's step on `local`.
    fn step(local: &mut Local, batch: &[[f64; 2]]) {
        let rows = rows(batch);
        let mut assigned = Assigned::new(local.sizes.len(), 2);
        assigned.add(&local.centres, &rows, 0..rows.len());
        local.step(&assigned);
    }

    /// Each centre ends at the mean of every row it was given, batch after batch, and the
    /// increments take the centres as pulled there; a centre given no row stays.
    #[test]
    fn centres_move_to_the_mean_of_their_rows_so_far() {
        let pulled = vec![0.0, 0.0, 10.0, 10.0];
        let mut local = Local::new(Centres::new(2, pulled.clone()), vec![0.0, 0.0]);
        step(&mut local, &[[1.0, 1.0], [3.0, -1.0]]);
        assert_eq!(local.centres.centre(0), &[2.0, 0.0]);
        assert_eq!(local.centres.centre(1), &[10.0, 10.0]);
        assert_eq!(local.sizes, [2.0, 0.0]);
        step(&mut local, &[[5.0, 3.0], [9.0, 9.0], [12.0, 11.0]]);
        // Centre 0: the mean of (1, 1), (3, -1), (5, 3); centre 1: of (9, 9), (12, 11).
        let want = [3.0, 1.0, 10.5, 10.0];
        let got: Vec<f64> = (0..2)
            .flat_map(|c| local.centres.centre(c).to_vec())
            .collect();
        assert_eq!(got, want);
        assert_eq!(local.sizes, [3.0, 2.0]);
        let (moved, values) = local.increments();
        assert_eq!(moved, [0, 1]);
        for (c, &row) in moved.iter().enumerate() {
            for d in 0..2 {
                let at = pulled[2 * row as usize + d] + f64::from(values[3 * c + d]);
                assert!((at - want[2 * row as usize + d]).abs() < 1e-6, "{values:?}");
            }
            assert_eq!(f64::from(values[3 * c + 2]), local.sizes[row as usize]);
        }
    }
}

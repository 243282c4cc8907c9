//! [`Centres`]: k-means's `k` centres as a worker pulled them, and each row's nearest one,
//! by `|x|^2 - 2 x.c + |c|^2`: over a sparse row's non-zeros only, so it costs its non-zeros
//! times `k`, not the dimension; over a dense point with a dot product the compiler turns
//! into vector instructions.

use std::ops::Range;

use super::points::Points;
use crate::rows::SparseRows;

/// See the module documentation.
#[derive(Debug, Clone)]
pub struct Centres {
    dim: usize,
    /// Centre after centre, `dim` coordinates each.
    values: Vec<f64>,
    /// Each centre's squared norm.
    norms: Vec<f64>,
}

impl Centres {
    /// `k` centres of `dim` coordinates from `values`, centre after centre.
    pub fn new(dim: usize, values: Vec<f64>) -> Self {
        let norms = values
            .chunks(dim.max(1))
            .map(|c| c.iter().map(|v| v * v).sum())
            .collect();
        Centres { dim, values, norms }
    }

    /// Number of centres.
    pub fn len(&self) -> usize {
        self.norms.len()
    }

    /// Whether there is no centre.
    pub fn is_empty(&self) -> bool {
        self.norms.is_empty()
    }

    /// Coordinates of centre `c`.
    pub fn centre(&self, c: usize) -> &[f64] {
        &self.values[c * self.dim..(c + 1) * self.dim]
    }

    /// Moves centre `c` by `by`.
    pub fn shift(&mut self, c: usize, by: &[f64]) {
        let centre = &mut self.values[c * self.dim..(c + 1) * self.dim];
        centre.iter_mut().zip(by).for_each(|(x, d)| *x += d);
        self.norms[c] = centre.iter().map(|v| v * v).sum();
    }

    /// Row `r`'s nearest centre (the first of equals) and its squared distance to it.
    pub fn nearest(&self, rows: &SparseRows, r: usize) -> (usize, f64) {
        let (keys, values) = (rows.keys(r), rows.values(r));
        let norm: f64 = values.map_or(keys.len() as f64, |v| v.iter().map(|v| v * v).sum());
        let mut best = (0, f64::INFINITY);
        for c in 0..self.len() {
            let centre = self.centre(c);
            let dot: f64 = match values {
                Some(values) => (keys.iter().zip(values))
                    .map(|(&k, v)| centre[k as usize] * v)
                    .sum(),
                None => keys.iter().map(|&k| centre[k as usize]).sum(),
            };
            // Rounding can take a distance of zero a little below it.
            let distance = (norm - 2.0 * dot + self.norms[c]).max(0.0);
            if distance < best.1 {
                best = (c, distance);
            }
        }
        best
    }

    /// Dense point `x`'s nearest centre (the first of equals) and its squared distance to it.
    pub fn nearest_dense(&self, x: &[f64]) -> (usize, f64) {
        let norm = dot(x, x);
        let mut best = (0, f64::INFINITY);
        for c in 0..self.len() {
            let distance = (norm - 2.0 * dot(x, self.centre(c)) + self.norms[c]).max(0.0);
            if distance < best.1 {
                best = (c, distance);
            }
        }
        best
    }
}

/// `a . b`, in eight running sums: independent sums the compiler can keep in vector lanes
/// (one running sum would fix the order of the additions).
fn dot(a: &[f64], b: &[f64]) -> f64 {
    let mut lanes = [0.0; 8];
    let (a8, b8) = (a.chunks_exact(8), b.chunks_exact(8));
    let tail: f64 = (a8.remainder().iter().zip(b8.remainder()))
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in a8.zip(b8) {
        for i in 0..8 {
            lanes[i] += x[i] * y[i];
        }
    }
    lanes.iter().sum::<f64>() + tail
}

/// What a pass of Lloyd's algorithm adds up: per centre, the coordinates of the rows nearest
/// it and their number, and the rows' summed squared distance to their centres (the
/// inertia).
#[derive(Debug, Clone)]
pub struct Assigned {
    dim: usize,
    /// Centre after centre: `dim` summed coordinates, then the count.
    pub sums: Vec<f64>,
    /// Summed squared distances.
    pub inertia: f64,
    /// Rows assigned.
    pub rows: u64,
}

impl Assigned {
    /// Nothing assigned yet to `k` centres of `dim` coordinates.
    pub fn new(k: usize, dim: usize) -> Self {
        Assigned {
            dim,
            sums: vec![0.0; k * (dim + 1)],
            inertia: 0.0,
            rows: 0,
        }
    }

    /// Assigns rows `range` of `rows` to their nearest centres.
    pub fn add(&mut self, centres: &Centres, rows: &Points, range: Range<usize>) {
        let width = self.dim + 1;
        for r in range {
            let (c, distance) = match rows {
                Points::Dense { values, dim } => {
                    let x = &values[r * dim..(r + 1) * dim];
                    let nearest = centres.nearest_dense(x);
                    let sum = &mut self.sums[nearest.0 * width..nearest.0 * width + dim];
                    sum.iter_mut().zip(x).for_each(|(s, v)| *s += v);
                    nearest
                }
                Points::Sparse(rows) => {
                    let nearest = centres.nearest(rows, r);
                    let sum = &mut self.sums[nearest.0 * width..(nearest.0 + 1) * width];
                    match rows.values(r) {
                        Some(values) => (rows.keys(r).iter().zip(values))
                            .for_each(|(&k, v)| sum[k as usize] += v),
                        None => rows.keys(r).iter().for_each(|&k| sum[k as usize] += 1.0),
                    }
                    nearest
                }
            };
            self.sums[c * width + self.dim] += 1.0;
            self.inertia += distance;
            self.rows += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Float64Builder, ListBuilder, UInt64Builder};

    use super::*;

    /// Rows of (index, value) pairs.
    fn rows(rows: &[&[(u64, f64)]]) -> SparseRows {
        let (mut idx, mut val) = (
            ListBuilder::new(UInt64Builder::new()),
            ListBuilder::new(Float64Builder::new()),
        );
        for row in rows {
            for &(k, v) in *row {
                idx.values().append_value(k);
                val.values().append_value(v);
            }
            idx.append(true);
            val.append(true);
        }
        let (idx, val): (ArrayRef, ArrayRef) = (Arc::new(idx.finish()), Arc::new(val.finish()));
        SparseRows::from_arrays("test", None, &idx, Some(&val)).unwrap()
    }

    /// Nearest centres and squared distances against the definition, sparse and dense alike,
    /// and Lloyd's sums.
    #[test]
    fn rows_go_to_their_nearest_centre() {
        let centres = Centres::new(3, vec![0.0, 0.0, 0.0, 4.0, 0.0, 1.0]);
        let rows = rows(&[&[(0, 1.0)], &[(0, 3.0), (2, 2.0)], &[]]);
        let distance =
            |r: &[f64], c: &[f64]| -> f64 { r.iter().zip(c).map(|(a, b)| (a - b) * (a - b)).sum() };
        let dense = [[1.0, 0.0, 0.0], [3.0, 0.0, 2.0], [0.0, 0.0, 0.0]];
        for (r, row) in dense.iter().enumerate() {
            let (c, d) = centres.nearest(&rows, r);
            assert_eq!(centres.nearest_dense(row), (c, d), "row {r}");
            let want = (0..2)
                .map(|c| distance(row, centres.centre(c)))
                .enumerate()
                .fold(
                    (0, f64::INFINITY),
                    |b, (c, d)| if d < b.1 { (c, d) } else { b },
                );
            assert_eq!(c, want.0, "row {r}");
            assert!((d - want.1).abs() < 1e-12, "row {r}: {d} vs {}", want.1);
        }
        let (n, sparse) = (rows.len(), Points::Sparse(rows));
        let values: Vec<f64> = dense.iter().flatten().copied().collect();
        let dense = Points::Dense {
            values: values.into(),
            dim: 3,
        };
        for points in [sparse, dense] {
            let mut assigned = Assigned::new(2, 3);
            assigned.add(&centres, &points, 0..n);
            assert_eq!(assigned.sums, vec![1.0, 0.0, 0.0, 2.0, 3.0, 0.0, 2.0, 1.0]);
            assert_eq!(assigned.rows, 3);
            assert!((assigned.inertia - (1.0 + 2.0)).abs() < 1e-12);
        }
    }
}

//! [`History`]: L-BFGS's last `m` pairs `(s_i, y_i)` (steps and gradient changes) as vectors
//! on the servers, beside the weights, and the two-loop recursion (Nocedal and Wright,
//! algorithm 7.4) that turns the gradient into the direction `d = -H g` through PS functions:
//! every vector stays on the servers; only the recursion's scalars (a dot product per pair and
//! pass) come back to the job.
//!
//! Pair `i`'s `s` and `y` are the vectors `PAIRS + 2 (i mod m)` and the one after
//! ([`super::vectors`]).

use std::collections::VecDeque;

use super::vectors::{DIRECTION, GRADIENT, NEXT_GRADIENT, PAIRS, POINT, Vector, Vectors, WEIGHTS};
use crate::error::Result;

/// Rows a history of `m` pairs keeps after each output's weights: the model's optimizer
/// state rows.
pub fn state_rows(m: usize) -> usize {
    PAIRS as usize - 1 + 2 * m
}

/// One pair's slot and its `rho = 1 / (y . s)`.
#[derive(Debug, Clone, Copy)]
struct Pair {
    slot: u64,
    rho: f64,
}

impl Pair {
    fn s(self) -> Vector {
        PAIRS + 2 * self.slot
    }

    fn y(self) -> Vector {
        PAIRS + 2 * self.slot + 1
    }
}

/// See the module documentation.
#[derive(Debug)]
pub struct History {
    vectors: Vectors,
    m: usize,
    /// The pairs kept, oldest first.
    pairs: VecDeque<Pair>,
    /// Pairs added so far (the next one's slot).
    added: u64,
    /// The initial Hessian's scale, `s . y / y . y` of the newest pair.
    gamma: f64,
}

impl History {
    /// An empty history of `m` pairs among `vectors`.
    pub fn new(vectors: Vectors, m: usize) -> Self {
        History {
            vectors,
            m: m.max(1),
            pairs: VecDeque::new(),
            added: 0,
            gamma: 1.0,
        }
    }

    /// Pairs kept.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// Whether no pair is kept.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// Forgets every pair: the next direction is the steepest descent.
    pub fn clear(&mut self) {
        self.pairs.clear();
        self.gamma = 1.0;
    }

    /// Writes `d = -H g` into [`DIRECTION`]: the two-loop recursion over the pairs kept, from
    /// the gradient `g` in vector `from` ([`GRADIENT`]; OWL-QN: the pseudo-gradient), `d = -g`
    /// with no pair yet.
    pub async fn direction(&self, from: Vector) -> Result<()> {
        let v = &self.vectors;
        v.copy(from, DIRECTION).await?;
        let mut alphas = Vec::with_capacity(self.pairs.len());
        for &pair in self.pairs.iter().rev() {
            let alpha = pair.rho * v.dot(pair.s(), DIRECTION).await?;
            v.axpy(-alpha, pair.y(), DIRECTION).await?;
            alphas.push(alpha);
        }
        v.scale(DIRECTION, -self.gamma).await?;
        // The sign is taken out: the second loop runs on -r, so its corrections flip too.
        for (&pair, alpha) in self.pairs.iter().zip(alphas.into_iter().rev()) {
            let beta = pair.rho * v.dot(pair.y(), DIRECTION).await?;
            v.axpy(-alpha - beta, pair.s(), DIRECTION).await?;
        }
        Ok(())
    }

    /// After a step from [`POINT`] to the [`WEIGHTS`] whose new gradient is in
    /// [`NEXT_GRADIENT`]: keeps the pair `s = w - x`, `y = g_next - g` (unless `y . s` is not
    /// positive, which would break the Hessian's positive definiteness: then the pair is
    /// skipped), dropping the oldest beyond `m`, and moves the new gradient into
    /// [`GRADIENT`]. Returns whether the pair was kept.
    pub async fn update(&mut self) -> Result<bool> {
        let v = &self.vectors;
        let pair = Pair {
            slot: self.added % self.m as u64,
            rho: 0.0,
        };
        if self.pairs.len() == self.m {
            self.pairs.pop_front();
        }
        v.copy(WEIGHTS, pair.s()).await?;
        v.axpy(-1.0, POINT, pair.s()).await?;
        v.copy(NEXT_GRADIENT, pair.y()).await?;
        v.axpy(-1.0, GRADIENT, pair.y()).await?;
        let (ys, yy) = (
            v.dot(pair.y(), pair.s()).await?,
            v.dot(pair.y(), pair.y()).await?,
        );
        v.copy(NEXT_GRADIENT, GRADIENT).await?;
        if !(ys > 0.0 && yy > 0.0) {
            return Ok(false);
        }
        self.pairs.push_back(Pair {
            rho: 1.0 / ys,
            ..pair
        });
        self.added += 1;
        self.gamma = ys / yy;
        Ok(true)
    }
}

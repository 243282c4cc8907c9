//! [`Worker`]: one worker's rows as the trees are grown, kept for the whole statement: their
//! bins, targets and margins, each row's gradient and hessian for the tree being grown, and
//! the node each row has reached in it.
//!
//! A statement's rounds take a worker through: its sketch (round 0), then per tree the root's
//! histogram and one layer's histograms per round, and at each tree's end the tree's values
//! added to its rows' margins. Every step here is local; [`super::task`] moves the counts.

use super::Gbdt;
use super::binned::Binned;
use super::sample;
use super::sketch::{Counts, Cuts};
use super::tree::{self, Node, Tree};
use crate::error::Result;
use crate::kinds::Gradient;
use crate::rows::SparseRows;

/// See the module documentation.
#[derive(Debug)]
pub struct Worker {
    /// The rows as read, until the cuts are known.
    rows: Option<SparseRows>,
    binned: Binned,
    targets: Vec<f64>,
    margins: Vec<f64>,
    grad: Vec<f64>,
    hess: Vec<f64>,
    /// The node each row has reached in the tree being grown.
    node: Vec<u32>,
    /// Each row's identity for the samples' draws ([`sample::row_id`]).
    ids: Vec<u64>,
    /// The features the tree being grown samples (`None`: all).
    features: Option<Vec<bool>>,
    /// The tree being grown and the layer whose histograms it built last; `None` before the
    /// first tree.
    pub at: Option<(usize, usize)>,
}

impl Worker {
    /// A worker of `rows` (checked) for model `gbdt`.
    pub fn new(gbdt: &Gbdt, rows: SparseRows) -> Self {
        let targets = (0..rows.len())
            .map(|r| gbdt.target(rows.label(r)))
            .collect();
        let ids = (0..rows.len())
            .map(|r| {
                let pairs = rows.keys(r).iter().enumerate();
                sample::row_id(rows.label(r), pairs.map(|(at, &k)| (k, rows.value(r, at))))
            })
            .collect();
        Worker {
            rows: Some(rows),
            binned: Binned::default(),
            targets,
            margins: Vec::new(),
            grad: Vec::new(),
            hess: Vec::new(),
            node: Vec::new(),
            ids,
            features: None,
            at: None,
        }
    }

    /// Number of rows.
    pub fn len(&self) -> usize {
        self.targets.len()
    }

    /// True when the worker has no rows.
    pub fn is_empty(&self) -> bool {
        self.targets.is_empty()
    }

    /// The sketch of its rows' values, feature by feature, and the sum of their targets.
    pub fn sketch(&self) -> (Counts, f64) {
        let mut counts = Counts::default();
        if let Some(rows) = &self.rows {
            for r in 0..rows.len() {
                for (at, &f) in rows.keys(r).iter().enumerate() {
                    counts.add(f, rows.value(r, at));
                }
            }
        }
        (counts, self.targets.iter().sum())
    }

    /// Bins its rows under `cuts` and starts every margin at `base`.
    pub fn start(&mut self, function: &str, cuts: &Cuts, base: f64) -> Result<()> {
        if let Some(rows) = self.rows.take() {
            self.binned = Binned::new(function, &rows, cuts)?;
        }
        self.margins = vec![base; self.len()];
        Ok(())
    }

    /// The summed loss of its rows at their margins.
    pub fn loss(&self, gbdt: &Gbdt) -> f64 {
        let mut d = [0.0];
        (self.targets.iter().zip(&self.margins))
            .map(|(&y, &m)| gbdt.objective.loss(y, &[m], &mut d))
            .sum()
    }

    /// Starts tree `t` of a model of `dim` features: every row at the root, with its loss's
    /// gradient and hessian at its margin (zero for a row the tree does not sample); returns
    /// their sums (the root's totals).
    pub fn begin_tree(&mut self, gbdt: &Gbdt, t: usize, dim: u64) -> (f64, f64) {
        let mut d = [0.0];
        let sampled = |r: usize| sample::keeps_row(self.ids[r], gbdt.seed, t, gbdt.subsample);
        let (grad, hess) = (0..self.len())
            .map(|r| match sampled(r) {
                true => {
                    gbdt.objective
                        .loss(self.targets[r], &[self.margins[r]], &mut d);
                    (d[0], gbdt.hessian(self.margins[r]))
                }
                false => (0.0, 0.0),
            })
            .unzip();
        (self.grad, self.hess) = (grad, hess);
        self.features = sample::features(gbdt.seed, t, dim, gbdt.colsample_bytree);
        self.node = vec![0; self.len()];
        self.at = Some((t, 0));
        (self.grad.iter().sum(), self.hess.iter().sum())
    }

    /// Ends a tree: each row goes down `tree` to its leaf, whose value joins its margin.
    pub fn finish_tree(&mut self, tree: &Tree) {
        for r in 0..self.len() {
            let leaf = tree.leaf_from(self.node[r] as usize, |n| self.goes_left(r, n));
            self.node[r] = leaf as u32;
            self.margins[r] += tree.value(leaf);
        }
    }

    /// Moves the rows at layer `layer`'s splits of `tree` to their children; returns the
    /// children whose histograms the workers build (one per split, [`Tree::built_child`]).
    pub fn descend(&mut self, tree: &Tree, layer: usize) -> Vec<usize> {
        let splits: Vec<usize> = tree::layer(layer)
            .filter(|&n| matches!(tree.nodes.get(n), Some(Node::Split { .. })))
            .collect();
        for r in 0..self.len() {
            let node = self.node[r] as usize;
            if tree::layer(layer).contains(&node) {
                self.node[r] = tree.step(node, |n| self.goes_left(r, n)) as u32;
            }
        }
        splits.iter().map(|&n| tree.built_child(n)).collect()
    }

    fn goes_left(&self, r: usize, node: &Node) -> bool {
        match *node {
            Node::Split {
                feature,
                bin,
                default_left,
                ..
            } => self
                .binned
                .bin(r, feature)
                .map_or(default_left, |b| b <= bin),
            Node::Leaf { .. } => true,
        }
    }

    /// The gradient/hessian histograms of nodes `nodes` over `dim` features of `bins` bins,
    /// node after node ([`super::grower`]'s layout: feature `f`'s bin `b` at `2 (f bins + b)`).
    pub fn histograms(&self, nodes: &[usize], dim: u64, bins: usize) -> Vec<f64> {
        let width = dim as usize * bins * 2;
        // Each node's place in the result, by node (nodes are numbered from 0 per tree).
        let mut slots = vec![usize::MAX; nodes.iter().max().map_or(0, |&n| n + 1)];
        for (s, &n) in nodes.iter().enumerate() {
            slots[n] = s * width;
        }
        let mut hist = vec![0.0; nodes.len() * width];
        for r in 0..self.len() {
            let base = slots
                .get(self.node[r] as usize)
                .copied()
                .unwrap_or(usize::MAX);
            // A row the tree does not sample (the only rows of no hessian) adds nothing.
            if base == usize::MAX || self.hess[r] == 0.0 {
                continue;
            }
            let (features, row_bins) = self.binned.row(r);
            for (&f, &b) in features.iter().zip(row_bins) {
                if self.features.as_ref().is_some_and(|m| !m[f as usize]) {
                    continue;
                }
                let c = base + 2 * (f as usize * bins + usize::from(b));
                hist[c] += self.grad[r];
                hist[c + 1] += self.hess[r];
            }
        }
        hist
    }
}

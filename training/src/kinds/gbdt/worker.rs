//! [`TreeWorker`]: one worker's rows as the trees are grown, kept for the whole statement: their
//! bins, targets and margins, each row's gradient and hessian for the tree being grown, and
//! the node each row has reached in it.
//!
//! A statement's rounds take a worker through: its sketch (round 0), then per tree the root's
//! histogram and one layer's histograms per round, and at each tree's end the tree's values
//! added to its rows' margins. Every step here is local; the task (`task.rs`) moves the counts.

use super::Gbdt;
use super::binned::Binned;
use super::partition::Partition;
use super::sample;
use super::sketch::{Counts, Cuts};
use super::tree::{self, Node, Tree};
use crate::error::Result;
use crate::kinds::Gradient;
use crate::rows::SparseRows;

/// See the module documentation.
#[derive(Debug)]
pub struct TreeWorker {
    /// The rows as read, until the cuts are known.
    rows: Option<SparseRows>,
    binned: Binned,
    targets: Vec<f64>,
    margins: Vec<f64>,
    grad: Vec<f64>,
    hess: Vec<f64>,
    /// The rows at each node of the tree being grown.
    partition: Partition,
    /// All zeros between two histograms: where one is summed.
    scratch: Vec<f64>,
    /// Each row's identity for the samples' draws ([`sample::row_id`]).
    ids: Vec<u64>,
    /// The features the tree being grown samples (`None`: all).
    features: Option<Vec<bool>>,
    /// The tree being grown and the layer whose histograms it built last; `None` before the
    /// first tree.
    pub at: Option<(usize, usize)>,
    /// The statement's round it last took part in.
    pub round: u32,
}

impl TreeWorker {
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
        TreeWorker {
            rows: Some(rows),
            binned: Binned::default(),
            targets,
            margins: Vec::new(),
            grad: Vec::new(),
            hess: Vec::new(),
            partition: Partition::default(),
            scratch: Vec::new(),
            ids,
            features: None,
            at: None,
            round: 0,
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
        self.partition.reset(self.len(), tree::nodes(gbdt.depth));
        self.at = Some((t, 0));
        (self.grad.iter().sum(), self.hess.iter().sum())
    }

    /// Ends a tree: the rows go down `tree` to their leaves (nodes in heap order come after
    /// their parents), whose values join their margins.
    pub fn finish_tree(&mut self, tree: &Tree) {
        for node in 0..tree.nodes.len() {
            self.split(tree, node);
            for &r in self.partition.rows(node) {
                self.margins[r as usize] += tree.value(node);
            }
        }
    }

    /// Brings a started worker (binned; margins at the base, or kept from an earlier round of
    /// the statement) to where the rounds that grew `trees` (every tree's row as the servers
    /// hold it now, the first one begun) left the workers that took part in them: the
    /// complete trees' values in its margins, and the tree being grown begun and descended to
    /// the layer the next round descends; a tree just completed is left for the next round to
    /// finish, as it is after its last round. False, changing nothing, when the worker is
    /// past that point (it was kept from another statement).
    pub fn catch_up(&mut self, gbdt: &Gbdt, trees: &[Tree], dim: u64) -> bool {
        let t = trees.iter().position(|t| !t.done).unwrap_or(trees.len());
        let layers = trees.get(t).map_or(0, Tree::split_layers);
        // The tree the next round goes on with (the one being grown, or the last complete),
        // and the layer it descends.
        let Some(current) = t.checked_sub(usize::from(layers == 0)) else {
            return self.at.is_none();
        };
        // A complete tree is finished by the next round however far its descent went.
        let (next, complete) = (layers.saturating_sub(1), layers == 0);
        match self.at {
            Some((t0, l0)) if t0 > current || (t0 == current && !complete && l0 > next) => {
                return false;
            }
            Some((t0, _)) if t0 == current && complete => return true,
            Some((t0, l0)) if t0 == current => {
                for layer in l0..next {
                    self.descend(&trees[current], layer);
                }
            }
            at => {
                // The tree it was growing ends (a split node's rows are gone from it, so
                // finishing picks up where its descent stopped); those after it replay whole.
                let first = at.map_or(0, |(t0, _)| {
                    self.finish_tree(&trees[t0]);
                    t0 + 1
                });
                for tree in &trees[first..current] {
                    self.partition.reset(self.len(), tree.nodes.len());
                    self.finish_tree(tree);
                }
                self.begin_tree(gbdt, current, dim);
                for layer in 0..next {
                    self.descend(&trees[current], layer);
                }
            }
        }
        self.at = Some((current, next));
        true
    }

    /// Whether its rows are binned (it took part in a round after the sketch's).
    pub fn started(&self) -> bool {
        self.rows.is_none()
    }

    /// Moves the rows at layer `layer`'s splits of `tree` to their children; returns the
    /// children whose histograms the workers build (one per split, [`Tree::built_child`]).
    pub fn descend(&mut self, tree: &Tree, layer: usize) -> Vec<usize> {
        let splits: Vec<usize> = tree::layer(layer)
            .filter(|&n| matches!(tree.nodes.get(n), Some(Node::Split { .. })))
            .collect();
        for &node in &splits {
            self.split(tree, node);
        }
        splits.iter().map(|&n| tree.built_child(n)).collect()
    }

    /// Moves the rows at `node` to its children when it is a split of `tree`.
    fn split(&mut self, tree: &Tree, node: usize) {
        if let Some(&Node::Split {
            feature,
            bin,
            default_left,
            ..
        }) = tree.nodes.get(node)
        {
            let column = self.binned.column(feature);
            let goes_left = |r| column.bin(r).map_or(default_left, |b| b <= bin);
            self.partition.split(node, goes_left);
        }
    }

    /// The gradient/hessian histograms of nodes `nodes` over `dim` features of `bins` bins
    /// ([`super::grower`]'s layout: feature `f`'s bin `b` at columns `2 (f bins + b)` and the
    /// one after), as a push sends them: the columns where some node has a value, and the
    /// values there, node after node.
    pub fn histograms(&mut self, nodes: &[usize], dim: u64, bins: usize) -> Histograms {
        let width = dim as usize * bins * 2;
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.resize(width, 0.0);
        let per_node: Vec<Vec<(u32, f64, f64)>> = (nodes.iter())
            .map(|&node| self.histogram(node, &mut scratch))
            .collect();
        self.scratch = scratch;
        Histograms::of(&per_node)
    }

    /// The gradient and hessian sums of the rows at `node`, by slot, ascending, over the slots
    /// some row has; `hist` is all zeros before and after (a wide model's histogram is large,
    /// and a node's rows touch a small part of it).
    fn histogram(&self, node: usize, hist: &mut [f64]) -> Vec<(u32, f64, f64)> {
        let mut touched = Vec::new();
        for &r in self.partition.rows(node) {
            let (g, h) = (self.grad[r as usize], self.hess[r as usize]);
            // A row the tree does not sample (the only rows of no hessian) adds nothing.
            if h == 0.0 {
                continue;
            }
            let slots = self.binned.slots(r as usize).iter();
            let mut add = |&slot: &u32| {
                let c = 2 * slot as usize;
                if hist[c + 1] == 0.0 {
                    touched.push(slot);
                }
                hist[c] += g;
                hist[c + 1] += h;
            };
            match &self.features {
                None => slots.for_each(&mut add),
                Some(mask) => slots
                    .filter(|&&s| mask[self.binned.feature(s)])
                    .for_each(&mut add),
            }
        }
        // A slot whose sum is still 0 after a row is listed again by the next.
        touched.sort_unstable();
        touched.dedup();
        (touched.into_iter())
            .map(|s| {
                let c = 2 * s as usize;
                let sums = (s, hist[c], hist[c + 1]);
                (hist[c], hist[c + 1]) = (0.0, 0.0);
                sums
            })
            .collect()
    }
}

/// Histograms as a push sends them: see [`TreeWorker::histograms`].
#[derive(Debug, Default, PartialEq)]
pub struct Histograms {
    /// Columns, ascending.
    pub keys: Vec<u64>,
    /// `keys.len()` values per node, node after node.
    pub values: Vec<f64>,
}

impl Histograms {
    /// The push of nodes' sums by slot (each ascending).
    fn of(per_node: &[Vec<(u32, f64, f64)>]) -> Self {
        let mut slots: Vec<u32> = per_node.iter().flatten().map(|p| p.0).collect();
        slots.sort_unstable();
        slots.dedup();
        let keys = (slots.iter())
            .flat_map(|&s| [2 * u64::from(s), 2 * u64::from(s) + 1])
            .collect();
        let mut values = Vec::with_capacity(2 * slots.len() * per_node.len());
        for sums in per_node {
            let mut sums = sums.iter().peekable();
            for &s in &slots {
                match sums.next_if(|p| p.0 == s) {
                    Some(&(_, g, h)) => values.extend([g, h]),
                    None => values.extend([0.0, 0.0]),
                }
            }
        }
        Histograms { keys, values }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_has_the_columns_of_every_nodes_slots() {
        let per_node = vec![
            vec![(1, 0.5, 1.0), (4, -1.0, 2.0)],
            vec![(4, 3.0, 1.0)],
            vec![],
        ];
        let push = Histograms::of(&per_node);
        assert_eq!(push.keys, [2, 3, 8, 9]);
        let values = [[0.5, 1.0, -1.0, 2.0], [0.0, 0.0, 3.0, 1.0], [0.0; 4]];
        assert_eq!(push.values, values.concat());
        assert_eq!(Histograms::of(&[]), Histograms::default());
    }

    fn split(feature: u64, bin: usize, default_left: bool) -> Node {
        let (threshold, cover, gain) = (0.0, 1.0, 1.0);
        Node::Split {
            feature,
            bin,
            threshold,
            default_left,
            cover,
            gain,
        }
    }

    fn leaf(value: f64) -> Node {
        Node::Leaf { value, cover: 1.0 }
    }

    /// The three trees of depth 2 a statement grows, as the servers hold them at each of its
    /// rounds after the sketch's (rounds 1 to 7), each tree written layer by layer.
    fn rounds() -> Vec<Vec<Tree>> {
        let empty = || vec![leaf(0.0); tree::nodes(2)];
        let tree = |done, offset, nodes| Tree {
            done,
            offset,
            nodes,
        };
        let mut first = empty();
        first[0] = split(0, 1, true);
        let mut first_done = first.clone();
        first_done[1] = split(1, 0, false);
        (first_done[2], first_done[3], first_done[4]) = (leaf(0.25), leaf(-0.5), leaf(0.125));
        let mut second = empty();
        second[0] = split(1, 2, false);
        let mut second_done = second.clone();
        (second_done[1], second_done[2]) = (leaf(-0.0625), leaf(0.375));
        let mut third_done = empty();
        third_done[0] = leaf(0.03125);
        let t0 = [
            tree(false, 0.5, empty()),
            tree(false, 0.5, first),
            tree(true, 0.5, first_done),
        ];
        let t1 = [
            tree(false, 0.0, empty()),
            tree(false, 0.0, second),
            tree(true, 0.0, second_done),
        ];
        let t2 = [tree(false, 0.0, empty()), tree(true, 0.0, third_done)];
        let state =
            |a: usize, b: usize, c: usize| vec![t0[a].clone(), t1[b].clone(), t2[c].clone()];
        vec![
            state(0, 0, 0),
            state(1, 0, 0),
            state(2, 0, 0),
            state(2, 1, 0),
            state(2, 2, 0),
            state(2, 2, 1),
        ]
    }

    /// 40 rows of two features (some missing), binned into 4 bins, started at margin 0.5.
    fn started(gbdt: &Gbdt) -> TreeWorker {
        use arrow::array::{ArrayRef, Float64Array, ListArray};
        use arrow::datatypes::{Float64Type, Int64Type};
        use std::sync::Arc;
        let keys = |r: i64| match r % 3 {
            0 => vec![Some(0), Some(1)],
            1 => vec![Some(0)],
            _ => vec![Some(1)],
        };
        let values = |r: i64| {
            keys(r)
                .iter()
                .map(|k| Some((r * 7 + k.unwrap() * 3) as f64 % 10.0))
                .collect::<Vec<_>>()
        };
        let idx: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Int64Type, _, _>(
            (0..40).map(|r| Some(keys(r))),
        ));
        let val: ArrayRef = Arc::new(ListArray::from_iter_primitive::<Float64Type, _, _>(
            (0..40).map(|r| Some(values(r))),
        ));
        let labels: ArrayRef = Arc::new(Float64Array::from_iter_values(
            (0..40).map(|r| f64::from(r % 2 == 0)),
        ));
        let rows = SparseRows::from_arrays("t", Some(&labels), &idx, Some(&val)).unwrap();
        let cuts = Cuts {
            bins: 4,
            values: vec![2.0, 5.0, 7.0, 1.0, 4.0, 8.0],
        };
        let mut worker = TreeWorker::new(gbdt, rows);
        worker.start("t", &cuts, 0.5).unwrap();
        worker
    }

    /// What a round does to a worker locally (`TreeTask::grow_round` without the pushes).
    fn grow_round(worker: &mut TreeWorker, gbdt: &Gbdt, trees: &[Tree]) {
        match worker.at {
            None => {
                worker.begin_tree(gbdt, 0, 2);
            }
            Some((t, _)) if trees[t].done => {
                worker.finish_tree(&trees[t]);
                match t + 1 < trees.len() {
                    true => drop(worker.begin_tree(gbdt, t + 1, 2)),
                    false => worker.at = Some((trees.len(), 0)),
                }
            }
            Some((t, layer)) => {
                worker.descend(&trees[t], layer);
                worker.at = Some((t, layer + 1));
            }
        }
    }

    fn same(a: &TreeWorker, b: &TreeWorker, what: &str) {
        assert_eq!(a.at, b.at, "{what}: where");
        assert_eq!(a.margins, b.margins, "{what}: margins");
        assert_eq!((&a.grad, &a.hess), (&b.grad, &b.hess), "{what}: gradients");
        for node in 0..tree::nodes(2) {
            assert_eq!(
                a.partition.rows(node),
                b.partition.rows(node),
                "{what}: node {node}"
            );
        }
    }

    /// A worker brought forward to any round, from a fresh start or from any earlier round,
    /// is the worker that took part in every round: the same place in the trees, margins,
    /// gradients and rows per node.
    #[test]
    fn a_worker_brought_forward_is_the_one_that_ran_every_round() {
        let gbdt = Gbdt {
            depth: 2,
            ..Gbdt::default()
        };
        let rounds = rounds();
        // The worker that ran every round through round `last` (of `rounds`).
        let ran = |last: usize| {
            let mut worker = started(&gbdt);
            for trees in &rounds[..=last] {
                grow_round(&mut worker, &gbdt, trees);
            }
            worker
        };
        for (r, trees) in rounds.iter().enumerate() {
            let reference = ran(r);
            let mut fresh = started(&gbdt);
            assert!(fresh.catch_up(&gbdt, trees, 2));
            grow_round(&mut fresh, &gbdt, trees);
            same(&fresh, &reference, &format!("round {r}, fresh"));
            for earlier in 0..r {
                let mut kept = ran(earlier);
                assert!(kept.catch_up(&gbdt, trees, 2));
                grow_round(&mut kept, &gbdt, trees);
                same(
                    &kept,
                    &reference,
                    &format!("round {r}, kept from {earlier}"),
                );
            }
        }
        // A worker past the trees (another statement's) is left as it is.
        let mut ahead = started(&gbdt);
        ahead.at = Some((2, 0));
        assert!(!ahead.catch_up(&gbdt, &rounds[0], 2));
    }
}

//! [`Grower`]: the statement's side of growing a boosted model, between the workers' rounds.
//!
//! After the workers' sketch round it cuts every feature at its quantiles; after each round
//! of histograms it finishes one layer of the tree being grown: it derives each built
//! child's sibling on the servers (the parent's histogram less the built one: the
//! subtraction trick, so workers build only the child of smaller cover), asks the servers for
//! each node's best split (`best_split`, which answers only the best candidate of each
//! partition), and pushes the layer's splits and leaves into the tree's row. The next round's
//! workers read them there.
//!
//! Beside the model's matrix (a row per tree, [`super::tree`]) a statement uses:
//!
//! - `<model>.sketch`: the merged quantile sketch, a count per feature and bucket;
//! - `<model>.cuts`: each feature's `bins - 1` cuts (kept with the model);
//! - `<model>.histograms`: a row per node of two layers (the parents' and the children's),
//!   feature `f`'s bin `b` at columns `2 (f bins + b)` (gradient) and the next (hessian),
//!   partitioned by whole features; dense up to 2^24 values, sparse beyond (wide sparse data);
//! - `<model>.totals`: the root's gradient and hessian sums (row 0), and the number of the
//!   round the workers run (row 1), from which a worker that kept nothing from the round
//!   before rebuilds its state (on Ballista, or after its executor died).

use std::sync::Arc;

use angel_client::{MatrixSpec, NodeSplit, PsClient, PushOptions, ValueType};
use futures::future::try_join_all;

use super::Gbdt;
use super::sketch::{self, Cuts};
use super::tree::{self, Field};
use crate::error::{Result, option_err};

/// Most values one node's histogram may have (1 GiB): a worker builds it whole.
const MAX_NODE_VALUES: u64 = 1 << 27;
/// Most values the histograms keep dense on the servers (128 MiB); wider ones are kept
/// sparse, as many values as the workers' rows fill (a wide sparse data set fills few).
const MAX_DENSE_HISTOGRAMS: u64 = 1 << 24;
/// Most column blocks of the histograms: the servers' share of the split finding.
const HISTOGRAM_BLOCKS: u64 = 16;
/// Features of the first read of the sketch.
const SKETCH_FEATURES_PER_CALL: u64 = 1024;
/// About how many (bucket, count) pairs a later read of the sketch answers (32 MiB): an
/// eighth of a message's limit, as features' densities vary.
const SKETCH_PAIRS_PER_CALL: u64 = 1 << 21;

/// The row of the totals matrix that holds the round number.
pub const ROUND_ROW: u64 = 1;

/// The names of a model's matrices.
#[derive(Debug, Clone)]
pub struct Names {
    pub trees: String,
    pub sketch: String,
    pub cuts: String,
    pub histograms: String,
    pub totals: String,
}

impl Names {
    /// The matrices of model `model`.
    pub fn of(model: &str) -> Self {
        Names {
            trees: model.to_string(),
            sketch: format!("{model}.sketch"),
            cuts: format!("{model}.cuts"),
            histograms: format!("{model}.histograms"),
            totals: format!("{model}.totals"),
        }
    }
}

/// The histogram row of `node` in a tree of depth `depth`: nodes of even layers in the
/// first half of the rows, of odd layers in the second, so a layer's children are built
/// while their parents' histograms are still there.
pub fn histogram_row(depth: usize, node: usize) -> u64 {
    let layer = (node + 1).ilog2() as usize;
    let half = 1usize << depth.saturating_sub(1);
    ((layer % 2) * half + node - tree::layer(layer).start) as u64
}

/// Features the histograms hold: `dim` rounded up to whole column blocks.
fn padded_features(dim: u64) -> u64 {
    let blocks = HISTOGRAM_BLOCKS.min(dim);
    dim.div_ceil(blocks) * blocks
}

/// See the module documentation.
pub struct Grower {
    client: Arc<PsClient>,
    names: Names,
    gbdt: Gbdt,
    dim: u64,
    cuts: Option<Cuts>,
    /// The tree being grown and the layer its last round built histograms for.
    tree: usize,
    layer: usize,
    /// The nodes of that layer with their gradient and hessian sums (the root's come from
    /// the totals).
    nodes: Vec<(usize, (f64, f64))>,
    /// Leaves of the trees so far.
    pub leaves: u64,
    /// Rounds started so far.
    rounds: u32,
    /// The margin the first tree's offset holds.
    base: f64,
}

impl Grower {
    /// Creates the statement's matrices of model `model` (a `gbdt` of `dim` features), the
    /// ones a previous statement left replaced.
    pub async fn create(client: Arc<PsClient>, model: &str, gbdt: &Gbdt, dim: u64) -> Result<Self> {
        let names = Names::of(model);
        let width = 2 * gbdt.bins as u64;
        let features = padded_features(dim);
        let rows = 1u64 << gbdt.depth;
        let per_node = features.saturating_mul(width);
        if per_node > MAX_NODE_VALUES {
            return option_err(format!(
                "model '{model}': a node's histogram would hold {per_node} values ({dim} \
                 features x {} bins x 2), over the {MAX_NODE_VALUES} a worker builds; lower \
                 bins or dim",
                gbdt.bins
            ));
        }
        let blocks = HISTOGRAM_BLOCKS.min(dim);
        let f64s =
            |name: &str, rows, cols| MatrixSpec::dense(name, rows, cols).value_type(ValueType::F64);
        let specs = [
            MatrixSpec::sparse(&names.sketch, 1, dim * sketch::BUCKETS).value_type(ValueType::I64),
            f64s(&names.cuts, 1, dim * (gbdt.bins as u64 - 1)),
            match rows.saturating_mul(per_node) <= MAX_DENSE_HISTOGRAMS {
                true => f64s(&names.histograms, rows, per_node),
                false => {
                    MatrixSpec::sparse(&names.histograms, rows, per_node).value_type(ValueType::F64)
                }
            }
            .block_shape(rows, features / blocks * width),
            f64s(&names.totals, 2, 2),
        ];
        for spec in specs {
            client.drop_matrix_if_any(&spec.name).await?;
            client.create_matrix(spec).await?;
        }
        Ok(Grower {
            client,
            names,
            gbdt: gbdt.clone(),
            dim,
            cuts: None,
            tree: 0,
            layer: 0,
            nodes: Vec::new(),
            leaves: 0,
            rounds: 0,
            base: 0.0,
        })
    }

    /// After the sketch round, whose rows' mean target is `mean_target`: cuts every feature at
    /// its quantiles into the cuts matrix, and sets the first tree's offset to the base margin.
    pub async fn after_sketch(&mut self, mean_target: f64) -> Result<()> {
        let bins = self.gbdt.bins;
        let mut values = Vec::with_capacity(self.dim as usize * (bins - 1));
        let mut counts = vec![0i64; sketch::BUCKETS as usize];
        let (mut first, mut features) = (0, SKETCH_FEATURES_PER_CALL);
        while first < self.dim {
            let last = first.saturating_add(features).min(self.dim);
            let columns = first * sketch::BUCKETS..last * sketch::BUCKETS;
            // Only the buckets some row fell in: a feature's values fill few of its buckets.
            let answer = (self.client)
                .nonzeros((&self.names.sketch, 0), columns, 0)
                .await?;
            let mut pairs: Vec<(u64, i64)> =
                answer.into_iter().map(|(c, n)| (c, n as i64)).collect();
            pairs.sort_unstable_by_key(|p| p.0);
            let mut pairs_left = pairs.iter().peekable();
            for feature in first..last {
                let (start, end) = (feature * sketch::BUCKETS, (feature + 1) * sketch::BUCKETS);
                counts.fill(0);
                while let Some(&(column, count)) = pairs_left.next_if(|p| p.0 < end) {
                    counts[(column - start) as usize] = count;
                }
                values.extend(sketch::cuts(&counts, bins));
            }
            // Each call scans the whole row on the servers: the next one takes as many
            // features as fill about SKETCH_PAIRS_PER_CALL pairs at this call's density, and
            // at most 4 times this call's.
            let per_feature = (pairs.len() as u64).div_ceil(last - first).max(1);
            features = (SKETCH_PAIRS_PER_CALL / per_feature).clamp(1, 4 * (last - first));
            first = last;
        }
        self.push_row(
            &self.names.cuts,
            (0..values.len() as u64).collect(),
            &values,
        )
        .await?;
        self.cuts = Some(Cuts { bins, values });
        self.base = self.gbdt.base_margin(mean_target);
        let names = &self.names;
        self.push(&names.trees, 0, vec![1], &[self.base]).await?;
        self.client.drop_matrix(&self.names.sketch).await?;
        Ok(())
    }

    /// Before each round of the workers: counts it in the totals' round row (round 0, the
    /// sketch's, is the row's zero).
    pub async fn start_round(&mut self) -> Result<()> {
        if self.rounds > 0 {
            self.push(&self.names.totals, ROUND_ROW, vec![0], &[1.0])
                .await?;
        }
        self.rounds += 1;
        Ok(())
    }

    /// Before tree `t`'s first round: the root's histogram and totals start at zero.
    pub async fn begin_tree(&mut self, t: usize) -> Result<()> {
        (self.tree, self.layer, self.nodes) = (t, 0, Vec::new());
        let hist = &self.names.histograms;
        self.client.psf("zero", &[(hist, 0)], &[]).await?;
        self.client
            .psf("zero", &[(&self.names.totals, 0)], &[])
            .await?;
        Ok(())
    }

    /// After a round of histograms: finishes the layer they were built for (see the module
    /// documentation); returns whether the tree grows another layer, which the workers then
    /// build histograms for in another round. When it does not, the tree is marked complete.
    pub async fn after_round(&mut self) -> Result<bool> {
        let depth = self.gbdt.depth;
        if self.layer == 0 {
            let totals = (self.client)
                .pull_rows::<f64>(&self.names.totals, &[0])
                .await?;
            let root = (totals[0][0], totals[0][1]);
            self.nodes = vec![(0, root)];
        }
        let mut fields: Vec<(u64, f64)> = Vec::new();
        if self.layer == 0 {
            fields.push((tree::column(0, Field::Cover), self.nodes[0].1.1));
        }
        // Each node's split on its own: the layer's calls go out together.
        let this = &*self;
        let splits = try_join_all(this.nodes.iter().map(|&(node, totals)| async move {
            match this.layer < depth {
                true => this.best_split(node, totals).await,
                false => Ok(None),
            }
        }))
        .await?;
        let (mut children, mut leaves) = (Vec::new(), 0);
        for (&(node, totals), split) in self.nodes.iter().zip(splits) {
            let Some(split) = split.filter(|s| s.gain > 0.0) else {
                fields.push((
                    tree::column(node, Field::Value),
                    self.gbdt.leaf_value(totals),
                ));
                leaves += 1;
                continue;
            };
            let right = (totals.0 - split.left.0, totals.1 - split.left.1);
            let cuts = self.cuts.as_ref().expect("cut after the sketch round");
            let threshold = cuts.threshold(split.feature, split.bin);
            fields.extend([
                (tree::column(node, Field::Split), 1.0),
                (tree::column(node, Field::Feature), split.feature as f64),
                (tree::column(node, Field::Bin), split.bin as f64),
                (tree::column(node, Field::Threshold), threshold),
                (
                    tree::column(node, Field::DefaultLeft),
                    f64::from(u8::from(split.default_left)),
                ),
                (tree::column(node, Field::Gain), split.gain),
                (tree::column(2 * node + 1, Field::Cover), split.left.1),
                (tree::column(2 * node + 2, Field::Cover), right.1),
            ]);
            children.push((2 * node + 1, split.left));
            children.push((2 * node + 2, right));
        }
        let grows = !children.is_empty() && self.layer + 1 < depth;
        if !grows {
            for &(node, totals) in &children {
                fields.push((
                    tree::column(node, Field::Value),
                    self.gbdt.leaf_value(totals),
                ));
                leaves += 1;
            }
            fields.push((0, 1.0));
        }
        self.leaves += leaves;
        fields.sort_unstable_by_key(|f| f.0);
        let (cols, values): (Vec<u64>, Vec<f64>) = fields.into_iter().unzip();
        self.push(&self.names.trees, self.tree as u64, cols, &values)
            .await?;
        if grows {
            self.prepare_children(&children).await?;
            self.layer += 1;
            self.nodes = children;
        }
        Ok(grows)
    }

    /// Zeroes the histogram rows the workers build next: per split, the child of smaller
    /// cover (left on a tie), as the workers choose it from the same covers.
    async fn prepare_children(&self, children: &[(usize, (f64, f64))]) -> Result<()> {
        let hist = &self.names.histograms;
        let rows = children
            .chunks_exact(2)
            .map(|pair| histogram_row(self.gbdt.depth, built(pair)));
        let zero = |row| async move { self.client.psf("zero", &[(hist, row)], &[]).await };
        try_join_all(rows.map(zero)).await?;
        Ok(())
    }

    /// The best split of `node` (gradient and hessian sums `totals`), its sibling's histogram
    /// first derived from its parent's if the workers built the sibling.
    async fn best_split(&self, node: usize, totals: (f64, f64)) -> Result<Option<NodeSplit>> {
        let depth = self.gbdt.depth;
        let hist = &self.names.histograms;
        if node > 0 {
            let sibling = if node % 2 == 1 { node + 1 } else { node - 1 };
            let pair = self.pair(node.min(sibling));
            if built(&pair) == sibling {
                let parent = (node - 1) / 2;
                let rows = [parent, sibling, node].map(|n| histogram_row(depth, n));
                let operands = rows.map(|r| (hist.as_str(), r));
                self.client.psf("sub", &operands, &[]).await?;
            }
        }
        let g = &self.gbdt;
        let args = [
            g.bins as f64,
            totals.0,
            totals.1,
            g.l2,
            g.min_child_weight,
            g.min_gain,
        ];
        let row = histogram_row(depth, node);
        let answer = self.client.psf("best_split", &[(hist, row)], &args).await?;
        Ok(NodeSplit::from_values(&answer))
    }

    /// The two children (left first) of the current layer that `left` begins.
    fn pair(&self, left: usize) -> [(usize, (f64, f64)); 2] {
        let at = self.nodes.iter().position(|n| n.0 == left);
        let at = at.expect("a child's sibling is of its layer");
        [self.nodes[at], self.nodes[at + 1]]
    }

    /// Drops trees `trees` (early stopping keeps the ones before): their rows go back to zero,
    /// the first tree's offset (the base margin) staying.
    pub async fn drop_trees(&self, trees: std::ops::Range<usize>) -> Result<()> {
        for t in trees.clone() {
            (self.client)
                .psf("zero", &[(&self.names.trees, t as u64)], &[])
                .await?;
        }
        if trees.start == 0 && !trees.is_empty() {
            let names = &self.names;
            self.push(&names.trees, 0, vec![1], &[self.base]).await?;
        }
        Ok(())
    }

    /// Drops the matrices only the statement needed (the sketch, the histograms and the
    /// totals); the cuts stay with the model.
    pub async fn finish(self) -> Result<()> {
        for name in [&self.names.histograms, &self.names.totals] {
            self.client.drop_matrix(name).await?;
        }
        Ok(())
    }

    async fn push(&self, matrix: &str, row: u64, cols: Vec<u64>, values: &[f64]) -> Result<()> {
        let how = PushOptions::default();
        (self.client)
            .push_with::<f64>(matrix, &[row], &cols, values, how)
            .await?;
        Ok(())
    }

    async fn push_row(&self, matrix: &str, cols: Vec<u64>, values: &[f64]) -> Result<()> {
        self.push(matrix, 0, cols, values).await
    }
}

/// Of two children (left first, with their sums), the one the workers build: the one of
/// smaller hessian sum, the left on a tie, as [`super::tree::Tree::built_child`] reads it.
fn built(pair: &[(usize, (f64, f64))]) -> usize {
    match pair[0].1.1 <= pair[1].1.1 {
        true => pair[0].0,
        false => pair[1].0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_layer_of_two_has_rows_of_its_own() {
        // Depth 3: layers 0 and 2 in rows 0..4, layer 1 in rows 4..8.
        let rows: Vec<u64> = (0..7).map(|n| histogram_row(3, n)).collect();
        assert_eq!(rows, [0, 4, 5, 0, 1, 2, 3]);
        assert_eq!(padded_features(123), 128);
        assert_eq!(padded_features(5), 5);
    }
}

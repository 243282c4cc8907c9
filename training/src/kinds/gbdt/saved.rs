//! A boosted model's saved format: `trees.parquet` and
//! `importance.parquet` in place of `weights.parquet`, and the base margin (the margin every
//! row starts from) in `model.json`.
//!
//! `trees.parquet` has a row per node a row can reach, numbered as in a binary heap (the
//! root 0, node `n`'s children `2n + 1` and `2n + 2`):
//!
//! - `tree`, `node`;
//! - for a split: `feature` (through the model's counter; null without one) and `index`, the
//!   histogram `bin` it cuts after and its `threshold` (a row goes left when its value is at
//!   or below it), `default_left` (where rows without the feature go), its children `left`
//!   and `right`, and its `gain` (the loss reduction);
//! - for a leaf: its `value` (the margin it adds);
//! - `cover`: the hessian sum of the node's training rows.
//!
//! `importance.parquet` has a row per feature: `splits`, total `gain`, `gain_share` (of all
//! the trees' gain) and total `cover`, the features split on first by gain, then the rest of
//! the dictionary with zeros (the counter is rebuilt from it on load).
//!
//! A row's margin is the base margin plus one leaf value per tree, so `read_model` gives a
//! model a query can evaluate; `LOAD MODEL` pushes the same trees back, and predictions are
//! identical after a reload.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use angel_client::PsClient;
use arrow::array::{
    Array, AsArray, BooleanArray, Float64Array, RecordBatch, StringArray, UInt32Array, UInt64Array,
};
use arrow::datatypes::{DataType, Field, Float64Type, Schema, SchemaRef, UInt32Type, UInt64Type};

use super::Gbdt;
use super::grown;
use super::importance::importance;
use super::tree::{self, Node, Tree};
use crate::error::{Result, input_err};
use crate::model::ModelSpec;
use crate::saved::dictionary::{check_counter_size, check_features, restore_counter};
use crate::saved::{ReadBack, Saved, SavedTable, TableSink, column_as, file_error};

/// Tree values one pull brings: 8 MB.
const PULL_VALUES: u64 = 1 << 20;

/// The tables of a saved boosted model.
pub fn tables() -> Vec<SavedTable> {
    vec![
        SavedTable {
            name: "trees",
            file: "trees.parquet",
            schema: trees_schema(),
        },
        SavedTable {
            name: "importance",
            file: "importance.parquet",
            schema: importance_schema(),
        },
    ]
}

/// Loads the trees read back in `read` onto the service as boosted model `name` (`gbdt` of
/// `spec`), its counter rebuilt first from the importance table's dictionary.
pub async fn load(
    client: &PsClient,
    name: &str,
    (gbdt, spec): (&Gbdt, &ModelSpec),
    read: &ReadBack,
) -> Result<()> {
    let [trees, dictionary] = [&read.tables[0], &read.tables[1]];
    let trees = read_trees(&trees.path, &trees.batches, gbdt, spec.dim)?;
    let features = read_dictionary(&dictionary.path, &dictionary.batches)?;
    check_features(&read.at, &features, spec.dim)?;
    if let Some(counter) = &spec.counter {
        restore_counter(client, counter, &features).await?;
        check_counter_size(client, &read.at, counter, spec.dim).await?;
    }
    spec.create(client, name).await?;
    push_trees(client, name, trees, read.base_margin.unwrap_or_default()).await
}

/// The columns of `trees.parquet`.
fn trees_schema() -> SchemaRef {
    let field = |name, t| Field::new(name, t, true);
    Arc::new(Schema::new(vec![
        Field::new("tree", DataType::UInt32, false),
        Field::new("node", DataType::UInt32, false),
        field("feature", DataType::Utf8),
        field("index", DataType::UInt64),
        field("bin", DataType::UInt32),
        field("threshold", DataType::Float64),
        field("default_left", DataType::Boolean),
        field("left", DataType::UInt32),
        field("right", DataType::UInt32),
        field("value", DataType::Float64),
        Field::new("cover", DataType::Float64, false),
        field("gain", DataType::Float64),
    ]))
}

/// The columns of `importance.parquet`.
fn importance_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("feature", DataType::Utf8, true),
        Field::new("index", DataType::UInt64, false),
        Field::new("splits", DataType::UInt64, false),
        Field::new("gain", DataType::Float64, false),
        Field::new("gain_share", DataType::Float64, false),
        Field::new("cover", DataType::Float64, false),
    ]))
}

/// Saves boosted model `name` to `sink`, its features named by `features`: its trees, their
/// features' importance, and its base margin for `model.json`.
pub async fn save(
    client: &PsClient,
    name: &str,
    features: &HashMap<u64, String>,
    sink: &mut dyn TableSink,
) -> Result<Saved> {
    let per_pull = client.matrix(name).await?.meta.cols;
    let rows = grown::rows(client, name).await?;
    let mut trees = Vec::with_capacity(rows as usize);
    let per_pull = (PULL_VALUES / per_pull.max(1)).max(1);
    for first in (0..rows).step_by(per_pull as usize) {
        let ids: Vec<u64> = (first..(first + per_pull).min(rows)).collect();
        let pulled = client.pull_rows::<f64>(name, &ids).await?;
        trees.extend(pulled.iter().map(|row| Tree::from_row(row)));
    }
    sink.write(0, trees_batch(&trees, features)?).await?;
    sink.write(1, importance_batch(&trees, features)?).await?;
    Ok(Saved {
        base_margin: Some(trees.iter().map(|t| t.offset).sum()),
    })
}

/// The rows of `trees.parquet`: the reachable nodes of the complete trees.
fn trees_batch(trees: &[Tree], features: &HashMap<u64, String>) -> Result<RecordBatch> {
    let nodes: Vec<(u32, u32, Node)> = (trees.iter().enumerate().filter(|(_, t)| t.done))
        .flat_map(|(t, tree)| (tree.reachable().into_iter()).map(move |n| (t, n, tree)))
        .map(|(t, n, tree)| (t as u32, n as u32, tree.nodes[n]))
        .collect();
    let floats = |of: fn(&Node) -> Option<f64>| -> Float64Array {
        nodes.iter().map(|(.., node)| of(node)).collect()
    };
    let children = |offset: u32| -> UInt32Array {
        (nodes.iter())
            .map(|(_, n, node)| matches!(node, Node::Split { .. }).then_some(2 * n + offset))
            .collect()
    };
    let feature = |node: &Node| match *node {
        Node::Split { feature, .. } => Some(feature),
        Node::Leaf { .. } => None,
    };
    let names: StringArray = (nodes.iter())
        .map(|(.., node)| feature(node).and_then(|f| features.get(&f).cloned()))
        .collect();
    let index: UInt64Array = nodes.iter().map(|(.., node)| feature(node)).collect();
    let bin: UInt32Array = (nodes.iter())
        .map(|(.., node)| match *node {
            Node::Split { bin, .. } => Some(bin as u32),
            Node::Leaf { .. } => None,
        })
        .collect();
    let default_left: BooleanArray = (nodes.iter())
        .map(|(.., node)| match *node {
            Node::Split { default_left, .. } => Some(default_left),
            Node::Leaf { .. } => None,
        })
        .collect();
    Ok(RecordBatch::try_new(
        trees_schema(),
        vec![
            Arc::new(UInt32Array::from_iter_values(nodes.iter().map(|n| n.0))),
            Arc::new(UInt32Array::from_iter_values(nodes.iter().map(|n| n.1))),
            Arc::new(names),
            Arc::new(index),
            Arc::new(bin),
            Arc::new(floats(|node| match *node {
                Node::Split { threshold, .. } => Some(threshold),
                Node::Leaf { .. } => None,
            })),
            Arc::new(default_left),
            Arc::new(children(1)),
            Arc::new(children(2)),
            Arc::new(floats(|node| match *node {
                Node::Leaf { value, .. } => Some(value),
                Node::Split { .. } => None,
            })),
            Arc::new(floats(|node| match *node {
                Node::Split { cover, .. } | Node::Leaf { cover, .. } => Some(cover),
            })),
            Arc::new(floats(|node| match *node {
                Node::Split { gain, .. } => Some(gain),
                Node::Leaf { .. } => None,
            })),
        ],
    )?)
}

/// The rows of `importance.parquet`: the features split on by total gain, then the rest of
/// the dictionary `features` by index.
fn importance_batch(trees: &[Tree], features: &HashMap<u64, String>) -> Result<RecordBatch> {
    let of = importance(trees);
    let mut rows: Vec<(u64, _)> = of.iter().map(|(&f, &i)| (f, i)).collect();
    rows.sort_by(|a, b| b.1.gain.total_cmp(&a.1.gain).then(a.0.cmp(&b.0)));
    let mut unused: Vec<u64> = (features.keys().copied())
        .filter(|f| !of.contains_key(f))
        .collect();
    unused.sort_unstable();
    rows.extend(unused.into_iter().map(|f| (f, Default::default())));
    let total: f64 = of.values().map(|i| i.gain).sum();
    let share = |gain: f64| if total > 0.0 { gain / total } else { 0.0 };
    Ok(RecordBatch::try_new(
        importance_schema(),
        vec![
            Arc::new(
                (rows.iter())
                    .map(|(f, _)| features.get(f).cloned())
                    .collect::<StringArray>(),
            ),
            Arc::new(UInt64Array::from_iter_values(rows.iter().map(|r| r.0))),
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|r| r.1.splits),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|r| r.1.gain),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|r| share(r.1.gain)),
            )),
            Arc::new(Float64Array::from_iter_values(
                rows.iter().map(|r| r.1.cover),
            )),
        ],
    )?)
}

/// The saved nodes of each tree, tree after tree: only the nodes the file holds, so what is
/// read takes memory of the file's rows, never of the trees x nodes the options allow.
type SavedTrees = Vec<BTreeMap<usize, Node>>;

/// Reads `trees.parquet` (`batches`, from `path`) of model `gbdt` of `dim` features, refusing
/// what would load wrong with the file and row named: a node outside the trees or given
/// twice, a NULL or non-finite value, a split on a feature outside `dim`, after a bin past
/// the model's cuts or naming other children than its own, a tree whose splits do not reach
/// exactly its saved nodes, a tree missing between saved ones.
fn read_trees(path: &str, batches: &[RecordBatch], gbdt: &Gbdt, dim: u64) -> Result<SavedTrees> {
    let room = tree::nodes(gbdt.depth);
    let mut trees: BTreeMap<usize, BTreeMap<usize, Node>> = BTreeMap::new();
    let mut row = 0;
    for batch in batches {
        let column = |n: &str, t: &DataType| column_as(path, batch, n, t);
        let [t, n, bin, left, right] =
            ["tree", "node", "bin", "left", "right"].map(|c| column(c, &DataType::UInt32));
        let (t, n, bin, left, right) = (t?, n?, bin?, left?, right?);
        let [t, n, bin, left, right] =
            [&t, &n, &bin, &left, &right].map(|c| c.as_primitive::<UInt32Type>());
        let index = column("index", &DataType::UInt64)?;
        let index = index.as_primitive::<UInt64Type>();
        let default_left = column("default_left", &DataType::Boolean)?;
        let default_left = default_left.as_boolean();
        let [threshold, value, cover, gain] =
            ["threshold", "value", "cover", "gain"].map(|c| column(c, &DataType::Float64));
        let (threshold, value, cover, gain) = (threshold?, value?, cover?, gain?);
        let [threshold, value, cover, gain] =
            [&threshold, &value, &cover, &gain].map(|c| c.as_primitive::<Float64Type>());
        for r in 0..batch.num_rows() {
            row += 1;
            let at = |what: String| file_error(&path, format!("row {row}: {what}"));
            if t.is_null(r) || n.is_null(r) || cover.is_null(r) {
                return Err(at("the tree, node or cover is NULL".into()));
            }
            let (tr, node) = (t.value(r) as usize, n.value(r) as usize);
            if tr >= gbdt.trees || node >= room {
                return Err(at(format!(
                    "tree {tr} node {node} is outside the model's {} trees of depth {} ({room} \
                     nodes each)",
                    gbdt.trees, gbdt.depth
                )));
            }
            let finite = |c: &Float64Array, name: &str| match c.is_valid(r) {
                true if c.value(r).is_finite() => Ok(c.value(r)),
                true => Err(at(format!(
                    "tree {tr} node {node}: {name} is {}",
                    c.value(r)
                ))),
                false => Err(at(format!("tree {tr} node {node}: {name} is NULL"))),
            };
            let c = finite(cover, "cover")?;
            let children = [left, right].map(|c| c.is_valid(r).then(|| c.value(r) as usize));
            let parsed = match index.is_valid(r) {
                true => {
                    let feature = index.value(r);
                    if feature >= dim {
                        return Err(at(format!(
                            "tree {tr} node {node} splits on feature {feature}, outside the \
                             model's dim {dim}"
                        )));
                    }
                    if bin.is_null(r) || default_left.is_null(r) {
                        return Err(at(format!(
                            "tree {tr} node {node}: a split's bin or default_left is NULL"
                        )));
                    }
                    let after = bin.value(r) as usize;
                    if after + 1 >= gbdt.bins {
                        return Err(at(format!(
                            "tree {tr} node {node} splits after bin {after}, past the model's \
                             {} cuts of {} bins",
                            gbdt.bins - 1,
                            gbdt.bins
                        )));
                    }
                    if children != [Some(2 * node + 1), Some(2 * node + 2)] {
                        return Err(at(format!(
                            "tree {tr} node {node}: a split's children are nodes {} and {}, \
                             not left {:?} and right {:?}",
                            2 * node + 1,
                            2 * node + 2,
                            children[0],
                            children[1]
                        )));
                    }
                    Node::Split {
                        feature,
                        bin: after,
                        threshold: finite(threshold, "threshold")?,
                        default_left: default_left.value(r),
                        cover: c,
                        gain: finite(gain, "gain")?,
                    }
                }
                false if children != [None, None] => {
                    return Err(at(format!(
                        "tree {tr} node {node}: a leaf has children (left {:?}, right {:?})",
                        children[0], children[1]
                    )));
                }
                false => Node::Leaf {
                    value: finite(value, "value")?,
                    cover: c,
                },
            };
            if trees.entry(tr).or_default().insert(node, parsed).is_some() {
                return Err(at(format!("tree {tr} node {node} a second time")));
            }
        }
    }
    for (expected, (&t, nodes)) in trees.iter().enumerate() {
        if t != expected {
            return input_err(format!(
                "{path}: tree {expected} is missing: the file has trees up to {} without it \
                 (trees are numbered from 0, each a row per node a row can reach)",
                trees.keys().last().copied().unwrap_or_default()
            ));
        }
        let tree = whole(nodes);
        let reached: HashSet<usize> = tree.reachable().into_iter().collect();
        let saved: HashSet<usize> = nodes.keys().copied().collect();
        if reached != saved {
            let mut odd: Vec<usize> = reached.symmetric_difference(&saved).copied().collect();
            odd.sort_unstable();
            return input_err(format!(
                "{path}: tree {t}: its splits reach nodes that are not saved, or saved nodes no \
                 split reaches: {odd:?} (a split's children are 2n + 1 and 2n + 2, within depth \
                 {})",
                gbdt.depth
            ));
        }
    }
    Ok(trees.into_values().collect())
}

/// The complete tree of saved `nodes`: its nodes up to the last saved one, those not saved
/// leaves of value 0.
fn whole(nodes: &BTreeMap<usize, Node>) -> Tree {
    let room = nodes.keys().last().map_or(0, |&n| n + 1);
    let mut tree = Tree {
        done: true,
        offset: 0.0,
        nodes: vec![
            Node::Leaf {
                value: 0.0,
                cover: 0.0
            };
            room
        ],
    };
    for (&n, &node) in nodes {
        tree.nodes[n] = node;
    }
    tree
}

/// Reads the dictionary's (feature, index) pairs from `importance.parquet` (`batches`, from
/// `path`).
fn read_dictionary(path: &str, batches: &[RecordBatch]) -> Result<Vec<(String, u64)>> {
    let mut features = Vec::new();
    for batch in batches {
        let column = |n: &str, t: &DataType| column_as(path, batch, n, t);
        let feature = column("feature", &DataType::Utf8)?;
        let index = column("index", &DataType::UInt64)?;
        let (feature, index) = (
            feature.as_string::<i32>(),
            index.as_primitive::<UInt64Type>(),
        );
        for r in (0..batch.num_rows()).filter(|&r| feature.is_valid(r) && index.is_valid(r)) {
            features.push((feature.value(r).to_string(), index.value(r)));
        }
    }
    Ok(features)
}

/// Pushes `trees` to boosted model `name` (just created), the first tree's offset holding
/// the base margin `base_margin`.
async fn push_trees(
    client: &PsClient,
    name: &str,
    trees: SavedTrees,
    base_margin: f64,
) -> Result<()> {
    // Without a complete tree, row 0 still holds the base margin.
    for t in 0..trees.len().max(1) {
        let mut tree = trees.get(t).map_or_else(Tree::default, whole);
        if t == 0 {
            tree.offset = base_margin;
        }
        let (cols, values): (Vec<u64>, Vec<f64>) = tree.fields().into_iter().unzip();
        if !cols.is_empty() {
            client
                .push_keys::<f64>(name, t as u64, &cols, &values)
                .await?;
        }
    }
    Ok(())
}

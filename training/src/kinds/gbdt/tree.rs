//! [`Tree`]: one tree of a boosted model, as one row of the model's matrix on the PS.
//!
//! A tree of depth `d` has room for `2^(d + 1) - 1` nodes, numbered as in a binary heap: node
//! `i`'s children are `2i + 1` (left) and `2i + 2` (right), and layer `l` holds nodes
//! `2^l - 1 .. 2^(l + 1) - 1`. The row starts with a header (whether the tree is complete, and
//! an offset it adds to every margin: the base margin, on the first tree) and then holds
//! [`FIELDS`] values per node. Each value is written once, by a push onto the zero row, so
//! the job grows a tree with pushes the servers replay after a recovery like any other.

/// Values before the nodes: done (1 when the tree is complete) and the offset.
pub const HEADER: usize = 2;
/// Values per node: split (1) or not, feature, bin, threshold, default left (1) or not,
/// value (a leaf's), cover (the node's hessian sum), gain (a split's loss reduction).
pub const FIELDS: usize = 8;

/// Where each field of a node sits in its [`FIELDS`] values.
#[derive(Debug, Clone, Copy)]
pub enum Field {
    Split = 0,
    Feature = 1,
    Bin = 2,
    Threshold = 3,
    DefaultLeft = 4,
    Value = 5,
    Cover = 6,
    Gain = 7,
}

/// Room for nodes in a tree of depth `depth`.
pub fn nodes(depth: usize) -> usize {
    (1 << (depth + 1)) - 1
}

/// Columns of the model's matrix: a tree's row.
pub fn columns(depth: usize) -> u64 {
    (HEADER + nodes(depth) * FIELDS) as u64
}

/// The column of `field` of node `node`.
pub fn column(node: usize, field: Field) -> u64 {
    (HEADER + node * FIELDS + field as usize) as u64
}

/// The first node of layer `layer`, and how many it holds.
pub fn layer(layer: usize) -> std::ops::Range<usize> {
    (1 << layer) - 1..(1 << (layer + 1)) - 1
}

/// A node as a row holds it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Node {
    /// Rows whose value of `feature` falls in bins `0..=bin` (at or below `threshold`) go
    /// left; rows without it go left when `default_left`.
    Split {
        feature: u64,
        bin: usize,
        threshold: f64,
        default_left: bool,
        cover: f64,
        gain: f64,
    },
    /// A leaf (or a node not grown yet, of value 0).
    Leaf { value: f64, cover: f64 },
}

/// See the module documentation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tree {
    pub done: bool,
    pub offset: f64,
    pub nodes: Vec<Node>,
}

impl Tree {
    /// The tree row `row` holds.
    pub fn from_row(row: &[f64]) -> Tree {
        let nodes = row[HEADER.min(row.len())..]
            .chunks_exact(FIELDS)
            .map(|n| match n[Field::Split as usize] != 0.0 {
                true => Node::Split {
                    feature: n[Field::Feature as usize] as u64,
                    bin: n[Field::Bin as usize] as usize,
                    threshold: n[Field::Threshold as usize],
                    default_left: n[Field::DefaultLeft as usize] != 0.0,
                    cover: n[Field::Cover as usize],
                    gain: n[Field::Gain as usize],
                },
                false => Node::Leaf {
                    value: n[Field::Value as usize],
                    cover: n[Field::Cover as usize],
                },
            })
            .collect();
        Tree {
            done: row.first().is_some_and(|&d| d != 0.0),
            offset: row.get(1).copied().unwrap_or_default(),
            nodes,
        }
    }

    /// The node a row at `node` moves to: a child if `node` splits (`goes_left` says, from
    /// the split's feature, bin and threshold, where the row goes), else `node` itself.
    pub fn child(&self, node: usize, goes_left: impl FnOnce(&Node) -> bool) -> usize {
        match self.nodes.get(node) {
            Some(split @ Node::Split { .. }) if 2 * node + 2 < self.nodes.len() => {
                match goes_left(split) {
                    true => 2 * node + 1,
                    false => 2 * node + 2,
                }
            }
            _ => node,
        }
    }

    /// The leaf a row reaches from `node`; `goes_left` as for [`Tree::child`].
    pub fn leaf_from(&self, mut node: usize, goes_left: impl Fn(&Node) -> bool) -> usize {
        loop {
            let next = self.child(node, &goes_left);
            if next == node {
                return node;
            }
            node = next;
        }
    }

    /// The value of leaf `node` (0 for a split).
    pub fn value(&self, node: usize) -> f64 {
        match self.nodes.get(node) {
            Some(Node::Leaf { value, .. }) => *value,
            _ => 0.0,
        }
    }

    /// The layers holding a split, from the root down (a split's parent is one): the layers
    /// a tree being grown has finished and grows on from.
    pub fn split_layers(&self) -> usize {
        let splits = |l: usize| {
            (self.nodes.get(layer(l)).unwrap_or_default().iter())
                .any(|n| matches!(n, Node::Split { .. }))
        };
        (0..).take_while(|&l| splits(l)).count()
    }

    /// The nodes a row can reach, in order: the root, and the children of every split
    /// reached (the rest of the row is room a shallower tree does not use).
    pub fn reachable(&self) -> Vec<usize> {
        let mut reached = Vec::new();
        let mut next = vec![0];
        while let Some(node) = next.pop() {
            let Some(n) = self.nodes.get(node) else {
                continue;
            };
            reached.push(node);
            if matches!(n, Node::Split { .. }) {
                next.extend([2 * node + 2, 2 * node + 1]);
            }
        }
        reached.sort_unstable();
        reached
    }

    /// The (column, value) pairs of the row that holds this tree, without its zeros: pushed
    /// onto a zero row they write it back ([`Tree::from_row`] reads the same tree).
    pub fn fields(&self) -> Vec<(u64, f64)> {
        let mut fields = vec![(0, f64::from(u8::from(self.done))), (1, self.offset)];
        for node in self.reachable() {
            let values = match self.nodes[node] {
                Node::Split {
                    feature,
                    bin,
                    threshold,
                    default_left,
                    cover,
                    gain,
                } => vec![
                    (Field::Split, 1.0),
                    (Field::Feature, feature as f64),
                    (Field::Bin, bin as f64),
                    (Field::Threshold, threshold),
                    (Field::DefaultLeft, f64::from(u8::from(default_left))),
                    (Field::Cover, cover),
                    (Field::Gain, gain),
                ],
                Node::Leaf { value, cover } => vec![(Field::Value, value), (Field::Cover, cover)],
            };
            fields.extend(values.into_iter().map(|(f, v)| (column(node, f), v)));
        }
        fields.retain(|f| f.1 != 0.0);
        fields
    }

    /// The child of split `node` whose histogram workers build (the other is the parent's
    /// less it, on the servers): the one of smaller cover, the left on a tie.
    pub fn built_child(&self, node: usize) -> usize {
        let cover = |n: usize| match self.nodes.get(n) {
            Some(Node::Split { cover, .. } | Node::Leaf { cover, .. }) => *cover,
            None => 0.0,
        };
        match cover(2 * node + 1) <= cover(2 * node + 2) {
            true => 2 * node + 1,
            false => 2 * node + 2,
        }
    }

    /// The margin this tree adds to a row whose value of feature `f` is `value(f)` (`None`:
    /// missing): its offset and the value of the leaf the row reaches.
    pub fn predict(&self, value: impl Fn(u64) -> Option<f64>) -> f64 {
        let leaf = self.leaf_from(0, |node| match node {
            Node::Split {
                feature,
                threshold,
                default_left,
                ..
            } => value(*feature).map_or(*default_left, |v| v <= *threshold),
            Node::Leaf { .. } => true,
        });
        self.offset + self.value(leaf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A depth-2 tree written field by field as the job pushes it.
    fn written() -> Vec<f64> {
        let mut row = vec![0.0; columns(2) as usize];
        let mut set = |node, field, v| row[column(node, field) as usize] = v;
        // Root: feature 3 at bin 1 (threshold 0.5), missing left; node 1: leaf; node 2:
        // feature 0 at threshold -1, missing right, with leaves 5 and 6.
        for (node, feature, bin, threshold, left) in
            [(0, 3.0, 1.0, 0.5, 1.0), (2, 0.0, 0.0, -1.0, 0.0)]
        {
            set(node, Field::Split, 1.0);
            set(node, Field::Feature, feature);
            set(node, Field::Bin, bin);
            set(node, Field::Threshold, threshold);
            set(node, Field::DefaultLeft, left);
            set(node, Field::Cover, 3.0);
            set(node, Field::Gain, 0.5 + feature);
        }
        for (node, value, cover) in [(1, 0.1, 4.0), (5, -0.2, 1.0), (6, 0.3, 2.0)] {
            set(node, Field::Value, value);
            set(node, Field::Cover, cover);
        }
        row[0] = 1.0;
        row[1] = 0.25;
        row
    }

    #[test]
    fn a_row_goes_down_its_tree_to_a_leaf() {
        let tree = Tree::from_row(&written());
        assert!(tree.done && tree.offset == 0.25 && tree.nodes.len() == 7);
        let x = |pairs: &'static [(u64, f64)]| {
            move |f: u64| pairs.iter().find(|(k, _)| *k == f).map(|(_, v)| *v)
        };
        assert_eq!(tree.predict(x(&[(3, 0.5)])), 0.25 + 0.1);
        assert_eq!(
            tree.predict(x(&[])),
            0.25 + 0.1,
            "missing goes left at the root"
        );
        assert_eq!(tree.predict(x(&[(3, 2.0), (0, -1.0)])), 0.25 - 0.2);
        assert_eq!(
            tree.predict(x(&[(3, 2.0)])),
            0.25 + 0.3,
            "missing goes right"
        );
        assert_eq!(tree.built_child(2), 5, "the child of smaller cover");
        assert_eq!(layer(2), 3..7);
        assert_eq!(tree.reachable(), [0, 1, 2, 5, 6]);
        assert_eq!(tree.split_layers(), 2);
        assert_eq!(Tree::from_row(&[0.0; 58]).split_layers(), 0);
    }

    #[test]
    fn a_tree_written_from_its_fields_reads_back_the_same() {
        let tree = Tree::from_row(&written());
        let mut row = vec![0.0; columns(2) as usize];
        for (column, value) in tree.fields() {
            row[column as usize] = value;
        }
        assert_eq!(Tree::from_row(&row), tree);
        assert_eq!(row, written());
    }
}

//! [`Importance`]: how much each feature does in a boosted model, as LightGBM and XGBoost
//! report it: the splits on it (LightGBM's `split` importance, XGBoost's `weight`), the loss
//! reduction they bring (`gain`, XGBoost's `total_gain`) and the hessian they divide
//! (`cover`, XGBoost's `total_cover`), over the complete trees.

use std::collections::BTreeMap;

use super::tree::{Node, Tree};

/// One feature's share in the splits of a model's trees.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Importance {
    /// Splits on the feature.
    pub splits: u64,
    /// Their loss reductions, summed.
    pub gain: f64,
    /// The hessian sums of the nodes they split, summed.
    pub cover: f64,
}

/// The importance of every feature some complete tree of `trees` splits on, by feature.
pub fn importance(trees: &[Tree]) -> BTreeMap<u64, Importance> {
    let mut of = BTreeMap::<u64, Importance>::new();
    for tree in trees.iter().filter(|t| t.done) {
        for node in tree.reachable() {
            if let Node::Split {
                feature,
                cover,
                gain,
                ..
            } = tree.nodes[node]
            {
                let i = of.entry(feature).or_default();
                i.splits += 1;
                i.gain += gain;
                i.cover += cover;
            }
        }
    }
    of
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(feature: u64, cover: f64, gain: f64) -> Node {
        Node::Split {
            feature,
            bin: 0,
            threshold: 0.0,
            default_left: true,
            cover,
            gain,
        }
    }

    #[test]
    fn splits_of_complete_trees_add_up_by_feature() {
        let leaf = Node::Leaf {
            value: 1.0,
            cover: 1.0,
        };
        let tree = |done, nodes: Vec<Node>| Tree {
            done,
            offset: 0.0,
            nodes,
        };
        // The split at node 3 is not reachable (node 1 is a leaf): room, not a split.
        let a = vec![
            split(2, 10.0, 4.0),
            leaf,
            split(5, 6.0, 1.5),
            split(9, 9.0, 9.0),
        ];
        let b = vec![split(5, 8.0, 2.0), leaf, leaf];
        let trees = [tree(true, a), tree(true, b.clone()), tree(false, b)];
        let got = importance(&trees);
        assert_eq!(got.len(), 2);
        assert_eq!(
            got[&2],
            Importance {
                splits: 1,
                gain: 4.0,
                cover: 10.0
            }
        );
        assert_eq!(
            got[&5],
            Importance {
                splits: 2,
                gain: 3.5,
                cover: 14.0
            }
        );
    }
}

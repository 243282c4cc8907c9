//! [`Partition`]: which of a worker's rows sit at each node of the tree being grown, as
//! LightGBM's data partition keeps them: one array of row numbers where every node owns a
//! contiguous run, split in place into its children's runs as the rows descend. A node's
//! histogram then reads only its own rows, in ascending order, rather than every row.

use std::ops::Range;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct Partition {
    /// Row numbers, each node's run ascending.
    order: Vec<u32>,
    /// Each node's run in `order` (heap numbering: node `n`'s children are `2n + 1` and
    /// `2n + 2`); empty for a node no row reached.
    runs: Vec<Range<usize>>,
    /// The rows going right while a run splits.
    scratch: Vec<u32>,
}

impl Partition {
    /// Puts all `rows` rows at the root of a tree of `nodes` nodes.
    pub fn reset(&mut self, rows: usize, nodes: usize) {
        self.order.clear();
        self.order.extend(0..rows as u32);
        self.runs.clear();
        self.runs.resize(nodes, 0..0);
        if let Some(root) = self.runs.first_mut() {
            *root = 0..rows;
        }
    }

    /// The rows at `node`, ascending.
    pub fn rows(&self, node: usize) -> &[u32] {
        self.runs
            .get(node)
            .map_or(&[], |run| &self.order[run.clone()])
    }

    /// Moves the rows at `node` to its children: left those `goes_left` says, in order, the
    /// others right. A node without room for children keeps its rows; a node without rows
    /// (one split before) leaves its children's as they are.
    pub fn split(&mut self, node: usize, goes_left: impl Fn(usize) -> bool) {
        let right_child = 2 * node + 2;
        if right_child >= self.runs.len() || self.runs[node].is_empty() {
            return;
        }
        let run = self.runs[node].clone();
        self.scratch.clear();
        let mut left = run.start;
        for at in run.clone() {
            let row = self.order[at];
            match goes_left(row as usize) {
                true => {
                    self.order[left] = row;
                    left += 1;
                }
                false => self.scratch.push(row),
            }
        }
        self.order[left..run.end].copy_from_slice(&self.scratch);
        self.runs[node] = 0..0;
        self.runs[right_child - 1] = run.start..left;
        self.runs[right_child] = left..run.end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_split_into_their_children_in_order() {
        let mut partition = Partition::default();
        partition.reset(6, 7);
        assert_eq!(partition.rows(0), [0, 1, 2, 3, 4, 5]);
        partition.split(0, |r| r % 2 == 0);
        assert_eq!(
            (partition.rows(1), partition.rows(2)),
            (&[0, 2, 4][..], &[1, 3, 5][..])
        );
        assert!(partition.rows(0).is_empty());
        partition.split(2, |r| r > 2);
        assert_eq!(
            (partition.rows(5), partition.rows(6)),
            (&[3, 5][..], &[1][..])
        );
        assert_eq!(partition.rows(1), [0, 2, 4], "a sibling keeps its rows");
        partition.split(5, |_| true);
        assert_eq!(partition.rows(5), [3, 5], "the last layer has no children");
        partition.split(0, |_| true);
        assert_eq!(
            partition.rows(1),
            [0, 2, 4],
            "a node split before has no rows to move"
        );
        partition.reset(2, 3);
        assert_eq!(
            (partition.rows(0), partition.rows(2)),
            (&[0, 1][..], &[][..])
        );
    }
}

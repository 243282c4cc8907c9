//! [`NodeSplit`]: a tree node's split as the PS function `best_split` answers it, read by the
//! workers and the job that grow gradient-boosted trees.

/// A node's split at a bin of a feature's histogram.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NodeSplit {
    /// The loss reduction, the minimum gain taken off.
    pub gain: f64,
    pub feature: u64,
    /// Bins `0..=bin` go left.
    pub bin: usize,
    /// Whether rows missing the feature go left.
    pub default_left: bool,
    /// The left child's gradient and hessian sums, its missing rows included.
    pub left: (f64, f64),
}

impl NodeSplit {
    /// As `best_split` answers it: gain, feature, bin, default left (1) or right (0), and the
    /// left child's gradient and hessian sums.
    pub fn to_values(&self) -> Vec<f64> {
        let left = f64::from(u8::from(self.default_left));
        let (g, h) = self.left;
        vec![self.gain, self.feature as f64, self.bin as f64, left, g, h]
    }

    /// The answer when no split fits: a gain of minus infinity.
    pub fn none_values() -> Vec<f64> {
        vec![f64::NEG_INFINITY, 0.0, 0.0, 0.0, 0.0, 0.0]
    }

    /// The split a `best_split` answer describes; `None` when it found none.
    pub fn from_values(values: &[f64]) -> Option<NodeSplit> {
        match values {
            [gain, feature, bin, left, g, h] if gain.is_finite() => Some(NodeSplit {
                gain: *gain,
                feature: *feature as u64,
                bin: *bin as usize,
                default_left: *left != 0.0,
                left: (*g, *h),
            }),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_split_reads_back_as_it_was_written() {
        let split = NodeSplit {
            gain: 0.25,
            feature: 17,
            bin: 3,
            default_left: true,
            left: (-1.5, 2.0),
        };
        assert_eq!(NodeSplit::from_values(&split.to_values()), Some(split));
        assert_eq!(NodeSplit::from_values(&NodeSplit::none_values()), None);
        assert_eq!(NodeSplit::from_values(&[1.0]), None);
    }
}

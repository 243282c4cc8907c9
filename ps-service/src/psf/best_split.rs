//! `best_split`: the best split of a tree node from its gradient/hessian histogram, found where
//! the histogram is (Angel's two-stage split finding for GBDT): each server scans the features
//! its partitions of the node's row hold and answers only its best candidate, and the client
//! keeps the best answer ([`Merge::Argmax`]), so no histogram crosses the network twice.
//!
//! A node's row holds, per feature `f` and bin `b`, the gradient sum of the node's rows whose
//! value of `f` falls in bin `b` at column `2 (f bins + b)` and their hessian sum at the next
//! column; a partition of the row must hold whole features. A row without a value of `f` is
//! missing there: the node's totals less the feature's bins. A split at bin `b` sends bins
//! `0..=b` left, and the missing rows to the side that gains more (the learned default
//! direction, as XGBoost learns it; right when the node has none).

use angel_proto::{Merge, NodeSplit, PsError, Result};

use super::{PsFunction, PsfContext, PsfRegistry};

/// Below this share of its node's hessian sum a feature's missing rows count as none.
const MISSING: f64 = 1e-9;

/// What decides a split: XGBoost's gain with L2 regularisation `l2`, children of hessian sum
/// at least `min_child_weight`, and `min_gain` taken off every gain.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitRule {
    pub bins: usize,
    pub l2: f64,
    pub min_child_weight: f64,
    pub min_gain: f64,
}

impl SplitRule {
    /// The score of a child of sums `(g, h)`: twice the loss it saves over no model.
    fn score(&self, (g, h): (f64, f64)) -> f64 {
        g * g / (h + self.l2)
    }

    /// The best split of a node of totals `node` over `hist`, the histogram of features
    /// `first..` (`2 bins` values each), scanning features, then bins, then the missing rows'
    /// side (right first) in ascending order and keeping the first best; `None` when no
    /// split leaves both children `min_child_weight`.
    pub fn best(&self, hist: &[f64], first: u64, node: (f64, f64)) -> Option<NodeSplit> {
        let width = 2 * self.bins;
        let parent = self.score(node);
        let mut best: Option<NodeSplit> = None;
        for (i, feature) in hist.chunks_exact(width).enumerate() {
            let present = feature
                .chunks_exact(2)
                .fold((0.0, 0.0), |(g, h), b| (g + b[0], h + b[1]));
            let missing = (node.0 - present.0, node.1 - present.1);
            // Without missing rows both directions are one split: the difference of the sums
            // is rounding, which must not pick the direction.
            let sides: &[bool] = match missing.1 > MISSING * node.1.abs() {
                true => &[false, true],
                false => &[false],
            };
            let mut left = (0.0, 0.0);
            for (bin, b) in feature.chunks_exact(2).enumerate().take(self.bins - 1) {
                left = (left.0 + b[0], left.1 + b[1]);
                for &default_left in sides {
                    let l = match default_left {
                        true => (left.0 + missing.0, left.1 + missing.1),
                        false => left,
                    };
                    let r = (node.0 - l.0, node.1 - l.1);
                    if l.1 < self.min_child_weight || r.1 < self.min_child_weight {
                        continue;
                    }
                    let gain = 0.5 * (self.score(l) + self.score(r) - parent) - self.min_gain;
                    if best.is_none_or(|s| gain > s.gain) {
                        best = Some(NodeSplit {
                            gain,
                            feature: first + i as u64,
                            bin,
                            default_left,
                            left: l,
                        });
                    }
                }
            }
        }
        best
    }
}

/// See the module documentation. Arguments: bins, the node's gradient and hessian sums, l2,
/// min_child_weight, min_gain. Answers [`NodeSplit::to_values`], or
/// [`NodeSplit::none_values`] when no split fits.
struct BestSplit;

impl PsFunction for BestSplit {
    fn name(&self) -> &str {
        "best_split"
    }

    fn merge(&self) -> Merge {
        Merge::Argmax
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["histogram"])?;
        let bins = ctx.arg(0, "bins per feature")?;
        let node = (
            ctx.arg(1, "the node's gradient sum")?,
            ctx.arg(2, "the node's hessian sum")?,
        );
        let rule = SplitRule {
            bins: bins as usize,
            l2: ctx.arg(3, "l2")?,
            min_child_weight: ctx.arg(4, "min_child_weight")?,
            min_gain: ctx.arg(5, "min_gain")?,
        };
        let cols = ctx.cols();
        let width = 2 * rule.bins as u64;
        if !((2.0..=65536.0).contains(&bins) && bins.fract() == 0.0) {
            return Err(PsError::InvalidArgument(format!(
                "PS function 'best_split': bins per feature must be a whole number from 2 to \
                 65536, got {bins}"
            )));
        }
        if !cols.start.is_multiple_of(width) || !cols.end.is_multiple_of(width) {
            return Err(PsError::InvalidArgument(format!(
                "PS function 'best_split': matrix '{}' has a partition of columns {}..{}, \
                 which does not hold whole features of {bins} bins (2 columns a bin)",
                ctx.matrix_name(0),
                cols.start,
                cols.end
            )));
        }
        let hist = ctx.read(0, |row| {
            let mut hist = vec![0.0; (cols.end - cols.start) as usize];
            row.for_each(&mut |c, v| hist[(c - cols.start) as usize] = v);
            hist
        });
        let best = rule.best(&hist, cols.start / width, node);
        Ok(best.map_or_else(NodeSplit::none_values, |s| s.to_values()))
    }
}

pub(super) fn register(registry: &mut PsfRegistry) {
    registry.register(BestSplit);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every candidate's gain computed from the rows themselves, as a check of the scan.
    #[test]
    fn the_scan_finds_the_split_the_rows_themselves_give() {
        // Rows: (feature 0 bin or missing, feature 1 bin or missing, gradient, hessian).
        let rows: [(Option<usize>, Option<usize>, f64, f64); 6] = [
            (Some(0), Some(2), -1.0, 0.25),
            (Some(0), None, -0.8, 0.2),
            (Some(1), Some(0), 0.5, 0.25),
            (None, Some(1), 0.9, 0.1),
            (Some(2), Some(0), 0.7, 0.2),
            (None, None, -0.3, 0.25),
        ];
        let rule = SplitRule {
            bins: 3,
            l2: 1.0,
            min_child_weight: 0.3,
            min_gain: 0.01,
        };
        let mut hist = vec![0.0; 2 * 2 * 3];
        for (b0, b1, g, h) in rows {
            for (f, bin) in [b0, b1].into_iter().enumerate() {
                if let Some(bin) = bin {
                    hist[2 * (f * 3 + bin)] += g;
                    hist[2 * (f * 3 + bin) + 1] += h;
                }
            }
        }
        let node = rows.iter().fold((0.0, 0.0), |a, r| (a.0 + r.2, a.1 + r.3));
        let found = rule.best(&hist, 7, node).expect("a split fits");
        // Brute force over every (feature, bin, side), each child summed from its rows.
        let mut best = (f64::NEG_INFINITY, 0, 0, false);
        for f in 0..2 {
            for bin in 0..2 {
                for default_left in [false, true] {
                    let goes_left = |r: &(Option<usize>, Option<usize>, f64, f64)| {
                        [r.0, r.1][f].map_or(default_left, |b| b <= bin)
                    };
                    let sum = |left: bool| {
                        (rows.iter().filter(|r| goes_left(r) == left))
                            .fold((0.0, 0.0), |a, r| (a.0 + r.2, a.1 + r.3))
                    };
                    let (l, r) = (sum(true), sum(false));
                    if l.1 < 0.3 || r.1 < 0.3 {
                        continue;
                    }
                    let s = |(g, h): (f64, f64)| g * g / (h + 1.0);
                    let gain = 0.5 * (s(l) + s(r) - s(node)) - 0.01;
                    if gain > best.0 + 1e-12 {
                        best = (gain, f, bin, default_left);
                    }
                }
            }
        }
        assert!((found.gain - best.0).abs() < 1e-12, "{found:?} vs {best:?}");
        assert_eq!(
            (found.feature, found.bin, found.default_left),
            (7 + best.1 as u64, best.2, best.3)
        );
    }

    #[test]
    fn no_split_when_a_child_would_be_too_light() {
        let rule = SplitRule {
            bins: 2,
            l2: 0.0,
            min_child_weight: 1.0,
            min_gain: 0.0,
        };
        assert_eq!(rule.best(&[1.0, 0.5, -1.0, 0.6], 0, (0.0, 1.1)), None);
    }
}

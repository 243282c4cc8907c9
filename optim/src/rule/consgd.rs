//! ConSGD (Angel+, `update = 'consgd'`): the W workers' changes add up, so each is scaled by
//! 1/W and a clock of W pushes moves the model as far as one worker's step would.

use super::Rule;

/// See the module documentation.
pub struct ConSgd;

impl Rule for ConSgd {
    fn factor(&self, workers: u32, _staleness: u64) -> f64 {
        1.0 / f64::from(workers.max(1))
    }
}

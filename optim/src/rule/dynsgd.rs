//! DynSGD (Angel+, `update = 'dynsgd'`): a change computed on partition version v' and applied
//! at version v is scaled by 1/(v - v' + 1), so stale gradients count less. The worker states
//! the versions it pulled with each push; a replayed push states none and applies unscaled.

use super::Rule;

/// See the module documentation.
pub struct DynSgd;

impl Rule for DynSgd {
    fn factor(&self, _workers: u32, staleness: u64) -> f64 {
        1.0 / (staleness as f64 + 1.0)
    }

    fn needs_bases(&self) -> bool {
        true
    }
}

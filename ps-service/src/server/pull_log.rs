//! [`PullLog`]: the training pulls a server saw, each with the worker and the clock it pulled
//! at, so anyone (an operator, the consistency tests) can check from the servers' side that no
//! worker pulled further ahead of the others than its model's staleness allows.

use std::collections::VecDeque;

use angel_proto::ClockedPull;
use parking_lot::Mutex;

/// Pulls kept: enough for a test's whole job, bounded for a long-running server.
const KEPT: usize = 1 << 16;

/// The newest [`KEPT`] training pulls, oldest first.
#[derive(Debug, Default)]
pub struct PullLog {
    inner: Mutex<(VecDeque<ClockedPull>, u64)>,
}

impl PullLog {
    /// Records a pull of matrix `matrix_id` by `worker` at `clock` that read partitions at
    /// `version` at most.
    pub fn record(&self, matrix_id: u32, (worker, clock): (u64, i64), version: u64) {
        let mut inner = self.inner.lock();
        let (pulls, order) = &mut *inner;
        if pulls.len() == KEPT {
            pulls.pop_front();
        }
        pulls.push_back(ClockedPull {
            matrix_id,
            worker,
            clock,
            order: *order,
            version,
        });
        *order += 1;
    }

    /// The kept pulls, oldest first.
    pub fn snapshot(&self) -> Vec<ClockedPull> {
        self.inner.lock().0.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_pulls_in_order() {
        let log = PullLog::default();
        for clock in 0..(KEPT as i64 + 3) {
            log.record(1, (7, clock), 0);
        }
        let pulls = log.snapshot();
        assert_eq!(pulls.len(), KEPT);
        assert_eq!(pulls[0].clock, 3);
        assert!(pulls.windows(2).all(|w| w[1].order == w[0].order + 1));
    }
}

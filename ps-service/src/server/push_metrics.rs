//! Pushes counted per client and matrix, so an operator (and the tests) can see which
//! processes wrote to a model: on a Ballista cluster, the executors and never the job's client.

use angel_proto::ClientPushes;
use angel_proto::pushes::{self, Sums};
use parking_lot::Mutex;

/// Counts of accepted pushes, keyed by (worker id, matrix id).
#[derive(Debug, Default)]
pub struct PushMetrics {
    counts: Mutex<Sums>,
}

impl PushMetrics {
    /// Adds the counts of `delta` (one or more accepted pushes) to its client and matrix.
    pub fn record(&self, delta: &ClientPushes) {
        pushes::accumulate(&mut self.counts.lock(), delta);
    }

    /// Every (client, matrix) count, ordered by client then matrix.
    pub fn snapshot(&self) -> Vec<ClientPushes> {
        self.counts.lock().values().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_add_up_per_client_and_matrix() {
        let metrics = PushMetrics::default();
        let push = |worker_id, elements, bytes| ClientPushes {
            worker_id,
            matrix_id: 1,
            pushes: 1,
            elements,
            bytes,
            ..Default::default()
        };
        metrics.record(&push(7, 10, 120));
        metrics.record(&push(7, 5, 60));
        metrics.record(&push(9, 1, 12));
        let all = metrics.snapshot();
        assert_eq!(all.len(), 2);
        assert_eq!(
            (
                all[0].worker_id,
                all[0].pushes,
                all[0].elements,
                all[0].bytes
            ),
            (7, 2, 15, 180)
        );
        assert_eq!((all[1].worker_id, all[1].pushes), (9, 1));
    }
}

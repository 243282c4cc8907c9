//! Push counters ([`ClientPushes`]): each server keeps one per (client, matrix); a status
//! carries every server's, and readers sum them over servers.

use std::collections::BTreeMap;

use crate::{ClientPushes, StatusReply};

/// Adds the counts of `delta` to `total` (same client and matrix).
fn add(total: &mut ClientPushes, delta: &ClientPushes) {
    total.pushes += delta.pushes;
    total.elements += delta.elements;
    total.bytes += delta.bytes;
    total.raw_bytes += delta.raw_bytes;
    total.slices += delta.slices;
    total.compressed_slices += delta.compressed_slices;
}

/// Counters keyed by (client, matrix), so they iterate ordered by client then matrix.
pub type Sums = BTreeMap<(u64, u32), ClientPushes>;

/// Adds `delta` to the counter of its client and matrix in `sums`.
pub fn accumulate(sums: &mut Sums, delta: &ClientPushes) {
    let total = sums
        .entry((delta.worker_id, delta.matrix_id))
        .or_insert_with(|| ClientPushes {
            worker_id: delta.worker_id,
            matrix_id: delta.matrix_id,
            ..Default::default()
        });
    add(total, delta);
}

/// One counter per (client, matrix), summed over the servers of `status`, ordered by client
/// then matrix.
pub fn totals(status: &StatusReply) -> Vec<ClientPushes> {
    let mut sums = Sums::new();
    for p in status.servers.iter().flat_map(|s| &s.pushes) {
        accumulate(&mut sums, p);
    }
    sums.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ServerStatus;

    #[test]
    fn totals_sum_over_servers_per_client_and_matrix() {
        let push = |worker_id, matrix_id, bytes| ClientPushes {
            worker_id,
            matrix_id,
            pushes: 1,
            bytes,
            ..Default::default()
        };
        let server = |pushes| ServerStatus {
            pushes,
            ..Default::default()
        };
        let status = StatusReply {
            servers: vec![
                server(vec![push(7, 1, 10), push(9, 1, 5)]),
                server(vec![push(7, 1, 20), push(7, 2, 1)]),
            ],
            ..Default::default()
        };
        let all = totals(&status);
        let got: Vec<_> = all
            .iter()
            .map(|p| (p.worker_id, p.matrix_id, p.pushes, p.bytes))
            .collect();
        assert_eq!(got, vec![(7, 1, 2, 30), (7, 2, 1, 1), (9, 1, 1, 5)]);
    }
}

//! Push traffic of a statement's matrices, from the master's status: what every executor or
//! task pushed, compressed or not.

use angel_proto::StatusReply;

/// (bytes sent, raw bytes) of every push to matrix `id` so far, from the master's status:
/// what every executor or task pushed, compressed or not.
pub fn push_traffic(status: &StatusReply, ids: &[u32]) -> (u64, u64) {
    angel_proto::pushes::totals(status)
        .iter()
        .filter(|p| ids.contains(&p.matrix_id))
        .fold((0, 0), |(b, r), p| (b + p.bytes, r + p.raw_bytes))
}

/// The push traffic between two readings of [`push_traffic`]. A server that died in between
/// takes its counts with it, so the difference is then a lower bound, not an underflow.
pub fn traffic(before: (u64, u64), after: (u64, u64)) -> (u64, u64) {
    (
        after.0.saturating_sub(before.0),
        after.1.saturating_sub(before.1),
    )
}

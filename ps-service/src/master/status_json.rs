//! The service's status as JSON (`GET /api/status`): what the status page shows, with stable
//! field names (docs/operations.md) for scripts too.

use std::collections::BTreeMap;

use angel_proto::StatusReply;
use angel_proto::pushes;
use serde_json::{Value, json};

/// `reply` as one JSON object: servers, matrices, counters, clients, workers, snapshots,
/// recoveries, each model's epochs and the leases of model rotation.
pub fn status_json(reply: &StatusReply) -> Value {
    let map = reply.map.clone().unwrap_or_default();
    let names: BTreeMap<u32, &str> = map
        .matrices
        .iter()
        .map(|m| (m.id, m.name.as_str()))
        .collect();
    json!({
        "map_epoch": map.epoch,
        "doubt": reply.doubt,
        "state_error": reply.state_error,
        "servers": reply.servers.iter().map(|s| {
            let (elements, bytes) = s.partitions.iter().fold((0, 0), |(e, b), p| (e + p.elements, b + p.bytes));
            json!({
                "id": s.server_id,
                "addr": s.addr,
                "state": match (s.standby, s.reachable) {
                    (true, _) => "standby",
                    (false, true) => "up",
                    (false, false) => "unreachable",
                },
                "heartbeat_ms": s.last_heartbeat_ms,
                "partitions": s.partitions.len(),
                "elements": elements,
                "bytes": bytes,
                "error": s.error,
                "snapshot_error": s.snapshot_error,
                "seen_epoch": s.seen_epoch,
            })
        }).collect::<Vec<_>>(),
        "matrices": map.matrices.iter().map(|m| json!({
            "name": m.name,
            "rows": m.rows,
            "cols": m.cols,
            "storage": m.storage().as_str_name(),
            "value_type": m.value_type().as_str_name(),
            "partitions": m.partitions.len(),
        })).collect::<Vec<_>>(),
        "counters": map.counters.iter().map(|c| json!({
            "name": c.name,
            "state": c.state().as_str_name(),
            "size": c.size,
        })).collect::<Vec<_>>(),
        "clients": pushes::totals(reply).into_iter().map(|p| json!({
            // Worker ids use all 64 bits: strings, which JavaScript keeps exact.
            "client": p.worker_id.to_string(),
            "matrix": names.get(&p.matrix_id).map_or_else(|| format!("#{}", p.matrix_id), |n| n.to_string()),
            "pushes": p.pushes,
            "elements": p.elements,
            "bytes": p.bytes,
            "raw_bytes": p.raw_bytes,
            "slices": p.slices,
            "compressed_slices": p.compressed_slices,
        })).collect::<Vec<_>>(),
        "workers": reply.workers.iter().map(|w| json!({
            "model": w.model,
            "worker": w.worker.to_string(),
            "clock": w.clock,
            "steps_per_sec": w.steps_per_sec,
            "slow": w.slow,
            "waited_ms": w.waited_ms,
            "left": w.left,
            "evicted": w.evicted,
        })).collect::<Vec<_>>(),
        "snapshots": {"dir": reply.snapshot_dir, "interval_ms": reply.snapshot_interval_ms},
        "recoveries": reply.recoveries.iter().map(|r| json!({
            "server": r.server_id,
            "addr": r.addr,
            "cause": r.cause,
            "at_unix_ms": r.at_unix_ms,
            "restored": r.restored,
            "millis": r.millis,
            "error": r.error,
            "replayed": r.changes_replayed,
            "lost": r.changes_lost,
        })).collect::<Vec<_>>(),
        "epochs": reply.epochs.iter().map(|e| json!({
            "model": e.model,
            "epoch": e.epoch,
            "rows": e.rows,
            "train_loss": e.train_loss,
            "holdout_loss": e.holdout_loss,
            "holdout_auc": e.holdout_auc,
            "holdout_accuracy": e.holdout_accuracy,
            "seconds": e.seconds,
        })).collect::<Vec<_>>(),
        "leases": reply.leases.iter().map(|l| json!({
            "model": l.model,
            "round": l.round,
            "step": l.step,
            "group": l.group,
            "rank": l.rank,
            "slice": l.slice,
            "start_us": l.start_us,
            "end_us": l.end_us,
            "rows": l.rows,
            "busy_us": l.busy_us,
        })).collect::<Vec<_>>(),
    })
}

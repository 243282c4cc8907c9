//! What a server reports at every Prometheus scrape: keys and bytes stored per matrix and
//! counter, its memory budget, and the pushes each client made.

use std::collections::BTreeMap;

use crate::telemetry::{NodeMetrics, Samples};
use crate::with_block;

use super::service::ServerService;

impl NodeMetrics for ServerService {
    fn sample(&self, out: &mut Samples) {
        let node = || ("node", self.node.clone());
        // (kind, name) -> (keys, bytes), summed over this server's partitions.
        let mut stored: BTreeMap<(&str, String), (u64, u64)> = BTreeMap::new();
        let mut names = BTreeMap::new();
        for p in self.parts.all() {
            let (keys, bytes) = with_block!(&*p.data.read(), b => b.usage());
            let sum = stored.entry(("matrix", p.matrix.name.clone())).or_default();
            *sum = (sum.0 + keys, sum.1 + bytes);
            names.insert(p.matrix.id, p.matrix.name.clone());
        }
        for c in self.parts.all_counters() {
            let (keys, bytes) = c.data.read().usage();
            let sum = stored
                .entry(("counter", c.counter.name.clone()))
                .or_default();
            *sum = (sum.0 + keys, sum.1 + bytes);
        }
        for ((kind, name), (keys, bytes)) in stored {
            let labels = vec![node(), ("kind", kind.to_string()), ("matrix", name)];
            out.gauge(
                "stored_keys",
                "Elements a server holds of a matrix (dense: rows x cols) or keys of a counter",
                labels.clone(),
                keys as f64,
            );
            out.gauge(
                "stored_bytes",
                "Bytes a server's storage holds for a matrix or counter",
                labels,
                bytes as f64,
            );
        }
        out.gauge(
            "memory_budget_bytes",
            "Bytes of partition data the server may hold",
            vec![node()],
            self.memory.budget() as f64,
        );
        out.gauge(
            "memory_held_bytes",
            "Bytes of partition data the server holds, as its memory account counts them",
            vec![node()],
            self.parts.bytes_held(None).0 as f64,
        );
        for push in self.pushes.snapshot() {
            let matrix = names
                .get(&push.matrix_id)
                .cloned()
                .unwrap_or_else(|| format!("#{}", push.matrix_id));
            let labels = vec![
                node(),
                ("client", push.worker_id.to_string()),
                ("matrix", matrix),
            ];
            let counts = [
                (
                    "client_pushes",
                    "Pushes a server accepted from a client",
                    push.pushes,
                ),
                (
                    "client_push_elements",
                    "Elements those pushes carried",
                    push.elements,
                ),
                (
                    "client_push_bytes",
                    "Payload bytes of those pushes as received",
                    push.bytes,
                ),
                (
                    "client_push_raw_bytes",
                    "Payload bytes of those pushes decoded",
                    push.raw_bytes,
                ),
            ];
            for (name, help, value) in counts {
                out.counter(name, help, labels.clone(), value);
            }
        }
    }
}

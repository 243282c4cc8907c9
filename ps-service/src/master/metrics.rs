//! What the master reports at every Prometheus scrape: its servers and their heartbeats,
//! the partition map, recoveries, and training workers' clocks.

use crate::telemetry::{NodeMetrics, Samples};

use super::service::MasterService;

impl NodeMetrics for MasterService {
    fn sample(&self, out: &mut Samples) {
        let node = || vec![("node", "master".to_string())];
        {
            let state = self.state.lock();
            for (id, server) in &state.servers {
                let labels = vec![("server", id.to_string()), ("addr", server.addr.clone())];
                let age = server.last_seen.elapsed();
                out.gauge(
                    "server_heartbeat_age_seconds",
                    "Time since the server's last heartbeat reached the master",
                    labels.clone(),
                    age.as_secs_f64(),
                );
                out.gauge(
                    "server_up",
                    "1 while the server's heartbeats arrive within the timeout",
                    labels,
                    f64::from(u8::from(age < self.server_timeout)),
                );
            }
            let count = |name, help, n: usize| (name, help, n as f64);
            for (name, help, value) in [
                count(
                    "matrices",
                    "Matrices the service holds",
                    state.matrices.len(),
                ),
                count("counters", "Distributed counters", state.counters.len()),
                count("servers", "Registered servers", state.servers.len()),
                (
                    "partition_map_epoch",
                    "Version of the partition map",
                    state.epoch as f64,
                ),
            ] {
                out.gauge(name, help, node(), value);
            }
            out.counter(
                "server_recoveries",
                "Servers declared dead, whose partitions were restored elsewhere",
                node(),
                state.recoveries.len() as u64,
            );
        }
        for worker in self.clocks.status() {
            let labels = vec![
                ("model", worker.model.clone()),
                ("worker", worker.worker.to_string()),
            ];
            out.gauge(
                "worker_clock",
                "A training worker's clock (steps finished)",
                labels.clone(),
                worker.clock as f64,
            );
            out.gauge(
                "worker_steps_per_second",
                "A training worker's steps per second of computing, waits excluded",
                labels.clone(),
                worker.steps_per_sec,
            );
            out.gauge(
                "worker_slow",
                "1 when the worker is slower than the median over the model's slow_factor",
                labels,
                f64::from(u8::from(worker.slow)),
            );
        }
    }
}

//! Metrics for Prometheus, and the HTTP listener that serves them.
//!
//! One [`Telemetry`] per process: a standalone service's master and servers share it, so
//! one scrape of `/metrics` covers them all, told apart by a `node` label.
//!
//! - [`rpc_layer`]: requests, errors, latency and bytes of every RPC, counted as they pass
//!   (the bodies' bytes by `counted_body`).
//! - [`samples`]: values read from the nodes' state at scrape time (stored keys and bytes,
//!   heartbeat ages, pushes per client).
//! - [`http`]: the `--http` listener: `/metrics`, and whatever routes a node adds.

mod counted_body;
pub mod http;
pub mod rpc_layer;
pub mod samples;

use std::sync::{Arc, Weak};

use parking_lot::Mutex;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::registry::Registry;

pub use rpc_layer::RpcMetricsLayer;
pub use samples::{NodeMetrics, Samples};

use rpc_layer::RpcFamilies;

/// The process's metrics: RPC counters, plus the nodes read at every scrape.
#[derive(Clone)]
pub struct Telemetry {
    registry: Arc<Registry>,
    rpc: Arc<RpcFamilies>,
    nodes: Arc<Nodes>,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

impl Default for Telemetry {
    fn default() -> Self {
        Self::new()
    }
}

impl Telemetry {
    /// An empty registry with the RPC families registered.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("angel_ps");
        let rpc = Arc::new(RpcFamilies::register(&mut registry));
        let nodes = Arc::new(Nodes::default());
        registry.register_collector(Box::new(nodes.clone()));
        Telemetry {
            registry: Arc::new(registry),
            rpc,
            nodes,
        }
    }

    /// The tower layer that counts the RPCs of the node called `node`.
    pub fn rpc_layer(&self, node: &str) -> RpcMetricsLayer {
        RpcMetricsLayer::new(self.rpc.clone(), node)
    }

    /// Reads `node` at every scrape, until it is dropped.
    pub fn watch(&self, node: Weak<dyn NodeMetrics>) {
        let mut nodes = self.nodes.0.lock();
        nodes.retain(|n| n.strong_count() > 0);
        nodes.push(node);
    }

    /// The Prometheus text exposition (format 0.0.4) of every metric.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail, and our collectors return no errors of their own.
        let _ = prometheus_client::encoding::prometheus_text::encode(&mut text, &self.registry);
        text
    }
}

/// The nodes read at scrape time, gathered into one family per metric name (two servers in
/// one process must not each print a `# TYPE` line for the same name).
#[derive(Default)]
struct Nodes(Mutex<Vec<Weak<dyn NodeMetrics>>>);

impl std::fmt::Debug for Nodes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Nodes")
    }
}

impl Collector for Nodes {
    fn encode(&self, encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let nodes: Vec<_> = self.0.lock().iter().filter_map(Weak::upgrade).collect();
        let mut samples = Samples::default();
        for node in nodes {
            node.sample(&mut samples);
        }
        samples.encode(encoder)
    }
}

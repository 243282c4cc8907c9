//! Values read from a node's state when Prometheus scrapes, rather than counted as they
//! change: what is stored per matrix, how long since each heartbeat, pushes per client.

use std::collections::BTreeMap;

use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;

/// A node (master or server) that reports its state at scrape time.
pub trait NodeMetrics: Send + Sync {
    /// Adds this node's current values to `samples`.
    fn sample(&self, samples: &mut Samples);
}

/// Label names and values of one sample.
pub type Labels = Vec<(&'static str, String)>;

/// Samples gathered from every node, grouped by metric name.
#[derive(Default)]
pub struct Samples {
    families: BTreeMap<&'static str, Family>,
}

struct Family {
    help: &'static str,
    kind: MetricType,
    points: Vec<(Labels, f64)>,
}

impl Samples {
    /// A value that goes up and down (`name` without the `angel_ps_` prefix).
    pub fn gauge(&mut self, name: &'static str, help: &'static str, labels: Labels, value: f64) {
        self.add(name, help, MetricType::Gauge, labels, value);
    }

    /// A count that only grows while its node lives (`name` without `_total`, which the
    /// exposition adds).
    pub fn counter(&mut self, name: &'static str, help: &'static str, labels: Labels, value: u64) {
        self.add(name, help, MetricType::Counter, labels, value as f64);
    }

    fn add(
        &mut self,
        name: &'static str,
        help: &'static str,
        kind: MetricType,
        labels: Labels,
        value: f64,
    ) {
        let family = self.families.entry(name).or_insert_with(|| Family {
            help,
            kind,
            points: Vec::new(),
        });
        family.points.push((labels, value));
    }

    /// Writes every family once, its samples from all nodes under it.
    pub(super) fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for (name, family) in &self.families {
            let mut metric = encoder.encode_descriptor(name, family.help, None, family.kind)?;
            for (labels, value) in &family.points {
                let point = metric.encode_family(labels)?;
                match family.kind {
                    // Counters come from u64 (`counter`); f64 holds them exactly below 2^53.
                    MetricType::Counter => ConstCounter::new(*value as u64).encode(point)?,
                    _ => ConstGauge::new(*value).encode(point)?,
                }
            }
        }
        Ok(())
    }
}

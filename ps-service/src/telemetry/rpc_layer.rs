//! [`RpcMetricsLayer`]: a tower layer on a node's gRPC server that counts, per method,
//! requests, errors (by gRPC code), latency, and bytes received and sent.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use http::{HeaderMap, Request, Response};
use parking_lot::RwLock;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tonic::body::Body;
use tower_layer::Layer;
use tower_service::Service;

use super::counted_body::CountedBody;

/// Distinct methods one node labels by name; further paths (a client calling made-up
/// methods) share the label `other`, so a caller cannot grow the registry without bound.
const MAX_METHODS: usize = 64;

/// Which node, and which RPC.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct RpcLabels {
    node: String,
    service: String,
    method: String,
}

/// [`RpcLabels`] and the gRPC code an error ended with.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct ErrorLabels {
    node: String,
    service: String,
    method: String,
    code: String,
}

type Latency = Family<RpcLabels, Histogram, fn() -> Histogram>;

/// The registered RPC metric families, shared by every node of the process.
pub(super) struct RpcFamilies {
    requests: Family<RpcLabels, Counter>,
    errors: Family<ErrorLabels, Counter>,
    latency: Latency,
    received: Family<RpcLabels, Counter>,
    sent: Family<RpcLabels, Counter>,
}

/// 100 µs to about 105 s, doubling.
fn latency_histogram() -> Histogram {
    Histogram::new(exponential_buckets(1e-4, 2.0, 21))
}

impl RpcFamilies {
    /// Creates the families and registers them in `registry`.
    pub(super) fn register(registry: &mut Registry) -> Self {
        let families = RpcFamilies {
            requests: Family::default(),
            errors: Family::default(),
            latency: Family::new_with_constructor(latency_histogram),
            received: Family::default(),
            sent: Family::default(),
        };
        registry.register("rpc_requests", "RPCs answered", families.requests.clone());
        registry.register(
            "rpc_errors",
            "RPCs answered with a gRPC error, by code",
            families.errors.clone(),
        );
        registry.register_with_unit(
            "rpc_duration",
            "Time from a request's arrival to its answer's headers",
            Unit::Seconds,
            families.latency.clone(),
        );
        registry.register_with_unit(
            "rpc_received",
            "Request body bytes received (gRPC framing included)",
            Unit::Bytes,
            families.received.clone(),
        );
        registry.register_with_unit(
            "rpc_sent",
            "Response body bytes sent (gRPC framing included)",
            Unit::Bytes,
            families.sent.clone(),
        );
        families
    }

    fn method(&self, node: &str, path: &str) -> MethodMetrics {
        let (service, method) = path
            .trim_start_matches('/')
            .split_once('/')
            .unwrap_or(("other", "other"));
        let labels = RpcLabels {
            node: node.to_string(),
            service: service.to_string(),
            method: method.to_string(),
        };
        MethodMetrics {
            requests: self.requests.get_or_create_owned(&labels),
            latency: self.latency.get_or_create_owned(&labels),
            received: self.received.get_or_create_owned(&labels),
            sent: self.sent.get_or_create_owned(&labels),
            errors: self.errors.clone(),
            labels,
        }
    }
}

/// One method's metrics on one node, looked up once and kept.
pub(super) struct MethodMetrics {
    requests: Counter,
    latency: Histogram,
    received: Counter,
    sent: Counter,
    errors: Family<ErrorLabels, Counter>,
    labels: RpcLabels,
}

impl MethodMetrics {
    /// Counts an error if `headers` (trailers, or a trailers-only answer) hold a non-OK
    /// `grpc-status`.
    pub(super) fn count_status(&self, headers: &HeaderMap) {
        let Some(status) = headers.get("grpc-status") else {
            return;
        };
        let code = status
            .to_str()
            .ok()
            .and_then(|s| s.parse::<i32>().ok())
            .map(tonic::Code::from_i32)
            .unwrap_or(tonic::Code::Unknown);
        if code != tonic::Code::Ok {
            let RpcLabels {
                node,
                service,
                method,
            } = self.labels.clone();
            let labels = ErrorLabels {
                node,
                service,
                method,
                code: format!("{code:?}"),
            };
            self.errors.get_or_create(&labels).inc();
        }
    }
}

/// Counts the RPCs of one node; see the module docs.
#[derive(Clone)]
pub struct RpcMetricsLayer {
    families: Arc<RpcFamilies>,
    node: Arc<str>,
    methods: Arc<RwLock<HashMap<String, Arc<MethodMetrics>>>>,
}

impl RpcMetricsLayer {
    pub(super) fn new(families: Arc<RpcFamilies>, node: &str) -> Self {
        RpcMetricsLayer {
            families,
            node: node.into(),
            methods: Default::default(),
        }
    }

    fn method(&self, path: &str) -> Arc<MethodMetrics> {
        if let Some(found) = self.methods.read().get(path) {
            return found.clone();
        }
        let mut methods = self.methods.write();
        let key = match methods.len() < MAX_METHODS {
            true => path,
            false => "/other/other",
        };
        methods
            .entry(key.to_string())
            .or_insert_with(|| Arc::new(self.families.method(&self.node, key)))
            .clone()
    }
}

impl<S> Layer<S> for RpcMetricsLayer {
    type Service = RpcMetrics<S>;

    fn layer(&self, inner: S) -> RpcMetrics<S> {
        RpcMetrics {
            inner,
            layer: self.clone(),
        }
    }
}

/// The service [`RpcMetricsLayer`] wraps around a node's routes.
#[derive(Clone)]
pub struct RpcMetrics<S> {
    inner: S,
    layer: RpcMetricsLayer,
}

type BoxFuture<T, E> = Pin<Box<dyn Future<Output = Result<T, E>> + Send>>;

impl<S> Service<Request<Body>> for RpcMetrics<S>
where
    S: Service<Request<Body>, Response = Response<Body>> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = BoxFuture<Response<Body>, S::Error>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        let method = self.layer.method(request.uri().path());
        let received = method.received.clone();
        let request = request.map(|body| Body::new(CountedBody::new(body, received, None)));
        let started = Instant::now();
        // The clone that was polled ready serves this call; the fresh clone waits for the next.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        Box::pin(async move {
            let response = inner.call(request).await?;
            method.requests.inc();
            method.latency.observe(started.elapsed().as_secs_f64());
            method.count_status(response.headers());
            let sent = method.sent.clone();
            Ok(response.map(|body| Body::new(CountedBody::new(body, sent, Some(method)))))
        })
    }
}

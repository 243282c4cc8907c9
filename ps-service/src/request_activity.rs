//! [`ActivityLayer`]: records on its connection's [`Activity`] each request a node serves, so
//! that a full gate closes connections that only idle (or only answer pings), never one with
//! a request in hand.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use http::Request;
use tonic::transport::server::TlsConnectInfo;
use tower_layer::Layer;
use tower_service::Service;

use crate::gate::GateInfo;

/// See the module documentation.
#[derive(Clone, Debug, Default)]
pub struct ActivityLayer;

impl<S> Layer<S> for ActivityLayer {
    type Service = Recorded<S>;

    fn layer(&self, inner: S) -> Recorded<S> {
        Recorded { inner }
    }
}

/// The service [`ActivityLayer`] wraps around a node's routes.
#[derive(Clone, Debug)]
pub struct Recorded<S> {
    inner: S,
}

impl<S, B> Service<Request<B>> for Recorded<S>
where
    S: Service<Request<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        let extensions = request.extensions();
        let info = (extensions.get::<GateInfo>())
            .or_else(|| (extensions.get::<TlsConnectInfo<GateInfo>>()).map(|t| t.get_ref()));
        let in_hand = info.map(|info| info.activity.request());
        let answer = self.inner.call(request);
        Box::pin(async move {
            let answer = answer.await;
            drop(in_hand);
            answer
        })
    }
}

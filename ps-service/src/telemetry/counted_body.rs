//! An HTTP body that counts the bytes passing through it and, for responses, notices a
//! gRPC error carried in the trailers.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use prometheus_client::metrics::counter::Counter;

use super::rpc_layer::MethodMetrics;

/// `inner`, adding the length of every data frame to `bytes`.
pub(super) struct CountedBody {
    inner: tonic::body::Body,
    bytes: Counter,
    /// Set on responses: a non-OK `grpc-status` trailer counts as that method's error.
    errors: Option<std::sync::Arc<MethodMetrics>>,
}

impl CountedBody {
    pub(super) fn new(
        inner: tonic::body::Body,
        bytes: Counter,
        errors: Option<std::sync::Arc<MethodMetrics>>,
    ) -> Self {
        CountedBody {
            inner,
            bytes,
            errors,
        }
    }
}

impl Body for CountedBody {
    type Data = Bytes;
    type Error = tonic::Status;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, tonic::Status>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &polled {
            if let Some(data) = frame.data_ref() {
                this.bytes.inc_by(data.len() as u64);
            }
            if let (Some(trailers), Some(method)) = (frame.trailers_ref(), &this.errors) {
                method.count_status(trailers);
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

//! [`AuthLayer`]: the check of the service token on every RPC a node answers (see
//! [`angel_proto::credential`]). A request without it, or with another, gets
//! UNAUTHENTICATED saying which setting to give, and reaches no handler: nothing changes.

use std::net::SocketAddr;
use std::task::{Context, Poll};

use angel_proto::credential::{HEADER, TOKEN_FILE_VAR, TOKEN_VAR, Token};
use angel_proto::{PsError, Result};

use crate::access::{Access, NamespaceTokens};
use futures::future::{Either, Ready, ready};
use http::{Request, Response};
use rand::Rng;
use tonic::Status;
use tonic::body::Body;
use tower_layer::Layer;
use tower_service::Service;

/// A fresh random service token (`angel-ps token`): 256 bits as hex.
pub fn generate_token() -> String {
    let mut rng = rand::rng();
    format!("{:032x}{:032x}", rng.random::<u128>(), rng.random::<u128>())
}

/// Refuses to serve `addr` (`what` names it) without a token unless it is a loopback
/// address: anyone who can reach a wider address could otherwise overwrite or drop any model.
/// Warns when such an address is served without TLS: the token would cross the network in
/// clear text.
pub fn require_token(addr: SocketAddr, token: Option<&Token>, tls: bool, what: &str) -> Result<()> {
    let loopback = addr.ip().is_loopback();
    if !loopback && !tls {
        tracing::warn!(
            "serving {what} on {addr} without TLS: the token and all data cross the network \
             in clear text; give --tls-cert, --tls-key and --tls-ca"
        );
    }
    match token.is_some() || loopback {
        true => Ok(()),
        false => Err(PsError::InvalidArgument(format!(
            "refusing to serve {what} on {addr} without a token: anyone who reaches it could \
             change any model. Make one with `angel-ps token > angel.token`, give every master \
             and server --token-file angel.token, and every client {TOKEN_FILE_VAR}=angel.token \
             (or {TOKEN_VAR} with the token itself)"
        ))),
    }
}

/// Refuses tokens limited to namespaces without the service token: nodes talk to each other
/// with the service token, and a service without one checks nothing.
pub fn check_scoped(token: Option<&Token>, scoped: &NamespaceTokens) -> Result<()> {
    match token {
        None if !scoped.is_empty() => Err(PsError::InvalidArgument(
            "--namespace-tokens needs the service token beside it (--token-file, ANGEL_TOKEN \
             or ANGEL_TOKEN_FILE): masters and servers call each other with it"
                .into(),
        )),
        Some(token) if scoped.contains(token) => Err(PsError::InvalidArgument(
            "--namespace-tokens holds the service token itself: give each team a token of its \
             own (`angel-ps token`)"
                .into(),
        )),
        _ => Ok(()),
    }
}

/// Checks the token of every request, when the node has one, and attaches the [`Access`] it
/// gives.
#[derive(Clone, Debug)]
pub struct AuthLayer {
    token: Option<Token>,
    scoped: NamespaceTokens,
}

impl AuthLayer {
    /// Checks for `token` (anything) or one of `scoped` (its namespaces); no `token` lets
    /// every request through.
    pub fn new(token: Option<Token>, scoped: NamespaceTokens) -> Self {
        AuthLayer { token, scoped }
    }
}

impl<S> Layer<S> for AuthLayer {
    type Service = Authenticated<S>;

    fn layer(&self, inner: S) -> Authenticated<S> {
        Authenticated {
            inner,
            token: self.token.clone(),
            scoped: self.scoped.clone(),
        }
    }
}

/// The service [`AuthLayer`] wraps around a node's routes.
#[derive(Clone, Debug)]
pub struct Authenticated<S> {
    inner: S,
    token: Option<Token>,
    scoped: NamespaceTokens,
}

impl<S> Service<Request<Body>> for Authenticated<S>
where
    S: Service<Request<Body>, Response = Response<Body>>,
{
    type Response = Response<Body>;
    type Error = S::Error;
    type Future = Either<S::Future, Ready<std::result::Result<Response<Body>, S::Error>>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<std::result::Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, mut request: Request<Body>) -> Self::Future {
        let Some(token) = &self.token else {
            return Either::Left(self.inner.call(request));
        };
        let sent = request.headers().get(HEADER).map(|v| v.as_bytes());
        let access = sent.and_then(|sent| match token.accepts(sent) {
            true => Some(Access::All),
            false => self.scoped.find(sent),
        });
        let refusal = match (access, sent) {
            (Some(access), _) => {
                request.extensions_mut().insert(access);
                return Either::Left(self.inner.call(request));
            }
            (None, Some(_)) => {
                "wrong token: this service was started with another one; give the \
                        client the service's token (ANGEL_TOKEN, or ANGEL_TOKEN_FILE naming its \
                        file)"
            }
            (None, None) => {
                "this service requires a token: give the client the service's token \
                     (ANGEL_TOKEN, or ANGEL_TOKEN_FILE naming its file; --token-file for a \
                     master or server)"
            }
        };
        Either::Right(ready(Ok(Status::unauthenticated(refusal).into_http())))
    }
}

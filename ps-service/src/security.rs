//! [`Security`]: who may talk to a node and over what — the service token, the tokens limited
//! to namespaces, and TLS. One value the master, server and standalone configurations share,
//! checked and turned into the RPC and HTTP checks the same way for every node, so a new
//! setting is added here once.

use std::net::SocketAddr;

use angel_proto::Result;
use angel_proto::credential::{Credential, Token};
use angel_proto::tls::{NodeTls, Trust};

use crate::access::NamespaceTokens;
use crate::auth::{self, AuthLayer};
use crate::telemetry::http::HttpAccess;

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Security {
    /// The service token every RPC must carry, and the node's own calls send (`--token-file`);
    /// none: no check, and only a loopback address may be served.
    pub token: Option<Token>,
    /// Tokens limited to namespaces (`--namespace-tokens`); they need `token` beside them.
    pub namespace_tokens: NamespaceTokens,
    /// The certificate and key the node serves with, and the CA the nodes it calls must be
    /// signed by (`--tls-cert`, `--tls-key`, `--tls-ca`); none: plain HTTP/2.
    pub tls: Option<NodeTls>,
}

impl Security {
    /// Refuses to serve `bind` as `who` (the master, a server) when the settings leave it
    /// open: a wider address than loopback without a token, or namespace tokens without the
    /// service token.
    pub fn check(&self, bind: SocketAddr, who: &str) -> Result<()> {
        auth::require_token(bind, self.token.as_ref(), self.tls.is_some(), who)?;
        auth::check_scoped(self.token.as_ref(), &self.namespace_tokens)
    }

    /// The layer that checks every RPC's token.
    pub fn auth_layer(&self) -> AuthLayer {
        AuthLayer::new(self.token.clone(), self.namespace_tokens.clone())
    }

    /// What the node's HTTP listener (status page, `/metrics`) checks.
    pub fn http_access(&self) -> HttpAccess {
        HttpAccess {
            token: self.token.clone(),
            scoped: self.namespace_tokens.clone(),
        }
    }

    /// The credential the node's own calls to other nodes carry.
    pub fn credential(&self) -> Credential {
        Credential::new(self.token.as_ref())
    }

    /// The CA the nodes it calls are checked against; none: plain HTTP/2.
    pub fn trust(&self) -> Option<&Trust> {
        self.tls.as_ref().map(|t| &t.trust)
    }
}

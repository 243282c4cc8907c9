//! Who may talk to the service, and over what: the token and TLS flags of `master`, `server`
//! and `standalone` ([`NodeAccess`]; a client command's are `angel_runner::client_access`).
//! Tokens are given as files or environment variables (`ANGEL_TOKEN`, `ANGEL_TOKEN_FILE`),
//! never as arguments, so they never show in a process list.

use std::path::PathBuf;

use angel_client::{PsError, Result};
use angel_proto::credential::Token;
use angel_proto::tls::NodeTls;
use angel_ps_service::access::NamespaceTokens;
use angel_ps_service::security::Security;
use clap::Args;

/// The token and TLS flags of a node.
#[derive(Debug, Args)]
pub struct NodeAccess {
    /// The service token every RPC must carry: a file holding it (`angel-ps token > FILE`).
    /// Without it, ANGEL_TOKEN (the token) or else ANGEL_TOKEN_FILE (its file), as clients
    /// read them; with none, there is no check and only a loopback address is served.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Tokens limited to namespaces, one per line: `NAMESPACE[,NAMESPACE...] TOKEN` (`#`
    /// comments). A client with one may only name matrices, counters and models of its
    /// namespaces (`NAMESPACE/name`). Needs the service token too.
    #[arg(long, value_name = "FILE")]
    pub namespace_tokens: Option<PathBuf>,
    /// Serve TLS with this PEM certificate (chain first); it must name the address others
    /// reach the node at (IP address or DNS name). Needs --tls-key and --tls-ca.
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,
    /// The PEM CA certificate every node's certificate is signed by: this node checks the
    /// nodes it calls (servers the master, the master its servers) against it.
    #[arg(long, value_name = "FILE")]
    pub tls_ca: Option<PathBuf>,
}

impl TryFrom<&NodeAccess> for Security {
    type Error = PsError;

    /// The token of --token-file or the environment, the tokens of --namespace-tokens (none
    /// without it) and TLS from the three flags (all or none); an error names a bad file.
    fn try_from(flags: &NodeAccess) -> Result<Self> {
        let namespace_tokens = match &flags.namespace_tokens {
            Some(path) => NamespaceTokens::from_file(path)?,
            None => NamespaceTokens::default(),
        };
        let (cert, key, ca) = (&flags.tls_cert, &flags.tls_key, &flags.tls_ca);
        Ok(Security {
            token: Token::resolve(flags.token_file.as_deref())?,
            namespace_tokens,
            tls: NodeTls::resolve(cert.as_deref(), key.as_deref(), ca.as_deref())?,
        })
    }
}

//! [`ClientAccess`]: the token and CA of a program that calls a running service (the job
//! runner, `status`, `snapshot`, `drop`, the Python package). Tokens are given as files or
//! environment variables (`ANGEL_TOKEN`, `ANGEL_TOKEN_FILE`), never as arguments, so they
//! never show in a process list.

use std::path::PathBuf;

use angel_client::{ClientConfig, Result};
use angel_proto::credential::Token;
use angel_proto::tls::Trust;

/// The token and CA flags of a client command.
#[derive(Debug, Default)]
#[cfg_attr(feature = "flags", derive(clap::Args))]
pub struct ClientAccess {
    /// A file holding the service token (or a namespace token) sent with every request.
    /// Without it, ANGEL_TOKEN (the token) or else ANGEL_TOKEN_FILE (its file).
    #[cfg_attr(feature = "flags", arg(long, value_name = "FILE"))]
    pub token_file: Option<PathBuf>,
    /// The PEM CA certificate the service's TLS certificates are checked against. Without
    /// it, the file ANGEL_TLS_CA names; with neither, plain HTTP/2.
    #[cfg_attr(feature = "flags", arg(long, value_name = "FILE"))]
    pub tls_ca: Option<PathBuf>,
    /// A token a program passes in (the Python package's `token=`); it comes before
    /// --token-file. Never a flag: a token on the command line would show in a process list.
    #[cfg_attr(feature = "flags", arg(skip))]
    pub token: Option<Token>,
}

impl ClientAccess {
    /// The client settings of the environment, with the given token, --token-file and
    /// --tls-ca when given.
    pub fn config(&self) -> Result<ClientConfig> {
        let token = match &self.token {
            Some(token) => Some(token.clone()),
            None => Token::resolve(self.token_file.as_deref())?,
        };
        Ok(ClientConfig {
            token,
            trust: Trust::resolve(self.tls_ca.as_deref())?,
            ..ClientConfig::from_env()?
        })
    }
}

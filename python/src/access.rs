//! Who the package's calls are made as: a token and CA given as arguments, else those of the
//! environment (`ANGEL_TOKEN`, `ANGEL_TOKEN_FILE`, `ANGEL_TLS_CA`), as the command line does.

use std::path::Path;

use angel_client::ClientConfig;
use angel_proto::credential::Token;
use angel_proto::tls::Trust;
use pyo3::prelude::*;

use crate::errors::Raise;

/// The token given as `token=`, checked as the service checks tokens.
pub fn token(token: Option<&str>) -> PyResult<Option<Token>> {
    token
        .map(|text| Token::new(text, "token="))
        .transpose()
        .py()
}

/// A client's settings: the environment's, with the given token, CA and namespace.
pub fn config(
    token: Option<&str>,
    tls_ca: Option<&Path>,
    namespace: Option<String>,
) -> PyResult<ClientConfig> {
    let environment = ClientConfig::from_env().py()?;
    let token = match self::token(token)? {
        Some(token) => Some(token),
        None => environment.token.clone(),
    };
    let trust = match tls_ca {
        Some(path) => Some(Trust::from_file(path, "tls_ca=").py()?),
        None => environment.trust.clone(),
    };
    Ok(ClientConfig {
        token,
        trust,
        namespace: namespace.unwrap_or_default(),
        ..environment
    })
}

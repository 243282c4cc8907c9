//! TLS on the service's gRPC (rustls): every node serves with a certificate and key
//! (`--tls-cert`, `--tls-key`), and whatever calls a node — clients, executors, servers
//! calling the master, the master calling servers — checks that certificate against a CA
//! (`--tls-ca`, or `ANGEL_TLS_CA` for clients). Without them everything is plain HTTP/2.

use std::fmt;
use std::path::{Path, PathBuf};

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tonic::transport::{Certificate, ClientTlsConfig, Endpoint, Identity, ServerTlsConfig};

use crate::{PsError, Result};

/// The variable naming the CA certificate file clients trust (what `--tls-ca` sets).
pub const CA_VAR: &str = "ANGEL_TLS_CA";

/// The CA certificates a caller verifies nodes against.
#[derive(Clone)]
pub struct Trust {
    ca: Certificate,
    file: PathBuf,
}

impl fmt::Debug for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Trust({})", self.file.display())
    }
}

impl Trust {
    /// The PEM certificates in the file at `path` (`flag` names where it was given).
    pub fn from_file(path: &Path, flag: &str) -> Result<Self> {
        let pem = read(path, flag)?;
        certificates(&pem, path, flag)?;
        Ok(Trust {
            ca: Certificate::from_pem(pem),
            file: path.to_path_buf(),
        })
    }

    /// The CA of `file` if given, else of the file `ANGEL_TLS_CA` names; None when neither is.
    pub fn resolve(file: Option<&Path>) -> Result<Option<Self>> {
        match file {
            Some(path) => Self::from_file(path, "--tls-ca").map(Some),
            None => match std::env::var_os(CA_VAR) {
                Some(path) => Self::from_file(Path::new(&path), CA_VAR).map(Some),
                None => Ok(None),
            },
        }
    }
}

/// A node's TLS: the certificate chain and key it serves with, and the CA it checks the nodes
/// it calls against. `Debug` shows the files, never the key.
#[derive(Clone)]
pub struct NodeTls {
    identity: Identity,
    cert_file: PathBuf,
    /// What this node trusts when it calls another node.
    pub trust: Trust,
}

impl fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "NodeTls({}, {:?})", self.cert_file.display(), self.trust)
    }
}

impl NodeTls {
    /// TLS from the three flags, all given or none (None); a missing one, an unreadable file
    /// or one that holds no certificate or key is an error naming the flag and file.
    pub fn resolve(
        cert: Option<&Path>,
        key: Option<&Path>,
        ca: Option<&Path>,
    ) -> Result<Option<Self>> {
        let (cert, key, ca) = match (cert, key, ca) {
            (None, None, None) => return Ok(None),
            (Some(cert), Some(key), Some(ca)) => (cert, key, ca),
            _ => {
                return Err(PsError::InvalidArgument(
                    "give --tls-cert, --tls-key and --tls-ca together: the certificate and key \
                     this node serves with, and the CA that signed every node's certificate"
                        .into(),
                ));
            }
        };
        let (cert_pem, key_pem) = (read(cert, "--tls-cert")?, read(key, "--tls-key")?);
        certificates(&cert_pem, cert, "--tls-cert")?;
        if PrivateKeyDer::from_pem_slice(&key_pem).is_err() {
            return Err(PsError::InvalidArgument(format!(
                "--tls-key {}: no PEM private key (PKCS#8, PKCS#1 or SEC1) in the file",
                key.display()
            )));
        }
        Ok(Some(NodeTls {
            identity: Identity::from_pem(cert_pem, key_pem),
            cert_file: cert.to_path_buf(),
            trust: Trust::from_file(ca, "--tls-ca")?,
        }))
    }

    /// What tonic's server needs to serve TLS.
    pub fn server_config(&self) -> ServerTlsConfig {
        ServerTlsConfig::new().identity(self.identity.clone())
    }
}

/// The endpoint of the node at `addr` (`host:port`): `https` checked against `trust` when
/// given (the certificate must name the host, an IP address or a DNS name), else `http`.
pub fn endpoint(addr: &str, trust: Option<&Trust>) -> Result<Endpoint> {
    let scheme = if trust.is_some() { "https" } else { "http" };
    let endpoint = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| PsError::InvalidArgument(format!("bad address '{addr}': {e}")))?;
    match trust {
        Some(trust) => endpoint
            .tls_config(ClientTlsConfig::new().ca_certificate(trust.ca.clone()))
            .map_err(|e| {
                PsError::InvalidArgument(format!(
                    "TLS for '{addr}' with the CA of {}: {}",
                    trust.file.display(),
                    chain(&e)
                ))
            }),
        None => Ok(endpoint),
    }
}

/// `e` and its sources, outermost first: tonic's transport errors say only "transport error"
/// and keep the TLS reason (unknown issuer, wrong name) underneath.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

fn read(path: &Path, flag: &str) -> Result<Vec<u8>> {
    crate::config_file::read(path, flag)
}

/// Checks `pem` holds at least one certificate.
fn certificates(pem: &[u8], path: &Path, flag: &str) -> Result<()> {
    let certs = CertificateDer::pem_slice_iter(pem).collect::<std::result::Result<Vec<_>, _>>();
    match certs {
        Ok(certs) if !certs.is_empty() => Ok(()),
        Ok(_) => Err(PsError::InvalidArgument(format!(
            "{flag} {}: no PEM certificate in the file",
            path.display()
        ))),
        Err(e) => Err(PsError::InvalidArgument(format!(
            "{flag} {}: not a PEM certificate file: {e}",
            path.display()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_or_empty_files_name_the_flag_and_file() {
        let dir = std::env::temp_dir().join(format!("angel-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let missing = dir.join("missing.pem");

        let err = Trust::from_file(&empty, "--tls-ca")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--tls-ca") && err.contains("empty.pem"),
            "{err}"
        );
        assert!(err.contains("no PEM certificate"), "{err}");
        let err = Trust::from_file(&missing, "--tls-ca")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("missing.pem") && err.contains("cannot read"),
            "{err}"
        );
        let err = NodeTls::resolve(Some(&empty), None, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("together"), "{err}");
        assert!(NodeTls::resolve(None, None, None).unwrap().is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn the_scheme_follows_trust() {
        let plain = endpoint("127.0.0.1:7077", None).unwrap();
        assert_eq!(plain.uri().scheme_str(), Some("http"));
        assert!(endpoint("no spaces allowed:1", None).is_err());
    }
}

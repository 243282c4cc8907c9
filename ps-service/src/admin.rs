//! The credential of the master's calls to servers. Creating and dropping partitions and
//! sealing counters are the master's decisions: a server takes them from the master only.
//!
//! Each server draws a random token when it starts and hands it to the master when it
//! registers; the master sends it with every `CreatePartitions`, `DropPartitions` and
//! `CounterAdmin` call, and the server refuses those calls without it (PERMISSION_DENIED). No
//! other process learns a server's token, so nothing needs configuring, embedded or not.

use angel_proto::credential::Credential;
use angel_proto::{PsError, Result};
use rand::Rng;
use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::{Request, Status};

/// The request header that carries the token.
pub const HEADER: &str = "x-angel-admin";
/// Longest token a server may register.
pub const MAX_TOKEN: usize = 128;

/// A fresh token: 128 random bits as hex.
pub fn new_token() -> String {
    format!("{:032x}", rand::rng().random::<u128>())
}

/// Adds a server's token, and the service's credential, to every request of the master's
/// client for that server.
#[derive(Debug, Clone)]
pub struct AdminToken(MetadataValue<Ascii>, Credential);

impl AdminToken {
    /// The interceptor for `token`, as a server registered it, sending `credential` too.
    pub fn new(token: &str, credential: Credential) -> Result<Self> {
        let valid = !token.is_empty() && token.len() <= MAX_TOKEN;
        match valid && token.bytes().all(|b| b.is_ascii_alphanumeric()) {
            true => Ok(AdminToken(
                token.parse().map_err(|_| bad_token())?,
                credential,
            )),
            false => Err(bad_token()),
        }
    }
}

fn bad_token() -> PsError {
    PsError::InvalidArgument(format!(
        "a server's admin token must be 1 to {MAX_TOKEN} letters or digits"
    ))
}

impl Interceptor for AdminToken {
    fn call(&mut self, mut request: Request<()>) -> std::result::Result<Request<()>, Status> {
        request.metadata_mut().insert(HEADER, self.0.clone());
        self.1.add(&mut request);
        Ok(request)
    }
}

/// Refuses `request` to `rpc` unless it carries `token`. The comparison takes the same time
/// wherever the first difference is.
pub fn check<T>(request: &Request<T>, token: &str, rpc: &str) -> Result<()> {
    let sent = request.metadata().get(HEADER).map(|v| v.as_bytes());
    let same = sent.is_some_and(|sent| {
        sent.len() == token.len()
            && sent
                .iter()
                .zip(token.as_bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    });
    match same {
        true => Ok(()),
        false => Err(PsError::PermissionDenied(format!(
            "{rpc} is the master's call; this request does not carry the credential the master \
             received when this server registered"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_requests_with_the_token_pass() {
        let token = new_token();
        assert_eq!(token.len(), 32);
        let mut with = AdminToken::new(&token, Credential::default()).unwrap();
        let request = with.call(Request::new(())).unwrap();
        check(&request, &token, "CreatePartitions").unwrap();
        let err = check(&Request::new(()), &token, "CreatePartitions").unwrap_err();
        assert!(matches!(err, PsError::PermissionDenied(_)), "{err}");
        assert!(check(&request, &new_token(), "DropPartitions").is_err());
        assert!(AdminToken::new("bad token\n", Credential::default()).is_err());
        assert!(AdminToken::new(&"a".repeat(MAX_TOKEN + 1), Credential::default()).is_err());
    }
}

//! The service token: a shared secret every RPC carries (`authorization: Bearer TOKEN`) and
//! the master and servers check when they were started with one (`--token-file`, or
//! `ANGEL_TOKEN`). Clients — jobs, executors, `angel-ps status` — read it from their own
//! environment, never from a plan or a request; no log or error shows it.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use tonic::metadata::{Ascii, MetadataValue};
use tonic::service::Interceptor;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::Channel;
use tonic::{Request, Status};

use crate::{PsError, Result};

/// The variable holding the token itself.
pub const TOKEN_VAR: &str = "ANGEL_TOKEN";
/// The variable naming a file that holds the token (what `--token-file` sets).
pub const TOKEN_FILE_VAR: &str = "ANGEL_TOKEN_FILE";
/// The request header that carries it.
pub const HEADER: &str = "authorization";
/// Shortest token accepted: 128 bits as hex.
const MIN_LEN: usize = 32;
/// Longest token accepted.
const MAX_LEN: usize = 1024;

/// A service token. Its `Debug` shows nothing of it.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(Arc<str>);

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

impl Token {
    /// `text` (surrounding whitespace ignored) as a token: 32 to 1024 printable ASCII
    /// characters, no spaces. `source` names where it came from in errors.
    pub fn new(text: &str, source: &str) -> Result<Self> {
        let text = text.trim();
        let printable = text.bytes().all(|b| b.is_ascii_graphic());
        if !(MIN_LEN..=MAX_LEN).contains(&text.len()) || !printable {
            return Err(PsError::InvalidArgument(format!(
                "the token in {source} must be {MIN_LEN} to {MAX_LEN} printable characters \
                 without spaces (it has {} characters); make one with `angel-ps token > FILE`",
                text.len()
            )));
        }
        Ok(Token(text.into()))
    }

    /// The token in the file at `path`.
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = crate::config_file::read_text(path, "token file")?;
        Self::new(&text, &format!("token file {}", path.display()))
    }

    /// The token of `file` if given, else of `ANGEL_TOKEN`, else of the file `ANGEL_TOKEN_FILE`
    /// names; None when there is none.
    pub fn resolve(file: Option<&Path>) -> Result<Option<Self>> {
        if let Some(path) = file {
            return Self::from_file(path).map(Some);
        }
        if let Ok(text) = std::env::var(TOKEN_VAR) {
            return Self::new(&text, TOKEN_VAR).map(Some);
        }
        match std::env::var_os(TOKEN_FILE_VAR) {
            Some(path) => Self::from_file(Path::new(&path)).map(Some),
            None => Ok(None),
        }
    }

    /// Whether `header` (the `authorization` value of a request) carries this token. Takes
    /// the same time wherever the first difference is.
    pub fn accepts(&self, header: &[u8]) -> bool {
        let Some(sent) = header.strip_prefix(b"Bearer ") else {
            return false;
        };
        sent.len() == self.0.len()
            && sent
                .iter()
                .zip(self.0.as_bytes())
                .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                == 0
    }
}

/// Adds the token (if any) to every request of a client: the interceptor of
/// [`AuthChannel`].
#[derive(Clone, Default)]
pub struct Credential(Option<MetadataValue<Ascii>>);

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Credential(<redacted>)")
    }
}

impl Credential {
    /// The credential that sends `token`; none sends nothing.
    pub fn new(token: Option<&Token>) -> Self {
        Credential(token.map(|t| {
            format!("Bearer {}", t.0)
                .parse()
                .expect("a token is printable ASCII")
        }))
    }

    /// Adds the header to `request`.
    pub fn add<T>(&self, request: &mut Request<T>) {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert(HEADER, value.clone());
        }
    }
}

impl Interceptor for Credential {
    fn call(&mut self, mut request: Request<()>) -> std::result::Result<Request<()>, Status> {
        self.add(&mut request);
        Ok(request)
    }
}

/// A channel whose requests carry the service token.
pub type AuthChannel = InterceptedService<Channel, Credential>;

//! [`ClientConfig`]: how a client talks to the service (deadline, message limit, identity,
//! replay buffer, token, TLS, namespace), from code or the environment; and the tuned endpoint
//! every connection is made with.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use angel_proto::credential::{Credential, Token};
use angel_proto::{PsError, Result};
use tonic::transport::Endpoint;

use angel_proto::tls::{self, Trust, chain};

use angel_proto::limits::{MAX_FRAME, WINDOW};

/// How often a connection with calls in flight is pinged.
const KEEP_ALIVE: Duration = Duration::from_secs(2);

/// How long a ping may go unanswered before the connection's calls fail.
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(4);

/// How a client talks to the service.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Deadline of every request.
    pub timeout: Duration,
    /// Largest request the client sends; larger ones fail with [`PsError::TooLarge`] before
    /// anything is sent. Keep it at or below the servers' `--max-message-bytes`.
    pub max_message_bytes: usize,
    /// Identifies this client in requests (idempotent retries, per-client metrics).
    pub worker_id: u64,
    /// Bytes of changes kept until a snapshot holds them, to replay to a partition restored
    /// from an older snapshot; past it the oldest are dropped (counted as lost if needed).
    pub replay_bytes: usize,
    /// The service token sent with every request (`ANGEL_TOKEN` or `ANGEL_TOKEN_FILE`).
    pub token: Option<Token>,
    /// The CA the nodes' TLS certificates are checked against (`ANGEL_TLS_CA`); none: plain
    /// HTTP/2.
    pub trust: Option<Trust>,
    /// The namespace names are taken in: a matrix or counter `name` is `NAMESPACE/name` on the
    /// service, unless `name` holds a `/` itself (qualified on purpose). Empty: names are
    /// taken as given.
    pub namespace: String,
}

impl Default for ClientConfig {
    fn default() -> Self {
        ClientConfig {
            timeout: Duration::from_secs(30),
            max_message_bytes: 256 << 20,
            worker_id: u64::from(std::process::id()) << 20 | next_local_id(),
            replay_bytes: 256 << 20,
            token: None,
            trust: None,
            namespace: String::new(),
        }
    }
}

/// The variable that sizes the replay buffer of the clients SQL jobs and executors share.
pub const REPLAY_MB_VAR: &str = "ANGEL_REPLAY_MB";

impl ClientConfig {
    /// The defaults, with [`ClientConfig::replay_bytes`] from `ANGEL_REPLAY_MB` (megabytes)
    /// when it is set, the token of `ANGEL_TOKEN` or `ANGEL_TOKEN_FILE`, and the CA of
    /// `ANGEL_TLS_CA`; an error naming the variable when one is malformed.
    pub fn from_env() -> Result<Self> {
        let mut config = ClientConfig {
            token: Token::resolve(None)?,
            trust: Trust::resolve(None)?,
            ..ClientConfig::default()
        };
        if let Ok(text) = std::env::var(REPLAY_MB_VAR) {
            let mb: usize = text.trim().parse().map_err(|_| {
                PsError::InvalidArgument(format!(
                    "{REPLAY_MB_VAR}='{text}': give the replay buffer's size as a whole number \
                     of megabytes"
                ))
            })?;
            config.replay_bytes = mb.saturating_mul(1 << 20);
        }
        Ok(config)
    }

    /// The interceptor that adds the token to requests.
    pub(super) fn credential(&self) -> Credential {
        Credential::new(self.token.as_ref())
    }
}

/// The process id inside a default [`ClientConfig::worker_id`], so a status can name the
/// process (a Ballista executor, a job's client) behind each push.
pub fn worker_pid(worker_id: u64) -> u64 {
    worker_id >> 20
}

fn next_local_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// Why the master at `addr` could not be reached, with the reason underneath tonic's
/// "transport error".
pub(super) fn unreachable(addr: &str, e: &tonic::transport::Error) -> PsError {
    PsError::Unavailable(format!("master {addr} is unreachable: {}", chain(e)))
}

/// A tonic endpoint tuned for bulk transfers: large HTTP/2 windows, no Nagle delay, and the
/// configured request deadline; TLS when the config trusts a CA. While calls are in flight
/// the connection is pinged: a peer that stops answering (a frozen process) fails its calls
/// within [`KEEP_ALIVE`] plus [`KEEP_ALIVE_TIMEOUT`] instead of holding them as long as it
/// sleeps.
pub(super) fn endpoint(addr: &str, config: &ClientConfig) -> Result<Endpoint> {
    tls::endpoint(addr, config.trust.as_ref()).map(|e| {
        e.timeout(config.timeout)
            .http2_keep_alive_interval(KEEP_ALIVE)
            .keep_alive_timeout(KEEP_ALIVE_TIMEOUT)
            .connect_timeout(Duration::from_secs(5))
            .tcp_nodelay(true)
            .initial_stream_window_size(Some(WINDOW))
            .initial_connection_window_size(Some(WINDOW))
            .max_frame_size(Some(MAX_FRAME))
    })
}

//! Typed errors, one per gRPC status code the service uses, each with a message that names
//! the matrix, key, row or server involved.

use tonic::{Code, Status};

/// Metadata key and value that mark a FAILED_PRECONDITION status as a stale partition map.
pub const STALE_MAP_MARKER: (&str, &str) = ("angel-error", "stale-map");

/// Names a NOT_FOUND lists at most: an error's text travels in a header, which has a limit.
const MAX_NAMES_LISTED: usize = 20;

/// Result alias used across the client and the service.
pub type Result<T, E = PsError> = std::result::Result<T, E>;

/// Every failure a caller of the PS can see. The variant is the gRPC status code; the text says
/// what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PsError {
    /// Unknown matrix, server or PS function (NOT_FOUND).
    #[error("not found: {0}")]
    NotFound(String),
    /// A name that is already taken (ALREADY_EXISTS).
    #[error("already exists: {0}")]
    AlreadyExists(String),
    /// A key or row outside the matrix (OUT_OF_RANGE).
    #[error("out of range: {0}")]
    OutOfRange(String),
    /// Malformed request: wrong value type, dimension mismatch, bad payload (INVALID_ARGUMENT).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// A request over the size limit, or storage that cannot be allocated (RESOURCE_EXHAUSTED).
    #[error("too large: {0}")]
    TooLarge(String),
    /// A server or the master cannot be reached (UNAVAILABLE).
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The caller routed with an outdated partition map (FAILED_PRECONDITION, marked with
    /// [`STALE_MAP_MARKER`] so clients know to refresh and retry).
    #[error("stale partition map: {0}")]
    StaleMap(String),
    /// A call in the wrong lifecycle state, such as counting into a sealed counter
    /// (FAILED_PRECONDITION).
    #[error("wrong state: {0}")]
    WrongState(String),
    /// A call only the master may make, made without its credential (PERMISSION_DENIED).
    #[error("permission denied: {0}")]
    PermissionDenied(String),
    /// A request without the service's token, or with a wrong one (UNAUTHENTICATED).
    #[error("unauthenticated: {0}")]
    Unauthenticated(String),
    /// A deadline passed (DEADLINE_EXCEEDED).
    #[error("timed out: {0}")]
    Timeout(String),
    /// A corrupt or missing snapshot, or partitions lost with a server no snapshot covered
    /// (DATA_LOSS).
    #[error("data loss: {0}")]
    DataLoss(String),
    /// Anything else; a bug if it ever shows.
    #[error("internal error: {0}")]
    Internal(String),
}

impl PsError {
    /// The gRPC status code this error travels as.
    pub fn code(&self) -> Code {
        match self {
            PsError::NotFound(_) => Code::NotFound,
            PsError::AlreadyExists(_) => Code::AlreadyExists,
            PsError::OutOfRange(_) => Code::OutOfRange,
            PsError::InvalidArgument(_) => Code::InvalidArgument,
            PsError::TooLarge(_) => Code::ResourceExhausted,
            PsError::Unavailable(_) => Code::Unavailable,
            PsError::StaleMap(_) | PsError::WrongState(_) => Code::FailedPrecondition,
            PsError::PermissionDenied(_) => Code::PermissionDenied,
            PsError::Unauthenticated(_) => Code::Unauthenticated,
            PsError::Timeout(_) => Code::DeadlineExceeded,
            PsError::DataLoss(_) => Code::DataLoss,
            PsError::Internal(_) => Code::Internal,
        }
    }

    /// NOT_FOUND for a matrix name, listing the `known` ones (the first 20) so a typo is easy
    /// to spot.
    pub fn no_matrix(name: &str, known: &[&str]) -> Self {
        let known = match known.len() {
            0 => "none".to_string(),
            n if n <= MAX_NAMES_LISTED => known.join(", "),
            n => format!(
                "{} and {} more",
                known[..MAX_NAMES_LISTED].join(", "),
                n - MAX_NAMES_LISTED
            ),
        };
        PsError::NotFound(format!("no matrix named '{name}' (known: {known})"))
    }

    /// Turns a status received from `peer` (a server or master address) into a typed error.
    /// Transport failures become [`PsError::Unavailable`] naming the peer.
    pub fn from_status(status: Status, peer: &str) -> Self {
        let msg = status.message().to_string();
        // tonic reports its own message-size cap as OUT_OF_RANGE; gRPC says RESOURCE_EXHAUSTED.
        if status.code() == Code::OutOfRange && msg.contains("message length too large") {
            return PsError::TooLarge(format!("{peer}: {msg}"));
        }
        match status.code() {
            Code::NotFound => PsError::NotFound(msg),
            Code::AlreadyExists => PsError::AlreadyExists(msg),
            Code::OutOfRange => PsError::OutOfRange(msg),
            Code::InvalidArgument => PsError::InvalidArgument(msg),
            Code::ResourceExhausted => PsError::TooLarge(msg),
            Code::FailedPrecondition if is_stale_map(&status) => PsError::StaleMap(msg),
            Code::FailedPrecondition => PsError::WrongState(msg),
            Code::PermissionDenied => PsError::PermissionDenied(msg),
            Code::Unauthenticated => PsError::Unauthenticated(format!("{peer}: {msg}")),
            Code::DeadlineExceeded => PsError::Timeout(format!("{peer}: {msg}")),
            Code::DataLoss => PsError::DataLoss(msg),
            Code::Unavailable | Code::Unknown | Code::Cancelled => {
                // A transport failure's reason (refused, reset, a TLS alert) is its source.
                let why = match std::error::Error::source(&status) {
                    Some(source) => {
                        let chain = crate::tls::chain(source);
                        match chain.starts_with(&msg) {
                            true => chain,
                            false => format!("{msg}: {chain}"),
                        }
                    }
                    None => msg,
                };
                PsError::Unavailable(format!("{peer} is unreachable: {why}"))
            }
            _ => PsError::Internal(format!("{peer}: {msg}")),
        }
    }
}

impl From<PsError> for Status {
    fn from(err: PsError) -> Status {
        let msg = match &err {
            PsError::NotFound(m)
            | PsError::AlreadyExists(m)
            | PsError::OutOfRange(m)
            | PsError::InvalidArgument(m)
            | PsError::TooLarge(m)
            | PsError::Unavailable(m)
            | PsError::StaleMap(m)
            | PsError::WrongState(m)
            | PsError::PermissionDenied(m)
            | PsError::Unauthenticated(m)
            | PsError::Timeout(m)
            | PsError::DataLoss(m)
            | PsError::Internal(m) => m.clone(),
        };
        let mut status = Status::new(err.code(), msg);
        if matches!(err, PsError::StaleMap(_)) {
            let (key, value) = STALE_MAP_MARKER;
            status
                .metadata_mut()
                .insert(key, tonic::metadata::MetadataValue::from_static(value));
        }
        status
    }
}

fn is_stale_map(status: &Status) -> bool {
    let (key, value) = STALE_MAP_MARKER;
    status.metadata().get(key).is_some_and(|v| v == value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_round_trip_keeps_code_and_message() {
        let errors = [
            PsError::NotFound("matrix 'w'".into()),
            PsError::OutOfRange("key 9 of matrix 'w'".into()),
            PsError::InvalidArgument("value type".into()),
            PsError::TooLarge("request".into()),
            PsError::StaleMap("epoch".into()),
            PsError::WrongState("counter 'c' is READ".into()),
            PsError::AlreadyExists("matrix 'w'".into()),
            PsError::DataLoss("snapshot p".into()),
        ];
        for err in errors {
            let back = PsError::from_status(Status::from(err.clone()), "127.0.0.1:1");
            assert_eq!(back, err);
        }
    }

    #[test]
    fn a_not_found_lists_at_most_twenty_names() {
        let names: Vec<String> = (0..5000).map(|i| format!("team/model-{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let err = PsError::no_matrix("team/x", &names).to_string();
        assert!(
            err.contains("model-19 and 4980 more") && !err.contains("model-20,"),
            "{err}"
        );
        assert!(err.len() < 600, "{} bytes", err.len());
    }

    #[test]
    fn tonic_size_cap_is_resource_exhausted() {
        let status = Status::out_of_range("Error, decoded message length too large: found 9 bytes");
        let err = PsError::from_status(status, "server 10.0.0.1:7");
        assert_eq!(err.code(), Code::ResourceExhausted, "{err}");
    }

    #[test]
    fn unavailable_names_the_peer() {
        let err = PsError::from_status(Status::unavailable("connection refused"), "10.0.0.1:7");
        assert_eq!(err.code(), Code::Unavailable);
        assert!(err.to_string().contains("10.0.0.1:7"), "{err}");
    }
}

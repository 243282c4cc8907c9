//! angel-storage: one storage layer for everything angel-ps reads and writes.
//!
//! A [`Location`] is a plain path or a URL: `file://`, `s3://bucket/key` (object_store's S3
//! client, configured the usual way: `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`,
//! `AWS_REGION`, and `AWS_ENDPOINT` with `AWS_ALLOW_HTTP=true` for S3-compatible servers such as
//! MinIO or Ceph) and `hdfs://` or `viewfs://` (hdfs-native, which reads `HADOOP_CONF_DIR`).
//! [`Stores`] builds one object store per bucket or name node on first use and keeps it.
//!
//! - [`location`]: parsing paths and URLs, naming the problem when one is wrong.
//! - [`stores`]: the object store behind each location.
//! - [`read`]: a file as a blocking stream of its (decompressed) bytes, for the parsers.
//! - [`list`]: the files a path names: one file, a directory's, or a glob's.
//! - [`write`]: whole files written at once, and directories removed.
//! - [`upload`]: a file written as a stream of parts, published whole at the end.
//! - [`versions`]: a directory that changes only by whole, committed versions.
//! - `runtime`: the one runtime every store's I/O runs on, apart from any caller's.
//!
//! It depends on no SQL engine: the parameter servers (snapshots) use it as the SQL layer does.

pub mod list;
pub mod location;
pub mod read;
mod runtime;
pub mod stores;
pub mod upload;
pub mod versions;
pub mod write;

pub use location::Location;
pub use stores::{Stores, stores};

/// Why a storage operation failed; every variant names the location.
#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    /// The text is not a path or URL angel-ps can use.
    #[error("{0}")]
    BadLocation(String),
    /// The store refused or failed (missing file, credentials, unreachable endpoint).
    #[error("{location}: {source}{hint}")]
    Store {
        /// Where.
        location: String,
        /// What the store said.
        source: object_store::Error,
        /// What to check, for the kinds of failure a user can fix.
        hint: &'static str,
    },
    /// Reading or decompressing the bytes failed.
    #[error("cannot read {0}: {1}")]
    Io(String, std::io::Error),
}

impl StorageError {
    /// A read of `location` that failed.
    pub fn io(location: &Location, e: std::io::Error) -> Self {
        StorageError::Io(location.to_string(), e)
    }

    /// True when the file or directory is not there (as opposed to unreadable).
    pub fn is_not_found(&self) -> bool {
        match self {
            StorageError::Store { source, .. } => {
                matches!(source, object_store::Error::NotFound { .. })
            }
            StorageError::Io(_, e) => e.kind() == std::io::ErrorKind::NotFound,
            StorageError::BadLocation(_) => false,
        }
    }

    /// The store's error at `location`, with what to check for it.
    pub fn store(location: &Location, source: object_store::Error) -> Self {
        use object_store::Error as E;
        let text = source.to_string();
        // Listing errors arrive as generic ones carrying the HTTP status and S3 error code.
        let refused = matches!(
            source,
            E::PermissionDenied { .. } | E::Unauthenticated { .. }
        ) || [
            "403 Forbidden",
            "401 Unauthorized",
            "SignatureDoesNotMatch",
            "InvalidAccessKeyId",
            "AccessDenied",
            "ExpiredToken",
        ]
        .iter()
        .any(|code| text.contains(code));
        let hint = match (location.store.scheme(), refused, &source) {
            (_, _, E::NotFound { .. }) => "",
            ("s3", true, _) => {
                " (refused: check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN and \
                 the bucket's policy)"
            }
            ("s3", false, E::Generic { .. }) => {
                " (check AWS_ENDPOINT, AWS_ALLOW_HTTP=true for an http:// endpoint, AWS_REGION, \
                 and that the bucket exists and the server answers)"
            }
            ("hdfs" | "viewfs", true, _) => " (refused: check the user and the path's permissions)",
            ("hdfs" | "viewfs", false, E::Generic { .. }) => {
                " (check the name node address, HADOOP_CONF_DIR, and that the name node answers)"
            }
            ("file", true, _) => " (refused: check the file's permissions)",
            _ => "",
        };
        StorageError::Store {
            location: location.to_string(),
            source,
            hint,
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = StorageError> = std::result::Result<T, E>;

//! [`Error`]: what training can fail on, told apart so the SQL layer can say whether a
//! statement was wrong (an option), its data was (a row), or the service failed.

use angel_client::PsError;

/// A training layer result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// See the module documentation. Every message names what is wrong: the option and value,
/// the row, the matrix.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An option, or a combination of options, is not allowed.
    #[error("{0}")]
    Option(String),
    /// What training was given cannot be used: a row, a matrix that is not a model.
    #[error("{0}")]
    Input(String),
    /// A setting of the process (an environment variable) is malformed.
    #[error("{0}")]
    Setting(String),
    /// The service refused or failed.
    #[error("angel-ps: {0}")]
    Ps(#[from] PsError),
    /// The engine running a statement failed (a pass, a query: DataFusion's error, kept
    /// whole so the SQL layer answers it as it came).
    #[error("{0}")]
    Engine(Box<dyn std::error::Error + Send + Sync>),
}

impl From<arrow::error::ArrowError> for Error {
    fn from(e: arrow::error::ArrowError) -> Self {
        Error::Engine(Box::new(e))
    }
}

/// Fails with [`Error::Option`].
pub fn option_err<T>(message: impl Into<String>) -> Result<T> {
    Err(Error::Option(message.into()))
}

/// Fails with [`Error::Input`].
pub fn input_err<T>(message: impl Into<String>) -> Result<T> {
    Err(Error::Input(message.into()))
}

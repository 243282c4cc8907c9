//! The package's exceptions: [`Error`] for everything it raises, with subclasses for what a
//! caller handles apart (no access, nothing of that name, bad arguments, service away).
//! Each carries the message `angel-ps` prints after `error:`.

use angel_client::PsError;
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

create_exception!(
    angel_ps,
    Error,
    PyException,
    "An angel-ps job or call failed; the message is the one `angel-ps` prints."
);
create_exception!(
    angel_ps,
    AccessError,
    Error,
    "The service refused the token (missing, wrong, or not of this namespace)."
);
create_exception!(
    angel_ps,
    NotFoundError,
    Error,
    "No matrix, counter, model or PS function has that name."
);
create_exception!(
    angel_ps,
    InvalidArgumentError,
    Error,
    "A call's arguments or a job's SQL do not make sense; the message names the problem."
);
create_exception!(
    angel_ps,
    UnavailableError,
    Error,
    "The service (or a server of it) could not be reached in time."
);

/// The exception for a service error: its class from the error's kind, its message the
/// error's text.
pub fn from_ps(e: &PsError) -> PyErr {
    let message = e.to_string();
    match e {
        PsError::PermissionDenied(_) | PsError::Unauthenticated(_) => AccessError::new_err(message),
        PsError::NotFound(_) => NotFoundError::new_err(message),
        PsError::InvalidArgument(_) | PsError::OutOfRange(_) | PsError::TooLarge(_) => {
            InvalidArgumentError::new_err(message)
        }
        PsError::Unavailable(_) | PsError::Timeout(_) => UnavailableError::new_err(message),
        _ => Error::new_err(message),
    }
}

/// The exception for any error of a job: a service error's class when the error is one, else
/// [`Error`]; the message is the whole chain the command line prints.
pub fn from_any(e: &(dyn std::error::Error + 'static)) -> PyErr {
    match e.downcast_ref::<PsError>() {
        Some(ps) => from_ps(ps),
        None => Error::new_err(e.to_string()),
    }
}

/// `?` on a service call inside a Python method.
pub trait Raise<T> {
    /// The value, or the error as a Python exception.
    fn py(self) -> PyResult<T>;
}

impl<T> Raise<T> for Result<T, PsError> {
    fn py(self) -> PyResult<T> {
        self.map_err(|e| from_ps(&e))
    }
}

/// Registers the exceptions in the module.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("Error", py.get_type::<Error>())?;
    m.add("AccessError", py.get_type::<AccessError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add(
        "InvalidArgumentError",
        py.get_type::<InvalidArgumentError>(),
    )?;
    m.add("UnavailableError", py.get_type::<UnavailableError>())?;
    Ok(())
}

//! NumPy arrays in and out of the PS verbs: keys as column numbers, values as one row per key
//! and one column per output row of the matrix (the servers keep them output after output).

use numpy::ndarray::Array2;
use numpy::{AllowTypeChange, IntoPyArray, PyArrayLike1, PyArrayLike2};
use pyo3::conversion::FromPyObjectOwned;
use pyo3::prelude::*;

use crate::errors::InvalidArgumentError;

/// `obj` as a NumPy array (a list, a tuple, an array of any dtype).
fn asarray<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyAny>> {
    obj.py().import("numpy")?.call_method1("asarray", (obj,))
}

/// The keys of a pull or push: a one-dimensional sequence of non-negative integers.
pub fn keys(obj: &Bound<'_, PyAny>) -> PyResult<Vec<u64>> {
    let array = asarray(obj)?;
    let ndim: usize = array.getattr("ndim")?.extract()?;
    let size: usize = array.getattr("size")?.extract()?;
    if ndim != 1 {
        return Err(InvalidArgumentError::new_err(format!(
            "keys must be one-dimensional, got {ndim} dimensions"
        )));
    }
    if size == 0 {
        return Ok(Vec::new());
    }
    let dtype = array.getattr("dtype")?;
    let kind: String = dtype.getattr("kind")?.extract()?;
    match kind.as_str() {
        "u" => Ok(array
            .extract::<PyArrayLike1<u64, AllowTypeChange>>()?
            .as_array()
            .to_vec()),
        "i" => {
            let signed = array.extract::<PyArrayLike1<i64, AllowTypeChange>>()?;
            let keys = signed.as_array();
            (keys.iter())
                .map(|&k| {
                    u64::try_from(k).map_err(|_| {
                        InvalidArgumentError::new_err(format!(
                            "key {k} is negative: keys are column numbers from 0"
                        ))
                    })
                })
                .collect()
        }
        _ => Err(InvalidArgumentError::new_err(format!(
            "keys must be integers (column numbers), got an array of {}",
            dtype.str()?
        ))),
    }
}

/// The values of a push of `keys` keys to `width` output rows, in the servers' order (output
/// after output): from an array of shape (keys, width), or (keys,) when `width` is 1.
pub fn values<T>(obj: &Bound<'_, PyAny>, keys: usize, width: usize) -> PyResult<Vec<T>>
where
    T: numpy::Element + Copy + for<'py> FromPyObjectOwned<'py>,
{
    let array = asarray(obj)?;
    let shape: Vec<usize> = array.getattr("shape")?.extract()?;
    let wrong = || {
        let wanted = match width {
            1 => format!("({keys},) or ({keys}, 1)"),
            _ => format!("({keys}, {width})"),
        };
        InvalidArgumentError::new_err(format!(
            "values have shape {shape:?} for {keys} keys: give shape {wanted}"
        ))
    };
    match shape.as_slice() {
        [n] if *n == keys && width == 1 => Ok(array
            .extract::<PyArrayLike1<T, AllowTypeChange>>()?
            .as_array()
            .to_vec()),
        [n, w] if *n == keys && *w == width => {
            let array = array.extract::<PyArrayLike2<T, AllowTypeChange>>()?;
            // Transposed: the servers take one output row after the other.
            Ok(array.as_array().t().iter().copied().collect())
        }
        _ => Err(wrong()),
    }
}

/// Pulled values (output after output, `keys` each) as an array of shape (keys, width).
pub fn table<'py, T: numpy::Element + Copy>(
    py: Python<'py>,
    pulled: Vec<T>,
    keys: usize,
    width: usize,
) -> PyResult<Bound<'py, PyAny>> {
    let by_output = Array2::from_shape_vec((width, keys), pulled)
        .map_err(|e| crate::errors::Error::new_err(format!("pulled values: {e}")))?;
    Ok(by_output
        .reversed_axes()
        .as_standard_layout()
        .to_owned()
        .into_pyarray(py)
        .into_any())
}

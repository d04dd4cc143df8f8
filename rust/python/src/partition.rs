//! Bindings of `dpstream_core::partition` (path encoding, cells, consistency).

use crate::{rows_array, to_py_err, zeroed};
use dpstream_core::partition::consistency::enforce_consistency;
use dpstream_core::partition::path::{cell_bounds, encode_points};
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

/// Level-`depth` paths of the rows of a C-contiguous float64 (n, d) array.
#[pyfunction]
fn encode_points_array(
    py: Python<'_>,
    points: PyReadonlyArray2<'_, f64>,
    depth: u32,
) -> PyResult<Py<PyArray1<u64>>> {
    let dim = points.shape()[1];
    let data = points.as_slice()?;
    let mut out = zeroed::<u64>(points.shape()[0])?;
    py.detach(|| encode_points(data, dim, depth, &mut out))
        .map_err(to_py_err)?;
    Ok(out.into_pyarray(py).unbind())
}

/// Lower and upper corners, each (n, dim), of the level-`level` cells `thetas`.
#[pyfunction]
fn cell_bounds_array(
    py: Python<'_>,
    thetas: PyReadonlyArray1<'_, u64>,
    level: u32,
    dim: usize,
) -> PyResult<(Py<PyArray2<f64>>, Py<PyArray2<f64>>)> {
    if dim == 0 {
        return Err(PyValueError::new_err("dim must be at least 1"));
    }
    if level > dpstream_core::partition::path::MAX_DEPTH {
        return Err(PyValueError::new_err(format!(
            "level must be at most 63, got {level}"
        )));
    }
    let thetas = thetas.as_slice()?;
    if level < 64 {
        if let Some(t) = thetas.iter().find(|&&t| level < 64 && t >> level != 0) {
            return Err(PyValueError::new_err(format!(
                "cell index {t} does not fit in {level} bits"
            )));
        }
    }
    let n = thetas.len();
    let mut lower = zeroed::<f64>(n * dim)?;
    let mut upper = zeroed::<f64>(n * dim)?;
    for (i, &t) in thetas.iter().enumerate() {
        let r = i * dim..(i + 1) * dim;
        cell_bounds(t, level, dim, &mut lower[r.clone()], &mut upper[r]);
    }
    Ok((rows_array(py, lower, dim)?, rows_array(py, upper, dim)?))
}

fn consistency<C: dpstream_core::partition::consistency::Count + numpy::Element>(
    py: Python<'_>,
    parent: &[C],
    left: &[C],
    right: &[C],
) -> PyResult<(Py<PyArray1<C>>, Py<PyArray1<C>>)> {
    if parent.len() != left.len() || parent.len() != right.len() {
        return Err(PyValueError::new_err(
            "parent, left and right must have the same length",
        ));
    }
    let mut l = left.to_vec();
    let mut r = right.to_vec();
    for ((p, a), b) in parent.iter().zip(l.iter_mut()).zip(r.iter_mut()) {
        enforce_consistency(*p, a, b);
    }
    Ok((l.into_pyarray(py).unbind(), r.into_pyarray(py).unbind()))
}

/// A pyfunction `$name(parent, left, right)`: Algorithm 4 applied to each
/// (parent, left, right) triple of `$t` counts.
macro_rules! consistency_fn {
    ($(#[$doc:meta])* $name:ident, $t:ty) => {
        $(#[$doc])*
        #[pyfunction]
        fn $name(
            py: Python<'_>,
            parent: PyReadonlyArray1<'_, $t>,
            left: PyReadonlyArray1<'_, $t>,
            right: PyReadonlyArray1<'_, $t>,
        ) -> PyResult<(Py<PyArray1<$t>>, Py<PyArray1<$t>>)> {
            consistency(py, parent.as_slice()?, left.as_slice()?, right.as_slice()?)
        }
    };
}

consistency_fn!(
    /// Algorithm 4 applied to each (parent, left, right) triple of float64 counts.
    consistency_f64,
    f64
);
consistency_fn!(
    /// Algorithm 4 applied to each (parent, left, right) triple of int64 counts.
    consistency_i64,
    i64
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(encode_points_array, m)?)?;
    m.add_function(wrap_pyfunction!(cell_bounds_array, m)?)?;
    m.add_function(wrap_pyfunction!(consistency_f64, m)?)?;
    m.add_function(wrap_pyfunction!(consistency_i64, m)?)?;
    Ok(())
}

//! Bindings of `dpstream_core::synth::OnlineSynthesizer` (He, Vershynin, Zhu, Algorithm 1).

use crate::{
    cells_arrays, fraction, points_slice, rational, rows_array, to_py_err, with_rng, zeroed, Rng,
};
use dpstream_core::partition::path::cell_bounds;
use dpstream_core::synth::OnlineSynthesizer;
use num_bigint::BigUint;
use numpy::{PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The online synthesizer; see `dpstream.OnlineSynthesizer`.
#[pyclass(module = "dpstream._core", name = "OnlineSynthesizer")]
pub(crate) struct PyOnlineSynthesizer {
    inner: OnlineSynthesizer,
}

synthesizer_methods! {
    PyOnlineSynthesizer(OnlineSynthesizer),
    new();
    get { depth: u32, n_regions: usize }

    /// `(lower, upper, counts)`: corners `(L, dim)` and the consistent
    /// non-negative counts `(L,)` of the `L = 2^depth` leaves, by path.
    fn cells(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<(Py<PyArray2<f64>>, Py<PyArray2<f64>>, Py<PyArray1<i64>>)> {
        let (dim, depth) = (self.inner.dim(), self.inner.depth());
        let inner = &mut self.inner;
        let counts = py.detach(|| inner.leaf_counts()).map_err(to_py_err)?;
        let size = counts
            .len()
            .checked_mul(dim)
            .ok_or_else(|| PyValueError::new_err("too many cells"))?;
        let mut lower = zeroed::<f64>(size)?;
        let mut upper = zeroed::<f64>(size)?;
        py.detach(|| {
            for (theta, (lo, hi)) in lower
                .chunks_exact_mut(dim)
                .zip(upper.chunks_exact_mut(dim))
                .enumerate()
            {
                cell_bounds(theta as u64, depth, dim, lo, hi);
            }
        });
        cells_arrays(py, lower, upper, counts, dim)
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.inner.to_bytes().map_err(to_py_err)?;
        Ok(PyBytes::new(py, &data))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOnlineSynthesizer>()?;
    Ok(())
}

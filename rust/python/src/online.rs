//! Bindings of `dpstream_core::synth::OnlineSynthesizer` (He, Vershynin, Zhu, Algorithm 1)
//! and of `ChunkedRelease` (any online synthesizer's release, drawn chunk by chunk).

use crate::{
    cells_arrays, fraction, points_slice, rational, rows_array, to_py_err, with_rng, zeroed, Rng,
};
use dpstream_core::partition::path::cell_bounds;
use dpstream_core::synth::{ChunkedRelease, OnlineSynthesizer, CHUNK_ROWS};
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

/// An online release drawn chunk by chunk; see `dpstream.online_dask`.
#[pyclass(module = "dpstream._core", name = "OnlineRelease")]
pub(crate) struct PyOnlineRelease {
    pub(crate) inner: ChunkedRelease<'static>,
}

#[pymethods]
impl PyOnlineRelease {
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn rows(&self) -> u64 {
        self.inner.rows()
    }
    #[getter]
    fn chunk_rows(&self) -> u64 {
        self.inner.chunk_rows()
    }
    #[getter]
    fn n_chunks(&self) -> u64 {
        self.inner.n_chunks()
    }
    /// Whether the release's noise came from a seeded generator (not private).
    #[getter]
    fn seeded(&self) -> bool {
        self.inner.is_seeded()
    }

    /// `(start, stop)`: the rows of chunk `index` in the release.
    fn chunk_bounds(&self, index: u64) -> PyResult<(u64, u64)> {
        self.inner.chunk_bounds(index).map_err(to_py_err)
    }

    /// Chunk `index`'s `(rows, dim)` points.
    fn chunk(&self, py: Python<'_>, index: u64) -> PyResult<Py<PyArray2<f64>>> {
        let inner = &self.inner;
        let out = py.detach(|| inner.chunk(index)).map_err(to_py_err)?;
        rows_array(py, out, inner.dim())
    }

    /// The whole `(rows, dim)` release: the chunks in order.
    fn sample(&self, py: Python<'_>) -> PyResult<Py<PyArray2<f64>>> {
        let inner = &self.inner;
        let out = py.detach(|| inner.sample()).map_err(to_py_err)?;
        rows_array(py, out, inner.dim())
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.inner.to_bytes().map_err(to_py_err)?;
        Ok(PyBytes::new(py, &data))
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: ChunkedRelease::from_bytes(data).map_err(to_py_err)?,
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyOnlineSynthesizer>()?;
    m.add_class::<PyOnlineRelease>()?;
    m.add("RELEASE_CHUNK_ROWS", CHUNK_ROWS)?;
    Ok(())
}

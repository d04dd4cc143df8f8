//! Bindings of `dpstream_core::synth::OnlineSynthesizer` (He, Vershynin, Zhu, Algorithm 1)
//! and of `ChunkedRelease` (any online synthesizer's release, drawn chunk by chunk).

use crate::{fraction, points_slice, rational, rows_array, to_py_err, with_rng, zeroed, Rng};
use dpstream_core::partition::path::cell_bounds;
use dpstream_core::synth::{ChunkedRelease, OnlineSynthesizer, CHUNK_ROWS};
use num_bigint::BigUint;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The online synthesizer; see `dpstream.OnlineSynthesizer`.
#[pyclass(module = "dpstream._core", name = "OnlineSynthesizer")]
pub(crate) struct PyOnlineSynthesizer {
    inner: OnlineSynthesizer,
}

#[pymethods]
impl PyOnlineSynthesizer {
    /// The synthesizer owns a generator derived from `rng` (seeded iff `rng`
    /// is), or, for `None`, one derived from a fresh OS-seeded generator.
    #[new]
    #[pyo3(signature = (eps_num, eps_den, dim, rng=None))]
    fn new(
        py: Python<'_>,
        eps_num: BigUint,
        eps_den: BigUint,
        dim: usize,
        rng: Option<&Bound<'_, Rng>>,
    ) -> PyResult<Self> {
        let eps = rational(eps_num, eps_den, "epsilon")?;
        let own = with_rng(py, rng, |r| r.derive())?;
        let inner = OnlineSynthesizer::new(&eps, dim, own).map_err(to_py_err)?;
        Ok(Self { inner })
    }

    /// `(numerator, denominator)` of ε.
    fn epsilon(&self) -> (BigUint, BigUint) {
        let e = self.inner.epsilon();
        fraction(e)
    }
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn time(&self) -> u64 {
        self.inner.time()
    }
    #[getter]
    fn depth(&self) -> u32 {
        self.inner.depth()
    }
    #[getter]
    fn n_regions(&self) -> usize {
        self.inner.n_regions()
    }
    /// Whether the noise comes from a caller-seeded generator (not private).
    #[getter]
    fn seeded(&self) -> bool {
        self.inner.is_seeded()
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// Feed a C-contiguous float64 (n, dim) batch, one point per time step;
    /// all-or-nothing.
    fn update(&mut self, py: Python<'_>, points: PyReadonlyArray2<'_, f64>) -> PyResult<()> {
        let data = points_slice(&points, self.inner.dim())?;
        let inner = &mut self.inner;
        py.detach(|| inner.update(data)).map_err(to_py_err)
    }

    /// `(rows, dim)` synthetic points: `t` rows for `size=None`, else `size`,
    /// drawn in chunks of `chunk_rows` rows.
    #[pyo3(signature = (size=None, chunk_rows=CHUNK_ROWS))]
    fn release(
        &mut self,
        py: Python<'_>,
        size: Option<u64>,
        chunk_rows: u64,
    ) -> PyResult<Py<PyArray2<f64>>> {
        let dim = self.inner.dim();
        let inner = &mut self.inner;
        let out = py
            .detach(|| inner.release_chunked(size, chunk_rows))
            .map_err(to_py_err)?;
        rows_array(py, out, dim)
    }

    /// The same release as `release`, to draw chunk by chunk (closes the
    /// open epoch and draws the sampling key now).
    #[pyo3(signature = (size=None, chunk_rows=CHUNK_ROWS))]
    fn release_sampler(
        &mut self,
        py: Python<'_>,
        size: Option<u64>,
        chunk_rows: u64,
    ) -> PyResult<PyOnlineRelease> {
        let inner = &mut self.inner;
        let r = py
            .detach(|| inner.release_sampler(size, chunk_rows))
            .map_err(to_py_err)?;
        Ok(PyOnlineRelease { inner: r })
    }

    /// `(lower, upper, counts)`: corners `(L, dim)` and the consistent
    /// non-negative counts `(L,)` of the `L = 2^depth` leaves, by path.
    fn cells(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<(Py<PyArray2<f64>>, Py<PyArray2<f64>>, Py<PyArray1<i64>>)> {
        let (dim, depth) = (self.inner.dim(), self.inner.depth());
        let inner = &mut self.inner;
        let counts = py.detach(|| inner.leaf_counts()).map_err(to_py_err)?;
        let n = counts.len();
        let size = n
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
        Ok((
            lower.into_pyarray(py).reshape([n, dim])?.unbind(),
            upper.into_pyarray(py).reshape([n, dim])?.unbind(),
            counts.into_pyarray(py).unbind(),
        ))
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.inner.to_bytes().map_err(to_py_err)?;
        Ok(PyBytes::new(py, &data))
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: OnlineSynthesizer::from_bytes(data).map_err(to_py_err)?,
        })
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

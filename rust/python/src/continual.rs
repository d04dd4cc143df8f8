//! Bindings of `dpstream_core::synth::ContinualPrivHP` (continual-release
//! PrivHP in fixed memory); see `dpstream.OnlineSynthesizer.for_memory`.

use crate::online::PyOnlineRelease;
use crate::privhp::{PyPrivHP, PyTreeGenerator};
use crate::{fraction, points_slice, rational, rows_array, to_py_err, with_rng, Rng};
use dpstream_core::synth::{ContinualPrivHP, CHUNK_ROWS};
use num_bigint::BigUint;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Continual-release PrivHP; see `dpstream.OnlineSynthesizer.for_memory`.
#[pyclass(module = "dpstream._core", name = "ContinualPrivHP")]
pub(crate) struct PyContinualPrivHP {
    inner: ContinualPrivHP,
}

#[pymethods]
impl PyContinualPrivHP {
    /// The object owns a generator derived from `rng` (seeded iff `rng` is),
    /// or, for `None`, one derived from a fresh OS-seeded generator.
    #[new]
    #[pyo3(signature = (eps_num, eps_den, dim, memory_bytes, expected_n, max_releases, rng=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        eps_num: BigUint,
        eps_den: BigUint,
        dim: usize,
        memory_bytes: usize,
        expected_n: u64,
        max_releases: u64,
        rng: Option<&Bound<'_, Rng>>,
    ) -> PyResult<Self> {
        let eps = rational(eps_num, eps_den, "epsilon")?;
        let own = with_rng(py, rng, |r| r.derive())?;
        let inner = py
            .detach(|| ContinualPrivHP::new(&eps, dim, memory_bytes, expected_n, max_releases, own))
            .map_err(to_py_err)?;
        Ok(Self { inner })
    }

    /// `(numerator, denominator)` of ε.
    fn epsilon(&self) -> (BigUint, BigUint) {
        let e = self.inner.epsilon();
        fraction(e)
    }
    /// `(numerator, denominator)` of the per-block budget ε/(2L).
    fn block_epsilon(&self) -> (BigUint, BigUint) {
        let e = &self.inner.config().epsilon;
        fraction(e)
    }
    /// `(numerator, denominator)` of the ledger `2·L·ε_b`.
    fn epsilon_ledger(&self) -> PyResult<(BigUint, BigUint)> {
        self.inner
            .epsilon_ledger()
            .map(|e| fraction(&e))
            .map_err(to_py_err)
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
    fn epochs(&self) -> u64 {
        self.inner.epochs()
    }
    #[getter]
    fn max_releases(&self) -> u64 {
        self.inner.max_releases()
    }
    #[getter]
    fn levels(&self) -> u32 {
        self.inner.levels()
    }
    #[getter]
    fn n_blocks(&self) -> usize {
        self.inner.n_blocks()
    }
    #[getter]
    fn memory_budget(&self) -> usize {
        self.inner.memory_budget()
    }
    #[getter]
    fn expected_n(&self) -> u64 {
        self.inner.expected_n()
    }
    #[getter]
    fn depth(&self) -> u32 {
        self.inner.config().depth
    }
    #[getter]
    fn k(&self) -> usize {
        self.inner.config().k
    }
    #[getter]
    fn width(&self) -> usize {
        self.inner.config().width
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

    /// The encoding of an empty summary with the shared configuration and
    /// hash keys (public), to count partitions elsewhere.
    fn template<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self
            .inner
            .template()
            .and_then(|t| t.to_bytes())
            .map_err(to_py_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// Add an exact summary counted by copies of `template()`; the same state
    /// as `update` of its points. All-or-nothing.
    fn merge_summary(&mut self, summary: PyRef<'_, PyPrivHP>) -> PyResult<()> {
        self.inner.merge_summary(&summary.inner).map_err(to_py_err)
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
            .detach(|| {
                inner
                    .release_sampler(size, chunk_rows)
                    .map(|r| r.into_owned())
            })
            .map_err(to_py_err)?;
        Ok(PyOnlineRelease { inner: r })
    }

    /// The live blocks after closing the open epoch: `[(n_j, generator_j)]`.
    fn release_generators(&mut self, py: Python<'_>) -> PyResult<Vec<(u64, PyTreeGenerator)>> {
        let inner = &mut self.inner;
        let blocks = py
            .detach(|| inner.release_generators())
            .map_err(to_py_err)?;
        Ok(blocks
            .into_iter()
            .map(|(n, g)| (n, PyTreeGenerator { inner: g }))
            .collect())
    }

    /// (lower, upper, counts) of the leaves of every live block (closes the open epoch).
    #[allow(clippy::type_complexity)]
    fn cells(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<(Py<PyArray2<f64>>, Py<PyArray2<f64>>, Py<PyArray1<i64>>)> {
        let dim = self.inner.dim();
        let inner = &mut self.inner;
        let (lower, upper, counts) = py.detach(|| inner.cells()).map_err(to_py_err)?;
        let n = counts.len();
        let counts: Vec<i64> = counts
            .into_iter()
            .map(|c| i64::try_from(c).unwrap_or(i64::MAX))
            .collect();
        Ok((
            lower.into_pyarray(py).reshape([n, dim])?.unbind(),
            upper.into_pyarray(py).reshape([n, dim])?.unbind(),
            counts.into_pyarray(py).unbind(),
        ))
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.inner.to_bytes().map_err(to_py_err)?;
        Ok(PyBytes::new(py, &bytes))
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: ContinualPrivHP::from_bytes(data).map_err(to_py_err)?,
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyContinualPrivHP>()?;
    Ok(())
}

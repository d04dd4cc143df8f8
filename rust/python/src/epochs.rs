//! Bindings of `dpstream_core::synth::EpochSynthesizer` (the default online synthesizer).

use crate::online::PyOnlineRelease;
use crate::privhp::PyTreeGenerator;
use crate::{fraction, points_slice, rational, rows_array, to_py_err, with_rng, Rng};
use dpstream_core::synth::{EpochSynthesizer, CHUNK_ROWS};
use num_bigint::BigUint;
use numpy::{PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The epoch synthesizer; see `dpstream.OnlineSynthesizer`.
#[pyclass(module = "dpstream._core", name = "EpochSynthesizer")]
pub(crate) struct PyEpochSynthesizer {
    inner: EpochSynthesizer,
}

#[pymethods]
impl PyEpochSynthesizer {
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
        let inner = EpochSynthesizer::new(&eps, dim, own).map_err(to_py_err)?;
        Ok(Self { inner })
    }

    /// `(numerator, denominator)` of ε.
    fn epsilon(&self) -> (BigUint, BigUint) {
        let e = self.inner.epsilon();
        fraction(e)
    }
    /// `(numerator, denominator)` of the ε of each block a point of
    /// super-block `k` enters (`k + 1` shares).
    fn epsilon_split(&self, k: u32) -> PyResult<Vec<(BigUint, BigUint)>> {
        let split =
            dpstream_core::synth::point_split(self.inner.epsilon(), k).map_err(to_py_err)?;
        Ok(split.iter().map(fraction).collect())
    }
    /// `(numerator, denominator)` of the ledger: the largest ε a point costs.
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
    fn depth(&self) -> u32 {
        self.inner.depth()
    }
    #[getter]
    fn n_blocks(&self) -> usize {
        self.inner.n_blocks()
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

    /// Feed exact counts of finest cells: `counts[i]` points with the 63-bit
    /// path `paths[i]` (uint64 arrays); the same state as `update` of those
    /// points. All-or-nothing.
    fn update_counts(
        &mut self,
        py: Python<'_>,
        paths: PyReadonlyArray1<'_, u64>,
        counts: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<()> {
        let (paths, counts) = (paths.as_slice()?, counts.as_slice()?);
        let inner = &mut self.inner;
        py.detach(|| inner.update_counts(paths, counts))
            .map_err(to_py_err)
    }

    /// A mark of the open epoch (epochs, open points, time) for `rollback`.
    fn mark(&self) -> (u64, u64, u64) {
        self.inner.mark()
    }

    /// Undo every update since `mark` (the same open epoch).
    fn rollback(&mut self, mark: (u64, u64, u64)) -> PyResult<()> {
        self.inner.rollback_to(mark).map_err(to_py_err)
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

    /// The fitted release tree (closes the open epoch).
    fn release_tree(&mut self, py: Python<'_>) -> PyResult<PyTreeGenerator> {
        let inner = &mut self.inner;
        let g = py.detach(|| inner.release_tree()).map_err(to_py_err)?;
        Ok(PyTreeGenerator { inner: g })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: EpochSynthesizer::from_bytes(data).map_err(to_py_err)?,
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEpochSynthesizer>()?;
    Ok(())
}

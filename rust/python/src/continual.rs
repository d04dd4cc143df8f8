//! Bindings of `dpstream_core::synth::ContinualPrivHP` (continual-release
//! PrivHP in fixed memory); see `dpstream.OnlineSynthesizer.for_memory`.

use crate::privhp::{PyPrivHP, PyTreeGenerator};
use crate::{cells_arrays, fraction, points_slice, rational, rows_array, to_py_err, with_rng, Rng};
use dpstream_core::synth::ContinualPrivHP;
use num_bigint::BigUint;
use numpy::{PyArray1, PyArray2, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Continual-release PrivHP; see `dpstream.OnlineSynthesizer.for_memory`.
#[pyclass(module = "dpstream._core", name = "ContinualPrivHP")]
pub(crate) struct PyContinualPrivHP {
    inner: ContinualPrivHP,
}

synthesizer_methods! {
    PyContinualPrivHP(ContinualPrivHP),
    new(memory_bytes: usize, expected_n: u64, max_releases: u64);
    get {
        epochs: u64,
        max_releases: u64,
        levels: u32,
        n_blocks: usize,
        memory_budget: usize,
        expected_n: u64,
    }
    config { depth: u32, k: usize, width: usize }

    /// `(numerator, denominator)` of the per-block budget ε/(2L).
    fn block_epsilon(&self) -> (BigUint, BigUint) {
        fraction(&self.inner.config().epsilon)
    }
    /// `(numerator, denominator)` of the ledger `2·L·ε_b`.
    fn epsilon_ledger(&self) -> PyResult<(BigUint, BigUint)> {
        self.inner
            .epsilon_ledger()
            .map(|e| fraction(&e))
            .map_err(to_py_err)
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
    fn cells(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<(Py<PyArray2<f64>>, Py<PyArray2<f64>>, Py<PyArray1<i64>>)> {
        let dim = self.inner.dim();
        let inner = &mut self.inner;
        let (lower, upper, counts) = py.detach(|| inner.cells()).map_err(to_py_err)?;
        let counts = counts
            .into_iter()
            .map(|c| i64::try_from(c).unwrap_or(i64::MAX))
            .collect();
        cells_arrays(py, lower, upper, counts, dim)
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.inner.to_bytes().map_err(to_py_err)?;
        Ok(PyBytes::new(py, &bytes))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyContinualPrivHP>()?;
    Ok(())
}

//! Bindings of `dpstream_core::synth::EpochSynthesizer` (the default online synthesizer).

use crate::privhp::PyTreeGenerator;
use crate::{fraction, points_slice, rational, rows_array, to_py_err, with_rng, Rng};
use dpstream_core::synth::EpochSynthesizer;
use num_bigint::BigUint;
use numpy::{PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// The epoch synthesizer; see `dpstream.OnlineSynthesizer`.
#[pyclass(module = "dpstream._core", name = "EpochSynthesizer")]
pub(crate) struct PyEpochSynthesizer {
    inner: EpochSynthesizer,
}

synthesizer_methods! {
    PyEpochSynthesizer(EpochSynthesizer),
    new();
    get { epochs: u64, depth: u32, n_blocks: usize }

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

    /// The fitted release tree (closes the open epoch).
    fn release_tree(&mut self, py: Python<'_>) -> PyResult<PyTreeGenerator> {
        let inner = &mut self.inner;
        let g = py.detach(|| inner.release_tree()).map_err(to_py_err)?;
        Ok(PyTreeGenerator { inner: g })
    }

    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyEpochSynthesizer>()?;
    Ok(())
}

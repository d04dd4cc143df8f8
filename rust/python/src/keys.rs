//! The key ring of a checkpointed stream; see `dpstream._rng.KeyRing`.

use crate::{to_py_err, Rng};
use numpy::PyReadonlyArray1;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A secret master key with a running keyed digest; see `dpstream._rng.KeyRing`.
#[pyclass(module = "dpstream._core", name = "KeyRing")]
pub(crate) struct KeyRing {
    inner: dpstream_core::KeyRing,
}

#[pymethods]
impl KeyRing {
    /// A ring whose master key is drawn from `rng` (seeded exactly when it is).
    #[new]
    fn new(rng: &Bound<'_, Rng>) -> PyResult<Self> {
        let mut guard = rng.try_borrow_mut()?;
        Ok(Self {
            inner: dpstream_core::KeyRing::new(&mut guard.inner),
        })
    }

    /// Whether the master key came from a seeded generator (not private).
    #[getter]
    fn seeded(&self) -> bool {
        self.inner.is_seeded()
    }

    /// Append `contents` to the running digest.
    fn absorb(&mut self, py: Python<'_>, contents: PyReadonlyArray1<'_, i64>) -> PyResult<()> {
        let values = contents.as_slice()?;
        let inner = &mut self.inner;
        py.detach(|| inner.absorb(values));
        Ok(())
    }

    /// The generator of `position` after the contents absorbed so far.
    fn generator(&self, position: Vec<u64>) -> Rng {
        Rng {
            inner: self.inner.generator(&position),
        }
    }

    /// An independent copy (the same master key and digest).
    fn copy(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }

    /// The ring for a checkpoint (49 bytes). Secret: it holds the master key.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// A ring from `to_bytes` output.
    #[staticmethod]
    fn from_bytes(data: &[u8]) -> PyResult<Self> {
        Ok(Self {
            inner: dpstream_core::KeyRing::from_bytes(data).map_err(to_py_err)?,
        })
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<KeyRing>()
}

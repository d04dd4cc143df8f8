//! Bindings of `dpstream_core::sketch::LinearSketch`.

use crate::{rational, to_py_err, with_rng, zeroed, Rng};
use dpstream_core::sketch::{LinearSketch, SketchKind, SketchRecord};
use dpstream_core::Rational;
use num_bigint::BigUint;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

pub(crate) fn parse_kind(kind: &str) -> PyResult<SketchKind> {
    match kind {
        "count-min" => Ok(SketchKind::CountMin),
        "count" => Ok(SketchKind::Count),
        other => Err(PyValueError::new_err(format!(
            "sketch must be 'count-min' or 'count', got {other:?}"
        ))),
    }
}

fn kind_name(kind: SketchKind) -> &'static str {
    match kind {
        SketchKind::CountMin => "count-min",
        SketchKind::Count => "count",
    }
}

/// A linear count-min or count sketch; `released` once noise has been added.
#[pyclass(module = "dpstream._core", name = "LinearSketch")]
pub(crate) struct PySketch {
    inner: LinearSketch,
    released: bool,
}

impl PySketch {
    fn check_open(&self, what: &str) -> PyResult<()> {
        if self.released {
            return Err(PyValueError::new_err(format!(
                "this sketch is a private release; it cannot be {what}"
            )));
        }
        Ok(())
    }
}

py_methods! {
    PySketch;
    get { rows: usize, width: usize }

    #[new]
    #[pyo3(signature = (kind, rows, width, rng=None))]
    fn new(
        py: Python<'_>,
        kind: &str,
        rows: usize,
        width: usize,
        rng: Option<&Bound<'_, Rng>>,
    ) -> PyResult<Self> {
        let kind = parse_kind(kind)?;
        let inner =
            with_rng(py, rng, |r| LinearSketch::new(kind, rows, width, r))?.map_err(to_py_err)?;
        Ok(Self {
            inner,
            released: false,
        })
    }

    #[getter]
    fn kind(&self) -> &'static str {
        kind_name(self.inner.kind())
    }
    #[getter]
    fn released(&self) -> bool {
        self.released
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// Add `counts[i]` to key `keys[i]`; all-or-nothing.
    fn update(
        &mut self,
        py: Python<'_>,
        keys: PyReadonlyArray1<'_, u64>,
        counts: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<()> {
        self.check_open("updated")?;
        let (keys, counts) = (keys.as_slice()?, counts.as_slice()?);
        let inner = &mut self.inner;
        py.detach(|| inner.update_many(keys, counts))
            .map_err(to_py_err)
    }

    fn query(
        &self,
        py: Python<'_>,
        keys: PyReadonlyArray1<'_, u64>,
    ) -> PyResult<Py<PyArray1<f64>>> {
        let keys = keys.as_slice()?;
        let mut out = zeroed::<f64>(keys.len())?;
        let inner = &self.inner;
        py.detach(|| inner.query_many(keys, &mut out))
            .map_err(to_py_err)?;
        Ok(out.into_pyarray(py).unbind())
    }

    fn merge(&mut self, other: &Bound<'_, PySketch>) -> PyResult<()> {
        self.check_open("merged into")?;
        let other = other
            .try_borrow()
            .map_err(|_| PyValueError::new_err("cannot merge a sketch into itself"))?;
        other.check_open("merged")?;
        self.inner.merge(&other.inner).map_err(to_py_err)
    }

    /// A noisy copy (discrete Laplace, scale rows/ε per cell), marked released.
    #[pyo3(signature = (eps_num, eps_den, rng=None))]
    fn release(
        &self,
        py: Python<'_>,
        eps_num: BigUint,
        eps_den: BigUint,
        rng: Option<&Bound<'_, Rng>>,
    ) -> PyResult<Self> {
        self.check_open("released again")?;
        let eps = rational(eps_num, eps_den, "epsilon")?;
        let mut copy = self.inner.clone();
        with_rng(py, rng, |r| copy.add_noise(r, &eps))?.map_err(to_py_err)?;
        Ok(Self {
            inner: copy,
            released: true,
        })
    }

    /// The public hash parameters `(a, b, sa, sb)` of each row.
    fn hashes(&self) -> Vec<(u128, u128, u128, u128)> {
        self.inner.hashes().iter().map(|h| h.parts()).collect()
    }

    fn cells<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        Ok(self.inner.cells().to_vec().into_pyarray(py))
    }

    /// The encoding with the release flag and the caller's ε ledger:
    /// `budget` (`None`: no cap) and `spent` as `(numerator, denominator)`,
    /// and whether the release's noise was seeded.
    #[pyo3(signature = (budget, spent, noise_seeded))]
    fn to_bytes<'py>(
        &self,
        py: Python<'py>,
        budget: Option<(BigUint, BigUint)>,
        spent: (BigUint, BigUint),
        noise_seeded: bool,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let record = SketchRecord {
            released: self.released,
            noise_seeded,
            budget: budget.map(|(n, d)| rational(n, d, "budget")).transpose()?,
            spent: rational(spent.0, spent.1, "spent")?,
        };
        let data = self.inner.to_bytes(&record).map_err(to_py_err)?;
        Ok(PyBytes::new(py, &data))
    }

    /// Decode `to_bytes` output: `(sketch, budget, spent, noise_seeded,
    /// legacy)`, the ε values as `(numerator, denominator)` (`budget` `None`:
    /// no cap); `legacy` for a version-1 encoding, whose ledger is returned
    /// exhausted (budget 0).
    #[staticmethod]
    #[allow(clippy::type_complexity)]
    fn from_bytes(
        data: &[u8],
    ) -> PyResult<(
        Self,
        Option<(BigUint, BigUint)>,
        (BigUint, BigUint),
        bool,
        bool,
    )> {
        let d = LinearSketch::from_bytes(data).map_err(to_py_err)?;
        let pair = |r: &Rational| (r.numer().clone(), r.denom().clone());
        let budget = d.record.budget.as_ref().map(pair);
        let spent = pair(&d.record.spent);
        let sketch = Self {
            inner: d.sketch,
            released: d.record.released,
        };
        Ok((sketch, budget, spent, d.record.noise_seeded, d.legacy))
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PySketch>()?;
    Ok(())
}

//! Bindings of `dpstream_core::synth` (PrivHP and its TreeGenerator).

use crate::counters::seeded_refusal;
use crate::sketch::parse_kind;
use crate::{cells_arrays, fraction, points_slice, rational, to_py_err, with_rng, zeroed, Rng};
use dpstream_core::synth::{BudgetRule, PrivHP, PrivHPConfig, TreeGenerator};
use num_bigint::BigUint;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

fn parse_budget(budget: &str) -> PyResult<BudgetRule> {
    match budget {
        "optimal" => Ok(BudgetRule::Optimal),
        "uniform" => Ok(BudgetRule::Uniform),
        other => Err(PyValueError::new_err(format!(
            "budget must be 'optimal' or 'uniform', got {other:?}"
        ))),
    }
}

/// The PrivHP summary; see `dpstream.PrivHP`.
#[pyclass(module = "dpstream._core", name = "PrivHP")]
pub(crate) struct PyPrivHP {
    pub(crate) inner: PrivHP,
}

py_methods! {
    PyPrivHP;
    get { points_seen: u64 }
    config { dim: usize, k: usize, width: usize, rows: usize, depth: u32 }

    #[new]
    #[pyo3(signature = (eps_num, eps_den, dim, k, width, rows, depth, sketch, budget, rng=None))]
    fn new(
        py: Python<'_>,
        eps_num: BigUint,
        eps_den: BigUint,
        dim: usize,
        k: usize,
        width: usize,
        rows: usize,
        depth: u32,
        sketch: &str,
        budget: &str,
        rng: Option<&Bound<'_, Rng>>,
    ) -> PyResult<Self> {
        let cfg = PrivHPConfig {
            epsilon: rational(eps_num, eps_den, "epsilon")?,
            dim,
            k,
            width,
            rows,
            depth,
            sketch: parse_kind(sketch)?,
            budget: parse_budget(budget)?,
        };
        cfg.validate().map_err(to_py_err)?;
        let inner = with_rng(py, rng, |r| PrivHP::new(cfg, r))?.map_err(to_py_err)?;
        Ok(Self { inner })
    }

    /// Parameters for a memory budget, as a dict (public values only).
    #[staticmethod]
    #[pyo3(signature = (eps_num, eps_den, dim, expected_n, memory_bytes, sketch, rows))]
    fn for_memory<'py>(
        py: Python<'py>,
        eps_num: BigUint,
        eps_den: BigUint,
        dim: usize,
        expected_n: u64,
        memory_bytes: usize,
        sketch: &str,
        rows: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let eps = rational(eps_num, eps_den, "epsilon")?;
        let cfg = PrivHPConfig::for_memory(
            eps,
            dim,
            expected_n,
            memory_bytes,
            parse_kind(sketch)?,
            rows,
        )
        .map_err(to_py_err)?;
        let d = PyDict::new(py);
        d.set_item("k", cfg.k)?;
        d.set_item("width", cfg.width)?;
        d.set_item("depth", cfg.depth)?;
        d.set_item("rows", cfg.rows)?;
        Ok(d)
    }

    /// Count a C-contiguous float64 (n, dim) batch; all-or-nothing.
    fn update(&mut self, py: Python<'_>, points: PyReadonlyArray2<'_, f64>) -> PyResult<()> {
        let data = points_slice(&points, self.inner.config().dim)?;
        let inner = &mut self.inner;
        py.detach(|| inner.update(data)).map_err(to_py_err)
    }

    /// An empty summary with the same configuration and hash keys (public).
    fn empty_copy(&self) -> PyResult<Self> {
        Ok(Self {
            inner: self.inner.empty_copy().map_err(to_py_err)?,
        })
    }

    fn merge(&mut self, other: &Bound<'_, PyPrivHP>) -> PyResult<()> {
        let other = other
            .try_borrow()
            .map_err(|_| PyValueError::new_err("cannot merge a PrivHP into itself"))?;
        self.inner.merge(&other.inner).map_err(to_py_err)
    }

    #[pyo3(signature = (rng=None))]
    fn release(
        &mut self,
        py: Python<'_>,
        rng: Option<&Bound<'_, Rng>>,
    ) -> PyResult<PyTreeGenerator> {
        let inner = &mut self.inner;
        let g = with_rng(py, rng, |r| inner.release(r))?.map_err(to_py_err)?;
        Ok(PyTreeGenerator { inner: g })
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    /// `(numerator, denominator)` of ε.
    fn epsilon(&self) -> (BigUint, BigUint) {
        let e = &self.inner.config().epsilon;
        fraction(e)
    }

    /// The exact, unreleased summary's encoding (sensitive); encoded with the GIL released.
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let inner = &self.inner;
        let data = py.detach(|| inner.to_bytes()).map_err(to_py_err)?;
        Ok(PyBytes::new(py, &data))
    }

    #[staticmethod]
    fn from_bytes(py: Python<'_>, data: &[u8]) -> PyResult<Self> {
        let inner = py.detach(|| PrivHP::from_bytes(data)).map_err(to_py_err)?;
        Ok(Self { inner })
    }

    /// Per-level budget σ_0..σ_depth as (numerator, denominator) pairs.
    fn sigmas(&self) -> Vec<(BigUint, BigUint)> {
        self.inner
            .sigmas()
            .iter()
            .map(|s| (s.numer().clone(), s.denom().clone()))
            .collect()
    }

    #[getter]
    fn released(&self) -> bool {
        self.inner.is_released()
    }
    #[getter]
    fn threads(&self) -> usize {
        self.inner.threads()
    }
    #[setter]
    fn set_threads(&mut self, threads: usize) {
        self.inner.set_threads(threads);
    }
    #[getter]
    fn exact_levels(&self) -> u32 {
        self.inner.config().exact_levels()
    }
}

/// The released generator; see `dpstream.TreeGenerator`.
#[pyclass(module = "dpstream._core", name = "TreeGenerator")]
pub(crate) struct PyTreeGenerator {
    pub(crate) inner: TreeGenerator,
}

py_methods! {
    PyTreeGenerator;
    get {
        /// Whether the release's noise came from a seeded generator (not private).
        noise_seeded: bool,
        dim: usize,
        n_leaves: usize,
        n_nodes: usize,
        total: f64,
        depth: u32,
    }

    #[pyo3(signature = (m, rng=None))]
    fn sample(
        &self,
        py: Python<'_>,
        m: usize,
        rng: Option<&Bound<'_, Rng>>,
    ) -> PyResult<Py<PyArray2<f64>>> {
        let dim = self.inner.dim();
        let len = m
            .checked_mul(dim)
            .ok_or_else(|| PyValueError::new_err("m is too large"))?;
        let mut out = zeroed::<f64>(len)?;
        let inner = &self.inner;
        with_rng(py, rng, |r| inner.sample(r, &mut out))?.map_err(to_py_err)?;
        Ok(out.into_pyarray(py).reshape([m, dim])?.unbind())
    }

    /// (lower, upper, counts) of the leaves.
    fn cells(
        &self,
        py: Python<'_>,
    ) -> PyResult<(Py<PyArray2<f64>>, Py<PyArray2<f64>>, Py<PyArray1<f64>>)> {
        let (lower, upper, counts) = self.inner.cells();
        cells_arrays(py, lower, upper, counts, self.inner.dim())
    }

    /// Versioned bytes, with whether the release's noise was seeded.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes())
    }

    /// Decode `to_bytes` output. A generator released with seeded noise
    /// (reproducible, not private) is refused unless `allow_seeded`.
    #[staticmethod]
    #[pyo3(signature = (data, allow_seeded=false))]
    fn from_bytes(data: &[u8], allow_seeded: bool) -> PyResult<Self> {
        let inner = TreeGenerator::from_bytes(data).map_err(to_py_err)?;
        if inner.noise_seeded() && !allow_seeded {
            return Err(PyValueError::new_err(seeded_refusal("TreeGenerator")));
        }
        Ok(Self { inner })
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyPrivHP>()?;
    m.add_class::<PyTreeGenerator>()?;
    Ok(())
}

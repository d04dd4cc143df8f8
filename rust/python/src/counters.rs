//! Bindings of `dpstream_core::counters`.

use crate::{rational, to_py_err, zeroed, Rng};
use dpstream_core::counters::{Counter, CounterKind, Sensitivity};
use num_bigint::BigUint;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

fn parse_kind(kind: &str, horizon: Option<u64>) -> PyResult<CounterKind> {
    let bounded = |h: Option<u64>| {
        h.ok_or_else(|| PyValueError::new_err(format!("counter {kind:?} needs a horizon")))
    };
    let unbounded = |k: CounterKind| match horizon {
        None => Ok(k),
        Some(_) => Err(PyValueError::new_err(format!(
            "counter {kind:?} has no horizon; horizon is only for 'block' and 'binary-tree'"
        ))),
    };
    match kind {
        "simple" => unbounded(CounterKind::Simple),
        "block" => Ok(CounterKind::Block {
            horizon: bounded(horizon)?,
        }),
        "unbounded-block" => unbounded(CounterKind::UnboundedBlock),
        "binary-tree" => Ok(CounterKind::BinaryTree {
            horizon: bounded(horizon)?,
        }),
        "hybrid" => unbounded(CounterKind::Hybrid),
        other => Err(PyValueError::new_err(format!(
            "kind must be 'simple', 'block', 'unbounded-block', 'binary-tree' or 'hybrid', \
             got {other:?}"
        ))),
    }
}

fn kind_name(kind: CounterKind) -> &'static str {
    match kind {
        CounterKind::Simple => "simple",
        CounterKind::Block { .. } => "block",
        CounterKind::UnboundedBlock => "unbounded-block",
        CounterKind::BinaryTree { .. } => "binary-tree",
        CounterKind::Hybrid => "hybrid",
    }
}

/// The counter's generator: the caller's, or its own OS-seeded one.
enum Source {
    Shared(Py<Rng>),
    Own(Box<dpstream_core::Rng>),
}

/// A continual-release counter; see `dpstream.counters.Counter`.
#[pyclass(module = "dpstream._core", name = "Counter")]
pub(crate) struct PyCounter {
    inner: Counter,
    rng: Source,
    seeded: bool,
}

impl PyCounter {
    /// Run `f` on the counter and its generator with the GIL released.
    fn with_rng<T: Send>(
        &mut self,
        py: Python<'_>,
        f: impl FnOnce(&mut Counter, &mut dpstream_core::Rng) -> T + Send,
    ) -> PyResult<T> {
        let Self { inner, rng, .. } = self;
        match rng {
            Source::Shared(shared) => {
                let mut guard = shared.bind(py).try_borrow_mut()?;
                let r = &mut guard.inner;
                Ok(py.detach(|| f(inner, r)))
            }
            Source::Own(r) => Ok(py.detach(|| f(inner, r))),
        }
    }
}

#[pymethods]
impl PyCounter {
    #[new]
    #[pyo3(signature = (kind, eps_num, eps_den, dim, horizon=None, rng=None))]
    fn new(
        py: Python<'_>,
        kind: &str,
        eps_num: BigUint,
        eps_den: BigUint,
        dim: usize,
        horizon: Option<u64>,
        rng: Option<Py<Rng>>,
    ) -> PyResult<Self> {
        let kind = parse_kind(kind, horizon)?;
        let eps = rational(eps_num, eps_den, "epsilon")?;
        let inner = Counter::new(kind, &eps, dim).map_err(to_py_err)?;
        let (rng, seeded) = match rng {
            Some(r) => {
                let seeded = r.bind(py).try_borrow()?.inner.is_seeded();
                (Source::Shared(r), seeded)
            }
            None => {
                let own = dpstream_core::Rng::from_os().map_err(to_py_err)?;
                (Source::Own(Box::new(own)), false)
            }
        };
        Ok(Self { inner, rng, seeded })
    }

    #[getter]
    fn kind(&self) -> &'static str {
        kind_name(self.inner.kind())
    }
    #[getter]
    fn horizon(&self) -> Option<u64> {
        self.inner.horizon()
    }
    #[getter]
    fn dim(&self) -> usize {
        self.inner.dim()
    }
    #[getter]
    fn time(&self) -> u64 {
        self.inner.time()
    }
    /// Whether the counter draws from a caller-seeded generator (not private).
    #[getter]
    fn seeded(&self) -> bool {
        self.seeded
    }

    /// `(numerator, denominator)` of ε.
    fn epsilon(&self) -> (BigUint, BigUint) {
        let e = self.inner.epsilon();
        (e.numer().clone(), e.denom().clone())
    }

    /// `(family, eps_num, eps_den, sensitivity)` per family; sensitivity
    /// `None` for the hybrid epoch trees (it is the epoch index `k`).
    fn epsilon_split(&self) -> Vec<(&'static str, BigUint, BigUint, Option<u64>)> {
        self.inner
            .epsilon_split()
            .into_iter()
            .map(|s| {
                let sens = match s.sensitivity {
                    Sensitivity::Fixed(v) => Some(v),
                    Sensitivity::EpochLevels => None,
                };
                (
                    s.family,
                    s.epsilon.numer().clone(),
                    s.epsilon.denom().clone(),
                    sens,
                )
            })
            .collect()
    }

    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }

    #[getter]
    fn release<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i64>> {
        self.inner.release().to_vec().into_pyarray(py)
    }

    /// One step; returns the release. All-or-nothing.
    fn step(
        &mut self,
        py: Python<'_>,
        increment: PyReadonlyArray1<'_, i64>,
    ) -> PyResult<Py<PyArray1<i64>>> {
        let inc = increment.as_slice()?;
        self.with_rng(py, |c, r| c.step(r, inc))?
            .map_err(to_py_err)?;
        Ok(self.inner.release().to_vec().into_pyarray(py).unbind())
    }

    /// `(T, dim)` increments in, `(T, dim)` releases out. All-or-nothing.
    fn run(
        &mut self,
        py: Python<'_>,
        increments: PyReadonlyArray2<'_, i64>,
    ) -> PyResult<Py<PyArray2<i64>>> {
        let [steps, dim] = [increments.shape()[0], increments.shape()[1]];
        if dim != self.inner.dim() {
            return Err(PyValueError::new_err(format!(
                "increments must have {} columns, got {dim}",
                self.inner.dim()
            )));
        }
        let size = steps
            .checked_mul(dim)
            .ok_or_else(|| PyValueError::new_err("increments are too large"))?;
        let inc = increments.as_slice()?;
        let mut out = zeroed::<i64>(size)?;
        self.with_rng(py, |c, r| c.run(r, inc, &mut out))?
            .map_err(to_py_err)?;
        Ok(out.into_pyarray(py).reshape([steps, dim])?.unbind())
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCounter>()?;
    Ok(())
}

//! Bindings of `dpstream_core::counters`.

use crate::{fraction, rational, to_py_err, zeroed, Rng};
use dpstream_core::counters::{
    Counter, CounterKind, InhomogeneousSparseCounter, LevelSchedule, Sensitivity, SparseCounter,
};
use num_bigint::BigUint;
use numpy::{
    IntoPyArray, PyArray1, PyArray2, PyArrayMethods, PyReadonlyArray1, PyReadonlyArray2,
    PyUntypedArrayMethods,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

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

/// An ε split as `(family, eps_num, eps_den, sensitivity)` tuples; the
/// sensitivity is `None` for the hybrid epoch trees (it is the epoch index).
fn share_tuples(
    shares: Vec<dpstream_core::counters::Share>,
) -> Vec<(&'static str, BigUint, BigUint, Option<u64>)> {
    shares
        .into_iter()
        .map(|s| {
            let sens = match s.sensitivity {
                Sensitivity::Fixed(v) => Some(v),
                Sensitivity::EpochLevels => None,
            };
            let (num, den) = fraction(&s.epsilon);
            (s.family, num, den, sens)
        })
        .collect()
}

/// A continual-release counter; see `dpstream.counters.Counter`.
#[pyclass(module = "dpstream._core", name = "Counter")]
pub(crate) struct PyCounter {
    inner: Counter,
    rng: Source,
    seeded: bool,
}

counter_methods! {
    PyCounter(Counter);
    get { horizon: Option<u64>, dim: usize }

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
        let (rng, seeded) = make_source(py, rng)?;
        Ok(Self { inner, rng, seeded })
    }

    #[getter]
    fn kind(&self) -> &'static str {
        kind_name(self.inner.kind())
    }

    /// `(numerator, denominator)` of ε.
    fn epsilon(&self) -> (BigUint, BigUint) {
        fraction(self.inner.epsilon())
    }

    /// `(family, eps_num, eps_den, sensitivity)` per family; sensitivity
    /// `None` for the hybrid epoch trees (it is the epoch index `k`).
    fn epsilon_split(&self) -> Vec<(&'static str, BigUint, BigUint, Option<u64>)> {
        share_tuples(self.inner.epsilon_split())
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
        let Self { inner, rng, .. } = self;
        with_source(py, inner, rng, |c, r| c.step(r, inc))?.map_err(to_py_err)?;
        Ok(self.inner.release().to_vec().into_pyarray(py).unbind())
    }

    /// Checkpoint bytes (kind `Counter`), with the seeded flag. Sensitive:
    /// the exact sums.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes(self.seeded))
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
        let Self { inner, rng, .. } = self;
        with_source(py, inner, rng, |c, r| c.run(r, inc, &mut out))?.map_err(to_py_err)?;
        Ok(out.into_pyarray(py).reshape([steps, dim])?.unbind())
    }
}

/// The refusal of a seeded checkpoint loaded without `allow_seeded=True`
/// (the same words as `dpstream.persistence._seeded_refusal`).
pub(crate) fn seeded_refusal(what: &str) -> String {
    format!(
        "these bytes hold a seeded {what} (its noise came from a seeded generator): it is \
         reproducible and NOT PRIVATE; pass allow_seeded=True to load it anyway (tests and \
         experiments only)"
    )
}

/// The generator of a new counter: the caller's, or an OS-seeded one.
fn make_source(py: Python<'_>, rng: Option<Py<Rng>>) -> PyResult<(Source, bool)> {
    match rng {
        Some(r) => {
            let seeded = r.bind(py).try_borrow()?.inner.is_seeded();
            Ok((Source::Shared(r), seeded))
        }
        None => {
            let own = dpstream_core::Rng::from_os().map_err(to_py_err)?;
            Ok((Source::Own(Box::new(own)), false))
        }
    }
}

/// The generator of a loaded counter whose bytes say `saved_seeded`: a
/// seeded checkpoint is refused unless `allow_seeded`; loaded, the counter
/// stays seeded whatever `rng` is (its noise so far is reproducible).
fn loaded_source(
    py: Python<'_>,
    rng: Option<Py<Rng>>,
    saved_seeded: bool,
    allow_seeded: bool,
    what: &str,
) -> PyResult<(Source, bool)> {
    if saved_seeded && !allow_seeded {
        return Err(PyValueError::new_err(seeded_refusal(what)));
    }
    let (rng, seeded) = make_source(py, rng)?;
    Ok((rng, seeded || saved_seeded))
}

/// Run `f` on `inner` and the generator with the GIL released.
fn with_source<C: Send, T: Send>(
    py: Python<'_>,
    inner: &mut C,
    rng: &mut Source,
    f: impl FnOnce(&mut C, &mut dpstream_core::Rng) -> T + Send,
) -> PyResult<T> {
    match rng {
        Source::Shared(shared) => {
            let mut guard = shared.bind(py).try_borrow_mut()?;
            let r = &mut guard.inner;
            Ok(py.detach(|| f(inner, r)))
        }
        Source::Own(r) => Ok(py.detach(|| f(inner, r))),
    }
}

/// Algorithm 2 of He, Vershynin, Zhu; see `dpstream.counters.SparseCounter`.
#[pyclass(module = "dpstream._core", name = "SparseCounter")]
pub(crate) struct PySparseCounter {
    inner: SparseCounter,
    rng: Source,
    seeded: bool,
}

sparse_counter_methods! {
    PySparseCounter(SparseCounter);
    get { horizon: u64, threshold: i64, segments: u64 }

    #[new]
    #[pyo3(signature = (eps_num, eps_den, horizon, rng=None))]
    fn new(
        py: Python<'_>,
        eps_num: BigUint,
        eps_den: BigUint,
        horizon: u64,
        rng: Option<Py<Rng>>,
    ) -> PyResult<Self> {
        let eps = rational(eps_num, eps_den, "epsilon")?;
        let inner = SparseCounter::new(&eps, horizon).map_err(to_py_err)?;
        let (rng, seeded) = make_source(py, rng)?;
        Ok(Self { inner, rng, seeded })
    }

    fn epsilon(&self) -> (BigUint, BigUint) {
        fraction(self.inner.epsilon())
    }
    /// `(family, eps_num, eps_den, sensitivity)` per family.
    fn epsilon_split(&self) -> Vec<(&'static str, BigUint, BigUint, Option<u64>)> {
        share_tuples(self.inner.epsilon_split())
    }
    /// Checkpoint bytes (kind `SparseCounter`), with the seeded flag.
    /// Sensitive: the exact counts.
    fn to_bytes<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.inner.to_bytes(self.seeded))
    }
}

/// Algorithm 3 of He, Vershynin, Zhu; see `dpstream.counters.InhomogeneousSparseCounter`.
#[pyclass(module = "dpstream._core", name = "InhomogeneousSparseCounter")]
pub(crate) struct PyInhomogeneousSparseCounter {
    inner: InhomogeneousSparseCounter,
    rng: Source,
    seeded: bool,
}

sparse_counter_methods! {
    PyInhomogeneousSparseCounter(InhomogeneousSparseCounter);
    get { start_level: u32, first_time: u64, level: Option<u32> }

    /// `table` is `[(num, den), ...]` for levels `r_0, r_0 + 1, ...`, or `None`
    /// with `online = (eps_num, eps_den, dim, depth)` for the online schedule.
    #[new]
    #[pyo3(signature = (time_eps_num, time_eps_den, start_level, table=None, online=None, rng=None))]
    fn new(
        py: Python<'_>,
        time_eps_num: BigUint,
        time_eps_den: BigUint,
        start_level: u32,
        table: Option<Vec<(BigUint, BigUint)>>,
        online: Option<(BigUint, BigUint, u32, u32)>,
        rng: Option<Py<Rng>>,
    ) -> PyResult<Self> {
        let time_eps = rational(time_eps_num, time_eps_den, "time epsilon")?;
        let schedule = match (table, online) {
            (Some(t), None) => LevelSchedule::Table(
                t.into_iter()
                    .map(|(n, d)| rational(n, d, "a level's epsilon"))
                    .collect::<PyResult<_>>()?,
            ),
            (None, Some((n, d, dim, depth))) => LevelSchedule::Online {
                epsilon: rational(n, d, "epsilon")?,
                dim,
                depth,
            },
            _ => {
                return Err(PyValueError::new_err(
                    "give exactly one of table and online",
                ))
            }
        };
        let inner =
            InhomogeneousSparseCounter::new(&time_eps, start_level, schedule).map_err(to_py_err)?;
        let (rng, seeded) = make_source(py, rng)?;
        Ok(Self { inner, rng, seeded })
    }

    fn time_epsilon(&self) -> (BigUint, BigUint) {
        let e = self.inner.time_epsilon();
        fraction(e)
    }
    /// `(num, den)` of `ε_r`.
    fn level_epsilon(&self, level: u32) -> PyResult<(BigUint, BigUint)> {
        if level < self.inner.start_level() {
            return Err(PyValueError::new_err(format!(
                "level must be at least the starting level {}, got {level}",
                self.inner.start_level()
            )));
        }
        let e = self
            .inner
            .schedule()
            .epsilon(self.inner.start_level(), level)
            .map_err(to_py_err)?;
        Ok(fraction(&e))
    }
    /// Checkpoint bytes (kind `InhomogeneousSparseCounter`), with the seeded
    /// flag. Sensitive: the exact counts. Refused for a schedule given as a
    /// function (none is, from Python).
    fn to_bytes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        let data = self.inner.to_bytes(self.seeded).map_err(to_py_err)?;
        Ok(PyBytes::new(py, &data))
    }
}

/// `(num, den)` of `ε_{j,r}` of the online synthesizer.
#[pyfunction]
fn online_epsilon(
    eps_num: BigUint,
    eps_den: BigUint,
    dim: u32,
    j: u32,
    r: u32,
) -> PyResult<(BigUint, BigUint)> {
    let eps = rational(eps_num, eps_den, "epsilon")?;
    let e = dpstream_core::synth::online_epsilon(&eps, dim, j, r).map_err(to_py_err)?;
    Ok(fraction(&e))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyCounter>()?;
    m.add_class::<PySparseCounter>()?;
    m.add_class::<PyInhomogeneousSparseCounter>()?;
    m.add_function(wrap_pyfunction!(online_epsilon, m)?)?;
    Ok(())
}

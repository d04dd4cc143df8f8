//! Thin PyO3 bindings of `dpstream-core`, importable as `dpstream._core`.
//!
//! No privacy logic lives here: arguments are converted, the GIL is released
//! around bulk work, and core errors become Python exceptions.

// Signatures mirror the Python API: tuples of arrays and keyword-rich
// constructors are the interface, not an accident of design.
#![allow(clippy::type_complexity, clippy::too_many_arguments)]

use dpstream_core::{Error, Rational};
use num_bigint::BigUint;
use numpy::{IntoPyArray, PyArray1};
use pyo3::exceptions::{PyMemoryError, PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

#[macro_use]
mod macros;

mod continual;
mod counters;
mod epochs;
mod keys;
mod noise;
mod online;
mod partition;
mod privhp;
mod sketch;

pub(crate) fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::InvalidParameter(m) => PyValueError::new_err(m),
        Error::Overflow(m) => PyOverflowError::new_err(m),
        Error::OutOfMemory(m) => PyMemoryError::new_err(m),
        Error::Entropy(m) => PyRuntimeError::new_err(m),
    }
}

/// A zeroed output buffer, or `MemoryError` instead of an abort when `size`
/// cannot be allocated.
pub(crate) fn zeroed<T: Clone + Default>(size: usize) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(size).map_err(|_| {
        PyMemoryError::new_err(format!(
            "cannot allocate an output array of {size} elements"
        ))
    })?;
    v.resize(size, T::default());
    Ok(v)
}

pub(crate) fn rational(num: BigUint, den: BigUint, what: &str) -> PyResult<Rational> {
    Rational::new(num, den).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// ChaCha12 CSPRNG; see `dpstream.Rng`.
#[pyclass(module = "dpstream._core", name = "Rng")]
pub(crate) struct Rng {
    pub(crate) inner: dpstream_core::Rng,
}

#[pymethods]
impl Rng {
    #[new]
    #[pyo3(signature = (seed=None))]
    fn new(seed: Option<Vec<u8>>) -> PyResult<Self> {
        let inner = match seed {
            None => dpstream_core::Rng::from_os().map_err(to_py_err)?,
            Some(bytes) => {
                let key: [u8; 32] = bytes.as_slice().try_into().map_err(|_| {
                    PyValueError::new_err(format!("seed must be 32 bytes, got {}", bytes.len()))
                })?;
                dpstream_core::Rng::from_seed(key)
            }
        };
        Ok(Self { inner })
    }

    /// Whether the generator was seeded by the caller (then it gives no privacy).
    #[getter]
    fn seeded(&self) -> bool {
        self.inner.is_seeded()
    }

    /// The full state of a seeded generator (68 bytes), or None for an OS-seeded one
    /// (whose key is never exported).
    fn seeded_state(&self) -> Option<Vec<u8>> {
        self.inner
            .seeded_state()
            .map(|(key, stream, pos, bits, nbits)| {
                let mut out = key.to_vec();
                out.extend_from_slice(&stream.to_le_bytes());
                out.extend_from_slice(&pos.to_le_bytes());
                out.extend_from_slice(&bits.to_le_bytes());
                out.extend_from_slice(&nbits.to_le_bytes());
                out
            })
    }

    /// A seeded generator continuing from `seeded_state()` output.
    #[staticmethod]
    fn from_seeded_state(state: &[u8]) -> PyResult<Self> {
        if state.len() != 68 {
            return Err(PyValueError::new_err(format!(
                "a generator state has 68 bytes, got {}",
                state.len()
            )));
        }
        let mut key = [0u8; 32];
        key.copy_from_slice(&state[..32]);
        let word = |a: usize, b: usize| state[a..b].to_vec();
        let stream = u64::from_le_bytes(word(32, 40).try_into().unwrap_or_default());
        let pos = u128::from_le_bytes(word(40, 56).try_into().unwrap_or_default());
        let bits = u64::from_le_bytes(word(56, 64).try_into().unwrap_or_default());
        let nbits = u32::from_le_bytes(word(64, 68).try_into().unwrap_or_default());
        let inner = dpstream_core::Rng::from_seeded_state((key, stream, pos, bits, nbits))
            .map_err(to_py_err)?;
        Ok(Self { inner })
    }

    /// Uniform 64-bit integers.
    fn integers(&mut self, py: Python<'_>, size: usize) -> PyResult<Py<PyArray1<u64>>> {
        let mut out = zeroed::<u64>(size)?;
        let inner = &mut self.inner;
        py.detach(|| out.iter_mut().for_each(|o| *o = inner.next_u64()));
        Ok(out.into_pyarray(py).unbind())
    }
}

/// Run `f` with the caller's generator, or a fresh OS-seeded one.
pub(crate) fn with_rng<T: Send>(
    py: Python<'_>,
    rng: Option<&Bound<'_, Rng>>,
    f: impl FnOnce(&mut dpstream_core::Rng) -> T + Send,
) -> PyResult<T> {
    match rng {
        Some(r) => {
            let mut guard = r.try_borrow_mut()?;
            let inner = &mut guard.inner;
            Ok(py.detach(|| f(inner)))
        }
        None => {
            let mut fresh = dpstream_core::Rng::from_os().map_err(to_py_err)?;
            Ok(py.detach(|| f(&mut fresh)))
        }
    }
}

/// `(numerator, denominator)` of an exact rational, for Python's `Fraction`.
pub(crate) fn fraction(q: &Rational) -> (BigUint, BigUint) {
    (q.numer().clone(), q.denom().clone())
}

/// The rows of a C-contiguous float64 `(n, dim)` batch as one row-major
/// slice, or a `ValueError` naming the expected width.
pub(crate) fn points_slice<'a>(
    points: &'a numpy::PyReadonlyArray2<'_, f64>,
    dim: usize,
) -> PyResult<&'a [f64]> {
    use numpy::PyUntypedArrayMethods;
    if points.shape()[1] != dim {
        return Err(pyo3::exceptions::PyValueError::new_err(format!(
            "points must have {dim} columns, got {}",
            points.shape()[1]
        )));
    }
    Ok(points.as_slice()?)
}

/// A row-major vector of `dim`-wide rows as an `(rows, dim)` array.
pub(crate) fn rows_array(
    py: Python<'_>,
    out: Vec<f64>,
    dim: usize,
) -> PyResult<Py<numpy::PyArray2<f64>>> {
    use numpy::{IntoPyArray, PyArrayMethods};
    let rows = out.len() / dim;
    Ok(out.into_pyarray(py).reshape([rows, dim])?.unbind())
}

/// `(lower, upper, counts)` of `n = counts.len()` cells as `(n, dim)`,
/// `(n, dim)` and `(n,)` arrays.
pub(crate) fn cells_arrays<C: numpy::Element>(
    py: Python<'_>,
    lower: Vec<f64>,
    upper: Vec<f64>,
    counts: Vec<C>,
    dim: usize,
) -> PyResult<(
    Py<numpy::PyArray2<f64>>,
    Py<numpy::PyArray2<f64>>,
    Py<PyArray1<C>>,
)> {
    use numpy::PyArrayMethods;
    let n = counts.len();
    Ok((
        lower.into_pyarray(py).reshape([n, dim])?.unbind(),
        upper.into_pyarray(py).reshape([n, dim])?.unbind(),
        counts.into_pyarray(py).unbind(),
    ))
}

/// The object kind of encoded dpstream state ("TreeGenerator", "Sketch"),
/// after checking its header and checksum.
#[pyfunction]
fn state_kind(data: &[u8]) -> PyResult<&'static str> {
    dpstream_core::state::peek_kind(data)
        .map(|k| k.name())
        .map_err(to_py_err)
}

/// The noise keys of a counter's steps 1..=T (`increments`: T rows of `dim`
/// values) under `master` (32 bytes): for reference implementations in tests
/// (seeded counters draw their master key as the first 32 bytes of their
/// generator).
#[pyfunction]
fn _counter_step_keys(master: &[u8], increments: Vec<i64>, dim: usize) -> PyResult<Vec<Vec<u8>>> {
    let master: [u8; 32] = master
        .try_into()
        .map_err(|_| pyo3::exceptions::PyValueError::new_err("master must be 32 bytes"))?;
    if dim == 0 || increments.len() % dim != 0 {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "increments must hold whole rows of dim values",
        ));
    }
    let mut digest = [1u64, 1];
    Ok(increments
        .chunks_exact(dim)
        .enumerate()
        .map(|(i, x)| {
            dpstream_core::counters::step_key(&master, &mut digest, i as u64 + 1, x).to_vec()
        })
        .collect())
}

/// Test-only (feature `planted-bugs`): multiply the ε the online synthesizers
/// spend by `factor` (1 removes the bug). Absent from release builds.
#[cfg(feature = "planted-bugs")]
#[pyfunction]
fn _planted_set_epsilon_factor(factor: u32) -> PyResult<()> {
    dpstream_core::planted::set_epsilon_factor(factor).map_err(to_py_err)
}

/// Test-only (feature `planted-bugs`): plant a block bug in the default online
/// synthesizer on the calling thread: "none", "extra-block" (a point of a
/// merged block in k + 2 noisy blocks) or "redraw" (noise redrawn at each
/// release). Absent from release builds.
#[cfg(feature = "planted-bugs")]
#[pyfunction]
fn _planted_set_epochs_bug(bug: &str) -> PyResult<()> {
    use dpstream_core::planted::{set_epochs_bug, EpochsBug};
    let bug = match bug {
        "none" => EpochsBug::None,
        "extra-block" => EpochsBug::ExtraBlock,
        "redraw" => EpochsBug::RedrawEachRelease,
        other => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown planted bug {other:?}: 'none', 'extra-block' or 'redraw'"
            )))
        }
    };
    set_epochs_bug(bug);
    Ok(())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Rng>()?;
    m.add_function(wrap_pyfunction!(state_kind, m)?)?;
    m.add_function(wrap_pyfunction!(_counter_step_keys, m)?)?;
    #[cfg(feature = "planted-bugs")]
    m.add_function(wrap_pyfunction!(_planted_set_epsilon_factor, m)?)?;
    #[cfg(feature = "planted-bugs")]
    m.add_function(wrap_pyfunction!(_planted_set_epochs_bug, m)?)?;
    noise::register(m)?;
    counters::register(m)?;
    partition::register(m)?;
    sketch::register(m)?;
    privhp::register(m)?;
    online::register(m)?;
    epochs::register(m)?;
    continual::register(m)?;
    keys::register(m)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

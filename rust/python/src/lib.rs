//! Thin PyO3 bindings of `dpstream-core`, importable as `dpstream._core`.
//!
//! No privacy logic lives here: arguments are converted, the GIL is released
//! around bulk work, and core errors become Python exceptions.

use dpstream_core::noise::{self, DiscreteGaussian, DiscreteLaplace};
use dpstream_core::{Error, Rational};
use num_bigint::BigUint;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::exceptions::{PyMemoryError, PyOverflowError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

fn to_py_err(e: Error) -> PyErr {
    match e {
        Error::InvalidParameter(m) => PyValueError::new_err(m),
        Error::Overflow(m) => PyOverflowError::new_err(m),
        Error::Entropy(m) => PyRuntimeError::new_err(m),
    }
}

/// A zeroed output buffer, or `MemoryError` instead of an abort when `size`
/// cannot be allocated.
fn zeroed<T: Clone + Default>(size: usize) -> PyResult<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(size).map_err(|_| {
        PyMemoryError::new_err(format!(
            "cannot allocate an output array of {size} elements"
        ))
    })?;
    v.resize(size, T::default());
    Ok(v)
}

fn rational(num: BigUint, den: BigUint, what: &str) -> PyResult<Rational> {
    Rational::new(num, den).map_err(|e| PyValueError::new_err(format!("{what}: {e}")))
}

/// ChaCha12 CSPRNG; see `dpstream.Rng`.
#[pyclass(module = "dpstream._core", name = "Rng")]
struct Rng {
    inner: dpstream_core::Rng,
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

    /// Uniform 64-bit integers.
    fn integers(&mut self, py: Python<'_>, size: usize) -> PyResult<Py<PyArray1<u64>>> {
        let mut out = zeroed::<u64>(size)?;
        let inner = &mut self.inner;
        py.detach(|| out.iter_mut().for_each(|o| *o = inner.next_u64()));
        Ok(out.into_pyarray(py).unbind())
    }
}

/// Run `f` with the caller's generator, or a fresh OS-seeded one.
fn with_rng<T: Send>(
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

/// Discrete Laplace draws with scale `num/den`.
#[pyfunction]
#[pyo3(signature = (num, den, size, rng=None))]
fn discrete_laplace(
    py: Python<'_>,
    num: BigUint,
    den: BigUint,
    size: usize,
    rng: Option<&Bound<'_, Rng>>,
) -> PyResult<Py<PyArray1<i64>>> {
    let sampler = DiscreteLaplace::new(&rational(num, den, "scale")?).map_err(to_py_err)?;
    let mut out = zeroed::<i64>(size)?;
    with_rng(py, rng, |r| sampler.fill(r, &mut out))?.map_err(to_py_err)?;
    Ok(out.into_pyarray(py).unbind())
}

/// Discrete Gaussian draws with sigma `num/den`.
#[pyfunction]
#[pyo3(signature = (num, den, size, rng=None))]
fn discrete_gaussian(
    py: Python<'_>,
    num: BigUint,
    den: BigUint,
    size: usize,
    rng: Option<&Bound<'_, Rng>>,
) -> PyResult<Py<PyArray1<i64>>> {
    let sampler = DiscreteGaussian::new(&rational(num, den, "sigma")?).map_err(to_py_err)?;
    let mut out = zeroed::<i64>(size)?;
    with_rng(py, rng, |r| sampler.fill(r, &mut out))?.map_err(to_py_err)?;
    Ok(out.into_pyarray(py).unbind())
}

/// Permute-and-flip over float64 scores; epsilon and sensitivity as exact fractions.
#[pyfunction]
#[pyo3(signature = (scores, eps_num, eps_den, sens_num, sens_den, rng=None))]
fn permute_and_flip(
    py: Python<'_>,
    scores: PyReadonlyArray1<'_, f64>,
    eps_num: BigUint,
    eps_den: BigUint,
    sens_num: BigUint,
    sens_den: BigUint,
    rng: Option<&Bound<'_, Rng>>,
) -> PyResult<usize> {
    let eps = rational(eps_num, eps_den, "epsilon")?;
    let sens = rational(sens_num, sens_den, "sensitivity")?;
    let scores = scores.as_slice()?.to_vec();
    with_rng(py, rng, |r| {
        noise::permute_and_flip(r, &scores, &eps, &sens)
    })?
    .map_err(to_py_err)
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Rng>()?;
    m.add_function(wrap_pyfunction!(discrete_laplace, m)?)?;
    m.add_function(wrap_pyfunction!(discrete_gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(permute_and_flip, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

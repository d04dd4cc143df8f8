//! Bindings of `dpstream_core::noise`.

use crate::{rational, to_py_err, with_rng, zeroed, Rng};
use dpstream_core::noise::{self, DiscreteGaussian, DiscreteLaplace};
use num_bigint::BigUint;
use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;

/// A pyfunction `$name(num, den, size, rng=None)`: `size` draws of the
/// sampler `$sampler` whose parameter (`$what`) is `num/den`, into a new
/// int64 array, with the GIL released.
macro_rules! sampler_draws {
    ($(#[$doc:meta])* $name:ident, $sampler:ident, $what:literal) => {
        $(#[$doc])*
        #[pyfunction]
        #[pyo3(signature = (num, den, size, rng=None))]
        fn $name(
            py: Python<'_>,
            num: BigUint,
            den: BigUint,
            size: usize,
            rng: Option<&Bound<'_, Rng>>,
        ) -> PyResult<Py<PyArray1<i64>>> {
            let sampler = $sampler::new(&rational(num, den, $what)?).map_err(to_py_err)?;
            let mut out = zeroed::<i64>(size)?;
            with_rng(py, rng, |r| sampler.fill(r, &mut out))?.map_err(to_py_err)?;
            Ok(out.into_pyarray(py).unbind())
        }
    };
}

sampler_draws!(
    /// Discrete Laplace draws with scale `num/den`.
    discrete_laplace,
    DiscreteLaplace,
    "scale"
);
sampler_draws!(
    /// Discrete Gaussian draws with sigma `num/den`.
    discrete_gaussian,
    DiscreteGaussian,
    "sigma"
);

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

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(discrete_laplace, m)?)?;
    m.add_function(wrap_pyfunction!(discrete_gaussian, m)?)?;
    m.add_function(wrap_pyfunction!(permute_and_flip, m)?)?;
    Ok(())
}

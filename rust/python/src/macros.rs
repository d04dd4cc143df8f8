//! The shapes the bindings repeat, written once: read-only properties that
//! forward to the wrapped core object, and the methods every online
//! synthesizer and every counter shares. `#[pymethods]` allows one block per
//! class, so each macro writes the whole block: the shared methods, then the
//! class's own items.

/// `#[pymethods] impl $py { … }` for a class wrapping `inner`: each name in
/// `get` becomes a read-only property returning `self.inner.name()`, each in
/// `config` one returning `self.inner.config().name`; then the given items.
macro_rules! py_methods {
    (
        $py:ident;
        get { $($(#[$gm:meta])* $get:ident: $gty:ty),* $(,)? }
        config { $($(#[$cm:meta])* $cfg:ident: $cty:ty),* $(,)? }
        $($item:tt)*
    ) => {
        #[pymethods]
        impl $py {
            $(
                $(#[$gm])*
                #[getter]
                fn $get(&self) -> $gty {
                    self.inner.$get()
                }
            )*
            $(
                $(#[$cm])*
                #[getter]
                fn $cfg(&self) -> $cty {
                    self.inner.config().$cfg
                }
            )*
            $($item)*
        }
    };
    ($py:ident; get { $($get:tt)* } $($item:tt)*) => {
        py_methods! { $py; get { $($get)* } config {} $($item)* }
    };
}

/// The `#[pymethods]` of the binding `$py { inner: $core }` of an online
/// synthesizer: the constructor `(eps_num, eps_den, dim, <new args>,
/// rng=None)` (the object owns a generator derived from `rng`, seeded iff
/// `rng` is, or from a fresh OS-seeded one for `None`), `epsilon`, the
/// properties `dim`, `time`, `seeded` and those of `get` and `config` (see
/// [`py_methods`]), `memory_bytes`, `update`, `release` and `from_bytes`;
/// then the given items.
macro_rules! synthesizer_methods {
    (
        $py:ident($core:ident),
        new($($arg:ident: $aty:ty),*);
        get { $($get:tt)* }
        $($item:tt)*
    ) => {
        py_methods! {
            $py;
            get { dim: usize, time: u64, $($get)* }
            $($item)*

            /// The synthesizer owns a generator derived from `rng` (seeded iff `rng`
            /// is), or, for `None`, one derived from a fresh OS-seeded generator.
            #[new]
            #[pyo3(signature = (eps_num, eps_den, dim, $($arg,)* rng=None))]
            fn new(
                py: Python<'_>,
                eps_num: BigUint,
                eps_den: BigUint,
                dim: usize,
                $($arg: $aty,)*
                rng: Option<&Bound<'_, Rng>>,
            ) -> PyResult<Self> {
                let eps = rational(eps_num, eps_den, "epsilon")?;
                let own = with_rng(py, rng, |r| r.derive())?;
                let inner = py
                    .detach(|| $core::new(&eps, dim, $($arg,)* own))
                    .map_err(to_py_err)?;
                Ok(Self { inner })
            }

            /// `(numerator, denominator)` of ε.
            fn epsilon(&self) -> (BigUint, BigUint) {
                fraction(self.inner.epsilon())
            }

            /// Whether the noise comes from a caller-seeded generator (not private).
            #[getter]
            fn seeded(&self) -> bool {
                self.inner.is_seeded()
            }

            fn memory_bytes(&self) -> usize {
                self.inner.memory_bytes()
            }

            /// Feed a C-contiguous float64 (n, dim) batch, one point per time step;
            /// all-or-nothing.
            fn update(
                &mut self,
                py: Python<'_>,
                points: PyReadonlyArray2<'_, f64>,
            ) -> PyResult<()> {
                let data = points_slice(&points, self.inner.dim())?;
                let inner = &mut self.inner;
                py.detach(|| inner.update(data)).map_err(to_py_err)
            }

            /// `(rows, dim)` synthetic points: `t` rows for `size=None`, else `size`,
            /// drawn in chunks of `chunk_rows` rows.
            #[pyo3(signature = (size=None, chunk_rows=dpstream_core::synth::CHUNK_ROWS))]
            fn release(
                &mut self,
                py: Python<'_>,
                size: Option<u64>,
                chunk_rows: u64,
            ) -> PyResult<Py<PyArray2<f64>>> {
                let dim = self.inner.dim();
                let inner = &mut self.inner;
                let out = py
                    .detach(|| inner.release_chunked(size, chunk_rows))
                    .map_err(to_py_err)?;
                rows_array(py, out, dim)
            }

            /// The same release as `release`, to draw chunk by chunk (closes the
            /// open epoch and draws the sampling key now).
            #[pyo3(signature = (size=None, chunk_rows=dpstream_core::synth::CHUNK_ROWS))]
            fn release_sampler(
                &mut self,
                py: Python<'_>,
                size: Option<u64>,
                chunk_rows: u64,
            ) -> PyResult<$crate::online::PyOnlineRelease> {
                let inner = &mut self.inner;
                let r = py
                    .detach(|| inner.release_sampler(size, chunk_rows).map(|r| r.into_owned()))
                    .map_err(to_py_err)?;
                Ok($crate::online::PyOnlineRelease { inner: r })
            }

            #[staticmethod]
            fn from_bytes(data: &[u8]) -> PyResult<Self> {
                let inner = $core::from_bytes(data).map_err(to_py_err)?;
                Ok(Self { inner })
            }
        }
    };
}

/// The `#[pymethods]` of the binding `$py { inner: $core, rng: Source,
/// seeded }` of a counter: the properties `time`, `seeded` and those of
/// `get` (see [`py_methods`]), `memory_bytes` and `from_bytes`; then the
/// given items.
macro_rules! counter_methods {
    ($py:ident($core:ident); get { $($get:tt)* } $($item:tt)*) => {
        py_methods! {
            $py;
            get { time: u64, $($get)* }
            $($item)*

            /// Whether the counter draws from a caller-seeded generator (not private).
            #[getter]
            fn seeded(&self) -> bool {
                self.seeded
            }

            fn memory_bytes(&self) -> usize {
                self.inner.memory_bytes()
            }

            /// Decode `to_bytes` output; the counter draws from `rng`, or from a
            /// fresh OS-seeded generator when `rng` is `None`. A checkpoint of a
            /// seeded counter is refused unless `allow_seeded`; loaded, it stays
            /// seeded whatever `rng` is (its noise so far is reproducible).
            #[staticmethod]
            #[pyo3(signature = (data, rng=None, allow_seeded=false))]
            fn from_bytes(
                py: Python<'_>,
                data: &[u8],
                rng: Option<Py<Rng>>,
                allow_seeded: bool,
            ) -> PyResult<Self> {
                let (inner, saved) = $core::from_bytes(data).map_err(to_py_err)?;
                let what = stringify!($core);
                let (rng, seeded) = loaded_source(py, rng, saved, allow_seeded, what)?;
                Ok(Self { inner, rng, seeded })
            }
        }
    };
}

/// [`counter_methods`] of a scalar sparse counter, with the property
/// `release` and the methods `step` and `run`.
macro_rules! sparse_counter_methods {
    ($py:ident($core:ident); get { $($get:tt)* } $($item:tt)*) => {
        counter_methods! {
            $py($core);
            get { release: i64, $($get)* }
            $($item)*

            /// One step; returns the release. All-or-nothing.
            fn step(&mut self, py: Python<'_>, value: i64) -> PyResult<i64> {
                let Self { inner, rng, .. } = self;
                with_source(py, inner, rng, |c, r| c.step(r, value))?.map_err(to_py_err)?;
                Ok(self.inner.release())
            }

            /// `(T,)` values in, `(T,)` releases out. All-or-nothing.
            fn run(
                &mut self,
                py: Python<'_>,
                values: PyReadonlyArray1<'_, i64>,
            ) -> PyResult<Py<PyArray1<i64>>> {
                let xs = values.as_slice()?;
                let mut out = zeroed::<i64>(xs.len())?;
                let Self { inner, rng, .. } = self;
                with_source(py, inner, rng, |c, r| c.run(r, xs, &mut out))?.map_err(to_py_err)?;
                Ok(out.into_pyarray(py).unbind())
            }
        }
    };
}

//! The one error type of the core. Every fallible public function returns
//! [`Result`]; bad input never panics.

/// Errors raised by `dpstream-core`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// A parameter is outside its valid range (the message names it).
    #[error("{0}")]
    InvalidParameter(String),
    /// A sampled value does not fit the output integer type. Its probability
    /// is astronomically small for any sensible scale; the call is refused
    /// rather than truncating the distribution silently.
    #[error("{0}")]
    Overflow(String),
    /// Memory for a structure or an output could not be allocated (the
    /// message names what and how much); nothing was changed. Python sees a
    /// `MemoryError`.
    #[error("{0}")]
    OutOfMemory(String),
    /// The operating system could not provide entropy for seeding.
    #[error("operating-system entropy unavailable: {0}")]
    Entropy(String),
}

/// Result alias used throughout the core.
pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for an [`Error::InvalidParameter`] built from `format!` arguments.
macro_rules! invalid {
    ($($arg:tt)*) => { $crate::error::Error::InvalidParameter(format!($($arg)*)) };
}
pub(crate) use invalid;

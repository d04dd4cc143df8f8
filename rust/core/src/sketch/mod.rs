//! Count-min and count sketches, private and mergeable (PrivHP, Algorithm 1
//! and Section 4.1; Cormode–Muthukrishnan 2005; Charikar–Chen–Farach-Colton 2002).
//!
//! One shared implementation, [`LinearSketch`], holds a `rows × width` matrix
//! of `i64` cells and one [`RowHash`] per row. An update of key `x` by count
//! `c` adds `c` (count-min) or `s_i(x)·c` (count sketch, `s_i(x) = ±1`) to
//! cell `(i, h_i(x))` of every row `i`. The query is the minimum over rows
//! (count-min) or the median over rows of `s_i(x)·C[i][h_i(x)]` (count sketch).
//! Both are linear maps of the key-count vector, so sketches with the same
//! hashes [merge](LinearSketch::merge) by adding cells.
//!
//! # Privacy
//!
//! * **Neighbouring relation**: two inputs differ by adding or removing one
//!   occurrence of one key with count 1 (one `update(x, 1)`). A caller whose
//!   records carry larger weights, or that updates several keys per record,
//!   scales the sensitivity accordingly (PrivHP updates one key per level per
//!   point, and each level has its own sketch and its own share of ε).
//! * **Sensitivity**: such a change moves exactly one cell per row by 1, so
//!   the ℓ1-sensitivity of the whole matrix is `rows`, for any fixed hashes.
//! * **Mechanism**: [`LinearSketch::add_noise`] adds independent discrete
//!   Laplace noise of scale `rows/ε` to every cell (exact, integer, from the
//!   CSPRNG), which is ε-DP for the released matrix; queries are
//!   post-processing. Noise is added once, at release (the one-pass model of
//!   PrivHP); each further call spends another ε (basic composition), and a
//!   sketch released without noise is not private.
//! * **Public**: the kind, `rows`, `width`, the hash functions (their
//!   parameters are drawn from the generator independently of the data, the
//!   analysis holds for every fixed choice, and they are serialized with the
//!   sketch) and ε. Only the cells are private.
//! * **Ledger**: the encoding ([`LinearSketch::to_bytes`]) carries a
//!   [`SketchRecord`]: whether the sketch is a release, whether its noise was
//!   seeded, and the ε budget and ε spent by its releases, so a loaded sketch
//!   cannot be released past its budget. The caller (the Python
//!   `dpstream.sketch` classes) keeps and enforces the ledger.
//!
//! # Accuracy
//!
//! Lemma 4 of PrivHP: for non-negative updates totalling `n`, the count-min
//! estimate of a key with true count `c` never underestimates before noise,
//! and overestimates by `E[error] <= (n − c)/w` for width `w` (here at most
//! `(n − c)·(1/w + w/2^128)`, the second term being the bias of mapping a
//! 64-bit hash to `w` buckets). Each count-sketch row estimate is unbiased;
//! the median of `rows` of them concentrates. The noise adds a discrete
//! Laplace(`rows/ε`) variable per cell read.
//!
//! # Overflow
//!
//! Cells are `i64`. [`LinearSketch::update`] (the hot path, infallible)
//! saturates at `i64::MIN`/`i64::MAX`; a cell can only get there after the
//! absolute counts fed to the sketch add up to more than 2^63 − 1 ≈ 9.2·10^18,
//! which unit updates never reach. [`LinearSketch::update_many`],
//! [`LinearSketch::merge`] and [`LinearSketch::add_noise`] use checked
//! arithmetic and refuse, changing nothing, any input that would overflow.

mod encoding;
pub mod hash;
pub mod linear;

pub use encoding::{DecodedSketch, SketchRecord};
pub use hash::RowHash;
pub use linear::{LinearSketch, SketchKind, MAX_CELL_BYTES, MAX_ROWS, MAX_WIDTH};

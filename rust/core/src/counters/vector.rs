//! The vector plumbing shared by every counter: fallible allocation and
//! exact, checked arithmetic on `dim`-long `i64` slices.

use crate::error::{Error, Result};

/// A zeroed buffer of `n` values, or an error instead of an abort when it
/// cannot be allocated (`what` names it).
pub(crate) fn zeros(n: usize, what: &str) -> Result<Vec<i64>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| Error::OutOfMemory(format!("cannot allocate {what} of {n} values")))?;
    v.resize(n, 0);
    Ok(v)
}

fn overflow(what: &str) -> Error {
    Error::Overflow(format!("{what} exceeds the int64 range"))
}

/// `out = a + b`, exact; `what` names the result in the error.
pub(crate) fn add_into(a: &[i64], b: &[i64], out: &mut [i64], what: &str) -> Result<()> {
    debug_assert!(a.len() == b.len() && b.len() == out.len());
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = x.checked_add(*y).ok_or_else(|| overflow(what))?;
    }
    Ok(())
}

/// `out = prev + z − Σ_r rows[r]`, exact, where `rows` holds whole rows of
/// `prev.len()` values one after another (the noise terms a step retires).
pub(crate) fn replace_into(prev: &[i64], z: &[i64], rows: &[i64], out: &mut [i64]) -> Result<()> {
    let dim = prev.len();
    debug_assert!(z.len() == dim && out.len() == dim && rows.len() % dim.max(1) == 0);
    for (c, o) in out.iter_mut().enumerate() {
        let mut acc = i128::from(prev[c]) + i128::from(z[c]);
        for row in rows.chunks_exact(dim) {
            acc -= i128::from(row[c]);
        }
        *o = i64::try_from(acc).map_err(|_| overflow("noise of the running sum"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_is_exact_and_checked() {
        let mut out = [0i64; 2];
        add_into(&[1, -2], &[3, 4], &mut out, "x").unwrap();
        assert_eq!(out, [4, 2]);
        assert!(add_into(&[i64::MAX, 0], &[1, 0], &mut out, "x").is_err());
        // Intermediate values beyond int64 are fine when the result fits.
        replace_into(
            &[i64::MAX, 5],
            &[i64::MAX, 1],
            &[i64::MAX, 2, 3, 4],
            &mut out,
        )
        .unwrap();
        assert_eq!(out, [i64::MAX - 3, 0]);
        assert!(replace_into(&[i64::MAX], &[1], &[], &mut out[..1]).is_err());
        assert!(zeros(usize::MAX, "huge").is_err());
        assert_eq!(zeros(3, "x").unwrap(), vec![0; 3]);
    }
}

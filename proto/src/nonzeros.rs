//! The arguments and answer of the PS function `nonzeros`, as the server that answers and the
//! clients that ask both read them. A PS function's arguments and results are f64s, which
//! hold whole numbers exactly only to 2^53, and a sparse matrix has up to 2^63 columns: so a
//! column travels as two exact 32-bit halves.
//!
//! Arguments: the first column and the column after the last (two halves each), and the most
//! pairs each block answers (0: all). The answer: (high half, low half, value) per element,
//! each block's ascending by column, the blocks' one after the other.

use std::ops::Range;

use crate::{PsError, Result};

/// Values of an f64 half: whole numbers below 2^32.
const HALF: f64 = 4_294_967_296.0;

/// The arguments asking for the elements of columns `cols`, at most `most` per block (0: all).
pub fn args(cols: Range<u64>, most: u64) -> Vec<f64> {
    let [a, b] = halves(cols.start);
    let [c, d] = halves(cols.end);
    vec![a, b, c, d, most as f64]
}

/// Column `col` as its high and low halves.
pub fn halves(col: u64) -> [f64; 2] {
    [(col >> 32) as f64, (col & 0xffff_ffff) as f64]
}

/// The column of halves `high` and `low`, or an error naming `what` it was when they are not
/// two whole numbers below 2^32.
pub fn column(high: f64, low: f64, what: &str) -> Result<u64> {
    let half = |h: f64| (0.0..HALF).contains(&h) && h.fract() == 0.0;
    if !(half(high) && half(low)) {
        return Err(PsError::InvalidArgument(format!(
            "PS function 'nonzeros': the {what} must be given as two whole numbers below 2^32 \
             (its high and low halves), got {high} and {low}"
        )));
    }
    Ok(((high as u64) << 32) | low as u64)
}

/// The (column, value) pairs of an answer, in its order.
pub fn pairs(answer: &[f64]) -> Result<Vec<(u64, f64)>> {
    if !answer.len().is_multiple_of(3) {
        return Err(PsError::Internal(format!(
            "PS function 'nonzeros' answered {} numbers, not (high, low, value) triples",
            answer.len()
        )));
    }
    (answer.chunks_exact(3))
        .map(|t| Ok((column(t[0], t[1], "answered column")?, t[2])))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_past_2_to_the_53_travel_exactly() {
        for col in [0, 1, (1 << 53) + 1, (1 << 63) - 3, u64::MAX] {
            let [h, l] = halves(col);
            assert_eq!(column(h, l, "c").unwrap(), col);
        }
        assert_eq!(pairs(&[1.0, 2.0, 0.5]).unwrap(), vec![((1 << 32) + 2, 0.5)]);
        assert!(column(HALF, 0.0, "first column").is_err());
        assert!(column(0.5, 0.0, "first column").is_err());
        assert!(pairs(&[1.0, 2.0]).is_err());
    }
}

//! Reductions: sum, asum (of absolute values), nnz, norm2, min, max over one row, dot of two rows, and `lgamma_sum`
//! over any rows (the topic model's log-likelihood, summed where its counts are).

use angel_proto::{Merge, Result};

use super::{PsFunction, PsfContext, PsfRegistry};
use crate::blocks::RowView;

/// A reduction of one row to one number.
struct Reduce {
    name: &'static str,
    merge: Merge,
    init: f64,
    step: fn(f64, f64) -> f64,
    /// Whether columns a sparse row does not store (zeros) take part, as they do for min/max.
    counts_absent_zeros: bool,
}

impl PsFunction for Reduce {
    fn name(&self) -> &str {
        self.name
    }

    fn merge(&self) -> Merge {
        self.merge
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x"])?;
        let width = ctx.cols().end - ctx.cols().start;
        let acc = ctx.read(0, |row| {
            let mut acc = self.init;
            row.for_each(&mut |_, v| acc = (self.step)(acc, v));
            if self.counts_absent_zeros && row.stored() < width {
                acc = (self.step)(acc, 0.0);
            }
            acc
        });
        Ok(vec![acc])
    }
}

/// `x . y` over the stored elements of `x`.
struct Dot;

impl PsFunction for Dot {
    fn name(&self) -> &str {
        "dot"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x", "y"])?;
        let x = ctx.copy(0);
        let dot = ctx.read(1, |y| {
            let mut dot = 0.0;
            x.for_each(&mut |c, v| dot += v * y.get(c));
            dot
        });
        Ok(vec![dot])
    }
}

/// `sum over the operands' stored elements x > 0 in columns below args[1] of lgamma(x + a) -
/// lgamma(a)`, `a = args[0]`: the word side of the topic model's joint log-likelihood
/// (`sum_k sum_w lgamma(n_wk + beta) - lgamma(beta)`) over its topics' rows, left out of it the
/// topic totals column; Angel's LDA sums it on its servers too, so no count crosses the
/// network.
struct LgammaSum;

impl PsFunction for LgammaSum {
    fn name(&self) -> &str {
        "lgamma_sum"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        let a = ctx.arg(0, "the offset a, above 0")?;
        let below = ctx.arg(1, "the first column left out")?;
        if !(a > 0.0 && a.is_finite()) {
            return Err(angel_proto::PsError::InvalidArgument(format!(
                "PS function 'lgamma_sum': the offset a must be a finite number above 0, got {a}"
            )));
        }
        let base = libm::lgamma(a);
        let mut sum = 0.0;
        for i in 0..ctx.operand_count() {
            ctx.read(i, |row| {
                row.for_each(&mut |c, x| {
                    if x > 0.0 && (c as f64) < below {
                        sum += libm::lgamma(x + a) - base;
                    }
                })
            });
        }
        Ok(vec![sum])
    }
}

pub(super) fn register(registry: &mut PsfRegistry) {
    let reductions = [
        (
            "sum",
            Merge::Sum,
            0.0,
            (|a, v| a + v) as fn(f64, f64) -> f64,
            false,
        ),
        (
            "nnz",
            Merge::Sum,
            0.0,
            |a, v| a + f64::from(u8::from(v != 0.0)),
            false,
        ),
        ("asum", Merge::Sum, 0.0, |a, v| a + v.abs(), false),
        ("norm2", Merge::SumSqrt, 0.0, |a, v| a + v * v, false),
        ("min", Merge::Min, f64::INFINITY, f64::min, true),
        ("max", Merge::Max, f64::NEG_INFINITY, f64::max, true),
    ];
    for (name, merge, init, step, counts_absent_zeros) in reductions {
        registry.register(Reduce {
            name,
            merge,
            init,
            step,
            counts_absent_zeros,
        });
    }
    registry.register(Dot);
    registry.register(LgammaSum);
}

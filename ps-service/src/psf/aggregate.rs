//! Reductions: sum, nnz, norm2, min, max over one row, and dot of two rows.

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
}

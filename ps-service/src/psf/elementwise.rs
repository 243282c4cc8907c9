//! Element-wise updates: axpy, copy, scale, and the binary operators add, sub, mul, div.
//!
//! They compute over stored elements, so a sparse row stays sparse: `add`/`sub` cover the
//! keys of either operand, `mul`/`div` the keys of `x` (elsewhere `x` is zero, and so is the
//! result of `mul`; `div` leaves those columns at zero).

use angel_proto::Result;

use super::{PsFunction, PsfContext, PsfRegistry};
use crate::blocks::RowView;

/// `y += a * x`; arguments: a.
struct Axpy;

impl PsFunction for Axpy {
    fn name(&self) -> &str {
        "axpy"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x", "y"])?;
        let a = ctx.arg(0, "a")?;
        let x = ctx.copy(0);
        ctx.write(1, |y| try_each(&x, |c, v| y.add(c, a * v)))?;
        Ok(Vec::new())
    }
}

/// `y = x`.
struct Copy;

impl PsFunction for Copy {
    fn name(&self) -> &str {
        "copy"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x", "y"])?;
        let x = ctx.copy(0);
        ctx.write(1, |y| {
            y.clear();
            y.reserve(x.stored() as usize);
            try_each(&x, |c, v| y.set(c, v))
        })?;
        Ok(Vec::new())
    }
}

/// `x *= a`; arguments: a.
struct Scale;

impl PsFunction for Scale {
    fn name(&self) -> &str {
        "scale"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x"])?;
        let a = ctx.arg(0, "a")?;
        ctx.write(0, |x| x.map(&mut |_, v| v * a));
        Ok(Vec::new())
    }
}

/// An element-wise operator on (x, y).
type BinaryOp = fn(f64, f64) -> f64;

/// `z = x op y`.
struct Binary {
    name: &'static str,
    op: BinaryOp,
    /// Also cover keys stored only in `y`.
    union: bool,
}

impl PsFunction for Binary {
    fn name(&self) -> &str {
        self.name
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x", "y", "z"])?;
        let (x, y) = (ctx.copy(0), ctx.copy(1));
        let op = self.op;
        ctx.write(2, |z| {
            z.clear();
            z.reserve(x.stored() as usize);
            try_each(&x, |c, xv| z.set(c, op(xv, y.get(c))))?;
            if !self.union {
                return Ok(());
            }
            try_each(&y, |c, yv| match x.contains(c) {
                true => Ok(()),
                false => z.set(c, op(0.0, yv)),
            })
        })?;
        Ok(Vec::new())
    }
}

/// Calls `f` on every stored element of `row`, stopping at the first error.
fn try_each(row: &dyn RowView, mut f: impl FnMut(u64, f64) -> Result<()>) -> Result<()> {
    let mut result = Ok(());
    row.for_each(&mut |c, v| {
        if result.is_ok() {
            result = f(c, v);
        }
    });
    result
}

pub(super) fn register(registry: &mut PsfRegistry) {
    registry.register(Axpy).register(Copy).register(Scale);
    let binaries: [(&'static str, BinaryOp, bool); 4] = [
        ("add", |a, b| a + b, true),
        ("sub", |a, b| a - b, true),
        ("mul", |a, b| a * b, false),
        ("div", |a, b| a / b, false),
    ];
    for (name, op, union) in binaries {
        registry.register(Binary { name, op, union });
    }
}

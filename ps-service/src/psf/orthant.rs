//! OWL-QN's PS functions (Andrew and Gao, 2007), for an objective `f(x) + l1 |x|_1`: the
//! pseudo-gradient, and the projections that keep a direction and a step within one orthant.
//! Columns from `free` on (a model's intercepts) take no penalty and are never projected.

use angel_proto::Result;

use super::{PsFunction, PsfContext, PsfRegistry};
use crate::blocks::RowView;

/// `pg` = the pseudo-gradient at `x` from `g`, the gradient of `f`: the steepest descent's
/// opposite of `f + l1 |x|_1`, zero where no move of a zero weight decreases it. Operands
/// (x, g, pg); arguments: l1, free.
struct PseudoGradient;

impl PsFunction for PseudoGradient {
    fn name(&self) -> &str {
        "pseudo_gradient"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x", "g", "pg"])?;
        let (l1, free) = (ctx.arg(0, "l1")?, ctx.arg(1, "free")? as u64);
        let (x, g) = (ctx.copy(0), ctx.copy(1));
        let pseudo = |c: u64| {
            let (x, g) = (x.get(c), g.get(c));
            match () {
                _ if c >= free => g,
                _ if x > 0.0 => g + l1,
                _ if x < 0.0 => g - l1,
                _ if g + l1 < 0.0 => g + l1,
                _ if g - l1 > 0.0 => g - l1,
                _ => 0.0,
            }
        };
        // Where x and g are both zero the pseudo-gradient is too.
        let mut cols = Vec::with_capacity(g.stored() as usize);
        g.for_each(&mut |c, _| cols.push(c));
        x.for_each(&mut |c, _| {
            if !g.contains(c) {
                cols.push(c)
            }
        });
        ctx.write(2, |pg| {
            pg.clear();
            pg.reserve(cols.len());
            cols.iter().try_for_each(|&c| pg.set(c, pseudo(c)))
        })?;
        Ok(Vec::new())
    }
}

/// Zeroes `d` where it does not descend along `-pg` (where `d_i pg_i >= 0`), below `free`.
/// Operands (d, pg); arguments: free.
struct OrthantDirection;

impl PsFunction for OrthantDirection {
    fn name(&self) -> &str {
        "orthant_direction"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["d", "pg"])?;
        let free = ctx.arg(0, "free")? as u64;
        let pg = ctx.copy(1);
        ctx.write(0, |d| {
            d.map(&mut |c, v| match c < free && v * pg.get(c) >= 0.0 {
                true => 0.0,
                false => v,
            })
        });
        Ok(Vec::new())
    }
}

/// Zeroes `w` where it left the orthant of the point `x` it was stepped from (for a zero
/// `x_i`, the orthant `-pg_i` points to), below `free`. Operands (w, x, pg); arguments: free.
struct OrthantProject;

impl PsFunction for OrthantProject {
    fn name(&self) -> &str {
        "orthant_project"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["w", "x", "pg"])?;
        let free = ctx.arg(0, "free")? as u64;
        let (x, pg) = (ctx.copy(1), ctx.copy(2));
        let orthant = |c: u64| match x.get(c) {
            0.0 => -pg.get(c),
            x => x,
        };
        ctx.write(0, |w| {
            w.map(&mut |c, v| match c < free && v * orthant(c) <= 0.0 {
                true => 0.0,
                false => v,
            })
        });
        Ok(Vec::new())
    }
}

pub(super) fn register(registry: &mut PsfRegistry) {
    registry
        .register(PseudoGradient)
        .register(OrthantDirection)
        .register(OrthantProject);
}

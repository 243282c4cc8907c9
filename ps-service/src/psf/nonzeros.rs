//! `nonzeros`: a row's elements that are not zero within a column range, as (column, value)
//! pairs: how a client reads a wide sparse row (a merged quantile sketch of many features, a
//! hashed model being saved) without naming every column it might hold. Each partition
//! answers its own pairs, ascending, at most as many as asked (the lowest columns), so a
//! client pages through a row in bounded memory; the client gets every partition's one after
//! the other ([`Merge::Concat`]). Arguments and answer: `angel_proto::nonzeros`.

use std::collections::BinaryHeap;

use angel_proto::nonzeros::{column, halves};
use angel_proto::{Merge, PsError, Result};

use super::{PsFunction, PsfContext, PsfRegistry};

/// See the module documentation.
struct NonZeros;

impl PsFunction for NonZeros {
    fn name(&self) -> &str {
        "nonzeros"
    }

    fn merge(&self) -> Merge {
        Merge::Concat
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x"])?;
        let half = |i: usize, what: &str| ctx.arg(i, what);
        let from = column(
            half(0, "first column")?,
            half(1, "first column")?,
            "first column",
        )?;
        let to = column(half(2, "end column")?, half(3, "end column")?, "end column")?;
        let most = ctx.arg(4, "most pairs")?;
        if to < from || !(most >= 0.0 && most.fract() == 0.0) {
            return Err(PsError::InvalidArgument(format!(
                "PS function 'nonzeros': the first column must be at most the end and the most \
                 pairs a whole number, got {from}..{to} and {most}"
            )));
        }
        let block = ctx.cols();
        let range = from.max(block.start)..to.min(block.end);
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let pairs = lowest(ctx, range, most as usize);
        Ok(pairs
            .into_iter()
            .flat_map(|(c, v)| {
                let [h, l] = halves(c);
                [h, l, v]
            })
            .collect())
    }
}

/// The block's pairs within `range`, ascending, at most `most` of them (0: all): the lowest
/// columns, kept in a heap of `most` so that a page costs no more memory than it answers.
fn lowest(ctx: &PsfContext<'_>, range: std::ops::Range<u64>, most: usize) -> Vec<(u64, f64)> {
    let mut heap: BinaryHeap<(u64, u64)> = BinaryHeap::new();
    ctx.read(0, |row| {
        row.for_each(&mut |c, v| {
            if range.contains(&c) && v != 0.0 {
                heap.push((c, v.to_bits()));
                if most > 0 && heap.len() > most {
                    heap.pop();
                }
            }
        });
    });
    let mut pairs: Vec<(u64, f64)> = (heap.into_vec().into_iter())
        .map(|(c, bits)| (c, f64::from_bits(bits)))
        .collect();
    pairs.sort_unstable_by_key(|p| p.0);
    pairs
}

pub(super) fn register(registry: &mut PsfRegistry) {
    registry.register(NonZeros);
}

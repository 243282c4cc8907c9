//! `nonzeros`: a row's elements that are not zero within a column range, as (column, value)
//! pairs: how a client reads a wide sparse row (a merged quantile sketch of many features, say)
//! without naming every column it might hold. Each partition answers its own pairs, ascending;
//! the client gets every partition's one after the other ([`Merge::Concat`]).

use angel_proto::{Merge, PsError, Result};

use super::{PsFunction, PsfContext, PsfRegistry};

/// See the module documentation. Arguments: the first column and the column after the last.
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
        let (from, to) = (ctx.arg(0, "first column")?, ctx.arg(1, "end column")?);
        if !(from >= 0.0 && to >= from && from.fract() == 0.0 && to.fract() == 0.0) {
            return Err(PsError::InvalidArgument(format!(
                "PS function 'nonzeros': the columns must be whole numbers, the first at most \
                 the end, got {from}..{to}"
            )));
        }
        let range = from as u64..to as u64;
        let mut pairs: Vec<(u64, f64)> = ctx.read(0, |row| {
            let mut pairs = Vec::new();
            row.for_each(&mut |c, v| {
                if range.contains(&c) && v != 0.0 {
                    pairs.push((c, v));
                }
            });
            pairs
        });
        pairs.sort_unstable_by_key(|p| p.0);
        Ok(pairs.into_iter().flat_map(|(c, v)| [c as f64, v]).collect())
    }
}

pub(super) fn register(registry: &mut PsfRegistry) {
    registry.register(NonZeros);
}

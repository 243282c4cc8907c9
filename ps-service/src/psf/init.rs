//! Initialisation: fill, zero, and random uniform / normal values.

use angel_proto::{PsError, Result};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, Normal, Uniform};

use super::{PsFunction, PsfContext, PsfRegistry};

/// `x = v` on stored elements (every element of a dense row); arguments: v.
struct Fill;

impl PsFunction for Fill {
    fn name(&self) -> &str {
        "fill"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x"])?;
        let v = ctx.arg(0, "value")?;
        ctx.write(0, |x| x.map(&mut |_, _| v));
        Ok(Vec::new())
    }
}

/// `x = 0`; a sparse row releases its keys.
struct Zero;

impl PsFunction for Zero {
    fn name(&self) -> &str {
        "zero"
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x"])?;
        ctx.write(0, |x| x.clear());
        Ok(Vec::new())
    }
}

/// Random values on a dense row, reproducible from a seed whatever the number of servers.
/// `random_uniform` takes (low, high, seed); `random_normal` takes (mean, std_dev, seed).
struct Random {
    name: &'static str,
    normal: bool,
}

impl PsFunction for Random {
    fn name(&self) -> &str {
        self.name
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x"])?;
        let (a, b) = (ctx.arg(0, "low or mean")?, ctx.arg(1, "high or std_dev")?);
        let seed = ctx.arg(2, "seed")? as u64;
        let bad = |e: &dyn std::fmt::Display| {
            PsError::InvalidArgument(format!("PS function '{}': {e}", self.name))
        };
        let sample: Box<dyn Fn(&mut StdRng) -> f64> = if self.normal {
            let d = Normal::new(a, b).map_err(|e| bad(&e))?;
            Box::new(move |r| d.sample(r))
        } else {
            let d = Uniform::new(a, b).map_err(|e| bad(&e))?;
            Box::new(move |r| d.sample(r))
        };
        let mut rng = StdRng::seed_from_u64(ctx.block_seed(seed));
        ctx.write(0, |x| {
            if !x.is_dense() {
                return Err(bad(&format!(
                    "random initialisation needs dense storage; matrix '{}' is sparse",
                    ctx.matrix_name(0)
                )));
            }
            x.map(&mut |_, _| sample(&mut rng));
            Ok(())
        })?;
        Ok(Vec::new())
    }
}

pub(super) fn register(registry: &mut PsfRegistry) {
    registry.register(Fill).register(Zero);
    registry.register(Random {
        name: "random_uniform",
        normal: false,
    });
    registry.register(Random {
        name: "random_normal",
        normal: true,
    });
}

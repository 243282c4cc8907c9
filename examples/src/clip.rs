//! `clip`: a user-defined PS function that clamps a row into [low, high] on the servers and
//! returns how many values it changed.
//!
//! Gradient or weight clipping is a typical server-side operator: doing it where the data
//! lives costs one small request instead of pulling and pushing the whole row.
//!
//! ```no_run
//! # async fn run() -> angel_client::Result<()> {
//! use angel_ps_service::{Functions, Standalone, StandaloneConfig};
//! let mut functions = Functions::default();
//! functions.psfs.register(angel_examples::clip::Clip);
//! let service = Standalone::start(StandaloneConfig { functions, ..StandaloneConfig::new(2) }).await?;
//! let client = angel_client::PsClient::connect(&service.master_addr()).await?;
//! let changed = client.psf("clip", &[("weights", 0)], &[-1.0, 1.0]).await?;
//! # Ok(()) }
//! ```

use angel_proto::{Merge, PsError, Result};
use angel_ps_service::{PsFunction, PsfContext};

/// Clamps operand 0 into [args[0], args[1]]; the result is the number of values changed.
pub struct Clip;

impl PsFunction for Clip {
    fn name(&self) -> &str {
        "clip"
    }

    fn merge(&self) -> Merge {
        Merge::Sum
    }

    fn apply(&self, ctx: &PsfContext<'_>) -> Result<Vec<f64>> {
        ctx.expect_operands(&["x"])?;
        let (low, high) = (ctx.arg(0, "low")?, ctx.arg(1, "high")?);
        if low > high {
            return Err(PsError::InvalidArgument(format!(
                "clip: low {low} is above high {high}"
            )));
        }
        let mut changed = 0.0;
        ctx.write(0, |row| {
            row.map(&mut |_, v| {
                let c = v.clamp(low, high);
                if c != v {
                    changed += 1.0;
                }
                c
            })
        });
        Ok(vec![changed])
    }
}

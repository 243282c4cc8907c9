//! Reading a model's [`Training`] description: the optimizer's usual defaults
//! ([`optimizer_params`]), the compression it asks for, and when its workers wait.

use crate::codec::{Compression, CompressionMode};
use crate::{OptimizerParams, Result, Sync, Training};

/// `name` at `learning_rate`, no regularisation, Adam's decays 0.9 / 0.999, epsilon 1e-8,
/// FTRL's beta 1.0.
pub fn optimizer_params(name: &str, learning_rate: f64) -> OptimizerParams {
    OptimizerParams {
        name: name.to_string(),
        learning_rate,
        beta1: 0.9,
        beta2: 0.999,
        epsilon: 1e-8,
        beta: 1.0,
        ..Default::default()
    }
}

impl Training {
    /// A description of a matrix a client trains with its own loop: pushes of gradients go to
    /// `optimizer` on the servers, one at a time (SGD, nobody waits).
    pub fn for_optimizer(optimizer: OptimizerParams) -> Self {
        Training {
            optimizer: Some(optimizer),
            sync: Some(Sync {
                staleness: -1,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// How pushes are encoded (`compression`, empty: none) and when (`compression_mode`,
    /// empty: auto); an error names a value that does not parse.
    pub fn codec(&self) -> Result<(Compression, CompressionMode)> {
        let compression = match self.compression.as_str() {
            "" => Compression::None,
            text => text.parse()?,
        };
        let mode = match self.compression_mode.as_str() {
            "" => CompressionMode::Auto,
            text => text.parse()?,
        };
        Ok((compression, mode))
    }
}

impl Sync {
    /// The staleness the clock table applies: -1 when workers never wait (ASP, or clocks
    /// counted in epochs, which statements already keep in step), else the staleness (0 for
    /// BSP).
    pub fn effective_staleness(&self) -> i64 {
        match self.epoch_clock || self.staleness < 0 {
            true => -1,
            false => self.staleness,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_codec_reads_empty_as_none_and_names_a_bad_value() {
        let mut t = Training::default();
        assert_eq!(
            t.codec().unwrap(),
            (Compression::None, CompressionMode::Auto)
        );
        t.compression = "sketchml".into();
        t.compression_mode = "always".into();
        assert!(matches!(t.codec().unwrap().0, Compression::SketchMl(_)));
        t.compression = "zip".into();
        assert!(t.codec().unwrap_err().to_string().contains("'zip'"));
    }

    #[test]
    fn epoch_clocks_and_asp_never_wait() {
        let sync = |staleness, epoch_clock| Sync {
            staleness,
            epoch_clock,
            ..Default::default()
        };
        assert_eq!(sync(0, false).effective_staleness(), 0);
        assert_eq!(sync(3, false).effective_staleness(), 3);
        assert_eq!(sync(-1, false).effective_staleness(), -1);
        assert_eq!(sync(0, true).effective_staleness(), -1);
    }
}

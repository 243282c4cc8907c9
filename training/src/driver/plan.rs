//! Reading a [`Plan`]'s options: what `CREATE MODEL` and `TRAIN MODEL` ask for: the model's spec and the run's
//! own options (`epochs`, `holdout`, `on_divergence`), and the check of each epoch's figures
//! that `on_divergence` sets.

use crate::error::{Error, Result, option_err};
use crate::model::{ModelSpec, Plan};

impl Plan {
    /// The plan of a statement training `spec` for `epochs`, without a holdout, failing when
    /// its training diverges.
    pub fn new(spec: ModelSpec, epochs: usize) -> Self {
        Plan {
            spec,
            epochs,
            holdout: None,
            fail_on_divergence: true,
            done_epochs: 0,
        }
    }

    /// Sets `key` if it is an option of the training run (`epochs`, `holdout`,
    /// `on_divergence`) rather than of the model; says whether it was.
    pub fn run_option(&mut self, key: &str, value: &str) -> Result<bool> {
        match key {
            "epochs" => match value.parse() {
                Ok(n) if n > 0 => self.epochs = n,
                _ => {
                    return option_err(format!(
                        "epochs must be a positive whole number, got '{value}'"
                    ));
                }
            },
            "holdout" => self.holdout = Some(value.to_string()),
            "on_divergence" => match value.trim().to_ascii_lowercase().as_str() {
                "fail" => self.fail_on_divergence = true,
                "continue" => self.fail_on_divergence = false,
                _ => {
                    return option_err(format!(
                        "on_divergence must be 'fail' or 'continue', got '{value}'"
                    ));
                }
            },
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Fails the statement when one of epoch `epoch`'s `figures` (name and value) of model
    /// `model` is NaN or infinite: its training diverged, and every later epoch, prediction
    /// and saved weight would be garbage. With `on_divergence = 'continue'` it is logged and
    /// training goes on.
    pub fn check_finite(
        &self,
        (model, epoch): (&str, usize),
        figures: &[(&str, Option<f64>)],
    ) -> Result<()> {
        let Some((figure, value)) =
            (figures.iter()).find_map(|&(name, v)| v.filter(|v| !v.is_finite()).map(|v| (name, v)))
        else {
            return Ok(());
        };
        let why = format!("model '{model}' diverged: epoch {epoch}'s {figure} is {value}");
        if !self.fail_on_divergence {
            tracing::warn!("{why}; training goes on (on_divergence = 'continue')");
            return Ok(());
        }
        Err(Error::Input(format!(
            "{why}; lower learning_rate (or scale the inputs), or set on_divergence = \
             'continue' to train on"
        )))
    }

    /// The workers each pass runs.
    pub fn workers(&self) -> usize {
        self.spec.sync.workers as usize
    }
}

//! Reading a [`Plan`]'s options: what `CREATE MODEL` and `TRAIN MODEL` ask for: the model's spec and the run's
//! own options (`epochs`, `holdout`).

use crate::error::{Result, option_err};
use crate::model::Plan;

impl Plan {
    /// Sets `key` if it is an option of the training run (`epochs`, `holdout`) rather than of
    /// the model; says whether it was.
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
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// The workers each pass runs.
    pub fn workers(&self) -> usize {
        self.spec.sync.workers as usize
    }
}
